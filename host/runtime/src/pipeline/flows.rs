//! The queued items of one CRD grouped into flows, one per namespace (cluster-scoped CRs
//! share one), and served in turn: the flow that gave the last item goes to the back, so
//! a namespace with thousands of items queued delays another's next item by at most one
//! item per busy flow, not by its whole backlog. Inside a flow, items keep their arrival
//! order.
//!
//! Pure: no kube or wasmtime imports.

use std::collections::{HashMap, VecDeque};

use super::queue::QueueItem;

/// The flows with items queued, and the order they are served in.
#[derive(Debug, Default)]
pub struct Flows {
    queues: HashMap<String, VecDeque<QueueItem>>,
    /// Flows with at least one item, next to serve first.
    turn: VecDeque<String>,
    len: usize,
}

/// The flow of a CR's key: its namespace, or "" for a cluster-scoped CR.
fn flow_of(key: &str) -> &str {
    key.split_once('/').map_or("", |(namespace, _)| namespace)
}

impl Flows {
    /// Queues `item` last in its flow.
    pub fn push(&mut self, item: QueueItem) {
        let flow = flow_of(&item.key);
        match self.queues.get_mut(flow) {
            Some(queue) => queue.push_back(item),
            None => {
                let flow = flow.to_string();
                self.turn.push_back(flow.clone());
                self.queues.insert(flow, VecDeque::from([item]));
            }
        }
        self.len += 1;
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

    /// Takes the first item `ready` accepts: the flows in turn, each in arrival order. Its
    /// flow goes to the back of the turn. `ready` sees every item up to that one (and all of
    /// them when none is taken), so it can note when the others will be.
    pub fn take(&mut self, mut ready: impl FnMut(&QueueItem) -> bool) -> Option<QueueItem> {
        let (turn, index) = self.turn.iter().enumerate().find_map(|(turn, flow)| {
            let queue = self.queues.get(flow)?;
            queue.iter().position(&mut ready).map(|index| (turn, index))
        })?;
        let flow = self.turn.remove(turn)?;
        let queue = self.queues.get_mut(&flow)?;
        let item = queue.remove(index)?;
        self.len -= 1;
        if queue.is_empty() {
            self.queues.remove(&flow);
        } else {
            self.turn.push_back(flow);
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::queue_item as item;

    fn drain(flows: &mut Flows) -> Vec<String> {
        std::iter::from_fn(|| flows.take(|_| true)).map(|i| i.key).collect()
    }

    #[test]
    fn flows_take_turns_and_each_keeps_its_arrival_order() {
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
            flows.push(item(key));
        }
        assert_eq!(flows.count(), 7);
        assert_eq!(
            drain(&mut flows),
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
        let mut flows = Flows::default();
        for i in 0..3000 {
            flows.push(item(&format!("noisy/{i}")));
        }
        assert_eq!(flows.take(|_| true).unwrap().key, "noisy/0");
        flows.push(item("quiet/new"));
        assert_eq!(flows.take(|_| true).unwrap().key, "noisy/1");
        assert_eq!(flows.take(|_| true).unwrap().key, "quiet/new");
        assert_eq!(flows.count(), 2998);
    }

    #[test]
    fn an_item_not_ready_keeps_its_place_and_the_next_ready_one_is_taken() {
        let mut flows = Flows::default();
        for key in ["a/later", "a/now", "b/later"] {
            flows.push(item(key));
        }
        let mut seen = Vec::new();
        let taken = flows.take(|i| {
            seen.push(i.key.clone());
            i.key.ends_with("now")
        });
        assert_eq!(taken.unwrap().key, "a/now");
        assert_eq!(seen, ["a/later", "a/now"]);
        let mut seen = Vec::new();
        assert!(
            flows
                .take(|i| {
                    seen.push(i.key.clone());
                    false
                })
                .is_none()
        );
        assert_eq!(seen, ["b/later", "a/later"], "every waiting item is seen once");
        assert_eq!(flows.count(), 2);
    }
}
