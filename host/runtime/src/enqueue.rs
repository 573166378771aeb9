//! The one enqueue path: every trigger of every source passes the same admission, in this
//! order, before it becomes a queue item:
//!
//! 1. namespace guard (restricted / allowed namespaces of the effective box);
//! 2. queue behaviour: `onThreshold` and `onLimit`, on depth alone (tier 1) or, when they
//!    declare conditions, on those conditions evaluated with the full resolver (tier 2);
//! 3. the enqueue gate of the effective box (sentinels, conditions, event context);
//! 4. the queue (coalescing, or one item per event for eventAware boxes).
//!
//! A dropped trigger is logged with its reason and counted; the object is not lost: the
//! next resync brings it back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::observe::{Cache, Enqueue, Trigger, split_key};
use crate::queue::{Added, Payload, QueueItem, WorkQueue};
use crate::tuning::Tuning;
use orkestra_katalog::compile::CompiledCrd;
use orkestra_katalog::resolver::Resolver;

/// Why a trigger did not become work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    Namespace,
    Threshold,
    Limit,
    EnqueueGate,
    Closed,
}

/// Counters of the enqueue path of one CRD.
#[derive(Debug, Default)]
pub struct Stats {
    pub offered: AtomicU64,
    pub queued: AtomicU64,
    pub coalesced: AtomicU64,
    pub dropped_namespace: AtomicU64,
    pub dropped_threshold: AtomicU64,
    pub dropped_limit: AtomicU64,
    pub dropped_gate: AtomicU64,
}

impl Stats {
    fn count(&self, dropped: Dropped) {
        let counter = match dropped {
            Dropped::Namespace => &self.dropped_namespace,
            Dropped::Threshold => &self.dropped_threshold,
            Dropped::Limit => &self.dropped_limit,
            Dropped::EnqueueGate | Dropped::Closed => &self.dropped_gate,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A snapshot for the Live API and tests.
    pub fn snapshot(&self) -> Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        json!({
            "offered": get(&self.offered),
            "queued": get(&self.queued),
            "coalesced": get(&self.coalesced),
            "dropped": {
                "namespace": get(&self.dropped_namespace),
                "threshold": get(&self.dropped_threshold),
                "limit": get(&self.dropped_limit),
                "enqueueGate": get(&self.dropped_gate),
            },
        })
    }
}

/// Admission for one CRD.
pub struct Admission {
    crd: Arc<CompiledCrd>,
    cache: Cache,
    queue: WorkQueue,
    stats: Arc<Stats>,
    tuning: Arc<Tuning>,
    event_ids: AtomicU64,
}

impl Admission {
    pub fn new(crd: Arc<CompiledCrd>, cache: Cache, queue: WorkQueue, stats: Arc<Stats>, tuning: Arc<Tuning>) -> Self {
        Self {
            crd,
            cache,
            queue,
            stats,
            tuning,
            event_ids: AtomicU64::new(1),
        }
    }

    /// Admits or drops a trigger; the verdict is also counted and logged.
    pub fn admit(&self, trigger: Trigger) -> Result<Added, Dropped> {
        self.stats.offered.fetch_add(1, Ordering::Relaxed);
        // Admission runs on the watch's task and evaluates the Katalog's gate conditions: a
        // panic there must cost this trigger only, never the watch.
        let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.decide(&trigger)));
        let decided = decided.unwrap_or_else(|panic| {
            let message = crate::kordinator::panic_message(panic.as_ref());
            tracing::error!(crd = %self.crd.name, key = %trigger.key, %message, "admitting a trigger panicked; it is dropped");
            Err(Dropped::EnqueueGate)
        });
        let verdict = match decided {
            Ok(Added::AtLimit) => Err(Dropped::Limit),
            Ok(Added::Closed) => Err(Dropped::Closed),
            other => other,
        };
        match verdict {
            Ok(Added::Queued) => {
                self.stats.queued.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {
                self.stats.coalesced.fetch_add(1, Ordering::Relaxed);
            }
            Err(reason) => {
                self.stats.count(reason);
                tracing::debug!(crd = %self.crd.name, key = %trigger.key, source = trigger.source.as_str(), ?reason, "trigger dropped");
            }
        }
        verdict
    }

    fn decide(&self, trigger: &Trigger) -> Result<Added, Dropped> {
        let object = self.cache.get(&trigger.key);
        let empty = Value::Null;
        let object_ref: &Value = object.as_deref().unwrap_or(&empty);
        let (compiled, _target) = self.crd.for_object(object_ref);

        let (namespace, _) = split_key(&trigger.key);
        if let Some(namespace) = namespace
            && !compiled.admits_namespace(namespace)
        {
            return Err(Dropped::Namespace);
        }

        let resolver = || {
            let context = self.crd.context_of(object_ref);
            let mut resolver =
                Resolver::in_context(object_ref, &self.crd.notes, &context).with_sentinels(trigger.sentinels);
            if let Some(events) = &trigger.events {
                resolver.set("events", events.clone());
            }
            if self.crd.stamp_metrics {
                // The queue depth is never stamped (it moves on its own): gates see it live.
                let mut metrics = resolver
                    .lookup("metrics")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({}));
                if let Some(fields) = metrics.as_object_mut() {
                    fields.insert("queueDepth".into(), self.queue.depth().into());
                }
                resolver.set("metrics", metrics);
            }
            resolver
        };
        let behaviour = &self.crd.behaviour;
        let depth = self.queue.depth();
        // The configured reference depth, or the autoscaler's while it is in force.
        let max_depth = self.tuning.max_depth();
        let mut bound = None;
        if max_depth > 0 {
            if let Some((percent, conditions)) = &behaviour.on_threshold {
                let at = (max_depth * (*percent as usize)).div_ceil(100);
                if depth >= at && (conditions.is_empty() || conditions.passes(&resolver(), None)) {
                    return Err(Dropped::Threshold);
                }
            }
            if let Some((drop, conditions)) = &behaviour.on_limit
                && *drop
            {
                if conditions.is_empty() {
                    // Tier 1: the queue refuses atomically, so the depth never passes the limit.
                    bound = Some(max_depth);
                } else if depth >= max_depth && conditions.passes(&resolver(), None) {
                    return Err(Dropped::Limit);
                }
            }
        }

        if let Some(gate) = &compiled.gates.enqueue
            && !gate.passes(&resolver())
        {
            return Err(Dropped::EnqueueGate);
        }

        let item = QueueItem {
            key: trigger.key.clone(),
            gvk: self.crd.gvk.clone(),
            event_id: compiled
                .gates
                .event_aware
                .then(|| self.event_ids.fetch_add(1, Ordering::Relaxed)),
        };
        let payload = Payload {
            sentinels: trigger.sentinels,
            events: trigger.events.clone(),
        };
        Ok(match bound {
            Some(limit) => self.queue.add_bounded(item, payload, limit),
            None => self.queue.add(item, payload),
        })
    }
}

impl Enqueue for Admission {
    fn offer(&self, trigger: Trigger) {
        let _ = self.admit(trigger);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::observe::Source;
    use crate::testing::compile_for_test;

    fn admission(operator_box: &str) -> (Admission, WorkQueue, Cache) {
        let (queue, cache) = (WorkQueue::new(), Cache::default());
        let crd = compile_for_test(operator_box);
        let tuning = Arc::new(Tuning::new(&crd));
        let admission = Admission::new(crd, cache.clone(), queue.clone(), Arc::new(Stats::default()), tuning);
        (admission, queue, cache)
    }

    fn trigger(key: &str) -> Trigger {
        Trigger {
            key: key.into(),
            source: Source::Primary,
            sentinels: Default::default(),
            events: None,
        }
    }

    fn put(cache: &Cache, key: &str, spec: Value) {
        let (ns, name) = split_key(key);
        cache.insert(
            key.into(),
            Arc::new(json!({"metadata": {"name": name, "namespace": ns}, "spec": spec})),
        );
    }

    #[test]
    fn the_namespace_guard_drops_restricted_namespaces_first() {
        let (admission, queue, _) = admission("        runtime:\n          restrictedNamespaces: [kube-system]\n");
        assert_eq!(admission.admit(trigger("kube-system/a")), Err(Dropped::Namespace));
        assert_eq!(admission.admit(trigger("apps/a")), Ok(Added::Queued));
        assert_eq!(queue.depth(), 1);
        let (allowing, _, _) = self::admission("        runtime:\n          allowedNamespaces: [apps]\n");
        assert_eq!(allowing.admit(trigger("other/a")), Err(Dropped::Namespace));
        assert_eq!(allowing.admit(trigger("apps/a")), Ok(Added::Queued));
    }

    #[test]
    fn on_threshold_drops_from_a_share_of_max_depth_on_depth_alone() {
        let (admission, queue, _) = admission(
            "        reconcile:\n          queue:\n            maxDepth: 10\n            behaviour:\n              onThreshold: {value: 50}\n",
        );
        for i in 0..5 {
            assert_eq!(admission.admit(trigger(&format!("ns/{i}"))), Ok(Added::Queued));
        }
        assert_eq!(admission.admit(trigger("ns/5")), Err(Dropped::Threshold));
        assert_eq!(queue.depth(), 5);
        assert_eq!(admission.stats.snapshot()["dropped"]["threshold"], 1);
    }

    #[test]
    fn on_limit_with_conditions_drops_only_what_they_select() {
        let (admission, queue, cache) = admission(
            "        reconcile:\n          queue:\n            maxDepth: 2\n            behaviour:\n              onLimit:\n                drop: true\n                when: [{field: spec.priority, notEquals: high}]\n",
        );
        for (key, priority) in [("ns/a", "low"), ("ns/b", "low"), ("ns/c", "low"), ("ns/urgent", "high")] {
            put(&cache, key, json!({"priority": priority}));
        }
        assert_eq!(admission.admit(trigger("ns/a")), Ok(Added::Queued));
        assert_eq!(admission.admit(trigger("ns/b")), Ok(Added::Queued));
        assert_eq!(
            admission.admit(trigger("ns/c")),
            Err(Dropped::Limit),
            "tier 2: low priority is dropped at the limit"
        );
        assert_eq!(
            admission.admit(trigger("ns/urgent")),
            Ok(Added::Queued),
            "high priority still gets in"
        );
        assert_eq!(queue.depth(), 3);
    }

    #[test]
    fn event_aware_boxes_give_each_trigger_its_own_item() {
        let (admission, queue, _) = admission("        preReconcile:\n          reconcileGate: {eventAware: true}\n");
        assert_eq!(admission.admit(trigger("ns/a")), Ok(Added::Queued));
        assert_eq!(admission.admit(trigger("ns/a")), Ok(Added::Queued));
        assert_eq!(queue.depth(), 2);
        let (plain, queue, _) = self::admission("        runtime: {}\n");
        plain.admit(trigger("ns/a")).unwrap();
        assert_eq!(plain.admit(trigger("ns/a")), Ok(Added::Coalesced));
        assert_eq!(queue.depth(), 1);
    }

    #[test]
    fn the_enqueue_gate_reads_the_object_and_the_event_context() {
        let (admission, _, cache) = admission(
            "        preReconcile:\n          enqueueGate:\n            or:\n              - {field: spec.on, equals: 'true'}\n              - {field: '{{ .events.ready.reason }}', equals: Ready}\n",
        );
        put(&cache, "ns/on", json!({"on": true}));
        put(&cache, "ns/off", json!({"on": false}));
        assert_eq!(admission.admit(trigger("ns/on")), Ok(Added::Queued));
        assert_eq!(admission.admit(trigger("ns/off")), Err(Dropped::EnqueueGate));
        let with_event = Trigger {
            events: Some(json!({"ready": {"reason": "Ready"}})),
            ..trigger("ns/off")
        };
        assert_eq!(admission.admit(with_event), Ok(Added::Queued));
    }
}
