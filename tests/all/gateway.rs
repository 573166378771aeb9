//! The gateway against the real API server: the Katalog's rules enforced at admission (a
//! bad CR refused by `kubectl apply` with the rule's message, a default landing in the same
//! write, a warning printed), the webhook certificate renewed while it runs, and `ork
//! gateway` registering its webhooks and removing them when it stops.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_gateway::webhooks::{Options, Webhooks};
use orkestra_test_support::{eventually, kubectl_output, kubectl_with, namespace};

use crate::ork::Ork;
use crate::pipeline::WAIT;

/// A Katalog of one CRD whose admission rules the webhooks enforce.
fn katalog(name: &str, group: &str, ns: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {name}}}
security:
  webhooks:
    admission: {{enabled: true}}
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site, plural: sites}}
      namespace: {ns}
      admission:
        validation:
          rules:
            - {{field: spec.image, prefix: 'myorg/', message: 'images come from the myorg/ registry, not {{{{ .spec.image }}}}'}}
            - {{field: spec.owner, exists: true, action: warn, message: name an owner}}
        mutation:
          rules:
            - {{field: spec.replicas, default: 2}}
      operatorBox: {{}}
"
    )
}

fn site(ns: &str, group: &str, name: &str, spec: &str) -> String {
    format!("apiVersion: {group}/v1\nkind: Site\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n")
}

/// `kubectl apply` of `manifest`: its stdout and stderr, or its error.
fn apply(kubeconfig: &std::path::Path, dir: &std::path::Path, manifest: &str) -> Result<String, String> {
    let file = dir.join("site.yaml");
    std::fs::write(&file, manifest).unwrap();
    kubectl_with(kubeconfig, &["apply", "-f", file.to_str().unwrap()]).map_err(|e| e.to_string())
}

fn webhook_configs(kubeconfig: &std::path::Path, name: &str) -> String {
    kubectl_with(
        kubeconfig,
        &[
            "get",
            "validatingwebhookconfigurations,mutatingwebhookconfigurations",
            "-o",
            "name",
            "--field-selector",
            &format!("metadata.name={name}"),
        ],
    )
    .unwrap()
}

// kubectl blocks its thread while the webhooks, in this process, answer the API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_katalogs_rules_run_at_admission_and_survive_a_certificate_renewal() {
    let ns = namespace("gw-admit").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let group = format!("{}.gateway.orkestra.io", ns.name);
    let text = katalog(&ns.name, &group, &ns.name);
    let compiled = orkestra_katalog::load_sources(&[("katalog.yaml".into(), text)]).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let options = Options {
        https_addr: "127.0.0.1:0".parse().unwrap(),
        url: None,
        namespace: ns.name.clone(),
        cert: None,
        // Renewed at 20 s, within the test.
        valid_for: Duration::from_secs(30),
    };
    let webhooks = Webhooks::start(ns.client.clone(), Arc::new(compiled), options)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = cluster.kubeconfig.clone();

    // The API server takes in a new webhook configuration within a few seconds.
    let refused = eventually("the webhook to refuse a bad image", WAIT, || {
        let (kubeconfig, dir) = (kubeconfig.clone(), dir.path().to_path_buf());
        let manifest = site(&ns.name, &group, "bad", "{image: nginx}");
        async move { apply(&kubeconfig, &dir, &manifest).err() }
    })
    .await
    .unwrap();
    assert!(
        refused.contains("images come from the myorg/ registry, not nginx"),
        "kubectl shows the rule's message: {refused}"
    );
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Site"), "sites");
    let sites: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    assert!(sites.get_opt("bad").await.unwrap().is_none(), "nothing was stored");

    apply(
        &kubeconfig,
        dir.path(),
        &site(&ns.name, &group, "good", "{image: myorg/web}"),
    )
    .unwrap();
    let stored = sites.get("good").await.unwrap();
    assert_eq!(stored.data["spec"]["replicas"], 2, "the default landed");
    assert_eq!(stored.metadata.generation, Some(1), "in the same write");

    // The renewal moves the caBundle to a new CA; the webhooks keep answering throughout.
    let name = orkestra_gateway::registration::name_for(&ns.name);
    let bundle = || {
        kubectl_with(
            &kubeconfig,
            &[
                "get",
                "validatingwebhookconfiguration",
                &name,
                "-o",
                "jsonpath={.webhooks[0].clientConfig.caBundle}",
            ],
        )
        .unwrap()
    };
    let first = bundle();
    eventually("the certificate to be renewed", Duration::from_secs(90), || {
        let now = bundle();
        let (first, renewed) = (first.clone(), now.clone());
        async move { (renewed != first && !renewed.is_empty()).then_some(()) }
    })
    .await
    .unwrap();
    let mut refusals = 0;
    for attempt in 0..20 {
        let manifest = site(&ns.name, &group, &format!("bad-{attempt}"), "{image: nginx}");
        match apply(&kubeconfig, dir.path(), &manifest) {
            Err(why) if why.contains("myorg/ registry") => refusals += 1,
            other => panic!("after the renewal the webhook must still answer: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(refusals, 20);
    webhooks.stop().await;
    assert_eq!(webhook_configs(&kubeconfig, &name).trim(), "", "removed at shutdown");
}

#[tokio::test]
async fn ork_gateway_warns_through_kubectl_and_removes_its_webhooks_when_it_stops() {
    let ns = namespace("gw-cli").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let group = format!("{}.gateway.orkestra.io", ns.name);
    let compiled = orkestra_katalog::load_sources(&[("k.yaml".into(), katalog(&ns.name, &group, &ns.name))]).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("katalog.yaml");
    std::fs::write(&file, katalog(&ns.name, &group, &ns.name)).unwrap();
    let kubeconfig = cluster.kubeconfig.to_str().unwrap();
    let mut ork = Ork::spawn(
        &["gateway", "-f", file.to_str().unwrap(), "--https-addr", "127.0.0.1:0"],
        &[("KUBECONFIG", kubeconfig)],
    );
    ork.wait_for("admission webhooks on https://127.0.0.1:", WAIT);
    let name = orkestra_gateway::registration::name_for(&ns.name);
    let registered = webhook_configs(&cluster.kubeconfig, &name);
    assert!(registered.contains("validatingwebhookconfiguration"), "{registered}");
    assert!(registered.contains("mutatingwebhookconfiguration"), "{registered}");

    // kubectl prints a warn rule's message and the write goes through.
    let manifest = site(&ns.name, &group, "unowned", "{image: myorg/web}");
    let path = dir.path().join("site.yaml");
    std::fs::write(&path, &manifest).unwrap();
    let output = eventually("kubectl to show the warning", WAIT, || {
        let path = path.clone();
        async move {
            let output = kubectl_output(&cluster.kubeconfig, &["apply", "-f", path.to_str().unwrap()]).unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            stderr
                .contains("name an owner")
                .then_some((output.status.success(), stderr))
        }
    })
    .await
    .unwrap();
    assert!(output.0, "a warning does not refuse: {}", output.1);

    let status = ork.signal_and_wait(libc::SIGINT, WAIT);
    assert!(status.success(), "{status:?}");
    assert_eq!(
        webhook_configs(&cluster.kubeconfig, &name).trim(),
        "",
        "removed when ork gateway stops"
    );
}
