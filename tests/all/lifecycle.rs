//! CR bookkeeping and deletion against the real API server (with kube-controller-manager):
//! our finalizers, labels and annotations on each CR, Events on change, and on deletion the
//! onDelete Jobs (un-owned, awaited until the job controller finishes them) or the owned
//! cluster-scoped children, then only our finalizers removed; a closed reconcile gate
//! holds reconciles but never a deletion; create-once children outlive their `when`; what a
//! status may hold (a schema that drops it, `ignoreStatusPatch`, `.request` from the
//! gateway's recorded intent).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, ListParams};
use orkestra::outcome::health::State;
use orkestra_test_support::eventually;
use serde_json::{Value, json};

use crate::pipeline::{Harness, WAIT, crd};

const CLEANUP: &str = "orkestra.orkspace.io/cleanup";
/// A cluster-scoped child, which the runtime itself removes when its CR goes.
const CLUSTER_ROLE: &str = "        reconcile:
          onReconcile:
            custom:
              - apiVersion: rbac.authorization.k8s.io/v1
                kind: ClusterRole
                name: '{{ .metadata.namespace }}-{{ .metadata.name }}'
";

fn finalizers(object: &Value) -> Vec<&str> {
    object["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

async fn reasons(h: &Harness, name: &str) -> Vec<String> {
    events(h, name).await.into_iter().map(|(reason, _)| reason).collect()
}

/// The Events about CR `name`: reason and note.
async fn events(h: &Harness, name: &str) -> Vec<(String, String)> {
    let events: Api<Event> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let params = ListParams::default().fields(&format!("regarding.name={name}"));
    let list = events.list(&params).await.map(|l| l.items).unwrap_or_default();
    list.into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn a_cr_is_marked_as_ours_and_on_deletion_loses_only_our_finalizers() {
    let operator_box = format!("        runtime:\n          finalizers: [example.io/audit]\n{CLUSTER_ROLE}");
    let h = Harness::start("lifecycle", &crd("app", "App", &operator_box), &[], true).await;
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
    // One Event for the reconcile that made it ours, naming the finalizers it put in place.
    let created = eventually("events", WAIT, || async {
        let events = events(&h, "a").await;
        events
            .iter()
            .any(|(reason, _)| reason == "AppReconciled")
            .then_some(events)
    })
    .await
    .unwrap();
    assert_eq!(created.len(), 1, "one Event at creation: {created:?}");
    assert!(
        created[0]
            .1
            .contains(&format!("finalizers {CLEANUP}, example.io/audit in place")),
        "{created:?}"
    );

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
async fn a_cr_whose_children_the_garbage_collector_takes_gets_no_finalizer_and_no_write_but_its_status() {
    // Without the stamps, which a write of their own would carry (see reconcile.rs).
    let operator_box = "        runtime: {stamps: false}
        reconcile:
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-c', data: {x: '1'}}
";
    let (h, tally) = Harness::start_counted("no-finalizer", &crd("app", "App", operator_box)).await;
    h.create("App", "d", json!({})).await;
    let app = eventually("Ready", WAIT, || async {
        let app = serde_json::to_value(h.api("App").get("d").await.ok()?).ok()?;
        (app["status"]["conditions"][0]["status"] == "True").then_some(app)
    })
    .await
    .unwrap();
    assert!(finalizers(&app).is_empty(), "{}", app["metadata"]);
    let patch = http::Method::PATCH;
    assert_eq!(tally.count(&patch, "/apps/d"), 0, "the CR itself is not written");
    assert_eq!(tally.count(&patch, "/apps/d/status"), 1, "its status is, once");
    let note = eventually("its Event", WAIT, || async {
        let note = events(&h, "d").await;
        (!note.is_empty()).then_some(note)
    })
    .await
    .unwrap();
    assert_eq!(note.len(), 1, "one Event: {note:?}");
    assert!(!note[0].1.contains("finalizers"), "{note:?}");

    // Deleted at once, with nothing of ours to wait for; the ConfigMap goes with it.
    h.api("App").delete("d", &DeleteParams::default()).await.unwrap();
    eventually("the CR gone", WAIT, || async {
        matches!(h.api("App").get_opt("d").await, Ok(None)).then_some(())
    })
    .await
    .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    // The garbage collector learns a new CRD's kind at its next discovery sync (every 30 s):
    // here that took 41 s.
    eventually("its ConfigMap collected", WAIT * 4, || async {
        matches!(configmaps.get_opt("d-c").await, Ok(None)).then_some(())
    })
    .await
    .unwrap();
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

#[tokio::test]
async fn a_gated_cr_keeps_its_children_reports_gated_and_is_still_finalized() {
    let gate = "        preReconcile:\n          reconcileGate:\n            when:\n              - {field: spec.paused, notEquals: 'true'}\n";
    let h = Harness::start(
        "gated-delete",
        &crd("app", "App", &format!("{gate}{CLUSTER_ROLE}")),
        &[],
        true,
    )
    .await;
    h.create("App", "g", json!({"paused": false})).await;
    let roles: Api<ClusterRole> = Api::all(h.ns.client.clone());
    let role_name = format!("{}-g", h.ns.name);
    eventually("the cluster-scoped child", WAIT, || async {
        roles.get_opt(&role_name).await.ok().flatten()
    })
    .await
    .unwrap();

    h.patch("App", "g", json!({"spec": {"paused": true}})).await;
    h.wait_state("app", State::Gated).await;
    let url = crate::live::serve(&h, orkestra::live::Auth::open()).await;
    let (_, health) = crate::live::get(&format!("{url}/katalog/app/health")).await;
    assert_eq!(
        (health["gated"].clone(), health["state"].clone()),
        (json!(true), json!("gated")),
        "{health}"
    );
    assert!(
        roles.get_opt(&role_name).await.unwrap().is_some(),
        "a closed gate does not clean up"
    );

    // The gate still says no, yet the deletion goes through: cleanup, then our finalizer.
    h.api("App").delete("g", &DeleteParams::default()).await.unwrap();
    eventually("the gated CR finalized and gone", WAIT, || async {
        matches!(h.api("App").get_opt("g").await, Ok(None)).then_some(())
    })
    .await
    .unwrap();
    assert!(
        roles.get_opt(&role_name).await.unwrap().is_none(),
        "its cluster-scoped child was cleaned up"
    );
    h.stop().await;
}

#[tokio::test]
async fn create_once_children_outlive_their_when_and_drift_corrected_ones_do_not() {
    // A two-step state machine: step one's Job and its `reconcile: false` ConfigMap are made
    // once; the drift-corrected ConfigMap of step one goes when the CR moves to step two.
    let operator_box = "        reconcile:
          resync: 1s
          onReconcile:
            jobs:
              - name: '{{ .metadata.name }}-build'
                image: busybox
                command: ['true']
                when: [{field: spec.step, equals: one}]
            configMaps:
              - name: '{{ .metadata.name }}-once'
                data: {step: '{{ .spec.step }}'}
                reconcile: false
                when: [{field: spec.step, equals: one}]
              - name: '{{ .metadata.name }}-live'
                data: {step: '{{ .spec.step }}'}
                when: [{field: spec.step, equals: one}]
              - name: '{{ .metadata.name }}-two'
                data: {step: '{{ .spec.step }}'}
                when: [{field: spec.step, equals: two}]
";
    let h = Harness::start("create-once", &crd("pipe", "Pipe", operator_box), &[], true).await;
    h.create("Pipe", "p", json!({"step": "one"})).await;
    let jobs: Api<Job> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let maps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    eventually("step one's children", WAIT, || async {
        let job = jobs.get_opt("p-build").await.ok()??;
        let once = maps.get_opt("p-once").await.ok()??;
        maps.get_opt("p-live").await.ok()??;
        Some((job, once))
    })
    .await
    .unwrap();

    h.patch("Pipe", "p", json!({"spec": {"step": "two"}})).await;
    eventually(
        "step two's child, and step one's drift-corrected child pruned",
        WAIT,
        || async {
            let two = maps.get_opt("p-two").await.ok()?;
            let live = maps.get_opt("p-live").await.ok()?;
            (two.is_some() && live.is_none()).then_some(())
        },
    )
    .await
    .unwrap();
    // Resyncs (every second) must not prune them either.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert!(
        jobs.get_opt("p-build").await.unwrap().is_some(),
        "the create-once Job outlives its when"
    );
    let once = maps
        .get_opt("p-once")
        .await
        .unwrap()
        .expect("the reconcile: false ConfigMap stays");
    assert_eq!(
        once.data.unwrap_or_default().get("step").map(String::as_str),
        Some("one"),
        "and is never rewritten"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_step_s_when_reads_the_job_an_earlier_run_made() {
    // The first step renders only while the CR has no phase (its first run), so later runs
    // apply no Job at all: the second step's entry, waiting on the first Job's success, must
    // read `.children.job` from what the Job watch holds. The simulated node runs the first
    // Job's Pod to success.
    let operator_box = "        reconcile:
          onReconcile:
            jobs:
              - name: '{{ .metadata.name }}-first'
                image: busybox
                command: ['true']
                when: [{field: status.phase, operator: notExists}]
              - name: '{{ .metadata.name }}-second'
                image: busybox
                command: ['true']
                when: [{field: children.job.status.succeeded, greaterThan: 0}]
        emit:
          status:
            fields:
              - {path: phase, value: started}
";
    let h = Harness::start("job-steps", &crd("pipe", "Pipe", operator_box), &[], true).await;
    h.create("Pipe", "p", json!({})).await;
    let jobs: Api<Job> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let second = eventually("the second step's Job", std::time::Duration::from_secs(120), || async {
        jobs.get_opt("p-second").await.ok()?
    })
    .await
    .unwrap();
    let first = jobs.get_opt("p-first").await.unwrap().expect("the first Job stays");
    let finished = first
        .status
        .and_then(|s| s.completion_time)
        .expect("the first Job completed");
    let made = second.metadata.creation_timestamp.expect("a creation time");
    assert!(
        made.0 >= finished.0,
        "the second step began ({made:?}) only once the first had finished ({finished:?})"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_crd_whose_schema_drops_status_is_warned_about_and_costs_no_writes() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::runtime::wait::{await_condition, conditions};
    let h = Harness::start(
        "dropped-status",
        &crd("app", "App", "        reconcile: {resync: 1s}\n"),
        &[],
        false,
    )
    .await;
    // As a crdFile might declare it: a schema with a spec only, and no status subresource.
    let name = format!("apps.{}", h.group);
    let definition: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "group": h.group, "scope": "Namespaced",
            "names": {"kind": "App", "plural": "apps", "singular": "app", "listKind": "AppList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }}}],
        },
    }))
    .unwrap();
    let definitions: Api<CustomResourceDefinition> = Api::all(h.ns.client.clone());
    definitions.create(&Default::default(), &definition).await.unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(definitions, &name, conditions::is_crd_established()),
    )
    .await
    .unwrap()
    .unwrap();
    eventually("the kind served", WAIT, || async {
        h.api("App").list(&Default::default()).await.ok()
    })
    .await
    .unwrap();
    h.create("App", "a", json!({"x": 1})).await;
    eventually("a StatusDropped warning", WAIT, || async {
        reasons(&h, "a")
            .await
            .iter()
            .any(|r| r == "StatusDropped")
            .then_some(())
    })
    .await
    .unwrap();
    h.writes_nothing_once_settled("app").await;
    h.stop().await;
}

#[tokio::test]
async fn request_is_the_recorded_intent_on_a_served_crd_and_ignore_status_patch_writes_none() {
    let status = "        emit:
          status:
            fields:
              - {path: team, value: '{{ .request.team | default \"none\" }}'}
        reconcile:
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-c', data: {team: '{{ .request.team | default \"none\" }}'}}
";
    let served = crd("app", "App", status)
        + "      serve:\n        enabled: true\n        namespace: NS\n        target:\n          app: {primary: true}\n";
    // Not served: an intent written on its CRs by anyone is not the gateway's.
    let unserved = crd("other", "Other", status);
    let quiet = crd(
        "quiet",
        "Quiet",
        "        runtime: {ignoreStatusPatch: true}
        reconcile:
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-q', data: {x: '1'}}
",
    );
    let h = Harness::start_with(
        "request",
        "gateway: {api: {enabled: true}}\n",
        &[served, unserved, quiet].concat(),
        &[],
        true,
    )
    .await;
    let intent = r#"{"team":"blue"}"#;
    for (kind, name) in [("App", "r"), ("Other", "s")] {
        let object: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{}/v1", h.group), "kind": kind,
            "metadata": {"name": name, "namespace": h.ns.name,
                         "annotations": {"orkestra.orkspace.io/serve-intent": intent}},
            "spec": {},
        }))
        .unwrap();
        h.api(kind).create(&Default::default(), &object).await.unwrap();
    }
    for (kind, name, want) in [("App", "r", "blue"), ("Other", "s", "none")] {
        let last = std::sync::Mutex::new(Value::Null);
        let status = eventually(&format!("{kind}'s status"), WAIT, || async {
            let object = serde_json::to_value(h.api(kind).get(name).await.ok()?).ok()?;
            *last.lock().unwrap() = object.clone();
            object["status"]["team"].as_str().map(str::to_string)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}: {}", last.lock().unwrap()));
        assert_eq!(status, want, "{kind}");
    }
    let maps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let child = maps.get("r-c").await.unwrap();
    assert_eq!(child.data.unwrap()["team"], "blue", "templates see it too");
    let forged = maps.get("s-c").await.unwrap();
    assert_eq!(forged.data.unwrap()["team"], "none", "not the gateway's: not shown");

    h.create("Quiet", "q", json!({})).await;
    eventually("the quiet CR's child", WAIT, || async {
        maps.get_opt("q-q").await.ok().flatten()
    })
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let quiet = serde_json::to_value(h.api("Quiet").get("q").await.unwrap()).unwrap();
    assert!(
        quiet.get("status").is_none_or(Value::is_null),
        "ignoreStatusPatch: {quiet}"
    );
    h.stop().await;
}
