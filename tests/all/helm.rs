//! The Helm chart (`deploy/helm/orkestra`) with helm itself (built from the Go module proxy by
//! `scripts/helm.sh`): every part rendered and admitted by the real API server's dry run, its
//! mistakes refused with the value to fix, and an install into the control plane whose token
//! survives an upgrade.

use std::path::{Path, PathBuf};
use std::process::Output;

use orkestra_test_support::{kubectl_output, kubectl_with};

use crate::ork::run;
use crate::replicas::Replicas;

pub(crate) fn chart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/helm/orkestra")
}

/// `helm ARGS` against the test control plane.
pub(crate) fn helm(args: &[&str]) -> Output {
    let helm = orkestra_test_support::helm().unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    std::process::Command::new(helm)
        .args(args)
        .env("KUBECONFIG", &cluster.kubeconfig)
        // Its caches and config stay out of the machine's home.
        .env("HELM_CACHE_HOME", std::env::temp_dir().join("ork-helm-cache"))
        .env("HELM_CONFIG_HOME", std::env::temp_dir().join("ork-helm-config"))
        .env("HELM_DATA_HOME", std::env::temp_dir().join("ork-helm-data"))
        .output()
        .unwrap()
}

pub(crate) fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The Katalog of `dir` and the RBAC `ork manifests` prints for it in `namespace`, as files.
pub(crate) fn inputs(dir: &Path, namespace: &str) -> (String, String) {
    let katalog = dir.join("katalog.yaml");
    let output = run(&["manifests", "-f", katalog.to_str().unwrap(), "-n", namespace], &[]);
    assert!(output.status.success(), "{}", said(&output));
    let rbac = dir.join("rbac.yaml");
    std::fs::write(&rbac, &output.stdout).unwrap();
    (
        format!("katalog={}", katalog.display()),
        format!("rbac.manifests={}", rbac.display()),
    )
}

/// `helm install` or `helm upgrade` (`verb`) of release `ops` in `namespace` with the
/// Katalog in `dir/katalog.yaml` and the RBAC `ork manifests` prints for it (`more`: other
/// flags); fails the test if helm does, else its output.
pub(crate) fn release(verb: &str, namespace: &str, dir: &Path, more: &[&str]) -> Output {
    let (katalog, rbac) = inputs(dir, namespace);
    let chart = chart();
    let mut args = vec![
        verb,
        "ops",
        chart.to_str().unwrap(),
        "-n",
        namespace,
        "--set-file",
        &katalog,
        "--set-file",
        &rbac,
    ];
    args.extend(more);
    let done = helm(&args);
    assert!(done.status.success(), "helm {verb}: {}", said(&done));
    done
}

/// The Prometheus Operator's ServiceMonitor kind, as far as a dry run needs it.
fn install_service_monitor_crd() {
    let cluster = orkestra_test_support::cluster().unwrap();
    let crd = std::env::temp_dir().join("ork-servicemonitor-crd.yaml");
    std::fs::write(
        &crd,
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
",
    )
    .unwrap();
    kubectl_with(&cluster.kubeconfig, &["apply", "-f", crd.to_str().unwrap()]).unwrap();
    kubectl_with(
        &cluster.kubeconfig,
        &[
            "wait",
            "--for=condition=Established",
            "crd/servicemonitors.monitoring.coreos.com",
        ],
    )
    .unwrap();
}

#[tokio::test]
async fn every_part_of_the_chart_renders_and_the_api_server_admits_it() {
    let replicas = Replicas::install("helm-dry").await;
    let cluster = orkestra_test_support::cluster().unwrap();
    let ns = replicas.ns.name.as_str();
    let (katalog, rbac) = inputs(replicas.dir.path(), ns);
    install_service_monitor_crd();
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let all = [
        "--set-file",
        &katalog,
        "--set-file",
        &rbac,
        "--set",
        "gateway.enabled=true,controlCenter.enabled=true,serviceMonitor.enabled=true",
        "--set",
        "runtime.ha=shard,runtime.replicas=3,runtime.recordings.enabled=true",
    ];
    let mut lint = vec!["lint", chart, "-n", ns];
    lint.extend(all);
    let linted = helm(&lint);
    assert!(linted.status.success(), "{}", said(&linted));

    let mut template = vec!["template", "ops", chart, "-n", ns];
    template.extend(all);
    let rendered = helm(&template);
    assert!(rendered.status.success(), "{}", said(&rendered));
    let file = replicas.dir.path().join("rendered.yaml");
    std::fs::write(&file, &rendered.stdout).unwrap();
    let applied = kubectl_with(
        &cluster.kubeconfig,
        &[
            "apply",
            "--dry-run=server",
            "-n",
            ns,
            "-f",
            file.to_str().unwrap(),
            "-o",
            "name",
        ],
    )
    .unwrap();
    for object in [
        "serviceaccount/orkestra",
        "role.rbac.authorization.k8s.io/orkestra:helm-dry",
        "rolebinding.rbac.authorization.k8s.io/orkestra:helm-dry",
        "configmap/ops-orkestra-katalog",
        "secret/ops-orkestra-live-api",
        "secret/ops-orkestra-control-center",
        "deployment.apps/ops-orkestra",
        "service/ops-orkestra",
        "poddisruptionbudget.policy/ops-orkestra",
        "deployment.apps/ops-orkestra-gateway",
        "service/ops-orkestra-gateway",
        "deployment.apps/ops-orkestra-control-center",
        "service/ops-orkestra-control-center",
        "servicemonitor.monitoring.coreos.com/ops-orkestra",
    ] {
        assert!(applied.lines().any(|l| l == object), "{object} in:\n{applied}");
    }
    let documents: Vec<serde_json::Value> =
        serde_yaml_ng::Deserializer::from_str(&String::from_utf8_lossy(&rendered.stdout))
            .filter_map(|d| serde::Deserialize::deserialize(d).ok())
            .collect();
    let runtime = documents
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "ops-orkestra")
        .unwrap();
    let args = runtime["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    for expected in [
        r#""--ha","shard""#,
        r#""--no-gateway""#,
        r#""--recordings","/var/lib/orkestra/recordings","--recordings-max-bytes","768Mi""#,
    ] {
        assert!(args.contains(expected), "{expected} in {args}");
    }
    assert_eq!(runtime["spec"]["replicas"], 3);
    let configmap = documents.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
    assert_eq!(
        configmap["data"]["katalog.yaml"].as_str().unwrap().trim(),
        std::fs::read_to_string(replicas.dir.path().join("katalog.yaml"))
            .unwrap()
            .trim()
    );

    // Mistakes are refused before anything is applied, each naming the value to fix.
    let other_rbac = replicas.dir.path().join("other-rbac.yaml");
    let output = run(
        &[
            "manifests",
            "-f",
            replicas.dir.path().join("katalog.yaml").to_str().unwrap(),
            "-n",
            "elsewhere",
        ],
        &[],
    );
    std::fs::write(&other_rbac, &output.stdout).unwrap();
    let other = format!("rbac.manifests={}", other_rbac.display());
    for (args, error) in [
        (vec!["--set-file", &rbac], "katalog: give the Katalog file"),
        (
            vec!["--set-file", &katalog],
            "rbac.manifests: give the RBAC the Katalog needs",
        ),
        (
            vec!["--set-file", &katalog, "--set-file", &other],
            "rbac.manifests: made for another ServiceAccount or namespace; run ork manifests -n",
        ),
        (
            vec!["--set-file", &katalog, "--set-file", &rbac, "--set", "runtime.ha=none"],
            "runtime.replicas: more than one replica needs runtime.ha leader or shard",
        ),
        (
            vec![
                "--set-file",
                &katalog,
                "--set-file",
                &rbac,
                "--set",
                "runtime.ha=sometimes",
            ],
            "runtime.ha: \"sometimes\" is not none, leader or shard",
        ),
    ] {
        let mut template = vec!["template", "ops", chart, "-n", ns];
        template.extend(args);
        let refused = helm(&template);
        assert!(!refused.status.success(), "{error}: rendered");
        assert!(said(&refused).contains(error), "{error} in {}", said(&refused));
    }
}

#[tokio::test]
async fn helm_installs_the_chart_and_an_upgrade_keeps_the_live_api_token() {
    let replicas = Replicas::install("helm-install").await;
    let cluster = orkestra_test_support::cluster().unwrap();
    let ns = replicas.ns.name.as_str();
    let installed = release("install", ns, replicas.dir.path(), &[]);
    assert!(
        said(&installed).contains("The Live API"),
        "the notes: {}",
        said(&installed)
    );
    let token = |_: ()| {
        kubectl_with(
            &cluster.kubeconfig,
            &[
                "get",
                "secret",
                "ops-orkestra-live-api",
                "-n",
                ns,
                "-o",
                "jsonpath={.data.token}",
            ],
        )
        .unwrap()
    };
    let first = token(());
    assert_eq!(first.len(), 64, "48 characters, base64: {first}");
    let deployment = kubectl_output(&cluster.kubeconfig, &["get", "deployment", "ops-orkestra", "-n", ns]).unwrap();
    assert!(deployment.status.success(), "{}", said(&deployment));

    release(
        "upgrade",
        ns,
        replicas.dir.path(),
        &["--set", "controlCenter.enabled=true"],
    );
    assert_eq!(token(()), first, "an upgrade keeps the token the clients hold");
    let cc = kubectl_output(
        &cluster.kubeconfig,
        &["get", "deployment", "ops-orkestra-control-center", "-n", ns],
    )
    .unwrap();
    assert!(cc.status.success(), "{}", said(&cc));

    let removed = helm(&["uninstall", "ops", "-n", ns, "--wait"]);
    assert!(removed.status.success(), "{}", said(&removed));
    let gone = kubectl_output(&cluster.kubeconfig, &["get", "deployment", "ops-orkestra", "-n", ns]).unwrap();
    assert!(!gone.status.success(), "uninstalled");
}
