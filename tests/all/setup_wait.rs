//! `setup.wait` against the real API server: an object that appears later is waited for, a
//! condition must turn `True`, and a wait that runs out names the object and what it lacked.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_katalog::model::SetupWait;
use orkestra_kube::setup_wait::wait_for;
use orkestra_test_support::namespace;
use serde_json::json;

fn wait(api_version: &str, kind: &str, name: &str, condition: Option<&str>, timeout: Duration) -> SetupWait {
    SetupWait {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        namespace: None,
        condition: condition.map(String::from),
        timeout,
    }
}

#[tokio::test]
async fn setup_wait_waits_for_an_object_and_its_condition_and_names_what_never_came() {
    let ns = namespace("setup-wait").await.unwrap();
    let client = ns.client.clone();

    // A ConfigMap made a second after the wait begins.
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let later = maps.clone();
    let maker = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let map = json!({"metadata": {"name": "app-config"}, "data": {"k": "v"}});
        later
            .create(&PostParams::default(), &serde_json::from_value(map).unwrap())
            .await
            .unwrap();
    });
    let waits = [wait("v1", "ConfigMap", "app-config", None, Duration::from_secs(20))];
    let waited = wait_for(&client, &waits, &ns.name).await.unwrap();
    maker.await.unwrap();
    assert_eq!(waited[0].0, format!("ConfigMap {}/app-config", ns.name));
    assert!(waited[0].1 >= Duration::from_millis(900), "{:?}", waited[0].1);

    // One that never comes: the error names it, what it lacked and the timeout.
    let waits = [wait("v1", "ConfigMap", "never", None, Duration::from_secs(1))];
    let error = wait_for(&client, &waits, &ns.name).await.unwrap_err().to_string();
    assert_eq!(
        error,
        format!("setup.wait: ConfigMap {}/never did not appear after 1s", ns.name)
    );

    // A condition: the object is there, but not Ready until its status says so.
    let katalog = orkestra_katalog::load_sources(&[(
        "katalog.yaml".into(),
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {name: setup-wait}\nspec:\n  crds:\n    gadget:\n      apiTypes: {group: setupwait.orkestra.io, version: v1, kind: Gadget}\n".into(),
    )])
    .unwrap();
    orkestra_kube::crd_install::install_crds(&client, &katalog.katalog, Duration::from_secs(60))
        .await
        .unwrap();
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("setupwait.orkestra.io", "v1", "Gadget"));
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &resource);
    let gadget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "setupwait.orkestra.io/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {},
    }))
    .unwrap();
    gadgets.create(&PostParams::default(), &gadget).await.unwrap();
    let ready = [wait(
        "setupwait.orkestra.io/v1",
        "Gadget",
        "g",
        Some("Ready"),
        Duration::from_secs(1),
    )];
    let error = wait_for(&client, &ready, &ns.name).await.unwrap_err().to_string();
    assert_eq!(error, format!("setup.wait: Gadget {}/g is not Ready after 1s", ns.name));
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Made",
        "message": "", "lastTransitionTime": "2026-12-06T10:00:00Z"}]}});
    gadgets
        .patch_status("g", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let waited = wait_for(&client, &ready, &ns.name).await.unwrap();
    assert_eq!(waited[0].0, format!("Gadget {}/g", ns.name));
}
