//! The queued items of one CRD grouped into flows (by default one per namespace) and served
//! in turn, each flow up to its weight in items before the next: a namespace with thousands
//! of items queued delays another's next item by at most a turn, not by its whole backlog.
//!
//! Inside a flow, a user's change (a new CR, a new generation, a deletion) goes before
//! background work (a resync, the initial list, a requeue), but background work ages: once
//! the first background item has waited `aging`, the flow alternates between the classes, so
//! it runs within two of the flow's turns however many user changes keep arriving, and user
//! changes still get every other turn behind a backlog of aged background work. With `aging`
//! zero the classes are one, in arrival order. Each class keeps its arrival order.
//!
//! Pure: no kube or wasmtime imports; time is given.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

pub use orkestra_katalog::compile::{FlowBy, FlowRules};

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

/// What caused an item, for its place in its flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Class {
    /// A change someone made: served first.
    #[default]
    User,
    /// A resync, the initial list, a requeue: served when no user change is waiting, or once
    /// it has waited `aging` longer than one.
    Background,
}

/// An item waiting in a flow, since when.
#[derive(Debug)]
struct Waiting {
    item: QueueItem,
    since: Instant,
}

#[derive(Debug, Default)]
struct Flow {
    user: VecDeque<Waiting>,
    background: VecDeque<Waiting>,
    /// Items served in its current turn.
    served_in_turn: u32,
    /// Whether its last item served was background work (the classes alternate once that
    /// has aged).
    last_background: bool,
}

impl Flow {
    fn len(&self) -> usize {
        self.user.len() + self.background.len()
    }
}

/// What one flow did, for metrics.
#[derive(Debug, Clone, Default)]
pub struct FlowStats {
    pub served: u64,
    /// Waits of its recently served items, from when each was queued.
    recent: VecDeque<Duration>,
}

/// Waits kept per flow for its percentiles.
const RECENT_WAITS: usize = 128;
/// Flows whose figures are kept (the ones served longest ago are forgotten first).
const FLOWS_KEPT: usize = 256;

impl FlowStats {
    /// The `p`th percentile of the recent waits (nearest rank).
    pub fn wait(&self, p: usize) -> Option<Duration> {
        let mut waits: Vec<Duration> = self.recent.iter().copied().collect();
        waits.sort();
        let rank = (waits.len() * p).div_ceil(100).saturating_sub(1);
        waits.get(rank).copied()
    }
}

/// A flow as `/metrics` and the Live API show it.
#[derive(Debug, Clone)]
pub struct FlowView {
    pub flow: Arc<str>,
    pub user: usize,
    pub background: usize,
    pub stats: FlowStats,
}

/// The flows with items queued, and the order they are served in.
#[derive(Debug, Default)]
pub struct Flows {
    rules: FlowRules,
    queues: HashMap<Arc<str>, Flow>,
    /// Flows with at least one item, next to serve first.
    turn: VecDeque<Arc<str>>,
    len: usize,
    stats: HashMap<Arc<str>, (FlowStats, Instant)>,
}

impl Flows {
    pub fn new(rules: FlowRules) -> Self {
        Self {
            rules,
            ..Self::default()
        }
    }

    /// Queues `item` of `flow` last in its class.
    pub fn push(&mut self, item: QueueItem, flow: &Arc<str>, class: Class, now: Instant) {
        let queue = match self.queues.get_mut(flow) {
            Some(queue) => queue,
            None => {
                self.turn.push_back(flow.clone());
                self.queues.entry(flow.clone()).or_default()
            }
        };
        let waiting = Waiting { item, since: now };
        match class {
            Class::User => queue.user.push_back(waiting),
            Class::Background => queue.background.push_back(waiting),
        }
        self.len += 1;
    }

    /// A user change for `item`, queued as background work in `flow`: it moves last among
    /// the flow's user changes.
    pub fn promote(&mut self, item: &QueueItem, flow: &Arc<str>, now: Instant) {
        let Some(queue) = self.queues.get_mut(flow) else { return };
        if let Some(at) = queue.background.iter().position(|w| w.item == *item) {
            let waiting = queue.background.remove(at).map(|w| w.item);
            queue.user.extend(waiting.map(|item| Waiting { item, since: now }));
        }
    }

    /// Items queued, in every flow.
    pub fn count(&self) -> usize {
        self.len
    }

    pub fn clear(&mut self) {
        self.queues.clear();
        self.turn.clear();
        self.len = 0;
    }

    /// Takes the first item `ready` accepts: the flows in turn; in a flow, its first ready
    /// user change, unless its first ready background item has waited `aging` and the flow's
    /// last item was a user change (or, with `aging` zero, whichever arrived first). A flow
    /// that is served its weight of items goes to the back of the turn. `ready` sees
    /// every item up to the ones taken (and all when none is), so it can note when the
    /// others will be.
    pub fn take(&mut self, now: Instant, ready: impl FnMut(&QueueItem) -> bool) -> Option<QueueItem> {
        self.take_open(now, |_| true, ready)
    }

    /// [`Flows::take`], passing over the flows `open` refuses without looking at their
    /// items (a namespace at its cap, where flows are namespaces).
    pub fn take_open(
        &mut self,
        now: Instant,
        open: impl Fn(&str) -> bool,
        mut ready: impl FnMut(&QueueItem) -> bool,
    ) -> Option<QueueItem> {
        let aging = self.rules.aging;
        let (turn, class, index) = self.turn.iter().enumerate().find_map(|(turn, flow)| {
            if !open(flow) {
                return None;
            }
            let queue = self.queues.get(flow)?;
            let user = queue.user.iter().position(|w| ready(&w.item));
            let background = queue.background.iter().position(|w| ready(&w.item));
            let class = match (user, background) {
                (Some(u), Some(b)) if aging.is_zero() => match queue.background[b].since < queue.user[u].since {
                    true => Class::Background,
                    false => Class::User,
                },
                (Some(_), Some(b))
                    if !queue.last_background && now.saturating_duration_since(queue.background[b].since) >= aging =>
                {
                    Class::Background
                }
                (Some(_), _) => Class::User,
                (None, Some(_)) => Class::Background,
                (None, None) => return None,
            };
            Some((turn, class, if class == Class::User { user? } else { background? }))
        })?;
        let flow = self.turn.get(turn)?.clone();
        let queue = self.queues.get_mut(&flow)?;
        let waiting = match class {
            Class::User => queue.user.remove(index)?,
            Class::Background => queue.background.remove(index)?,
        };
        self.len -= 1;
        queue.served_in_turn += 1;
        queue.last_background = class == Class::Background;
        let weight = self.rules.weights.get(&*flow).copied().unwrap_or(1).max(1);
        if queue.len() == 0 {
            self.queues.remove(&flow);
            self.turn.remove(turn);
        } else if turn != 0 || queue.served_in_turn >= weight {
            // Its turn is over (or it was served out of turn, when those ahead had nothing
            // ready): to the back.
            queue.served_in_turn = 0;
            self.turn.remove(turn);
            self.turn.push_back(flow.clone());
        }
        self.served(&flow, now.saturating_duration_since(waiting.since), now);
        Some(waiting.item)
    }

    fn served(&mut self, flow: &Arc<str>, waited: Duration, now: Instant) {
        if !self.stats.contains_key(flow) && self.stats.len() >= FLOWS_KEPT {
            let oldest = self.stats.iter().min_by_key(|(_, (_, at))| *at).map(|(f, _)| f.clone());
            oldest.map(|f| self.stats.remove(&f));
        }
        let (stats, at) = self
            .stats
            .entry(flow.clone())
            .or_insert_with(|| (FlowStats::default(), now));
        stats.served += 1;
        if stats.recent.len() == RECENT_WAITS {
            stats.recent.pop_front();
        }
        stats.recent.push_back(waited);
        *at = now;
    }

    /// The `limit` flows with the most items queued, then those served most recently, with
    /// their figures.
    pub fn view(&self, limit: usize) -> Vec<FlowView> {
        let mut flows: Vec<FlowView> = self
            .queues
            .iter()
            .map(|(flow, queue)| FlowView {
                flow: flow.clone(),
                user: queue.user.len(),
                background: queue.background.len(),
                stats: self.stats.get(flow).map(|(s, _)| s.clone()).unwrap_or_default(),
            })
            .collect();
        flows.sort_by(|a, b| {
            (b.user + b.background)
                .cmp(&(a.user + a.background))
                .then(a.flow.cmp(&b.flow))
        });
        flows.truncate(limit);
        let mut idle: Vec<(&Arc<str>, &(FlowStats, Instant))> = self
            .stats
            .iter()
            .filter(|(flow, _)| !self.queues.contains_key(*flow))
            .collect();
        idle.sort_by_key(|(_, (_, at))| std::cmp::Reverse(*at));
        let room = limit.saturating_sub(flows.len());
        flows.extend(idle.into_iter().take(room).map(|(flow, (stats, _))| FlowView {
            flow: flow.clone(),
            user: 0,
            background: 0,
            stats: stats.clone(),
        }));
        flows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::queue_item as item;

    fn flow(key: &str) -> Arc<str> {
        FlowBy::Namespace.flow(key, None)
    }

    fn push(flows: &mut Flows, key: &str, class: Class, now: Instant) {
        flows.push(item(key), &flow(key), class, now);
    }

    fn drain(flows: &mut Flows, now: Instant) -> Vec<String> {
        std::iter::from_fn(|| flows.take(now, |_| true))
            .map(|i| i.key)
            .collect()
    }

    #[test]
    fn flows_take_turns_and_each_keeps_its_arrival_order() {
        let now = Instant::now();
        let mut flows = Flows::default();
        for key in [
            "noisy/1",
            "noisy/2",
            "noisy/3",
            "noisy/4",
            "quiet/a",
            "cluster-wide",
            "quiet/b",
        ] {
            push(&mut flows, key, Class::User, now);
        }
        assert_eq!(flows.count(), 7);
        assert_eq!(
            drain(&mut flows, now),
            [
                "noisy/1",
                "quiet/a",
                "cluster-wide",
                "noisy/2",
                "quiet/b",
                "noisy/3",
                "noisy/4"
            ]
        );
        assert_eq!(flows.count(), 0);
    }

    #[test]
    fn a_flow_that_arrives_behind_a_backlog_is_served_next_but_one() {
        let now = Instant::now();
        let mut flows = Flows::default();
        for i in 0..3000 {
            push(&mut flows, &format!("noisy/{i}"), Class::User, now);
        }
        assert_eq!(flows.take(now, |_| true).unwrap().key, "noisy/0");
        push(&mut flows, "quiet/new", Class::User, now);
        assert_eq!(flows.take(now, |_| true).unwrap().key, "noisy/1");
        assert_eq!(flows.take(now, |_| true).unwrap().key, "quiet/new");
        assert_eq!(flows.count(), 2998);
    }

    #[test]
    fn an_item_not_ready_keeps_its_place_and_the_next_ready_one_is_taken() {
        let now = Instant::now();
        let mut flows = Flows::default();
        for key in ["a/later", "a/now", "b/later"] {
            push(&mut flows, key, Class::User, now);
        }
        let mut seen = Vec::new();
        let taken = flows.take(now, |i| {
            seen.push(i.key.clone());
            i.key.ends_with("now")
        });
        assert_eq!(taken.unwrap().key, "a/now");
        assert_eq!(seen, ["a/later", "a/now"]);
        let mut seen = Vec::new();
        assert!(
            flows
                .take(now, |i| {
                    seen.push(i.key.clone());
                    false
                })
                .is_none()
        );
        assert_eq!(seen, ["b/later", "a/later"], "every waiting item is seen once");
        assert_eq!(flows.count(), 2);
    }

    #[test]
    fn a_heavier_flow_is_served_its_weight_in_each_turn() {
        let now = Instant::now();
        let rules = FlowRules {
            weights: HashMap::from([("gold".to_string(), 3)]),
            ..FlowRules::default()
        };
        let mut flows = Flows::new(rules);
        for i in 0..6 {
            push(&mut flows, &format!("gold/{i}"), Class::User, now);
            push(&mut flows, &format!("free/{i}"), Class::User, now);
        }
        let order = drain(&mut flows, now);
        assert_eq!(
            &order[..8],
            [
                "gold/0", "gold/1", "gold/2", "free/0", "gold/3", "gold/4", "gold/5", "free/1"
            ]
        );
    }

    #[test]
    fn user_changes_go_first_and_background_work_ages_past_later_ones() {
        let start = Instant::now();
        let mut flows = Flows::new(FlowRules {
            aging: Duration::from_secs(10),
            ..FlowRules::default()
        });
        push(&mut flows, "a/resync", Class::Background, start);
        push(&mut flows, "a/new", Class::User, start + Duration::from_secs(1));
        assert_eq!(
            drain(&mut flows, start + Duration::from_secs(1)),
            ["a/new", "a/resync"],
            "the later user change first"
        );
        // A user change that arrives past the background item's aging waits behind it.
        push(&mut flows, "a/resync", Class::Background, start);
        push(&mut flows, "a/late", Class::User, start + Duration::from_secs(11));
        assert_eq!(
            drain(&mut flows, start + Duration::from_secs(11)),
            ["a/resync", "a/late"]
        );
        // Aging zero: one class, arrival order.
        let mut flat = Flows::new(FlowRules {
            aging: Duration::ZERO,
            ..FlowRules::default()
        });
        push(&mut flat, "a/resync", Class::Background, start);
        push(&mut flat, "a/new", Class::User, start + Duration::from_secs(1));
        assert_eq!(drain(&mut flat, start + Duration::from_secs(1)), ["a/resync", "a/new"]);
    }

    #[test]
    fn a_user_change_to_queued_background_work_promotes_it() {
        let now = Instant::now();
        let mut flows = Flows::default();
        push(&mut flows, "a/1", Class::User, now);
        push(&mut flows, "a/relisted", Class::Background, now);
        push(&mut flows, "a/2", Class::User, now);
        flows.promote(&item("a/relisted"), &flow("a/relisted"), now);
        assert_eq!(drain(&mut flows, now), ["a/1", "a/2", "a/relisted"]);
        assert_eq!(flows.count(), 0);
    }

    #[test]
    fn each_flow_counts_what_it_served_and_how_long_it_waited() {
        let start = Instant::now();
        let mut flows = Flows::default();
        push(&mut flows, "a/1", Class::User, start);
        push(&mut flows, "a/2", Class::User, start);
        push(&mut flows, "b/1", Class::User, start);
        flows.take(start + Duration::from_millis(10), |_| true);
        let view = flows.view(10);
        assert_eq!(&*view[0].flow, "a", "the deepest flow first");
        assert_eq!((view[0].user, view[0].stats.served), (1, 1));
        assert_eq!(view[0].stats.wait(50), Some(Duration::from_millis(10)));
        drain(&mut flows, start + Duration::from_millis(20));
        let view = flows.view(1);
        assert_eq!(view.len(), 1, "bounded");
        assert_eq!(
            (view[0].user, view[0].background),
            (0, 0),
            "idle flows keep their figures"
        );
    }

    #[test]
    fn behind_aged_background_work_user_changes_still_get_every_other_turn() {
        let start = Instant::now();
        let mut flows = Flows::new(FlowRules {
            aging: Duration::from_secs(10),
            ..FlowRules::default()
        });
        for i in 0..5 {
            push(&mut flows, &format!("a/bg-{i}"), Class::Background, start);
        }
        for i in 0..3 {
            push(
                &mut flows,
                &format!("a/u-{i}"),
                Class::User,
                start + Duration::from_secs(20),
            );
        }
        assert_eq!(
            drain(&mut flows, start + Duration::from_secs(30)),
            [
                "a/bg-0", "a/u-0", "a/bg-1", "a/u-1", "a/bg-2", "a/u-2", "a/bg-3", "a/bg-4"
            ]
        );
    }
}
