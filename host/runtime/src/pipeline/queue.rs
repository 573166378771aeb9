//! The work queue of one CRD: admitted triggers in, leases for workers out.
//!
//! - Each namespace (or label value, as `queue.fairness` says) is a flow of its own, and
//!   flows are served in turn, each up to its weight (see [`super::flows`]): one
//!   namespace's backlog does not hold up another's next item. Inside a flow, user changes
//!   go before background work (resyncs, the initial list, requeues, retries), which ages.
//! - The same item is coalesced: at most one queued and one running; an item added while
//!   it runs is marked dirty and queued once more when the run ends.
//! - `eventAware` items carry an event id and never coalesce, but two items of one key
//!   never run at once: each waits for the previous run of its key.
//! - A failed run is retried after a per-key exponential backoff (5 ms doubling to 1000 s);
//!   a success resets it. A delayed add keeps the earlier of two times.
//! - A bounded add refuses a new item at the limit (an existing item still coalesces), so
//!   the depth never exceeds it.
//! - A key that keeps asking to run again at once (a hot loop: more than `HOT_STREAK`
//!   requeues in a row of at most `HOT_REQUEUE`) is slowed, its delay doubling from 1 s to
//!   `HOT_MAX`; a run that ends without such a requeue resets it.
//!
//! Pure: no kube or wasmtime imports; time comes from tokio (tests run on paused time).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::Instant;

pub use super::flows::QueueItem;
use super::flows::{Class, FlowBy, FlowRules, Flows};
use crate::tenants::Tenants;
use orkestra_expr::sentinel::SentinelBits;

/// First retry delay after a failure.
pub const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// Retry delays stop growing here.
pub const BACKOFF_MAX: Duration = Duration::from_secs(1000);

/// A requeue this soon or sooner counts towards a hot loop (the default requeue floor: a
/// reconciler that asks for "as soon as possible").
pub const HOT_REQUEUE: Duration = Duration::from_secs(1);
/// Quick requeues of one key in a row before they are slowed.
pub const HOT_STREAK: u32 = 10;
/// Hot-loop delays stop growing here.
pub const HOT_MAX: Duration = Duration::from_secs(60);

/// What travels with an item: the facts of the events that produced it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Payload {
    /// Union of the sentinels of every coalesced event.
    pub sentinels: SentinelBits,
    /// The event context of the latest `observe.events` trigger (`.events.<name>`).
    pub events: Option<serde_json::Value>,
    /// A user's change, or background work; coalesced, a user's change wins.
    pub class: Class,
    /// Its flow, where the key alone does not say it (`queue.fairness.by: label:...`); the
    /// queue sets it when the item is queued.
    pub flow: Option<Arc<str>>,
    /// When the earliest of its coalesced triggers was seen (none for a requeue): its
    /// latencies run from here. A failed or unfinished run's next run keeps it, as the
    /// change is not done.
    pub seen: Option<Instant>,
    /// Whether its change already started a run (one that failed or did not finish): its
    /// wait is not timed again.
    pub started: bool,
}

impl Payload {
    fn merge(&mut self, other: Payload) {
        self.sentinels = SentinelBits(self.sentinels.0 | other.sentinels.0);
        if other.events.is_some() {
            self.events = other.events;
        }
        if other.class == Class::User {
            self.class = Class::User;
        }
        self.seen = earliest(self.seen, other.seen);
        // A change that has not started yet is waiting in it.
        self.started &= other.started;
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What `add` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// A new queued item.
    Queued,
    /// Merged into an item already queued (or pending behind a running one).
    Coalesced,
    /// Refused: the queue holds `limit` items.
    AtLimit,
    /// Refused: the queue is shut down.
    Closed,
}

/// How a run ended, as the worker reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Success, and run again after this long.
    RequeueAfter(Duration),
    /// Failed: retry after the key's backoff.
    Retry,
    /// Neither done nor failed (the CR changed under a write, or waits for its write
    /// budget): run again after this long.
    Unfinished(Duration),
}

/// A running item; hand it back with [`WorkQueue::done`].
#[derive(Debug)]
pub struct Lease {
    pub item: QueueItem,
    pub payload: Payload,
    /// How many times this key has failed in a row before this run.
    pub failures: u32,
    /// How long it waited once it was ready.
    pub waited: Duration,
    /// When a worker took it.
    pub taken: Instant,
    /// Its namespace's count of reconciles at once, held while it runs.
    pub tenant: Option<crate::tenants::reconciles::Permit>,
}

/// What went through the queue, as client-go counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throughput {
    /// Items newly queued (a coalesced trigger is not one).
    pub adds: u64,
    /// Failed runs handed back for a retry after backoff.
    pub retries: u64,
}

#[derive(Debug)]
enum Slot {
    /// Waiting, ready at the instant.
    Queued { at: Instant, payload: Payload },
    /// Being worked on; `pending` holds what arrived meanwhile.
    Running { pending: Option<Payload> },
}

#[derive(Debug)]
struct State {
    slots: HashMap<QueueItem, Slot>,
    /// Queued items, by flow (the instant in the slot decides readiness).
    order: Flows,
    running_keys: HashSet<String>,
    failures: HashMap<String, u32>,
    /// Quick requeues in a row, by key.
    hot: HashMap<String, u32>,
    closed: bool,
    throughput: Throughput,
    by: FlowBy,
}

/// A queue shared by the enqueue path (producers) and the workers.
#[derive(Debug, Clone)]
pub struct WorkQueue {
    state: Arc<Mutex<State>>,
    notify: Arc<Notify>,
    /// The runtime's caps per namespace (and the CRD this queue is of): an item of a
    /// namespace at its cap waits.
    tenants: Option<(Arc<Tenants>, Arc<str>)>,
}

/// The least delay of quick requeue number `streak` in a row: none up to `HOT_STREAK`, then
/// 1 s doubling to `HOT_MAX`.
pub fn hot_delay(streak: u32) -> Duration {
    match streak.checked_sub(HOT_STREAK + 1) {
        None => Duration::ZERO,
        Some(over) => Duration::from_secs(1).saturating_mul(1u32 << over.min(30)).min(HOT_MAX),
    }
}

/// The backoff before retry number `failures` (1 = first retry).
pub fn backoff(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(30);
    BACKOFF_BASE.saturating_mul(1u32 << exponent).min(BACKOFF_MAX)
}

impl Default for WorkQueue {
    fn default() -> Self {
        Self::with_rules(FlowRules::default())
    }
}

impl WorkQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// A queue whose flows follow `rules` (`queue.fairness`, `queue.priority`).
    pub fn with_rules(rules: FlowRules) -> Self {
        let state = State {
            slots: HashMap::new(),
            by: rules.by.clone(),
            order: Flows::new(rules),
            running_keys: HashSet::new(),
            failures: HashMap::new(),
            hot: HashMap::new(),
            closed: false,
            throughput: Throughput::default(),
        };
        Self {
            state: Arc::new(Mutex::new(state)),
            notify: Arc::default(),
            tenants: None,
        }
    }

    /// The same queue, of the CRD `crd`, its items held to `tenants`' caps on a namespace's
    /// reconciles at once (shared with the runtime's other CRDs).
    pub fn sharing(mut self, tenants: Arc<Tenants>, crd: Arc<str>) -> Self {
        self.tenants = Some((tenants, crd));
        self
    }

    /// The `limit` busiest flows (then the most recently served), with their figures.
    pub fn flows(&self, limit: usize) -> Vec<super::flows::FlowView> {
        self.lock().order.view(limit)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A worker that panicked while holding the lock cannot have left the state half
        // updated: every update is a few assignments. Keep going.
        self.state.lock()
    }

    /// Queues `item` now.
    pub fn add(&self, item: QueueItem, payload: Payload) -> Added {
        self.add_at(item, payload, Instant::now(), None)
    }

    /// Queues `item` now unless the queue already holds `limit` items.
    pub fn add_bounded(&self, item: QueueItem, payload: Payload, limit: usize) -> Added {
        self.add_at(item, payload, Instant::now(), Some(limit))
    }

    /// Queues `item` after `delay` (an earlier time already set wins).
    pub fn add_after(&self, item: QueueItem, payload: Payload, delay: Duration) -> Added {
        self.add_at(item, payload, Instant::now() + delay, None)
    }

    fn add_at(&self, item: QueueItem, mut payload: Payload, at: Instant, limit: Option<usize>) -> Added {
        let mut state = self.lock();
        if state.closed {
            return Added::Closed;
        }
        let queued = state.order.count();
        let State { slots, order, .. } = &mut *state;
        let added = match slots.get_mut(&item) {
            Some(Slot::Queued {
                at: current,
                payload: existing,
            }) => {
                *current = (*current).min(at);
                if existing.class == Class::Background
                    && payload.class == Class::User
                    && let Some(flow) = &existing.flow
                {
                    order.promote(&item, flow, Instant::now());
                }
                existing.merge(payload);
                Added::Coalesced
            }
            Some(Slot::Running { pending }) => {
                match pending {
                    Some(existing) => existing.merge(payload),
                    None => *pending = Some(payload),
                }
                Added::Coalesced
            }
            None => {
                if limit.is_some_and(|limit| queued >= limit) {
                    return Added::AtLimit;
                }
                let flow = state.by.flow(&item.key, payload.flow.take());
                state.order.push(item.clone(), &flow, payload.class, at);
                payload.flow = Some(flow);
                state.slots.insert(item, Slot::Queued { at, payload });
                state.throughput.adds += 1;
                Added::Queued
            }
        };
        drop(state);
        self.notify.notify_one();
        added
    }

    /// Items waiting (ready or delayed), not counting running ones.
    pub fn depth(&self) -> usize {
        self.lock().order.count()
    }

    /// Items being worked on.
    pub fn running(&self) -> usize {
        self.lock().running_keys.len()
    }

    /// What has gone through so far.
    pub fn throughput(&self) -> Throughput {
        self.lock().throughput
    }

    /// Waits for the next ready item whose key is not running and whose namespace has room
    /// for one more reconcile; `None` once shut down.
    pub async fn next(&self) -> Option<Lease> {
        loop {
            let notified = self.notify.notified();
            let freed = self.tenants.as_ref().map(|(tenants, _)| tenants.freed());
            let wake_at = {
                let mut state = self.lock();
                if state.closed {
                    return None;
                }
                let now = Instant::now();
                let mut earliest: Option<Instant> = None;
                let State {
                    order,
                    slots,
                    running_keys,
                    by,
                    ..
                } = &mut *state;
                let room = self.tenants.as_ref().map(|(tenants, crd)| tenants.room(crd));
                // Flows that are namespaces: one at its cap is passed over whole, not item by
                // item (its backlog may be long).
                let by_namespace = *by == FlowBy::Namespace;
                let open = |flow: &str| match &room {
                    Some(room) if by_namespace && !flow.is_empty() => room.has_room_in(flow),
                    _ => true,
                };
                let chosen = order.take_open(now, open, |item| {
                    if running_keys.contains(&item.key) {
                        return false;
                    }
                    match slots.get(item) {
                        Some(Slot::Queued { at, .. }) if *at <= now => {
                            room.as_ref().is_none_or(|room| room.has_room(&item.key))
                        }
                        Some(Slot::Queued { at, .. }) => {
                            earliest = Some(earliest.map_or(*at, |e: Instant| e.min(*at)));
                            false
                        }
                        _ => false,
                    }
                });
                if let Some(item) = chosen {
                    let tenant = room.and_then(|room| room.enter(&item.key));
                    let (payload, ready) = match state.slots.insert(item.clone(), Slot::Running { pending: None }) {
                        Some(Slot::Queued { payload, at }) => (payload, at),
                        _ => (Payload::default(), now),
                    };
                    state.running_keys.insert(item.key.clone());
                    let failures = state.failures.get(&item.key).copied().unwrap_or(0);
                    return Some(Lease {
                        item,
                        payload,
                        failures,
                        waited: now.saturating_duration_since(ready),
                        taken: now,
                        tenant,
                    });
                }
                earliest
            };
            let ready_later = async {
                match wake_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            // An item held back for its namespace's room runs once a reconcile of a namespace
            // at its cap ends, in this CRD or another.
            let room_freed = async {
                match freed {
                    Some(freed) => freed.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = notified => {}
                () = ready_later => {}
                () = room_freed => {}
            }
        }
    }

    /// Ends a run: forgets or schedules the item as `outcome` says, and releases its key.
    pub fn done(&self, lease: Lease, outcome: Outcome) {
        let mut state = self.lock();
        let Lease { item, payload, .. } = lease;
        let (flow, seen, class) = (payload.flow, payload.seen, payload.class);
        state.running_keys.remove(&item.key);
        let pending = match state.slots.remove(&item) {
            Some(Slot::Running { pending }) => pending,
            _ => None,
        };
        let now = Instant::now();
        if !matches!(outcome, Outcome::RequeueAfter(delay) | Outcome::Unfinished(delay) if delay <= HOT_REQUEUE) {
            state.hot.remove(&item.key);
        }
        let retry_at = match outcome {
            Outcome::Success => {
                state.failures.remove(&item.key);
                None
            }
            Outcome::RequeueAfter(delay) | Outcome::Unfinished(delay) => {
                state.failures.remove(&item.key);
                let delay = if delay <= HOT_REQUEUE {
                    let streak = state.hot.entry(item.key.clone()).or_insert(0);
                    *streak += 1;
                    delay.max(hot_delay(*streak))
                } else {
                    delay
                };
                Some(now + delay)
            }
            Outcome::Retry => {
                state.throughput.retries += 1;
                let failures = state.failures.entry(item.key.clone()).or_insert(0);
                *failures += 1;
                Some(now + backoff(*failures))
            }
        };
        // Something arrived during the run: run again now. Otherwise honour the schedule.
        let at = match (&pending, retry_at) {
            (Some(_), _) => Some(now),
            (None, at) => at,
        };
        if let Some(at) = at
            && !state.closed
        {
            // What arrived during the run keeps its class; a requeue is background work. A
            // change not done yet (failed, or unfinished) is still the same change: its class
            // and sighting go on. Its flow stays the one it was served from.
            let carried_on = matches!(outcome, Outcome::Retry | Outcome::Unfinished(_));
            let mut payload = pending.unwrap_or(Payload {
                class: Class::Background,
                started: carried_on,
                ..Payload::default()
            });
            if carried_on {
                payload.seen = earliest(payload.seen, seen);
                if class == Class::User {
                    payload.class = Class::User;
                }
            }
            let flow = state.by.flow(&item.key, payload.flow.take().or(flow));
            state.order.push(item.clone(), &flow, payload.class, at);
            payload.flow = Some(flow);
            state.slots.insert(item, Slot::Queued { at, payload });
        }
        drop(state);
        // Another worker may be waiting for this key.
        self.notify.notify_waiters();
        self.notify.notify_one();
    }

    /// Stops intake and wakes every waiting worker; queued items are dropped (a restart's
    /// initial list brings them back).
    pub fn shutdown(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.order.clear();
        state.slots.retain(|_, slot| matches!(slot, Slot::Running { .. }));
        drop(state);
        self.notify.notify_waiters();
    }

    /// Whether [`WorkQueue::shutdown`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

#[cfg(test)]
mod tests;
