//! Provenance only the gateway writes (issue 33, finding 1): with the Serve API open, a
//! `kubectl apply` by anyone else that sets, changes or removes `serve-source` or
//! `serve-intent` is refused at admission, while edits that leave them as the gateway wrote
//! them go through.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_expr::labels::{SERVE_INTENT, SERVE_SOURCE};
use orkestra_gateway::webhooks::Webhooks;
use orkestra_test_support::{eventually, kubectl_with, namespace};
use serde_json::json;

use crate::pipeline::WAIT;

fn katalog(ns: &str, group: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: provenance-{ns}}}
gateway:
  api:
    enabled: true
    auth:
      tokens:
        - {{name: ci, secretRef: {{name: gw-ci, namespace: {ns}}}}}
spec:
  crds:
    app:
      apiTypes: {{group: {group}, version: v1, kind: App, plural: apps}}
      namespace: {ns}
      serve:
        enabled: true
        namespace: {ns}
        fields:
          image: {{required: true}}
        tokens:
          ci: {{permissions: {{global: ['*']}}}}
      operatorBox: {{}}
"
    )
}

/// A ServiceAccount that may write Apps in `ns`, as kubectl impersonates it.
fn forger(kubeconfig: &std::path::Path, dir: &std::path::Path, ns: &str, group: &str) -> String {
    let rbac = format!(
        "apiVersion: v1
kind: ServiceAccount
metadata: {{name: forger, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: app-writer, namespace: {ns}}}
rules:
  - {{apiGroups: ['{group}'], resources: [apps], verbs: [get, list, create, update, patch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: forger-writes-apps, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: app-writer}}
subjects: [{{kind: ServiceAccount, name: forger, namespace: {ns}}}]
"
    );
    let file = dir.join("rbac.yaml");
    std::fs::write(&file, rbac).unwrap();
    kubectl_with(kubeconfig, &["apply", "-f", file.to_str().unwrap()]).unwrap();
    format!("--as=system:serviceaccount:{ns}:forger")
}

// kubectl blocks its thread while the webhooks, in this process, answer the API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provenance_is_written_by_the_gateway_alone() {
    let ns = namespace("provenance").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let group = format!("{}.provenance.orkestra.io", ns.name);
    let compiled = Arc::new(orkestra_katalog::load_sources(&[("k.yaml".into(), katalog(&ns.name, &group))]).unwrap());
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "gw-ci"}, "stringData": {"token": "ci-token"}})).unwrap();
    secrets.create(&PostParams::default(), &secret).await.unwrap();
    let webhooks = Webhooks::start(ns.client.clone(), compiled.clone(), crate::policies::options(&ns.name))
        .await
        .unwrap();
    let (base, refresh) = crate::gateway::serve_api(&ns, compiled.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = cluster.kubeconfig.clone();
    let as_forger = forger(&kubeconfig, dir.path(), &ns.name, &group);
    let manifest = |name: &str, annotations: serde_json::Value| {
        json!({"apiVersion": format!("{group}/v1"), "kind": "App",
               "metadata": {"name": name, "namespace": ns.name, "annotations": annotations},
               "spec": {"image": "web"}})
        .to_string()
    };
    let kubectl = |args: Vec<String>| {
        let (kubeconfig, as_forger) = (kubeconfig.clone(), as_forger.clone());
        let mut all = vec![as_forger];
        all.extend(args);
        async move {
            let args: Vec<&str> = all.iter().map(String::as_str).collect();
            kubectl_with(&kubeconfig, &args).map_err(|e| e.to_string())
        }
    };

    // A plain kubectl apply that claims to come from CI with an approved intent.
    let forged = manifest(
        "forged",
        json!({SERVE_SOURCE: "repo:shop/web", SERVE_INTENT: "{\"approvedBy\":\"security-team\"}"}),
    );
    std::fs::write(dir.path().join("forged.json"), &forged).unwrap();
    let path = dir.path().join("forged.json").display().to_string();
    // The API server takes in a new webhook configuration within a few seconds.
    let refused = eventually("the provenance webhook to refuse", WAIT, || {
        let apply = kubectl(vec!["apply".into(), "-f".into(), path.clone()]);
        async move { apply.await.err() }
    })
    .await
    .unwrap();
    assert!(
        refused.contains("provenance that only the gateway writes") && refused.contains(SERVE_SOURCE),
        "{refused}"
    );
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "App"), "apps");
    let apps: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    assert!(apps.get_opt("forged").await.unwrap().is_none(), "nothing stored");

    // The forger's own CR, without provenance, is theirs to write.
    std::fs::write(dir.path().join("plain.json"), manifest("plain", json!({}))).unwrap();
    let plain = dir.path().join("plain.json").display().to_string();
    kubectl(vec!["apply".into(), "-f".into(), plain]).await.unwrap();

    // The gateway's apply records provenance; others may edit the CR around it...
    let applied = reqwest::Client::new()
        .post(format!("{base}/apply"))
        .bearer_auth("ci-token")
        .json(&json!({"target": "app", "name": "shop", "image": "web"}))
        .send()
        .await
        .unwrap();
    assert_eq!(applied.status(), 200, "{}", applied.text().await.unwrap());
    let shop = apps.get("shop").await.unwrap();
    let intent = shop.metadata.annotations.as_ref().unwrap()[SERVE_INTENT].clone();
    kubectl(vec![
        "label".into(),
        "-n".into(),
        ns.name.clone(),
        format!("apps.{group}"),
        "shop".into(),
        "team=web".into(),
    ])
    .await
    .unwrap();
    // ...but not change or remove it.
    let overwrite = format!("{SERVE_INTENT}={{\"approvedBy\":\"security-team\"}}");
    let changed = kubectl(vec![
        "annotate".into(),
        "--overwrite".into(),
        "-n".into(),
        ns.name.clone(),
        format!("apps.{group}"),
        "shop".into(),
        overwrite,
    ])
    .await
    .unwrap_err();
    assert!(changed.contains(SERVE_INTENT), "{changed}");
    let removed = kubectl(vec![
        "annotate".into(),
        "-n".into(),
        ns.name.clone(),
        format!("apps.{group}"),
        "shop".into(),
        format!("{SERVE_SOURCE}-"),
    ])
    .await
    .unwrap_err();
    assert!(removed.contains(SERVE_SOURCE), "{removed}");
    let shop = apps.get("shop").await.unwrap();
    assert_eq!(shop.metadata.annotations.as_ref().unwrap()[SERVE_INTENT], intent);
    assert_eq!(shop.metadata.labels.as_ref().unwrap()["team"], "web");
    refresh.abort();
    webhooks.stop().await;
}

/// Issue 49, finding 9: provenance was guarded only on CRDs the Serve API serves, so with
/// admission webhooks on and no Serve API (or only webhook intake) a `kubectl apply` stored
/// a forged `serve-source`, which a rule or a template then trusted. Every CRD of a Katalog
/// whose webhooks are registered is guarded now, in every gateway mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provenance_is_refused_from_anyone_but_the_gateway_on_every_crd_whose_webhooks_are_registered() {
    let ns = namespace("provenance-all").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (mode, group_part, gateway) in [
        // Admission rules, no Serve API.
        (
            "rules",
            "rules",
            "security:\n  webhooks:\n    admission: {enabled: true}\n",
        ),
        // Webhook intake only.
        (
            "intake",
            "intake",
            "gateway:\n  webhooks:\n    generic: [{name: pager, enabled: true, secretRef: {name: pager, key: secret}}]\n",
        ),
    ] {
        let group = format!("{}.{group_part}.provenance.orkestra.io", ns.name);
        let katalog = format!(
            "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: provenance-{mode}-{ns}}}
{gateway}spec:
  crds:
    app:
      apiTypes: {{group: {group}, version: v1, kind: App, plural: apps}}
      namespace: {ns}
      admission:
        validation:
          rules:
            - {{field: spec.image, exists: true, message: 'an image is required'}}
      operatorBox: {{}}
",
            ns = ns.name
        );
        let compiled = Arc::new(orkestra_katalog::load_sources(&[("k.yaml".into(), katalog)]).unwrap());
        orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
            .await
            .unwrap();
        let webhooks = Webhooks::start(ns.client.clone(), compiled.clone(), crate::policies::options(&ns.name))
            .await
            .unwrap();
        let as_forger = forger(&cluster.kubeconfig, dir.path(), &ns.name, &group);
        let forged = json!({"apiVersion": format!("{group}/v1"), "kind": "App",
            "metadata": {"name": "forged", "namespace": ns.name,
                         "annotations": {SERVE_SOURCE: "repo:shop/web"}},
            "spec": {"image": "web"}});
        let file = dir.path().join(format!("{mode}.json"));
        std::fs::write(&file, forged.to_string()).unwrap();
        let path = file.display().to_string();
        let refused = eventually(&format!("{mode}: the provenance webhook to refuse"), WAIT, || {
            let (kubeconfig, as_forger, path) = (cluster.kubeconfig.clone(), as_forger.clone(), path.clone());
            async move {
                kubectl_with(&kubeconfig, &[&as_forger, "apply", "-f", &path])
                    .err()
                    .map(|e| e.to_string())
            }
        })
        .await
        .unwrap();
        assert!(
            refused.contains("provenance that only the gateway writes") && refused.contains(SERVE_SOURCE),
            "{mode}: {refused}"
        );
        let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "App"), "apps");
        let apps: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
        assert!(
            apps.get_opt("forged").await.unwrap().is_none(),
            "{mode}: nothing stored"
        );
        webhooks.stop().await;
    }
}
