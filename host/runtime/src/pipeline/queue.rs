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
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

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

/// The identity of queued work.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueItem {
    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub key: String,
    /// `group/version/Kind` of the primary resource.
    pub gvk: Arc<str>,
    /// Present only for eventAware CRDs: every admitted event is its own item.
    pub event_id: Option<u64>,
}

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
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
mod tests {
    use super::*;
    use crate::testing::queue_item as item;

    fn event(key: &str, id: u64) -> QueueItem {
        QueueItem {
            event_id: Some(id),
            ..item(key)
        }
    }

    fn with(bits: u16) -> Payload {
        Payload {
            sentinels: SentinelBits(bits),
            ..Payload::default()
        }
    }

    /// Polls once: a ready item or nothing, without letting paused time move.
    async fn next_now(queue: &WorkQueue) -> Option<Lease> {
        use futures::FutureExt;
        tokio::task::yield_now().await;
        queue.next().now_or_never().flatten()
    }

    #[tokio::test(start_paused = true)]
    async fn queue_should_coalesce_the_same_item_and_merge_sentinels() {
        let queue = WorkQueue::new();
        assert_eq!(queue.add(item("ns/a"), with(0b01)), Added::Queued);
        assert_eq!(queue.add(item("ns/a"), with(0b10)), Added::Coalesced);
        assert_eq!(queue.depth(), 1);
        let lease = queue.next().await.unwrap();
        assert_eq!(lease.payload.sentinels, SentinelBits(0b11));
        queue.done(lease, Outcome::Success);
        assert!(next_now(&queue).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_is_timed_from_its_first_sighting_through_retries_but_not_past_its_run() {
        let seen = |at: Instant| Payload {
            seen: Some(at),
            ..Payload::default()
        };
        let queue = WorkQueue::new();
        let first = Instant::now();
        tokio::time::advance(Duration::from_millis(30)).await;
        queue.add(item("ns/a"), seen(Instant::now()));
        queue.add(item("ns/a"), seen(first));
        let lease = queue.next().await.unwrap();
        assert_eq!(lease.payload.seen, Some(first), "the earliest of the coalesced");
        // It failed: its retry is the same change, still timed from its sighting.
        queue.done(lease, Outcome::Retry);
        tokio::time::advance(Duration::from_secs(1)).await;
        let retry = queue.next().await.unwrap();
        assert_eq!(retry.payload.seen, Some(first));
        assert!(retry.payload.started, "its wait was timed at its first run");
        // Its write met a newer CR: still not done, still the same change.
        queue.done(retry, Outcome::Unfinished(Duration::from_millis(200)));
        tokio::time::advance(Duration::from_millis(200)).await;
        let retry = queue.next().await.unwrap();
        assert_eq!(retry.payload.seen, Some(first));
        // Handled, then requeued: the requeue is no change of anyone's.
        queue.done(retry, Outcome::RequeueAfter(Duration::from_secs(5)));
        tokio::time::advance(Duration::from_secs(5)).await;
        let requeued = queue.next().await.unwrap();
        assert_eq!(requeued.payload.seen, None);
        queue.done(requeued, Outcome::Success);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_namespace_waits_for_one_item_of_a_noisy_ones_backlog_not_all_of_it() {
        let queue = WorkQueue::new();
        for i in 0..3000 {
            queue.add(item(&format!("noisy/{i}")), with(0));
        }
        let running = queue.next().await.unwrap();
        assert_eq!(running.item.key, "noisy/0");
        queue.add(item("quiet/new"), with(0));
        let taken: Vec<String> = [queue.next().await.unwrap(), queue.next().await.unwrap()]
            .into_iter()
            .map(|lease| lease.item.key)
            .collect();
        assert_eq!(taken, ["noisy/1", "quiet/new"]);
        queue.done(running, Outcome::Success);
        assert_eq!(queue.depth(), 2998, "the backlog goes on");
    }

    #[tokio::test(start_paused = true)]
    async fn a_namespace_at_its_cap_over_every_crd_waits_while_others_run() {
        use orkestra_katalog::compile::{TenantLimits, TenantRules};
        let limits = TenantLimits {
            reconciles: 2,
            api: None,
            wasm_calls: 16,
            wasm_cpu: 0.5,
        };
        let tenants = Arc::new(Tenants::new(TenantRules {
            default: limits,
            namespaces: Default::default(),
        }));
        // Two CRDs' queues, one runtime.
        let (websites, databases) = (
            WorkQueue::new().sharing(tenants.clone(), "websites".into()),
            WorkQueue::new().sharing(tenants.clone(), "databases".into()),
        );
        websites.add(item("noisy/site1"), with(0));
        websites.add(item("noisy/site2"), with(0));
        for key in ["noisy/db1", "noisy/db2", "quiet/db"] {
            databases.add(item(key), with(0));
        }
        let sites = [websites.next().await.unwrap(), websites.next().await.unwrap()];
        // The noisy namespace is at its cap; the databases still run one of its CRs.
        let db1 = next_now(&databases).await.expect("one of each namespace in each CRD");
        assert_eq!(db1.item.key, "noisy/db1");
        let quiet = next_now(&databases).await.expect("another namespace runs");
        assert_eq!(quiet.item.key, "quiet/db");
        assert!(next_now(&databases).await.is_none(), "noisy/db2 waits for room");
        // The websites' reconciles end: the databases' waiting worker takes noisy/db2 once
        // the namespace is under its cap.
        let waiting = tokio::spawn({
            let databases = databases.clone();
            async move { databases.next().await }
        });
        tokio::task::yield_now().await;
        let [site1, site2] = sites;
        websites.done(site1, Outcome::Success);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "two of two running still");
        websites.done(site2, Outcome::Success);
        let db2 = waiting.await.unwrap().expect("a lease");
        assert_eq!(db2.item.key, "noisy/db2");
        assert_eq!(tenants.reconciling(), [("noisy".into(), 2), ("quiet".into(), 1)]);
        for lease in [db1, db2, quiet] {
            databases.done(lease, Outcome::Success);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_added_while_running_runs_once_more_after() {
        let queue = WorkQueue::new();
        queue.add(item("ns/a"), with(0));
        let lease = queue.next().await.unwrap();
        assert_eq!(queue.add(item("ns/a"), with(1)), Added::Coalesced);
        assert_eq!(queue.add(item("ns/a"), with(2)), Added::Coalesced);
        assert!(next_now(&queue).await.is_none(), "never two runs of one key at once");
        queue.done(lease, Outcome::Success);
        let again = next_now(&queue).await.expect("the pending run");
        assert_eq!(again.payload.sentinels, SentinelBits(3));
        queue.done(again, Outcome::Success);
        assert!(next_now(&queue).await.is_none(), "at most one pending run");
    }

    #[tokio::test(start_paused = true)]
    async fn event_aware_items_stay_separate_but_one_key_runs_at_a_time() {
        let queue = WorkQueue::new();
        queue.add(event("ns/a", 1), with(1));
        queue.add(event("ns/a", 2), with(2));
        queue.add(event("ns/b", 3), with(4));
        assert_eq!(queue.depth(), 3);
        let first = queue.next().await.unwrap();
        assert_eq!(first.item.event_id, Some(1));
        let other = next_now(&queue).await.unwrap();
        assert_eq!(other.item.key, "ns/b", "the second event of ns/a waits for the first");
        queue.done(first, Outcome::Success);
        let second = next_now(&queue).await.unwrap();
        assert_eq!(
            (second.item.event_id, second.payload.sentinels),
            (Some(2), SentinelBits(2))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_exponentially_and_success_resets() {
        let queue = WorkQueue::new();
        queue.add(item("ns/a"), with(0));
        for failures in 1..=4u32 {
            let lease = queue.next().await.unwrap();
            assert_eq!(lease.failures, failures - 1);
            queue.done(lease, Outcome::Retry);
            let wait = backoff(failures);
            tokio::time::advance(wait - Duration::from_micros(500)).await;
            assert!(next_now(&queue).await.is_none(), "not before {wait:?}");
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        let lease = queue.next().await.unwrap();
        assert_eq!(lease.failures, 4);
        queue.done(lease, Outcome::Success);
        queue.add(item("ns/a"), with(0));
        assert_eq!(queue.next().await.unwrap().failures, 0);
        assert_eq!(backoff(1), Duration::from_millis(5));
        assert_eq!(backoff(2), Duration::from_millis(10));
        assert_eq!(backoff(40), BACKOFF_MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hot_loop_is_slowed_and_a_calm_run_resets_it() {
        let queue = WorkQueue::new();
        queue.add(item("ns/a"), with(0));
        for _ in 0..HOT_STREAK {
            let lease = next_now(&queue).await.expect("quick requeues run at once at first");
            queue.done(lease, Outcome::RequeueAfter(Duration::ZERO));
        }
        for streak in HOT_STREAK + 1..=HOT_STREAK + 8 {
            let lease = next_now(&queue).await.unwrap();
            queue.done(lease, Outcome::RequeueAfter(Duration::ZERO));
            let wait = hot_delay(streak);
            tokio::time::advance(wait - Duration::from_millis(1)).await;
            assert!(
                next_now(&queue).await.is_none(),
                "quick requeue {streak} waits {wait:?}"
            );
            tokio::time::advance(Duration::from_millis(2)).await;
        }
        assert_eq!(hot_delay(HOT_STREAK + 1), Duration::from_secs(1));
        assert_eq!(hot_delay(HOT_STREAK + 8), HOT_MAX);
        // A requeue that is not quick, or a plain success, ends the streak.
        let lease = next_now(&queue).await.unwrap();
        let calm = HOT_REQUEUE + Duration::from_secs(1);
        queue.done(lease, Outcome::RequeueAfter(calm));
        tokio::time::advance(calm).await;
        let lease = next_now(&queue).await.unwrap();
        queue.done(lease, Outcome::RequeueAfter(Duration::ZERO));
        assert!(next_now(&queue).await.is_some(), "the streak starts over");
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_add_keeps_the_earlier_time() {
        let queue = WorkQueue::new();
        queue.add_after(item("ns/a"), with(0), Duration::from_secs(10));
        queue.add_after(item("ns/a"), with(0), Duration::from_secs(60));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(next_now(&queue).await.is_none());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(next_now(&queue).await.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_after_success_schedules_the_next_run() {
        let queue = WorkQueue::new();
        queue.add(item("ns/a"), with(0));
        let lease = queue.next().await.unwrap();
        queue.done(lease, Outcome::RequeueAfter(Duration::from_secs(30)));
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(next_now(&queue).await.is_none());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(next_now(&queue).await.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_bounded_add_never_exceeds_the_limit_but_still_coalesces() {
        let queue = WorkQueue::new();
        for i in 0..3 {
            assert_eq!(queue.add_bounded(item(&format!("ns/{i}")), with(0), 3), Added::Queued);
        }
        assert_eq!(queue.add_bounded(item("ns/9"), with(0), 3), Added::AtLimit);
        assert_eq!(queue.add_bounded(item("ns/0"), with(1), 3), Added::Coalesced);
        assert_eq!(queue.depth(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_wakes_waiting_workers_and_refuses_new_work() {
        let queue = WorkQueue::new();
        let waiting = tokio::spawn({
            let queue = queue.clone();
            async move { queue.next().await.is_none() }
        });
        tokio::task::yield_now().await;
        queue.shutdown();
        assert!(waiting.await.unwrap(), "a waiting worker gets None");
        assert_eq!(queue.add(item("ns/a"), with(0)), Added::Closed);
    }
    fn background() -> Payload {
        Payload {
            class: Class::Background,
            ..Payload::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_users_change_runs_before_the_initial_list_and_a_requeue_is_background_work() {
        let queue = WorkQueue::new();
        for i in 0..50 {
            queue.add(item(&format!("ns/listed-{i}")), background());
        }
        queue.add(item("ns/new"), with(0));
        assert_eq!(next_now(&queue).await.unwrap().item.key, "ns/new");
        // Requeued, it is background work: a later user change goes first.
        let listed = next_now(&queue).await.unwrap();
        assert_eq!(listed.item.key, "ns/listed-0");
        queue.done(listed, Outcome::RequeueAfter(Duration::ZERO));
        queue.add(item("ns/changed"), with(0));
        assert_eq!(next_now(&queue).await.unwrap().item.key, "ns/changed");
        // A user's change to a queued background item promotes it.
        queue.add(item("ns/listed-40"), with(0));
        assert_eq!(next_now(&queue).await.unwrap().item.key, "ns/listed-40");
        assert_eq!(next_now(&queue).await.unwrap().item.key, "ns/listed-1");
    }

    /// A sustained stream of user changes, more than the workers keep up with: background
    /// work still runs, within the aging bound plus one run.
    #[tokio::test(start_paused = true)]
    async fn background_work_waits_at_most_its_aging_under_sustained_user_changes() {
        let aging = Duration::from_secs(2);
        let queue = WorkQueue::with_rules(FlowRules {
            aging,
            ..FlowRules::default()
        });
        let run = Duration::from_millis(10);
        queue.add(item("ns/resync"), background());
        let started = Instant::now();
        let mut user = 0;
        let waited = loop {
            // Two user changes arrive per run: the backlog only grows.
            for _ in 0..2 {
                queue.add(item(&format!("ns/user-{user}")), with(0));
                user += 1;
            }
            let lease = next_now(&queue).await.unwrap();
            if lease.item.key == "ns/resync" {
                break started.elapsed();
            }
            tokio::time::advance(run).await;
            queue.done(lease, Outcome::Success);
            assert!(started.elapsed() < aging * 2, "the background item never ran");
        };
        assert!(waited >= aging - run, "user changes went first: ran after {waited:?}");
        assert!(waited <= aging + run, "within its aging: ran after {waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn flows_by_label_group_what_the_enqueue_path_named_and_by_none_is_first_in_first_out() {
        let labelled = WorkQueue::with_rules(FlowRules {
            by: FlowBy::Label("team".into()),
            ..FlowRules::default()
        });
        let team = |name: &str| Payload {
            flow: Some(name.into()),
            ..Payload::default()
        };
        for (key, flow) in [("a/1", "red"), ("b/1", "red"), ("a/2", "red"), ("c/1", "blue")] {
            labelled.add(item(key), team(flow));
        }
        let mut order = Vec::new();
        while let Some(lease) = next_now(&labelled).await {
            order.push(lease.item.key.clone());
            labelled.done(lease, Outcome::Success);
        }
        assert_eq!(
            order,
            ["a/1", "c/1", "b/1", "a/2"],
            "red and blue take turns, whatever the namespace"
        );
        let mut flows: Vec<_> = labelled
            .flows(10)
            .into_iter()
            .map(|f| (f.flow, f.stats.served))
            .collect();
        flows.sort();
        assert_eq!(flows, [("blue".into(), 1), ("red".into(), 3)]);

        let fifo = WorkQueue::with_rules(FlowRules {
            by: FlowBy::None,
            aging: Duration::ZERO,
            ..FlowRules::default()
        });
        for key in ["noisy/1", "noisy/2", "quiet/1"] {
            fifo.add(item(key), with(0));
        }
        let mut order = Vec::new();
        while let Some(lease) = next_now(&fifo).await {
            order.push(lease.item.key.clone());
            fifo.done(lease, Outcome::Success);
        }
        assert_eq!(order, ["noisy/1", "noisy/2", "quiet/1"]);
    }
}
