//! CR bookkeeping and deletion against the real API server (with kube-controller-manager):
//! our finalizers, labels and annotations on each CR, Events on change, and on deletion the
//! onDelete Jobs (un-owned, awaited until the job controller finishes them) or the owned
//! cluster-scoped children, then only our finalizers removed.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, ListParams};
use orkestra_test_support::eventually;
use serde_json::{Value, json};

use crate::pipeline::{Harness, WAIT, crd};

const CLEANUP: &str = "orkestra.orkspace.io/cleanup";

fn finalizers(object: &Value) -> Vec<&str> {
    object["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

async fn reasons(h: &Harness, name: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let params = ListParams::default().fields(&format!("regarding.name={name}"));
    let list = events.list(&params).await.map(|l| l.items).unwrap_or_default();
    list.into_iter().filter_map(|e| e.reason).collect()
}

#[tokio::test]
async fn a_cr_is_marked_as_ours_and_on_deletion_loses_only_our_finalizers() {
    let operator_box = "        runtime:
          finalizers: [example.io/audit]
        reconcile:
          onReconcile:
            custom:
              - apiVersion: rbac.authorization.k8s.io/v1
                kind: ClusterRole
                name: '{{ .metadata.namespace }}-{{ .metadata.name }}'
";
    let h = Harness::start("lifecycle", &crd("app", "App", operator_box), &[], true).await;
    h.create("App", "a", json!({})).await;
    let app = eventually("bookkeeping", WAIT, || async {
        let app = h.api("App").get("a").await.ok()?;
        let app = serde_json::to_value(app).ok()?;
        (app["status"]["conditions"][0]["status"] == "True").then_some(app)
    })
    .await
    .unwrap();
    assert_eq!(finalizers(&app), [CLEANUP, "example.io/audit"]);
    assert_eq!(app["metadata"]["labels"]["orkestra.orkspace.io/managed"], "true");
    assert_eq!(
        app["metadata"]["annotations"]["orkestra.orkspace.io/managed-by"],
        "lifecycle"
    );
    let since = app["metadata"]["annotations"]["orkestra.orkspace.io/managed-since"]
        .as_str()
        .unwrap();
    assert!(
        since.parse::<jiff::Timestamp>().is_ok(),
        "managed-since is RFC 3339: {since}"
    );
    let roles: Api<ClusterRole> = Api::all(h.ns.client.clone());
    let role_name = format!("{}-a", h.ns.name);
    assert!(
        roles.get_opt(&role_name).await.unwrap().is_some(),
        "the cluster-scoped child"
    );
    eventually("events", WAIT, || async {
        let reasons = reasons(&h, "a").await;
        (reasons.iter().any(|r| r == "AppFinalizerAdded") && reasons.iter().any(|r| r == "AppReconciled")).then_some(())
    })
    .await
    .unwrap();

    // Someone else's finalizer survives our cleanup and keeps the CR until they are done.
    h.patch(
        "App",
        "a",
        json!({"metadata": {"finalizers": [CLEANUP, "example.io/audit", "someone.else/keep"]}}),
    )
    .await;
    h.api("App").delete("a", &DeleteParams::default()).await.unwrap();
    let app = eventually("our finalizers removed", WAIT, || async {
        let app = serde_json::to_value(h.api("App").get("a").await.ok()?).ok()?;
        (finalizers(&app) == ["someone.else/keep"]).then_some(app)
    })
    .await
    .unwrap();
    assert!(app["metadata"]["deletionTimestamp"].is_string());
    assert!(
        roles.get_opt(&role_name).await.unwrap().is_none(),
        "owned cluster-scoped children are deleted: no owner reference collects them"
    );
    assert!(reasons(&h, "a").await.iter().any(|r| r == "AppDeleted"));
    h.patch("App", "a", json!({"metadata": {"finalizers": []}})).await;
    h.stop().await;
}

#[tokio::test]
async fn on_delete_jobs_outlive_the_cr_and_hold_it_until_they_finish() {
    // Its Pod asks for a node that does not exist, so it never runs and the job controller
    // fails the Job at its deadline: finished, a few seconds after the CR's deletion.
    let operator_box = "        reconcile:
          onDelete:
            jobs:
              - {name: '{{ .metadata.name }}-farewell', image: busybox, command: ['true'], activeDeadlineSeconds: 3, backoffLimit: 0, nodeSelector: {disk: none}}
";
    let h = Harness::start("on-delete", &crd("app", "App", operator_box), &[], true).await;
    h.create("App", "b", json!({})).await;
    eventually("the cleanup finalizer", WAIT, || async {
        let app = serde_json::to_value(h.api("App").get("b").await.ok()?).ok()?;
        finalizers(&app).contains(&CLEANUP).then_some(())
    })
    .await
    .unwrap();
    let jobs: Api<Job> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    assert!(
        jobs.get_opt("b-farewell").await.unwrap().is_none(),
        "onDelete runs only on deletion"
    );

    h.api("App").delete("b", &DeleteParams::default()).await.unwrap();
    let job = eventually("the onDelete Job", WAIT, || async {
        jobs.get_opt("b-farewell").await.ok().flatten()
    })
    .await
    .unwrap();
    assert!(
        job.metadata.owner_references.unwrap_or_default().is_empty(),
        "an onDelete Job has no owner: it must outlive the CR"
    );
    let app = serde_json::to_value(h.api("App").get("b").await.unwrap()).unwrap();
    assert!(
        finalizers(&app).contains(&CLEANUP),
        "the CR waits for its Job (the job controller needs seconds to fail it)"
    );
    eventually("the CR gone once the Job finished", WAIT, || async {
        matches!(h.api("App").get_opt("b").await, Ok(None)).then_some(())
    })
    .await
    .unwrap();
    let job = jobs.get("b-farewell").await.unwrap();
    let failed = job.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(failed.iter().any(|c| c.type_ == "Failed" && c.status == "True"));
    h.stop().await;
}

#[tokio::test]
async fn declared_events_fire_on_their_outcome_with_rendered_text() {
    let operator_box = "        reconcile:
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-conf', data: {v: '{{ .spec.v }}'}}
        emit:
          events:
            shipped: {reason: Shipped, message: 'version {{ .spec.v }} as {{ .children.configmap.metadata.name }}', on: [success]}
            broken: {type: Warning, reason: Broken, message: 'failed: {{ .error }}', on: [failure]}
";
    let h = Harness::start("emit", &crd("app", "App", operator_box), &[], true).await;
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let taken: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "bad-conf"}})).unwrap();
    configmaps.create(&Default::default(), &taken).await.unwrap();
    h.create("App", "good", json!({"v": "7"})).await;
    h.create("App", "bad", json!({"v": "8"})).await;
    let events: Api<Event> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let find = |name: &'static str, reason: &'static str| {
        let events = events.clone();
        async move {
            let params = ListParams::default().fields(&format!("regarding.name={name}"));
            let list = events.list(&params).await.ok()?.items;
            list.into_iter().find(|e| e.reason.as_deref() == Some(reason))
        }
    };
    let shipped = eventually("Shipped", WAIT, || find("good", "Shipped")).await.unwrap();
    assert_eq!(shipped.note.as_deref(), Some("version 7 as good-conf"));
    assert_eq!(shipped.type_.as_deref(), Some("Normal"));
    let broken = eventually("Broken", WAIT, || find("bad", "Broken")).await.unwrap();
    assert_eq!(broken.type_.as_deref(), Some("Warning"));
    assert!(
        broken.note.as_deref().unwrap_or_default().contains("NotOwned"),
        "{:?}",
        broken.note
    );
    assert!(find("good", "Broken").await.is_none() && find("bad", "Shipped").await.is_none());
    h.stop().await;
}

#[tokio::test]
async fn ordered_deletion_waits_for_each_group_to_be_gone_before_the_next() {
    let operator_box = "        reconcile:
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-first', data: {a: '1'}}
            services:
              - {name: '{{ .metadata.name }}-second', port: 80}
          onDelete:
            ordered: true
            timeout: 2m
            groups:
              - configMaps: [{name: '{{ .metadata.name }}-first'}]
              - services: [{name: '{{ .metadata.name }}-second'}]
";
    let h = Harness::start("ordered", &crd("app", "App", operator_box), &[], true).await;
    h.create("App", "o", json!({})).await;
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    eventually("the children", WAIT, || async {
        services.get_opt("o-second").await.ok().flatten()
    })
    .await
    .unwrap();
    // Someone holds the first group's ConfigMap: the second group must wait for it.
    let hold = json!({"metadata": {"finalizers": ["example.io/hold"]}});
    configmaps
        .patch(
            "o-first",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(hold),
        )
        .await
        .unwrap();
    h.api("App").delete("o", &DeleteParams::default()).await.unwrap();
    eventually("the first group deleting", WAIT, || async {
        let first = configmaps.get_opt("o-first").await.ok().flatten()?;
        first.metadata.deletion_timestamp.map(|_| ())
    })
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert!(
        services.get_opt("o-second").await.unwrap().is_some(),
        "the second group waits"
    );
    assert!(h.api("App").get_opt("o").await.unwrap().is_some(), "so does the CR");

    let release = json!({"metadata": {"finalizers": []}});
    configmaps
        .patch(
            "o-first",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(release),
        )
        .await
        .unwrap();
    eventually("the CR gone after both groups", WAIT, || async {
        matches!(h.api("App").get_opt("o").await, Ok(None)).then_some(())
    })
    .await
    .unwrap();
    assert!(services.get_opt("o-second").await.unwrap().is_none());
    h.stop().await;
}

#[tokio::test]
async fn a_failure_that_repeats_is_one_event_whose_series_counts_it() {
    let operator_box = "        reconcile:
          onReconcile:
            configMaps:
              - {name: broken, data: {value: '{{ div 1 .spec.zero }}'}}
";
    let h = Harness::start("series", &crd("app", "App", operator_box), &[], true).await;
    h.create("App", "a", json!({"zero": 0})).await;
    let events: Api<Event> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let params = ListParams::default().fields("regarding.name=a");
    let errors = eventually("the failure to repeat", WAIT, || async {
        let list = events.list(&params).await.ok()?.items;
        let errors: Vec<Event> = list
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("AppReconcileError"))
            .collect();
        errors
            .iter()
            .any(|e| e.series.as_ref().is_some_and(|s| s.count >= 3))
            .then_some(errors)
    })
    .await
    .unwrap();
    assert_eq!(errors.len(), 1, "repeats join one Event: {errors:?}");
    let event = &errors[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reporting_controller.as_deref(), Some("orkestra"));
    // The note says why and where in the Katalog: the entry that did not render.
    assert!(
        event.note.as_deref().is_some_and(
            |n| n.contains("RenderFailed") && n.contains("operatorBox.reconcile.onReconcile.configMaps[0]: ")
        ),
        "{:?}",
        event.note
    );
}
