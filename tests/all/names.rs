//! Names that would change the URL they go into (issue 33, finding 3): a name is checked
//! against Kubernetes' rules and encoded before it reaches the API server, so a get never
//! becomes a list or a watch and a delete never a deletecollection, whether the name comes
//! through the Serve API's path or a guest's kube call.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_test_support::{guests, namespace};
use serde_json::json;

use crate::pipeline::WAIT;

fn notes_katalog(ns: &str, group: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: smuggle-{ns}}}
gateway:
  api:
    enabled: true
    auth:
      tokens:
        - {{name: admin, secretRef: {{name: gw-admin, namespace: {ns}}}}}
spec:
  crds:
    note:
      apiTypes: {{group: {group}, version: v1, kind: Note, plural: notes}}
      namespace: {ns}
      serve:
        enabled: true
        namespace: {ns}
        tokens:
          admin: {{permissions: {{global: ['*']}}}}
      operatorBox: {{}}
"
    )
}

#[tokio::test]
async fn a_serve_api_path_never_becomes_a_watch_or_a_deletecollection() {
    let ns = namespace("smuggle").await.unwrap();
    let group = format!("{}.names.orkestra.io", ns.name);
    let compiled =
        Arc::new(orkestra_katalog::load_sources(&[("k.yaml".into(), notes_katalog(&ns.name, &group))]).unwrap());
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "gw-admin"}, "stringData": {"token": "admin-token"}}))
            .unwrap();
    secrets.create(&PostParams::default(), &secret).await.unwrap();
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Note"), "notes");
    let notes: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    for name in ["one", "two"] {
        let note: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1"), "kind": "Note", "metadata": {"name": name}, "spec": {}}))
        .unwrap();
        notes.create(&PostParams::default(), &note).await.unwrap();
    }
    let (base, refresh) = crate::gateway::serve_api(&ns, compiled).await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let call = |method: reqwest::Method, name: &str| {
        let url = format!("{base}/resources/Note/{}/{name}", ns.name);
        http.request(method, url).bearer_auth("admin-token").send()
    };

    // Today's way in: `?watch=true`, encoded into the path, came out of the router decoded.
    let watched = call(reqwest::Method::GET, "%3Fwatch%3Dtrue")
        .await
        .expect("an answer, not a watch held open");
    assert_eq!(watched.status(), 400);
    let body = watched.text().await.unwrap();
    assert!(body.contains("DNS-1123 subdomain"), "{body}");

    let deleted = call(reqwest::Method::DELETE, "%3Fzz%3D").await.unwrap();
    assert_eq!(deleted.status(), 400, "{}", deleted.text().await.unwrap());
    let bad_namespace = http
        .get(format!("{base}/resources/Note/%3Fwatch%3D1/one"))
        .bearer_auth("admin-token")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_namespace.status(), 400);
    assert!(bad_namespace.text().await.unwrap().contains("DNS-1123 label"));

    for name in ["one", "two"] {
        assert!(notes.get_opt(name).await.unwrap().is_some(), "{name} was not deleted");
    }
    // A real name still reads and deletes one CR.
    let one = call(reqwest::Method::GET, "one").await.unwrap();
    assert_eq!(one.status(), 200);
    assert_eq!(call(reqwest::Method::DELETE, "one").await.unwrap().status(), 200);
    assert!(notes.get_opt("two").await.unwrap().is_some());
    refresh.abort();
}

#[tokio::test]
async fn a_guests_kube_call_names_one_object_whatever_the_name_holds() {
    let hostile = guests::component("hostile").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: guest-smuggle}}
spec:
  crds:
    smuggler:
      apiTypes: {{group: names.orkestra.io, version: v1, kind: Smuggler}}
      operatorBox:
        reconcile:
          hooks:
            component: {}
            limits: {{timeout: 5s}}
            capabilities:
              - {{apiVersion: v1, kinds: [ConfigMap], verbs: [get, delete]}}
",
        hostile.display()
    );
    std::fs::write(dir.path().join("katalog.yaml"), katalog).unwrap();
    let run = crate::running::Running::start("guest-smuggle", &[dir.path().join("katalog.yaml")], &[]).await;
    let maps: Api<ConfigMap> = Api::namespaced(run.ns.client.clone(), &run.ns.name);
    for name in ["keep-1", "keep-2"] {
        let map: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}, "data": {"a": "b"}})).unwrap();
        maps.create(&PostParams::default(), &map).await.unwrap();
    }
    let smugglers = run.crs("names.orkestra.io", "Smuggler");
    run.create(&smugglers, "Smuggler", "s", json!({"mode": "smuggle"}))
        .await;
    let status = run.status(&smugglers, "s", |s| s["get"].is_string()).await;
    assert_eq!(status["get"], "refused: not found", "{status}");
    assert_eq!(status["delete"], "refused: not found", "{status}");
    let slash = status["slash"].as_str().unwrap();
    assert!(
        slash.starts_with("refused: rejected") && slash.contains("'/'"),
        "{slash}"
    );
    for name in ["keep-1", "keep-2"] {
        assert!(maps.get_opt(name).await.unwrap().is_some(), "{name} survives");
    }
    run.stop().await;
}
