//! The one enqueue path: every trigger of every source passes the same admission, in this
//! order, before it becomes a queue item:
//!
//! 1. namespace guard (restricted / allowed namespaces of the effective box);
//! 2. queue behaviour: `onThreshold` and `onLimit`, on depth alone (tier 1) or, when they
//!    declare conditions, on those conditions evaluated with the full resolver (tier 2);
//! 3. the enqueue gate of the effective box (sentinels, conditions, event context, and its
//!    external calls);
//! 4. the queue (coalescing, or one item per event for eventAware boxes).
//!
//! A dropped trigger is logged with its reason and counted; the object is not lost: the
//! next resync brings it back.
//!
//! A gate with external calls cannot decide on the watch's task, which must not wait on
//! someone's HTTP server: the trigger is decided on a task of its own, and while one is
//! being decided for a key, the key's further triggers wait as one (their sentinels
//! merged, the latest event context kept). So an event storm costs one call per key at a
//! time, and at most [`GATE_CALLS`] at once for the CRD.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tracing::Instrument;

use crate::pipeline::flows::{Class, FlowBy};
use crate::pipeline::observe::{Cache, Enqueue, Trigger, split_key};
use crate::pipeline::queue::{Added, Payload, QueueItem, WorkQueue};
use crate::pipeline::tuning::Tuning;
use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::CompiledCrd;

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

/// Enqueue gates with external calls that may run at once for one CRD.
const GATE_CALLS: usize = 8;

/// Admission for one CRD.
pub struct Admission {
    crd: Arc<CompiledCrd>,
    cache: Cache,
    queue: WorkQueue,
    stats: Arc<Stats>,
    tuning: Arc<Tuning>,
    event_ids: AtomicU64,
    /// For enqueue gates that make external calls.
    calls: GateCalls,
}

struct GateCalls {
    externals: orkestra_effects::external::Externals,
    permits: Semaphore,
    /// Keys being decided, each with the trigger that came for it meanwhile.
    deciding: Mutex<HashMap<String, Option<Trigger>>>,
    /// This admission, for the tasks that decide.
    me: Weak<Admission>,
}

/// What became of the enqueue gate's external calls for a trigger.
enum Calls {
    NotMade,
    Made(Value),
    /// One failed and the gate's failPolicy is open, or closed.
    FailedOpen,
    FailedClosed,
}

/// What admission makes of a trigger before the queue.
enum Step {
    Add(QueueItem, Payload, Option<usize>),
    /// The enqueue gate needs its external calls made first.
    Call,
}

impl Admission {
    pub fn new(
        crd: Arc<CompiledCrd>,
        cache: Cache,
        queue: WorkQueue,
        stats: Arc<Stats>,
        tuning: Arc<Tuning>,
        externals: orkestra_effects::external::Externals,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            crd,
            cache,
            queue,
            stats,
            tuning,
            event_ids: AtomicU64::new(1),
            calls: GateCalls {
                externals,
                permits: Semaphore::new(GATE_CALLS),
                deciding: Mutex::default(),
                me: me.clone(),
            },
        })
    }

    /// Admits or drops a trigger; the verdict is also counted and logged. A trigger whose
    /// enqueue gate makes external calls is decided on its own task: `Ok(Added::Coalesced)`.
    pub fn admit(&self, trigger: Trigger) -> Result<Added, Dropped> {
        self.stats.offered.fetch_add(1, Ordering::Relaxed);
        match self.step(&trigger, Calls::NotMade) {
            Ok(Step::Call) => {
                self.defer(trigger);
                Ok(Added::Coalesced)
            }
            decided => self.record(&trigger, decided),
        }
    }

    /// [`Admission::decide`], where a panic (in the Katalog's gate conditions) costs this
    /// trigger only, never the watch's task it runs on.
    fn step(&self, trigger: &Trigger, calls: Calls) -> Result<Step, Dropped> {
        let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.decide(trigger, &calls)));
        decided.unwrap_or_else(|panic| {
            let message = crate::pipeline::kordinator::panic_message(panic.as_ref());
            tracing::error!(key = %trigger.key, %message, "admitting a trigger panicked; it is dropped");
            Err(Dropped::EnqueueGate)
        })
    }

    /// Queues what was admitted, then counts and logs the verdict.
    fn record(&self, trigger: &Trigger, decided: Result<Step, Dropped>) -> Result<Added, Dropped> {
        let added = decided.map(|step| match step {
            Step::Add(item, payload, Some(limit)) => self.queue.add_bounded(item, payload, limit),
            Step::Add(item, payload, None) => self.queue.add(item, payload),
            // Only asked of a trigger whose calls were made.
            Step::Call => Added::Closed,
        });
        let verdict = match added {
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
                tracing::debug!(key = %trigger.key, source = trigger.source.as_str(), ?reason, "trigger dropped");
            }
        }
        verdict
    }

    /// Queues `trigger` for a decision with the gate's calls, or folds it into the one
    /// already waiting for its key.
    fn defer(&self, trigger: Trigger) {
        let mut deciding = self.calls.deciding.lock();
        if let Some(waiting) = deciding.get_mut(&trigger.key) {
            *waiting = Some(match waiting.take() {
                Some(earlier) => Trigger {
                    sentinels: orkestra_expr::sentinel::SentinelBits(earlier.sentinels.0 | trigger.sentinels.0),
                    events: trigger.events.or(earlier.events),
                    class: match (earlier.class, trigger.class) {
                        (Class::Background, Class::Background) => Class::Background,
                        _ => Class::User,
                    },
                    seen: earlier.seen.min(trigger.seen),
                    ..trigger
                },
                None => trigger,
            });
            return;
        }
        let (Some(me), Ok(runtime)) = (self.calls.me.upgrade(), tokio::runtime::Handle::try_current()) else {
            drop(deciding);
            let _ = self.record(&trigger, Err(Dropped::Closed));
            return;
        };
        deciding.insert(trigger.key.clone(), None);
        drop(deciding);
        runtime.spawn(async move { me.decide_with_calls(trigger).await }.in_current_span());
    }

    /// Makes the gate's calls and decides, for `trigger` and then for each one that came for
    /// its key meanwhile.
    async fn decide_with_calls(self: Arc<Self>, mut trigger: Trigger) {
        loop {
            let calls = {
                let _permit = self.calls.permits.acquire().await.ok();
                self.call(&trigger).await
            };
            let decided = match calls {
                Calls::FailedClosed => Err(Dropped::EnqueueGate),
                calls => self.step(&trigger, calls),
            };
            let _ = self.record(&trigger, decided);
            let mut deciding = self.calls.deciding.lock();
            match deciding.get_mut(&trigger.key).and_then(Option::take) {
                Some(next) => trigger = next,
                None => {
                    deciding.remove(&trigger.key);
                    return;
                }
            }
        }
    }

    /// Makes the enqueue gate's calls for `trigger`'s object.
    async fn call(&self, trigger: &Trigger) -> Calls {
        let object = self.cache.get(&trigger.key);
        let empty = Value::Null;
        let object_ref: &Value = object.as_deref().unwrap_or(&empty);
        let (compiled, _) = self.crd.for_object(object_ref);
        let Some(gate) = compiled.gates.enqueue.as_ref().filter(|g| !g.external.is_empty()) else {
            return Calls::NotMade;
        };
        let context = self.crd.context_of(object_ref);
        let mut resolver = Resolver::in_context(object_ref, &self.crd.notes, &context);
        match orkestra_effects::external::run(&self.calls.externals, &gate.external, &mut resolver).await {
            Ok(()) => Calls::Made(resolver.lookup("external").cloned().unwrap_or_else(|| json!({}))),
            Err(error) => {
                tracing::debug!(key = %trigger.key, %error, open = gate.fail_open, "enqueue gate call failed");
                if gate.fail_open {
                    Calls::FailedOpen
                } else {
                    Calls::FailedClosed
                }
            }
        }
    }

    /// Everything admission decides about `trigger`, given what became of the gate's calls.
    fn decide(&self, trigger: &Trigger, calls: &Calls) -> Result<Step, Dropped> {
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
            if self.crd.stamp_metrics.is_read() {
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

        if let Some(gate) = &compiled.gates.enqueue {
            let passes = match calls {
                Calls::NotMade if !gate.external.is_empty() => return Ok(Step::Call),
                Calls::NotMade => gate.passes(&resolver()),
                Calls::Made(results) => {
                    let mut resolver = resolver();
                    resolver.set("external", results.clone());
                    gate.passes(&resolver)
                }
                // A failed call: failPolicy decides, as at the reconcile gate.
                Calls::FailedOpen => true,
                Calls::FailedClosed => false,
            };
            if !passes {
                return Err(Dropped::EnqueueGate);
            }
        }

        let item = QueueItem {
            key: trigger.key.clone(),
            gvk: self.crd.gvk.clone(),
            event_id: compiled
                .gates
                .event_aware
                .then(|| self.event_ids.fetch_add(1, Ordering::Relaxed)),
        };
        // The CRD's rules, as its queue was made with: no lock on the queue to read them.
        let flow = match &self.crd.flows.by {
            // Its flow is a label's value: read now, from the CR as observed.
            FlowBy::Label(label) => Some(
                self.cache
                    .get(&trigger.key)
                    .and_then(|cr| cr["metadata"]["labels"][label.as_str()].as_str().map(Arc::from))
                    .unwrap_or_else(|| Arc::from("")),
            ),
            FlowBy::Namespace | FlowBy::None => None,
        };
        let payload = Payload {
            sentinels: trigger.sentinels,
            events: trigger.events.clone(),
            class: trigger.class,
            flow,
            seen: Some(trigger.seen),
            started: false,
        };
        Ok(Step::Add(item, payload, bound))
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
    use crate::pipeline::observe::Source;
    use crate::testing::compile_for_test;

    fn admission(operator_box: &str) -> (Arc<Admission>, WorkQueue, Cache) {
        let (queue, cache) = (WorkQueue::new(), Cache::default());
        let crd = compile_for_test(operator_box);
        let tuning = Arc::new(Tuning::new(&crd));
        let stats = Arc::new(Stats::default());
        let admission = Admission::new(crd, cache.clone(), queue.clone(), stats, tuning, Default::default());
        (admission, queue, cache)
    }

    fn trigger(key: &str) -> Trigger {
        Trigger::new(key.into(), Source::Primary)
    }

    fn put(cache: &Cache, key: &str, spec: Value) {
        let (ns, name) = split_key(key);
        cache.insert(
            key.into(),
            &json!({"metadata": {"name": name, "namespace": ns}, "spec": spec}),
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

    /// A flag service on loopback: `/flag/{name}` answers `{"allow": true}` for names
    /// starting with `yes`, after `delay`; it counts the calls.
    async fn flags(delay: std::time::Duration) -> (String, Arc<AtomicU64>) {
        let calls = Arc::new(AtomicU64::new(0));
        let counted = calls.clone();
        let app = axum::Router::new().route(
            "/flag/{name}",
            axum::routing::get(move |axum::extract::Path(name): axum::extract::Path<String>| {
                let counted = counted.clone();
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    axum::Json(json!({"allow": name.starts_with("yes")}))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, calls)
    }

    #[tokio::test]
    async fn an_enqueue_gate_makes_its_calls_off_the_watch_and_coalesces_a_key_while_deciding() {
        let (url, calls) = flags(std::time::Duration::from_millis(300)).await;
        let (admission, queue, cache) = admission(&format!(
            "        preReconcile:\n          enqueueGate:\n            external: [{{name: flag, url: '{url}/flag/{{{{ .metadata.name }}}}'}}]\n            when: [{{field: external.flag.body.allow, equals: 'true'}}]\n"
        ));
        for key in ["ns/yes-a", "ns/no-b"] {
            put(&cache, key, json!({}));
        }
        // Neither decides on the caller's task: both wait for their calls.
        assert_eq!(admission.admit(trigger("ns/yes-a")), Ok(Added::Coalesced));
        assert_eq!(admission.admit(trigger("ns/no-b")), Ok(Added::Coalesced));
        assert_eq!(queue.depth(), 0);
        // A storm for one key while it is being decided: one more decision, not ten.
        for _ in 0..10 {
            admission.admit(trigger("ns/yes-a")).unwrap();
        }
        orkestra_test_support::eventually("the decisions", std::time::Duration::from_secs(10), || async {
            (admission.calls.deciding.lock().is_empty()).then_some(())
        })
        .await
        .unwrap();
        assert_eq!(queue.depth(), 1, "the allowed key is queued, the refused one is not");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            3,
            "one call for no-b, two for the yes-a storm"
        );
        assert_eq!(admission.stats.snapshot()["dropped"]["enqueueGate"], 1);
    }

    #[tokio::test]
    async fn a_failed_gate_call_lets_the_fail_policy_decide() {
        for (policy, depth) in [("open", 1), ("closed", 0)] {
            let (admission, queue, cache) = admission(&format!(
                "        preReconcile:\n          enqueueGate:\n            failPolicy: {policy}\n            external: [{{name: flag, url: 'http://127.0.0.1:9/flag', timeout: 2s}}]\n            when: [{{field: external.flag.body.allow, equals: 'true'}}]\n"
            ));
            put(&cache, "ns/a", json!({}));
            admission.admit(trigger("ns/a")).unwrap();
            orkestra_test_support::eventually("the decision", std::time::Duration::from_secs(10), || async {
                (admission.calls.deciding.lock().is_empty()).then_some(())
            })
            .await
            .unwrap();
            assert_eq!(queue.depth(), depth, "failPolicy {policy}");
        }
    }
}
