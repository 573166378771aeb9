//! The Kordinator: dequeues items of one CRD, resolves the effective box of each CR,
//! evaluates its reconcile gate (a failing gate skips the item, writes nothing and marks the
//! CRD gated), dispatches to the MuxReconciler, and reports the outcome to the queue and
//! the health board. A panic inside a reconciler is caught and counted as a failure of that
//! item only. It knows nothing of how a reconciler works.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use kube::api::{Patch, PatchParams};
use kube::core::ApiResource;
use serde_json::{Map, Value};
use tracing::Instrument;

use crate::outcome::budget::{Meter, WriteBudget};
use crate::outcome::counters::Counters;
use crate::outcome::failure::{Reason, ReconcileError, Retry};
use crate::outcome::health::{Event, HealthBoard};
use crate::pipeline::feedback;
use crate::pipeline::flows::Class;
use crate::pipeline::mux::{Action, Interrupt, MuxReconciler, Reconciled, Request, StampPatch};
use crate::pipeline::observe::Cache;
use crate::pipeline::queue::{Lease, Outcome, WorkQueue};
use crate::pipeline::tuning::Tuning;
use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::CompiledCrd;

/// How soon a reconcile whose write found the CR changed runs again (time for the watch to
/// deliver the new version).
const STALE_RETRY: Duration = Duration::from_millis(200);

/// The workers of one CRD share one Kordinator.
pub struct Kordinator {
    pub client: kube::Client,
    /// The reconcile gate's external calls.
    pub externals: orkestra_effects::external::Externals,
    pub crd: Arc<CompiledCrd>,
    pub resource: Arc<ApiResource>,
    pub cache: Cache,
    pub queue: WorkQueue,
    pub mux: MuxReconciler,
    pub health: HealthBoard,
    pub counters: Arc<Counters>,
    pub tuning: Arc<Tuning>,
    /// Which CRs this replica reconciles (all, without leases).
    pub ownership: crate::ha::Ownership,
    /// The runtime's writes to the CRs, announced so their echoes trigger nothing.
    pub own: Arc<crate::pipeline::observe::own_writes::OwnWrites>,
    /// What each CR's writes may cost.
    pub budget: Arc<WriteBudget>,
    /// What its CRs' stamps are made of.
    pub stamps: Arc<feedback::StampSource>,
}

/// The root span of one reconcile, at error level so its fields reach every event the filter
/// lets through. Each is a trace of its own (a worker's lifetime is no trace), joined to the
/// trace of the write it answers when that write carried one (a gateway apply) and this
/// generation was not reconciled yet.
fn reconcile_span(crd: &str, key: &str, object: Option<&Value>) -> tracing::Span {
    let tenant = key.split_once('/').map_or("", |(namespace, _)| namespace);
    let span = tracing::error_span!(parent: None, "reconcile", crd = %crd, key = %key, tenant = %tenant);
    if let Some(object) = object
        && object["status"]["observedGeneration"] != object["metadata"]["generation"]
        && let Some(traceparent) = object["metadata"]["annotations"][orkestra_kube::trace::TRACEPARENT].as_str()
    {
        orkestra_kube::trace::follow(&span, traceparent);
    }
    span
}

impl Kordinator {
    /// One worker: runs items until the queue shuts down; an item in progress finishes. A
    /// panic anywhere in an item's run (its gate, its reconcile, its stamp) fails that item
    /// only, and the worker goes on.
    ///
    /// Guarantees: one reconcile per key at a time (the queue leases a key to one worker);
    /// an item of another replica's share is dropped unreconciled; a CR over its write
    /// budget waits instead of reconciling; each item runs in a `reconcile` span with its
    /// key. The outcome (success, retry after backoff, or wait for a change) goes back to
    /// the queue and the health board; nothing is returned.
    pub async fn work(self: Arc<Self>) {
        // A slot first: the autoscaler decides how many workers take items.
        while let Some(slot) = self.tuning.slot().await {
            let Some(lease) = self.queue.next().await else { break };
            // Another replica's CR: dropped here, offered again if it becomes ours.
            let Some(claim) = self.ownership.claim(&self.crd.name, &lease.item.key) else {
                self.queue.done(lease, Outcome::Success);
                drop(slot);
                continue;
            };
            // A change's wait, once: a retry's runs are part of its time to done, not waits.
            let class = usize::from(lease.payload.class == Class::Background);
            if let Some(seen) = lease.payload.seen.filter(|_| !lease.payload.started) {
                self.counters.timing.change_queued[class].observe(seen.elapsed().as_secs_f64());
            }
            // The CR as cached, read once for the span and the run.
            let cached = self.cache.get_with_text(&lease.item.key);
            let span = reconcile_span(&self.crd.name, &lease.item.key, cached.as_ref().map(|(o, _)| &**o));
            // Every request of the reconcile is charged to its CR's tenant.
            let tenant = orkestra_kube::tenant::of(&lease.item.key, None);
            let run = orkestra_kube::tenant::scope(tenant, self.run(&lease, cached).instrument(span));
            let outcome = match AssertUnwindSafe(run).catch_unwind().await {
                Ok(outcome) => outcome,
                Err(panic) => {
                    let message = panic_message(panic.as_ref());
                    self.counters.failed(&Reason::Panicked);
                    self.counters.panics.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(key = %lease.item.key, %message, "a reconcile step panicked; counted as a failure");
                    self.health
                        .record(&self.crd.name, Event::Failed(format!("panic: {message}")));
                    Outcome::Retry
                }
            };
            let results = &self.counters.results;
            let result = match outcome {
                Outcome::Success => &results.success,
                Outcome::Unfinished(STALE_RETRY) => &results.requeue,
                Outcome::RequeueAfter(_) | Outcome::Unfinished(_) => &results.requeue_after,
                Outcome::Retry => &results.error,
            };
            result.fetch_add(1, Ordering::Relaxed);
            let timing = &self.counters.timing;
            // Handled: neither failed nor unfinished.
            let handled = matches!(outcome, Outcome::Success | Outcome::RequeueAfter(_));
            if let Some(seen) = lease.payload.seen.filter(|_| handled) {
                timing.change_done[class].observe(seen.elapsed().as_secs_f64());
            }
            timing.queued.observe(lease.waited.as_secs_f64());
            timing.work.observe(lease.taken.elapsed().as_secs_f64());
            self.queue.done(lease, outcome);
            drop(claim);
            drop(slot);
        }
    }

    /// Calls the reconciler, retrying errors in place when `queue.retryBackoff` says so.
    /// A panic is not retried here: it goes straight back to the queue.
    async fn reconcile(&self, request: &Request) -> std::thread::Result<Result<Reconciled, ReconcileError>> {
        let mut retry = 0;
        loop {
            self.counters.reconciles.fetch_add(1, Ordering::Relaxed);
            let started = std::time::Instant::now();
            let result = AssertUnwindSafe(self.mux.reconcile(request)).catch_unwind().await;
            self.counters.record(started.elapsed(), !matches!(result, Ok(Ok(_))));
            // Decide before waiting: no reference into the result may live across the sleep.
            let delay = match (&result, self.crd.retry) {
                // A stale write goes back to the queue: in place it would fail the same way.
                (Ok(Err(error)), Some(policy)) if retry < policy.attempts && error.retry() != Retry::Soon => {
                    retry += 1;
                    let delay = policy.delay(retry);
                    tracing::debug!(retry, ?delay, reason = %error.reason, "retrying in place");
                    Some(delay)
                }
                _ => None,
            };
            match delay {
                Some(delay) => tokio::time::sleep(delay).await,
                None => return result,
            }
        }
    }

    async fn run(&self, lease: &Lease, cached: Option<(Arc<Value>, Arc<str>)>) -> Outcome {
        let key = &lease.item.key;
        let (object, text) = (cached.as_ref().map(|(o, _)| o.clone()), cached.map(|(_, t)| t));
        let empty = Value::Null;
        let object_ref = object.as_deref().unwrap_or(&empty);
        let (compiled, target) = self.crd.for_object(object_ref);
        let context = Arc::new(self.run_context(object_ref, lease));
        let alive = object
            .as_ref()
            .is_some_and(|o| o["metadata"]["deletionTimestamp"].is_null());
        // The gate decides whether a live CR is reconciled, never whether one being deleted
        // is finalized: a closed gate would keep it Terminating with its children for ever.
        if alive
            && let Some(gate) = &compiled.gates.reconcile
            && !gate_passes(&self.externals, gate, self.resolver(object_ref, &context))
                .instrument(tracing::debug_span!("gate"))
                .await
        {
            self.counters.gated.fetch_add(1, Ordering::Relaxed);
            self.health.record(&self.crd.name, Event::Gated);
            tracing::debug!("reconcile gate closed; item skipped");
            return Outcome::Success;
        }
        if object.is_none() {
            self.budget.forget(key);
        }
        // A CR that spent its write budget waits for it (its deletion never does).
        if alive && let Err(wait) = self.budget.admit(key) {
            self.counters.held.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(?wait, "write budget spent; reconcile held back");
            return Outcome::Unfinished(wait);
        }
        let meter = Meter::default();
        let outcome = meter
            .measure(self.reconcile_and_stamp(lease, (object, text), alive, compiled.clone(), target, context))
            .await;
        self.budget.charge(key, meter.writes());
        outcome
    }

    /// What every stage of a run starts from: the CR's stamps and gateway request, and the
    /// item's event: its sentinels (`.sentinels`, and the sentinel functions) and, for an
    /// event-aware CRD, the Events behind it (`.events`), from the gate to the last status
    /// field alike.
    fn run_context(&self, object: &Value, lease: &Lease) -> Map<String, Value> {
        let mut context = self.crd.context_of(object);
        if lease.payload.sentinels.0 != 0 {
            context.insert("sentinels".into(), lease.payload.sentinels.named());
        }
        if let Some(events) = &lease.payload.events {
            context.insert("events".into(), events.clone());
        }
        context
    }

    /// What gates and the requeue see: the run's context, and the metrics live.
    fn resolver<'o>(&'o self, object: &'o Value, context: &Map<String, Value>) -> Resolver<'o, 'o> {
        let mut resolver = Resolver::in_context(object, &self.crd.notes, context);
        if self.crd.stamp_metrics.is_read() {
            // Gates see the metrics live, queue depth included (it is never stamped).
            resolver.set("metrics", self.live_metrics());
        }
        resolver
    }

    /// The reconcile of one item past its gates, and the stamps after it.
    async fn reconcile_and_stamp(
        &self,
        lease: &Lease,
        (object, text): (Option<Arc<Value>>, Option<Arc<str>>),
        alive: bool,
        compiled: Arc<orkestra_katalog::compile::CompiledBox>,
        target: Option<&str>,
        context: Arc<Map<String, Value>>,
    ) -> Outcome {
        let key = &lease.item.key;
        let empty = Value::Null;
        let object_ref = object.as_deref().unwrap_or(&empty);
        // The reconciler's own write of the CR's metadata may carry every stamp; after the
        // run, those only shown follow only a run that wrote the CR.
        let stamps = StampPatch::new(self.stamps.clone());
        let request = Request {
            key: key.clone(),
            crd: self.crd.name.clone(),
            resource: self.resource.clone(),
            object: object.clone(),
            text,
            target: target.map(String::from),
            compiled: compiled.clone(),
            context: context.clone(),
            sentinels: lease.payload.sentinels,
            event_id: lease.item.event_id,
            interrupt: self.interrupt(key, object.as_deref()),
            stamps: stamps.clone(),
            own: self.own.clone(),
        };
        let result = self.reconcile(&request).await;
        let outcome = match result {
            Ok(Ok(Reconciled { action, waiting })) => {
                // A CR being deleted or gone reports nothing waiting, which ends its wait.
                let waiting = waiting.filter(|_| self.crd.health_waits_for_children);
                self.health.record(
                    &self.crd.name,
                    Event::Succeeded {
                        key: key.clone(),
                        waiting,
                    },
                );
                match action {
                    // Never sooner than the floor: a reconciler asking for 0 would hold a
                    // worker and the API server for as long as it keeps asking.
                    Action::RequeueAfter(delay) => Outcome::RequeueAfter(delay.max(compiled.requeue_floor)),
                    Action::Done => match (&compiled.requeue, &object) {
                        (Some(requeue), Some(_)) => {
                            let resolver = self.resolver(object_ref, &context);
                            let after = match resolver.render(&requeue.after) {
                                Ok(text) if text.trim().is_empty() => None,
                                Ok(text) => orkestra_expr::duration::parse(&text)
                                    .inspect_err(|error| {
                                        tracing::warn!(%error, "requeue.after is not a duration; no requeue");
                                    })
                                    .ok(),
                                Err(error) => {
                                    tracing::warn!(error = %error.message, "requeue.after does not render; no requeue");
                                    None
                                }
                            };
                            match after {
                                Some(delay) if !delay.is_zero() && requeue.conditions.passes(&resolver, None) => {
                                    Outcome::RequeueAfter(delay.max(compiled.requeue_floor))
                                }
                                _ => Outcome::Success,
                            }
                        }
                        _ => Outcome::Success,
                    },
                }
            }
            Ok(Err(error)) if error.retry() == Retry::Soon => {
                // Not a failure: the CR changed under our write. The next run writes against
                // the version read now; the queue's hot-loop backoff holds a CR that keeps
                // changing.
                tracing::debug!(message = %error.message, "the custom resource changed under a write; running again");
                self.refresh(key).await;
                Outcome::Unfinished(STALE_RETRY)
            }
            Ok(Err(error)) => {
                self.counters.failed(&error.reason);
                if error.retry() == Retry::Backoff {
                    tracing::info!(reason = %error.reason, message = %error.message, "the API server is busy or unreachable; backing off");
                } else {
                    tracing::warn!(reason = %error.reason, message = %error.message, "reconcile failed");
                }
                self.health.record(&self.crd.name, Event::Failed(error.to_string()));
                Outcome::Retry
            }
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                self.counters.failed(&Reason::Panicked);
                self.counters.panics.fetch_add(1, Ordering::Relaxed);
                tracing::error!(%message, "reconciler panicked; counted as a failure");
                self.health
                    .record(&self.crd.name, Event::Failed(format!("panic: {message}")));
                Outcome::Retry
            }
        };
        if let Some(object) = object.as_deref().filter(|_| alive) {
            let after = self.stamps.stamps(stamps.touched());
            // Unless the reconciler's own write carried them and the reconcile did not move them.
            if stamps.carried().as_ref() != Some(&after) {
                self.stamp(key, object, &after).await;
            }
        }
        outcome
    }

    /// Stops a run early when the runtime shuts down, or when the CR it works for (alive when
    /// the run began) is being deleted or is gone: the next run handles that.
    fn interrupt(&self, key: &str, object: Option<&Value>) -> Interrupt {
        let alive = object.is_some_and(|o| o["metadata"]["deletionTimestamp"].is_null());
        let (queue, cache, key) = (self.queue.clone(), self.cache.clone(), key.to_string());
        Interrupt::new(move || {
            if queue.is_closed() {
                return Some("the runtime is shutting down");
            }
            if !alive {
                return None;
            }
            match cache.get(&key) {
                None => Some("the custom resource is gone"),
                Some(now) if !now["metadata"]["deletionTimestamp"].is_null() => {
                    Some("the custom resource is being deleted")
                }
                Some(_) => None,
            }
        })
    }

    /// `.metrics` as gates see it, queue depth included.
    fn live_metrics(&self) -> Value {
        feedback::live_metrics(&self.queue, &self.tuning, &self.counters)
    }

    /// Writes `stamps` on the CR where they differ from what it carries. Best effort: a failed
    /// stamp is logged and retried by the next reconcile.
    /// After a write refused for a stale resourceVersion: the CR as the API server holds it
    /// now, in place of the cached one. Waiting for the watch instead costs a failed write
    /// every retry while it reconnects (17 for one CR after an API server restart).
    async fn refresh(&self, key: &str) {
        let Ok((api, name)) = crate::pipeline::observe::api_for_key(&self.client, &self.resource, key) else {
            return;
        };
        match api.get_opt(name).await {
            Ok(Some(fresh)) => {
                let cached = crate::pipeline::observe::to_cached_json(fresh, self.crd.declared_sentinels());
                if let Some((_, value)) = cached {
                    self.cache.insert(key.to_string(), &value);
                }
            }
            // Gone: the watch's deletion handles it.
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, "could not read the custom resource again"),
        }
    }

    async fn stamp(&self, key: &str, object: &Value, stamps: &feedback::Stamps) {
        let Some(patch) = feedback::patch(object, stamps) else {
            return;
        };
        let Ok((api, name)) = crate::pipeline::observe::api_for_key(&self.client, &self.resource, key) else {
            return;
        };
        self.counters.wrote();
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        if let Err(error) = self.own.write(key, api.patch(name, &params, &patch)).await {
            tracing::debug!(%error, "could not stamp health and metrics");
        }
    }
}

/// The text of a panic's payload.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    orkestra_expr::text::bounded(text, 1024)
}

/// Makes the gate's external calls, then asks it; a failed call lets `failPolicy` decide.
pub(crate) async fn gate_passes(
    externals: &orkestra_effects::external::Externals,
    gate: &orkestra_katalog::compile::Gate,
    mut resolver: Resolver<'_, '_>,
) -> bool {
    if !gate.external.is_empty()
        && let Err(error) = orkestra_effects::external::run(externals, &gate.external, &mut resolver).await
    {
        tracing::debug!(%error, open = gate.fail_open, "reconcile gate call failed");
        return gate.fail_open;
    }
    gate.passes(&resolver)
}
