//! The feedback loop: after each reconcile the runtime stamps the CRD's health and metrics on
//! the CR as JSON annotations, which every resolver over that CR reads back as `.health.*` and
//! `.metrics.*` (so the next gate sees how the operator stood at the end of the last cycle).
//!
//! Stamps are written only where the Katalog reads them, hold only values that settle when
//! nothing happens (never the queue depth, which moves on its own: gates and cross reads get
//! it live), are written only when they differ, ride along with the reconciler's own metadata
//! write when there is one, and a change to nothing but them never enqueues the CR: the loop
//! cannot feed itself. Pure: no kube or wasmtime imports.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::outcome::counters::Counters;
use crate::outcome::health::{Health, HealthBoard, State};
use crate::pipeline::queue::WorkQueue;
use crate::pipeline::tuning::Tuning;
use orkestra_expr::labels::{CROSS_METRICS, HEALTH};
use orkestra_katalog::compile::{CompiledCrd, Stamping};

/// What gets stamped for a CRD (either part may be switched off).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stamps {
    pub health: Option<Value>,
    pub metrics: Option<Value>,
}

/// What one CRD's stamps are made of, shared by its Kordinator and the runs it hands out.
/// Stamps are made only when asked for: a run that stamps nothing (a settled CR whose
/// Katalog reads none) costs nothing, not even the error rate's window.
pub struct StampSource {
    pub crd: Arc<CompiledCrd>,
    pub health: HealthBoard,
    pub tuning: Arc<Tuning>,
    pub counters: Arc<Counters>,
}

impl StampSource {
    /// What the CRD's CRs should carry now: what its Katalog reads, and with `shown`, those
    /// kept only for people to see.
    pub fn stamps(&self, shown: bool) -> Stamps {
        let wanted = |stamping: Stamping| stamping.is_read() || (shown && stamping == Stamping::WithWrites);
        Stamps {
            health: wanted(self.crd.stamp_health)
                .then(|| self.health.get(&self.crd.name))
                .flatten()
                .map(|h| health(&h)),
            metrics: wanted(self.crd.stamp_metrics).then(|| metrics(&self.tuning, &self.counters)),
        }
    }
}

/// The `.health` stamp.
pub fn health(health: &Health) -> Value {
    json!({
        "state": health.state,
        "healthy": health.is_healthy(),
        "degraded": health.state == State::Degraded,
        "consecutiveFails": health.consecutive_fails,
        "lastError": health.last_error.as_deref().unwrap_or_default(),
    })
}

/// The `.metrics` stamp: workers now, whether the autoscaler set them, and the error rate
/// over the last minute in whole percent.
pub fn metrics(tuning: &Tuning, counters: &Counters) -> Value {
    // The last minute, as the Live API, the autoscaler and the Control Center count it.
    let error_rate = counters.recent(std::time::Instant::now()).error_rate_percent;
    json!({"workers": tuning.workers(), "autoscaleActive": tuning.scaled(), "errorRatePercent": error_rate})
}

/// `.metrics` as gates and cross reads see it, live: the stamp's values and the queue depth.
pub fn live_metrics(queue: &WorkQueue, tuning: &Tuning, counters: &Counters) -> Value {
    let mut metrics = metrics(tuning, counters);
    metrics["queueDepth"] = json!(queue.depth());
    metrics
}

/// The merge patch that brings the CR's stamps up to date, if any differs.
pub fn patch(object: &Value, stamps: &Stamps) -> Option<Value> {
    annotations(object, stamps).map(|annotations| json!({"metadata": {"annotations": annotations}}))
}

/// The stamp annotations that differ from the CR's, if any.
pub fn annotations(object: &Value, stamps: &Stamps) -> Option<Map<String, Value>> {
    let mut annotations = Map::new();
    for (annotation, stamp) in [(HEALTH, &stamps.health), (CROSS_METRICS, &stamps.metrics)] {
        let Some(stamp) = stamp else { continue };
        let current = object["metadata"]["annotations"][annotation]
            .as_str()
            .and_then(|text| serde_json::from_str::<Value>(text).ok());
        if current.as_ref() != Some(stamp) {
            annotations.insert(annotation.to_string(), json!(stamp.to_string()));
        }
    }
    (!annotations.is_empty()).then_some(annotations)
}

/// True when `new` differs from `old` only in our stamps (and the bookkeeping the server
/// does on every write): such an update must not enqueue the CR.
pub fn only_stamps_changed(old: &Value, new: &Value) -> bool {
    let (Value::Object(old), Value::Object(new)) = (old, new) else {
        return false;
    };
    // Borrowed, not cloned: this runs on every watch update of a primary.
    let empty = Map::new();
    let old_meta = submap(old, "metadata").unwrap_or(&empty);
    let new_meta = submap(new, "metadata").unwrap_or(&empty);
    let old_notes = submap(old_meta, "annotations").unwrap_or(&empty);
    let new_notes = submap(new_meta, "annotations").unwrap_or(&empty);
    old_notes != new_notes
        && same_except(old, new, &["metadata"])
        && same_except(old_meta, new_meta, &["resourceVersion", "managedFields", "annotations"])
        && same_except(old_notes, new_notes, &[HEALTH, CROSS_METRICS])
}

/// The map under `key`, if it is one.
fn submap<'a>(parent: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    parent.get(key).and_then(Value::as_object)
}

/// Whether `a` and `b` hold the same values under every key but `skip`.
fn same_except(a: &Map<String, Value>, b: &Map<String, Value>, skip: &[&str]) -> bool {
    a.keys()
        .chain(b.keys())
        .filter(|k| !skip.contains(&k.as_str()))
        .all(|k| a.get(k) == b.get(k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use orkestra_expr::resolver::Resolver;

    #[test]
    fn a_stamp_is_written_once_and_read_back_by_the_resolver() {
        let mut record = Health::new(orkestra_katalog::FailureThreshold::InARow(3));
        record = record
            .step(crate::outcome::health::Event::Started)
            .step(crate::outcome::health::Event::Succeeded {
                key: "ns/a".into(),
                waiting: None,
            });
        let tuning = Tuning::new(&crate::testing::compile_for_test("        reconcile: {workers: 2}\n"));
        let counters = Counters::default();
        for i in 0..10 {
            counters.record(std::time::Duration::from_millis(5), i == 0);
        }
        let stamps = Stamps {
            health: Some(health(&record)),
            metrics: Some(metrics(&tuning, &counters)),
        };
        let object = json!({"metadata": {"name": "a"}});
        let patch = patch(&object, &stamps).expect("a first stamp");
        let stamped = json!({"metadata": {"name": "a", "annotations": patch["metadata"]["annotations"].clone()}});
        assert_eq!(
            super::patch(&stamped, &stamps),
            None,
            "unchanged stamps are not rewritten"
        );
        let resolver = Resolver::new(&stamped, &[]);
        assert_eq!(resolver.lookup("health.state"), Some(&json!("healthy")));
        assert_eq!(resolver.lookup("metrics.errorRatePercent"), Some(&json!(10)));
        assert_eq!(
            resolver.lookup("metrics.queueDepth"),
            None,
            "never stamped: it moves on its own"
        );
        assert_eq!(resolver.lookup("metrics.workers"), Some(&json!(2)));
        assert_eq!(resolver.lookup("metrics.autoscaleActive"), Some(&json!(false)));
        assert_eq!(
            live_metrics(&WorkQueue::new(), &tuning, &counters)["queueDepth"],
            0,
            "gates see it live"
        );
    }

    #[test]
    fn only_a_stamp_change_is_recognised_as_one() {
        let old = json!({"metadata": {"resourceVersion": "1", "annotations": {"a": "1"}}, "spec": {"x": 1}});
        let stamped =
            json!({"metadata": {"resourceVersion": "2", "annotations": {"a": "1", HEALTH: "{}"}}, "spec": {"x": 1}});
        assert!(only_stamps_changed(&old, &stamped));
        let edited =
            json!({"metadata": {"resourceVersion": "2", "annotations": {"a": "2", HEALTH: "{}"}}, "spec": {"x": 1}});
        assert!(!only_stamps_changed(&old, &edited), "a user's annotation edit counts");
        let spec =
            json!({"metadata": {"resourceVersion": "2", "annotations": {"a": "1", HEALTH: "{}"}}, "spec": {"x": 2}});
        assert!(!only_stamps_changed(&old, &spec));
        let resync = json!({"metadata": {"resourceVersion": "1", "annotations": {"a": "1"}}, "spec": {"x": 1}});
        assert!(
            !only_stamps_changed(&old, &resync),
            "an unchanged object is not a stamp change"
        );
    }
}
