//! The shared control plane behaves as a real cluster: CRDs, CRs, the status subresource,
//! watches, the workload controllers and garbage collection.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use orkestra_katalog::Katalog;
use orkestra_kube::crd_install;
use orkestra_test_support::{eventually, namespace};
use serde_json::json;

/// A one-CRD Katalog, loaded from a file as a user would write it.
fn katalog_with(kind: &str, group: &str) -> (tempfile::TempDir, Katalog) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("katalog.yaml");
    let text = format!(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {{name: test}}\nspec:\n  crds:\n    {}:\n      apiTypes: {{group: {group}, version: v1, kind: {kind}}}\n",
        kind.to_lowercase()
    );
    std::fs::write(&path, text).unwrap();
    let katalog = orkestra_katalog::load(&[path]).unwrap().katalog;
    (dir, katalog)
}

#[tokio::test]
async fn crd_from_api_types_serves_crs_with_a_status_subresource_seen_by_a_watch() {
    let ns = namespace("crd-watch").await.unwrap();
    let (_dir, katalog) = katalog_with("Gadget", "crdwatch.orkestra.io");
    let installed = crd_install::install_crds(&ns.client, &katalog, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(installed, ["gadgets.crdwatch.orkestra.io"]);

    let gvk = GroupVersionKind::gvk("crdwatch.orkestra.io", "v1", "Gadget");
    let api: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::from_gvk_with_plural(&gvk, "gadgets"),
    );
    let mut events = watcher(api.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();

    let gadget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "crdwatch.orkestra.io/v1", "kind": "Gadget",
        "metadata": {"name": "g1"}, "spec": {"size": 3, "anything": {"nested": true}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &gadget).await.unwrap();
    let status = json!({"apiVersion": "crdwatch.orkestra.io/v1", "kind": "Gadget", "status": {"phase": "Ready"}});
    let patched = api
        .patch_status("g1", &PatchParams::apply("orkestra-test"), &Patch::Apply(&status))
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["phase"], "Ready");
    assert_eq!(
        patched.data["spec"]["anything"]["nested"], true,
        "unknown spec fields are preserved"
    );
    assert_eq!(
        patched.metadata.generation,
        Some(1),
        "a status write does not bump the generation"
    );

    let mut saw_spec = false;
    let mut saw_status = false;
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(object) = events.try_next().await.unwrap() {
            saw_spec |= object.data["spec"]["size"] == 3;
            saw_status |= object.data["status"]["phase"] == "Ready";
            if saw_spec && saw_status {
                break;
            }
        }
    })
    .await
    .expect("the watch delivers the CR and its status update");
}

#[tokio::test]
async fn a_deployment_gets_a_replicaset_from_the_controller_manager() {
    let ns = namespace("workloads").await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(ns.client.clone(), &ns.name);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}},
        },
    }))
    .unwrap();
    deployments.create(&PostParams::default(), &deployment).await.unwrap();
    let replicasets: Api<ReplicaSet> = Api::namespaced(ns.client.clone(), &ns.name);
    let owner = eventually(
        "a ReplicaSet owned by the Deployment",
        Duration::from_secs(30),
        || async {
            let list = replicasets.list(&ListParams::default()).await.ok()?;
            let rs = list.items.into_iter().next()?;
            rs.metadata
                .owner_references?
                .into_iter()
                .next()
                .map(|o| (o.kind, o.name))
        },
    )
    .await
    .unwrap();
    assert_eq!(owner, ("Deployment".to_string(), "web".to_string()));
}

#[tokio::test]
async fn deleting_an_owner_garbage_collects_its_owned_configmap() {
    let ns = namespace("gc").await.unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let owner = configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let uid = owner.metadata.uid.unwrap();
    let owned: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "owned", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]},
    }))
    .unwrap();
    configmaps.create(&PostParams::default(), &owned).await.unwrap();

    configmaps.delete("owner", &DeleteParams::default()).await.unwrap();
    eventually(
        "the owned ConfigMap to be garbage collected",
        Duration::from_secs(60),
        || async { matches!(configmaps.get_opt("owned").await, Ok(None)).then_some(()) },
    )
    .await
    .unwrap();
}
