//! Write storms (issue 33, finding 7): a status that differs on every reconcile, from a
//! template or from a component, writes once and settles, because the echo of the runtime's
//! own write is no trigger (nor, where the Katalog reads its own status, a write that changes
//! only fields it does not read); a CR that keeps being changed is held to its write budget; and a
//! component's events join series instead of each being a write.

use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams};
use orkestra_test_support::{eventually, guests};
use serde_json::{Value, json};

use crate::pipeline::{Harness, WAIT, crd};

/// How many times `name` was written in `window` (its resourceVersion moving).
async fn writes_during(api: &Api<DynamicObject>, name: &str, window: Duration) -> usize {
    let version = |cr: DynamicObject| cr.metadata.resource_version.unwrap_or_default();
    let mut last = version(api.get(name).await.unwrap());
    let mut seen = 0;
    let deadline = tokio::time::Instant::now() + window;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = version(api.get(name).await.unwrap());
        if now != last {
            seen += 1;
            last = now;
        }
    }
    seen
}

/// Waits for `name`'s first status (its `field`) and the health stamped right after it: a
/// new CR's own writes, before a window that counts the writes that follow.
async fn first_status_and_stamps(crs: &Api<DynamicObject>, name: &str, field: &str) {
    eventually(&format!("{name}'s status and stamps"), WAIT, || async {
        let cr = crs.get(name).await.ok()?;
        let stamped = cr.metadata.annotations?.contains_key("orkestra.orkspace.io/health");
        (stamped && cr.data["status"][field].is_string()).then_some(())
    })
    .await
    .unwrap();
}

const TIMESTAMPED: &str = "        reconcile:
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-c', data: {x: '{{ .spec.x }}'}}
        emit:
          status:
            fields:
              - {path: at, value: '{{ timeFormat \"RFC3339Nano\" }}'}
";

#[tokio::test]
async fn a_status_holding_a_timestamp_is_written_once_not_forever() {
    let h = Harness::start("storm-time", &crd("clock", "Clock", TIMESTAMPED), &[], true).await;
    let crs = h.api("Clock");
    for name in ["a", "b"] {
        h.create("Clock", name, json!({"x": "1"})).await;
    }
    for name in ["a", "b"] {
        first_status_and_stamps(&crs, name, "at").await;
    }
    let counters = &h.handle("clock").counters;
    let before = counters.writes.load(Ordering::Relaxed);
    let written = writes_during(&crs, "a", Duration::from_secs(5)).await;
    let total = counters.writes.load(Ordering::Relaxed) - before;
    assert!(written <= 1, "the CR was written {written} times in 5 s");
    assert!(total <= 4, "the runtime wrote {total} times in 5 s for two CRs");
    h.stop().await;
}

#[tokio::test]
async fn a_timestamp_beside_a_status_field_the_katalog_reads_is_no_next_step() {
    // It reads its own `.status.seen` (a state machine would), which settles at once; the
    // timestamp beside it changes on every write, and nothing reads it.
    let katalog =
        format!("{TIMESTAMPED}              - {{path: seen, value: '{{{{ .status.seen | default \"first\" }}}}'}}\n");
    let h = Harness::start("storm-steps", &crd("clock", "Clock", &katalog), &[], true).await;
    let crs = h.api("Clock");
    h.create("Clock", "a", json!({"x": "1"})).await;
    first_status_and_stamps(&crs, "a", "seen").await;
    // The write that set `seen` was one step (it read a field that changed); the next writes
    // only the timestamp, which is no step.
    let written = writes_during(&crs, "a", Duration::from_secs(5)).await;
    assert!(written <= 1, "the CR was written {written} times in 5 s");
    h.stop().await;
}

#[tokio::test]
async fn a_cr_changed_without_pause_is_held_to_its_write_budget() {
    let h = Harness::start("storm-budget", &crd("clock", "Clock", TIMESTAMPED), &[], true).await;
    h.create("Clock", "busy", json!({"x": "0"})).await;
    let crs = h.api("Clock");
    eventually("the first status", WAIT, || async {
        crs.get("busy").await.ok()?.data["status"]["at"].as_str().map(|_| ())
    })
    .await
    .unwrap();
    let counters = &h.handle("clock").counters;
    let before = counters.writes.load(Ordering::Relaxed);
    // 200 changes in 10 s, each a ConfigMap update, a status and an Event to write.
    let started = std::time::Instant::now();
    for x in 1..=200 {
        h.patch("Clock", "busy", json!({"spec": {"x": x.to_string()}})).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let written = counters.writes.load(Ordering::Relaxed) - before;
    // The budget's burst, then its rate (events are counted when published).
    let per_cr = orkestra::outcome::budget::PER_CR;
    let allowed = per_cr.burst + per_cr.per_second * seconds + 5.0;
    assert!(
        (written as f64) <= allowed,
        "{written} writes in {seconds:.1} s; the budget allows about {allowed:.0}"
    );
    assert!(counters.held.load(Ordering::Relaxed) > 0, "reconciles were held back");
    // The latest change still lands once the budget allows.
    let maps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    eventually("the last change applied", Duration::from_secs(90), || async {
        let data = maps.get("busy-c").await.ok()?.data?;
        (data.get("x")? == "200").then_some(())
    })
    .await
    .unwrap();
    h.stop().await;
}

#[tokio::test]
async fn a_component_whose_status_and_events_change_every_call_settles() {
    let hostile = guests::component("hostile").unwrap();
    let operator_box = format!(
        "        reconcile:
          hooks:
            component: {}
            limits: {{timeout: 2s}}
",
        hostile.display()
    );
    let h = Harness::start("storm-wasm", &crd("churner", "Churner", &operator_box), &[], true).await;
    h.create("Churner", "c", json!({"mode": "churn"})).await;
    let crs = h.api("Churner");
    eventually("the churner's status", WAIT, || async {
        crs.get("c").await.ok()?.data["status"]["at"].as_str().map(|_| ())
    })
    .await
    .unwrap();
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let churned = || async {
        let listed = events.list(&ListParams::default()).await.unwrap().items;
        listed
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("Churned"))
            .map(|e| serde_json::to_value(e).unwrap())
            .collect::<Vec<Value>>()
    };
    let before = churned().await.len();
    let written = writes_during(&crs, "c", Duration::from_secs(5)).await;
    // One resync (every 30 s) may fall in the window.
    assert!(written <= 1, "the CR was written {written} times in 5 s");
    let after = churned().await.len();
    assert!(after - before <= 1, "{} Churned events in 5 s", after - before);
    h.stop().await;
}

#[tokio::test]
async fn a_component_may_not_write_what_another_cr_controls_nor_hold_a_child_with_a_finalizer() {
    let hostile = guests::component("hostile").unwrap();
    let operator_box = format!(
        "        reconcile:
          hooks:
            component: {}
            limits: {{timeout: 5s}}
            capabilities:
              - {{apiVersion: v1, kinds: [ConfigMap], verbs: [get, apply, delete]}}
          onReconcile:
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}-t', data: {{owner: '{{{{ .metadata.name }}}}'}}}}
",
        hostile.display()
    );
    let h = Harness::start("grab", &crd("grabber", "Grabber", &operator_box), &[], true).await;
    // The victim's child, applied by the templates for CR "victim".
    h.create("Grabber", "victim", json!({"mode": "ok"})).await;
    let maps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    eventually("the victim's child", WAIT, || async {
        maps.get_opt("victim-t").await.ok().flatten().map(|_| ())
    })
    .await
    .unwrap();
    h.create("Grabber", "thief", json!({"mode": "grab", "victim": "victim-t"}))
        .await;
    let crs = h.api("Grabber");
    let thief = eventually("the thief's attempt", WAIT, || async {
        let cr = crs.get("thief").await.ok()?;
        let ready = cr.data["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")?
            .clone();
        (ready["reason"] == "ComponentForbidden").then_some(ready)
    })
    .await
    .unwrap();
    assert!(
        thief["message"]
            .as_str()
            .unwrap()
            .contains("controlled by another custom resource"),
        "{thief}"
    );
    let victim = maps.get("victim-t").await.unwrap();
    assert_eq!(victim.data.unwrap().get("grabbed"), None, "not rewritten");

    // A child returned with a finalizer is refused, with nothing applied.
    h.create("Grabber", "holder", json!({"mode": "finalize-child"})).await;
    eventually("the finalizer refused", WAIT, || async {
        let cr = crs.get("holder").await.ok()?;
        let text = cr.data["status"]["conditions"].to_string();
        text.contains("metadata.finalizers").then_some(())
    })
    .await
    .unwrap();
    assert!(maps.get_opt("holder-held").await.unwrap().is_none());
    h.stop().await;
}
