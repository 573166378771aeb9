//! The gateway's policies against the real API server, through kubectl as a user meets them:
//! deletion protection refusing `kubectl delete` of a CR and of its CRD until the label is
//! removed, namespace protection refusing a CR in a forbidden namespace, and the conversion
//! webhook serving a two-version CRD both ways.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_expr::labels::DELETION_PROTECTION;
use orkestra_gateway::webhooks::{Options, Webhooks};
use orkestra_test_support::{eventually, kubectl_with, namespace};

use crate::pipeline::WAIT;

/// The webhooks on a free loopback port, with a certificate made for an hour.
pub(crate) fn options(ns: &str) -> Options {
    Options {
        https_addr: "127.0.0.1:0".parse().unwrap(),
        url: None,
        namespace: ns.to_string(),
        cert: None,
        valid_for: Duration::from_secs(3600),
    }
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_string()
}

// kubectl blocks its thread while the webhooks, in this process, answer the API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_and_namespace_protection_refuse_kubectl_until_the_label_goes() {
    let ns = namespace("gw-protect").await.unwrap();
    let locked = namespace("gw-locked").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let group = format!("{}.protect.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {name}}}
security:
  deletionProtection: {{enabled: true}}
  namespaceProtection: {{enabled: true, restrictedNamespaces: [{locked}]}}
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site, plural: sites}}
      operatorBox: {{}}
",
        name = ns.name,
        locked = locked.name
    );
    let compiled = orkestra_katalog::load_sources(&[("k.yaml".into(), katalog)]).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Site"), "sites");
    let sites: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    // A CR from before the gateway: labelled when it starts.
    let before: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": format!("{group}/v1"), "kind": "Site", "metadata": {"name": "before"}, "spec": {}}))
    .unwrap();
    sites.create(&PostParams::default(), &before).await.unwrap();
    let webhooks = Webhooks::start(ns.client.clone(), Arc::new(compiled), options(&ns.name))
        .await
        .unwrap();
    let labels = |o: &DynamicObject| o.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels(&sites.get("before").await.unwrap())
            .get(DELETION_PROTECTION)
            .map(String::as_str),
        Some("true")
    );

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = cluster.kubeconfig.clone();
    let manifest = |name: &str, namespace: &str| {
        format!("apiVersion: {group}/v1\nkind: Site\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{}}\n")
    };
    // The API server takes in the new configurations within a few seconds.
    let site = write(dir.path(), "site.yaml", &manifest("web", &ns.name));
    eventually("a new CR to be labelled in its own write", WAIT, || {
        let (kubeconfig, site, sites) = (kubeconfig.clone(), site.clone(), sites.clone());
        async move {
            kubectl_with(&kubeconfig, &["apply", "-f", &site]).ok()?;
            let stored = sites.get("web").await.ok()?;
            if labels(&stored).get(DELETION_PROTECTION).map(String::as_str) == Some("true") {
                return Some(());
            }
            // Created before the webhook was in place: unlabelled, so it may go; again.
            let _ = sites.delete("web", &Default::default()).await;
            None
        }
    })
    .await
    .unwrap();
    let refused = kubectl_with(&kubeconfig, &["delete", "-f", &site])
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("is protected from deletion") && refused.contains("remove the label"),
        "{refused}"
    );
    assert!(sites.get_opt("web").await.unwrap().is_some(), "still there");
    let crd = format!("sites.{group}");
    let refused = kubectl_with(&kubeconfig, &["delete", "crd", &crd])
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(&format!("CustomResourceDefinition {crd} is protected")),
        "{refused}"
    );

    // Removing the label is the way to delete.
    // Fully qualified: other tests' CRDs have a kind Site too.
    let sites_resource = format!("sites.{group}");
    let label = format!("{DELETION_PROTECTION}-");
    kubectl_with(&kubeconfig, &["label", "-n", &ns.name, &sites_resource, "web", &label]).unwrap();
    kubectl_with(&kubeconfig, &["delete", "-f", &site, "--wait=false"]).unwrap();

    // Namespace protection: the locked namespace takes no CR.
    let there = write(dir.path(), "locked.yaml", &manifest("web", &locked.name));
    let refused = kubectl_with(&kubeconfig, &["apply", "-f", &there])
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(&format!("may not be created in namespace {}", locked.name)),
        "{refused}"
    );
    assert_eq!(
        webhooks
            .counts
            .deletion_blocked
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );

    webhooks.stop().await;
    kubectl_with(
        &kubeconfig,
        &["delete", "-n", &ns.name, &sites_resource, "before", "--wait=false"],
    )
    .unwrap();
}

/// A CRD served as v1alpha1 (`spec.size`) and v1 (`spec.replicas`), stored as v1.
fn two_versions(group: &str) -> String {
    let version = |name: &str, storage: bool, field: &str| {
        format!(
            "  - name: {name}
    served: true
    storage: {storage}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              {field}: {{type: integer}}
              image: {{type: string}}
"
        )
    };
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: dbs.{group}}}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: dbs, singular: db, kind: Db}}
  versions:
{}{}",
        version("v1alpha1", false, "size"),
        version("v1", true, "replicas")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conversion_webhook_serves_two_versions_both_ways() {
    let ns = namespace("gw-convert").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let group = format!("{}.convert.orkestra.io", ns.name);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = cluster.kubeconfig.clone();
    kubectl_with(
        &kubeconfig,
        &["apply", "-f", &write(dir.path(), "crd.yaml", &two_versions(&group))],
    )
    .unwrap();
    kubectl_with(
        &kubeconfig,
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/dbs.{group}"),
            "--timeout=60s",
        ],
    )
    .unwrap();
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {name}}}
security:
  conversion: {{enabled: true, conversionWindow: 3}}
spec:
  crds:
    db:
      apiTypes: {{group: {group}, version: v1, kind: Db, plural: dbs}}
      admission:
        conversion:
          # storageVersion left out: the entry's version, v1.
          updateCRD: true
          paths:
            - {{from: v1alpha1, to: v1, spec: {{replicas: '{{{{ .spec.size }}}}'}}}}
            - {{from: v1, to: v1alpha1, spec: {{size: '{{{{ .spec.replicas }}}}'}}}}
      operatorBox: {{}}
",
        name = ns.name
    );
    let compiled = orkestra_katalog::load_sources(&[("k.yaml".into(), katalog)]).unwrap();
    let webhooks = Webhooks::start(ns.client.clone(), Arc::new(compiled), options(&ns.name))
        .await
        .unwrap();
    let strategy = kubectl_with(
        &kubeconfig,
        &[
            "get",
            "crd",
            &format!("dbs.{group}"),
            "-o",
            "jsonpath={.spec.conversion.strategy}",
        ],
    )
    .unwrap();
    assert_eq!(strategy, "Webhook", "the CRD points at the gateway");

    let old = format!(
        "apiVersion: {group}/v1alpha1\nkind: Db\nmetadata: {{name: pg, namespace: {}}}\nspec: {{size: 3, image: postgres}}\n",
        ns.name
    );
    let old = write(dir.path(), "db.yaml", &old);
    let v1 = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Db"), "dbs");
    let dbs: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &v1);
    // The API server takes in the CRD's new conversion within a few seconds.
    let stored = eventually("a v1alpha1 write to read back as v1", WAIT, || {
        let (kubeconfig, old, dbs) = (kubeconfig.clone(), old.clone(), dbs.clone());
        async move {
            kubectl_with(&kubeconfig, &["apply", "-f", &old]).ok()?;
            let stored = dbs.get("pg").await.ok()?;
            (stored.data["spec"]["replicas"] == 3).then_some(stored)
        }
    })
    .await
    .unwrap();
    assert_eq!(stored.data["spec"]["image"], "postgres");
    assert!(
        stored.data["spec"].get("size").is_none(),
        "v1 has no size: {}",
        stored.data
    );

    // Written as v1, read as v1alpha1.
    let mut newer = stored.clone();
    newer.data["spec"]["replicas"] = serde_json::json!(5);
    dbs.replace("pg", &PostParams::default(), &newer).await.unwrap();
    let size = kubectl_with(
        &kubeconfig,
        &[
            "get",
            "-n",
            &ns.name,
            &format!("dbs.v1alpha1.{group}"),
            "pg",
            "-o",
            "jsonpath={.spec.size}",
        ],
    )
    .unwrap();
    assert_eq!(size, "5");
    assert!(webhooks.counts.converted.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    // The rolling figures cover the last three reviews only (conversionWindow: 3).
    let window = webhooks.counts.conversions.json();
    assert_eq!(window["size"], 3, "{window}");
    assert!((1..=3).contains(&window["reviews"].as_u64().unwrap()), "{window}");
    assert_eq!(window["failed"], 0, "{window}");
    assert!(window["p95Ms"].as_f64().is_some(), "{window}");
    webhooks.stop().await;
    kubectl_with(&kubeconfig, &["delete", "crd", &format!("dbs.{group}"), "--wait=false"]).unwrap();
}

/// Issue 33, finding 6: a tenant's Katalog entry for a built-in kind reaches only the
/// objects its labelSelector (and namespace) selects, never every Deployment in the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_for_a_built_in_kind_protects_only_what_it_selects() {
    use k8s_openapi::api::apps::v1::Deployment;
    let ns = namespace("gw-scope").await.unwrap();
    let bystanders = namespace("gw-bystander").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let app = format!("grabby-{}", ns.name);
    let deployment = |name: &str, labels: serde_json::Value| -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"selector": {"matchLabels": {"run": name}},
                     "template": {"metadata": {"labels": {"run": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
        .unwrap()
    };
    // Before the gateway starts: one Deployment it selects, one of another tenant.
    let mine: Api<Deployment> = Api::namespaced(ns.client.clone(), &ns.name);
    let theirs: Api<Deployment> = Api::namespaced(ns.client.clone(), &bystanders.name);
    mine.create(
        &PostParams::default(),
        &deployment("selected", serde_json::json!({"app": app})),
    )
    .await
    .unwrap();
    theirs
        .create(
            &PostParams::default(),
            &deployment("bystander", serde_json::json!({"app": "other"})),
        )
        .await
        .unwrap();
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: grabby-{ns}}}
security:
  deletionProtection: {{enabled: true, strictMode: true}}
spec:
  crds:
    deployments:
      apiTypes: {{group: apps, version: v1, kind: Deployment}}
      labelSelector: {{app: {app}}}
      operatorBox: {{}}
",
        ns = ns.name
    );
    let compiled = orkestra_katalog::load_sources(&[("k.yaml".into(), katalog)]).unwrap();
    let webhooks = Webhooks::start(ns.client.clone(), Arc::new(compiled), options(&ns.name))
        .await
        .unwrap();
    let protected = |d: &Deployment| {
        d.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(DELETION_PROTECTION))
            .is_some()
    };
    assert!(
        protected(&mine.get("selected").await.unwrap()),
        "what it selects is labelled"
    );
    assert!(
        !protected(&theirs.get("bystander").await.unwrap()),
        "another tenant's is not"
    );
    let configuration = kubectl_with(
        &cluster.kubeconfig,
        &[
            "get",
            "validatingwebhookconfiguration",
            &format!("orkestra-gateway-grabby-{}", ns.name),
            "-o",
            "json",
        ],
    )
    .unwrap();
    let configuration: serde_json::Value = serde_json::from_str(&configuration).unwrap();
    for webhook in configuration["webhooks"].as_array().unwrap() {
        assert_eq!(
            webhook["objectSelector"]["matchLabels"]["app"],
            app.as_str(),
            "{webhook}"
        );
        assert_ne!(
            webhook["rules"][0]["resources"][0], "customresourcedefinitions",
            "a built-in kind has no CRD of the Katalog's to protect"
        );
    }
    // Once the API server has the configuration: the selected Deployment is held, another
    // tenant's goes as it always did.
    eventually("the deletion webhook to refuse", WAIT, || async {
        kubectl_with(
            &cluster.kubeconfig,
            &["delete", "deployment", "selected", "-n", &ns.name, "--wait=false"],
        )
        .err()
        .map(|e| e.to_string())
    })
    .await
    .unwrap();
    kubectl_with(
        &cluster.kubeconfig,
        &[
            "delete",
            "deployment",
            "bystander",
            "-n",
            &bystanders.name,
            "--wait=false",
        ],
    )
    .unwrap();
    webhooks.stop().await;
}
