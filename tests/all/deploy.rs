//! Running in a cluster: `deploy/base` with the RBAC `ork manifests` prints, checked by the
//! real API server through `kubectl apply --dry-run=server -k`, and `ork run` with nothing
//! but in-cluster configuration (a ServiceAccount token file and KUBERNETES_SERVICE_HOST),
//! allowed exactly what that RBAC grants.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use orkestra_test_support::{eventually, kubectl_output, kubectl_with};

use crate::ork::{ORK, Ork, run};
use crate::pipeline::WAIT;
use crate::replicas::{Replicas, free_port};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `ork manifests` for the Katalog in `dir`, the runtime in `namespace`.
fn manifests(dir: &Path, namespace: &str) -> String {
    let katalog = dir.join("katalog.yaml");
    let output = run(&["manifests", "-f", katalog.to_str().unwrap(), "-n", namespace], &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// `ork generate bundle`: every object of it passes the real API server's dry run, the
/// Deployment mounts the Katalog it carries, and `ork generate crd` prints the same CRDs.
#[tokio::test]
async fn a_generated_bundle_passes_server_side_dry_run() {
    let replicas = Replicas::install("bundle").await;
    let cluster = orkestra_test_support::cluster().unwrap();
    let ns = &replicas.ns.name;
    let katalog = replicas.dir.path().join("katalog.yaml");
    let katalog = katalog.to_str().unwrap();
    let output = run(&["generate", "bundle", "-f", katalog, "-n", ns, "--replicas", "1"], &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let bundle = String::from_utf8(output.stdout).unwrap();
    let file = replicas.dir.path().join("bundle.yaml");
    std::fs::write(&file, &bundle).unwrap();
    let applied = kubectl_with(
        &cluster.kubeconfig,
        &["apply", "--dry-run=server", "-f", file.to_str().unwrap(), "-o", "name"],
    )
    .unwrap();
    for object in [
        "customresourcedefinition.apiextensions.k8s.io/",
        "namespace/",
        "serviceaccount/orkestra",
        "role.rbac.authorization.k8s.io/orkestra:bundle",
        "rolebinding.rbac.authorization.k8s.io/orkestra:bundle",
        "configmap/orkestra-katalog",
        "secret/orkestra-live-api",
        "deployment.apps/orkestra",
        "service/orkestra",
        "poddisruptionbudget.policy/orkestra",
    ] {
        assert!(
            applied.lines().any(|l| l.starts_with(object)),
            "{object} in:\n{applied}"
        );
    }
    let documents: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&bundle)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let deployment = documents.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let args: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    assert_eq!(args[..3], ["run", "-f", "/etc/orkestra/katalog/katalog.yaml"]);
    assert!(!args.contains(&"--ha"), "one replica: no leader election");
    // The runtime follows its Katalog's ConfigMap, so a bundle applied again with a changed
    // Katalog reaches it; its Role allows reading that one ConfigMap.
    let followed = format!("{ns}/orkestra-katalog");
    assert!(
        args.windows(2)
            .any(|a| a[0] == "--katalog-configmap" && a[1] == followed),
        "{args:?}"
    );
    let mut verbs: Vec<&str> = documents
        .iter()
        .filter(|d| d["kind"] == "Role" && d["metadata"]["namespace"] == ns.as_str())
        .flat_map(|role| role["rules"].as_array().unwrap())
        .filter(|rule| {
            rule["resources"] == serde_json::json!(["configmaps"])
                && rule["resourceNames"]
                    .as_array()
                    .is_some_and(|names| names.iter().any(|n| n == "orkestra-katalog"))
        })
        .flat_map(|rule| rule["verbs"].as_array().unwrap())
        .filter_map(serde_json::Value::as_str)
        .collect();
    verbs.sort_unstable();
    assert_eq!(verbs, ["get", "list", "watch"], "{bundle}");
    let service = documents.iter().find(|d| d["kind"] == "Service").unwrap();
    assert_eq!(
        service["metadata"]["labels"]["orkestra.io/live-api"], "true",
        "a Control Center's discovery finds it: {service}"
    );
    let configmap = documents.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
    assert_eq!(
        configmap["data"]["katalog.yaml"],
        std::fs::read_to_string(katalog).unwrap()
    );
    let crds = run(&["generate", "crd", "-f", katalog], &[]);
    let crds = String::from_utf8(crds.stdout).unwrap();
    assert!(
        crds.contains("kind: CustomResourceDefinition") && bundle.contains(crds.trim()),
        "{crds}"
    );
}

#[tokio::test]
async fn the_kustomize_base_and_the_generated_rbac_pass_server_side_dry_run() {
    let replicas = Replicas::install("deploy-dry").await;
    let cluster = orkestra_test_support::cluster().unwrap();
    let ns = &replicas.ns.name;
    let overlay = replicas.dir.path();
    std::fs::write(overlay.join("rbac.yaml"), manifests(overlay, ns)).unwrap();
    // kustomize takes a base only by a relative path.
    let base = repo().join("deploy/base").canonicalize().unwrap();
    let up = overlay.canonicalize().unwrap().components().count() - 1;
    let base = PathBuf::from("../".repeat(up)).join(base.strip_prefix("/").unwrap());
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {ns}
resources: [{base}, rbac.yaml]
configMapGenerator:
  - {{name: orkestra-katalog, files: [katalog.yaml]}}
secretGenerator:
  - {{name: orkestra-live-api, literals: [token=dry-run]}}
",
            base = base.display()
        ),
    )
    .unwrap();
    let dir = overlay.to_str().unwrap();
    let applied = kubectl_with(
        &cluster.kubeconfig,
        &["apply", "--dry-run=server", "-k", dir, "-o", "name"],
    )
    .unwrap();
    for object in [
        "serviceaccount/orkestra",
        "service/orkestra",
        "deployment.apps/orkestra",
        "poddisruptionbudget.policy/orkestra",
        "role.rbac.authorization.k8s.io/orkestra:deploy-dry",
        "rolebinding.rbac.authorization.k8s.io/orkestra:deploy-dry",
    ] {
        assert!(
            applied.lines().any(|l| l.starts_with(object)),
            "{object} in:\n{applied}"
        );
    }
    assert!(
        !applied.contains("clusterrole"),
        "a Katalog confined to one namespace needs no cluster-wide role:\n{applied}"
    );
    // The dry run admitted the Deployment as the API server defaults it: non-root, read-only.
    let rendered = kubectl_with(
        &cluster.kubeconfig,
        &["apply", "--dry-run=server", "-k", dir, "-o", "yaml"],
    )
    .unwrap();
    for expected in [
        "readOnlyRootFilesystem: true",
        "runAsNonRoot: true",
        "path: /ready",
        "orkestra-katalog-",
        // A Control Center's discovery finds the Service.
        "orkestra.io/live-api: \"true\"",
    ] {
        assert!(rendered.contains(expected), "{expected} in the rendered objects");
    }
    // Nothing was created.
    let output = kubectl_output(&cluster.kubeconfig, &["get", "deployment", "orkestra", "-n", ns]).unwrap();
    assert!(!output.status.success());
}

#[tokio::test]
async fn ork_run_in_cluster_config_reconciles_with_only_the_generated_rbac() {
    let replicas = Replicas::install("deploy-in").await;
    let cluster = orkestra_test_support::cluster().unwrap();
    let ns = &replicas.ns.name;
    let dir = replicas.dir.path();
    let sa = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: orkestra, namespace: {ns}}}\n{}",
        manifests(dir, ns)
    );
    std::fs::write(dir.join("rbac.yaml"), sa).unwrap();
    kubectl_with(
        &cluster.kubeconfig,
        &["apply", "-f", dir.join("rbac.yaml").to_str().unwrap()],
    )
    .unwrap();
    let forbidden = kubectl_with(
        &cluster.kubeconfig,
        &[
            "auth",
            "can-i",
            "list",
            "secrets",
            "-n",
            ns,
            &format!("--as=system:serviceaccount:{ns}:orkestra"),
        ],
    );
    assert!(
        forbidden.is_err(),
        "the Katalog reads no Secrets, so neither may its runtime"
    );

    let mount = service_account_mount(dir, ns, "serviceaccount");
    let katalog = dir.join("katalog.yaml");
    let live = free_port();
    let args = [
        "run",
        "-f",
        katalog.to_str().unwrap(),
        "--ha",
        "leader",
        "--identity",
        "in-cluster",
        "--http-addr",
        &format!("127.0.0.1:{live}"),
    ];
    let mut command = in_cluster(&mount, &args);
    command.env("HOME", dir).env("ORK_API_TOKEN", "");
    let mut ork = Ork::spawn_command(command);
    ork.wait_for("Live API on", WAIT);
    replicas.create(0..5, "in-cluster").await;
    replicas.converged(5, "in-cluster", WAIT).await;
    // Its Lease is in the namespace the pod's files name.
    let leases: Api<Lease> = Api::namespaced(replicas.ns.client.clone(), ns);
    let lease = eventually("the leader Lease", WAIT, || async {
        leases.get_opt("orkestra-konductor-deploy-in").await.ok().flatten()
    })
    .await
    .unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("in-cluster"));
    let status = ork.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    assert!(status.success(), "{status:?}: {}", ork.seen.join("\n"));
}

/// What the kubelet mounts into a pod of ServiceAccount `orkestra` of `ns`, in `dir/folder`:
/// a token `kubectl create token` makes, the cluster's CA and the namespace.
pub(crate) fn service_account_mount(dir: &Path, ns: &str, folder: &str) -> PathBuf {
    let cluster = orkestra_test_support::cluster().unwrap();
    let mount = dir.join(folder);
    std::fs::create_dir_all(&mount).unwrap();
    let token = kubectl_with(&cluster.kubeconfig, &["create", "token", "orkestra", "-n", ns]).unwrap();
    std::fs::write(mount.join("token"), token.trim()).unwrap();
    std::fs::write(mount.join("namespace"), ns).unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(&cluster.kubeconfig).unwrap();
    let ca = kubeconfig.clusters[0]
        .cluster
        .as_ref()
        .unwrap()
        .certificate_authority_data
        .clone()
        .unwrap();
    let pem = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, ca).unwrap();
    std::fs::write(mount.join("ca.crt"), pem).unwrap();
    mount
}

/// `ork ARGS` with nothing but the in-cluster configuration, as in a pod: a private mount
/// namespace puts `mount`'s files where kube's in-cluster config reads them, the service's
/// host and port are in the environment, and no kubeconfig is anywhere to be found.
pub(crate) fn in_cluster(mount: &Path, args: &[&str]) -> Command {
    let cluster = orkestra_test_support::cluster().unwrap();
    let address = cluster.server.trim_start_matches("https://").trim_end_matches('/');
    let (host, port) = address.rsplit_once(':').unwrap();
    let script = format!(
        "mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount \
         && cp {mount}/* /run/secrets/kubernetes.io/serviceaccount/ && exec \"$0\" \"$@\"",
        mount = mount.display(),
    );
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "sh", "-c", &script, ORK])
        .args(args)
        .env_remove("KUBECONFIG")
        .env("KUBERNETES_SERVICE_HOST", host)
        .env("KUBERNETES_SERVICE_PORT", port);
    command
}
