//! Deliveries already taken, remembered per entry for as long as their proof holds, so a
//! captured delivery played again is refused instead of applied a second time (which could
//! revert a newer intent). A delivery is known by what the provider gives it: GitHub's
//! `X-GitHub-Delivery` and GitLab's `X-Gitlab-Event-UUID` ids, or the signature itself for
//! Slack and generic senders (it covers the timestamp and the body), or, without any of
//! those, the body's digest.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Deliveries remembered per entry; past it the oldest are forgotten first.
const KEPT: usize = 10_000;

#[derive(Default)]
struct Entry {
    /// Each id, until when it is remembered.
    ids: HashMap<String, Instant>,
    /// The ids in the order they came.
    order: VecDeque<String>,
}

impl Entry {
    /// Forgets, oldest first, what has passed its window, and what is past [`KEPT`].
    fn forget(&mut self, now: Instant) {
        while let Some(id) = self.order.front() {
            let expired = self.ids.get(id).is_none_or(|until| *until <= now);
            if !expired && self.order.len() < KEPT {
                break;
            }
            self.ids.remove(id);
            self.order.pop_front();
        }
    }
}

/// Every entry's remembered deliveries.
#[derive(Clone, Default)]
pub struct Delivered {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
}

/// A delivery taken for `entry`: remembered unless [`Claim::release`]d (the delivery was
/// turned away and may come again).
pub struct Claim {
    delivered: Delivered,
    entry: String,
    id: String,
}

impl Claim {
    pub fn release(self) {
        let mut entries = self.delivered.entries.lock();
        if let Some(entry) = entries.get_mut(&self.entry)
            && entry.ids.remove(&self.id).is_some()
        {
            entry.order.retain(|id| *id != self.id);
        }
    }
}

impl Delivered {
    /// Takes the delivery `id` of `entry`, remembered for `window`; `None` when it was taken
    /// already within its window.
    pub fn claim(&self, entry: &str, id: String, window: Duration) -> Option<Claim> {
        let now = Instant::now();
        let mut entries = self.entries.lock();
        let remembered = entries.entry(entry.to_string()).or_default();
        remembered.forget(now);
        if remembered.ids.get(&id).is_some_and(|until| *until > now) {
            return None;
        }
        if remembered.ids.insert(id.clone(), now + window).is_none() {
            remembered.order.push_back(id.clone());
        }
        Some(Claim {
            delivered: self.clone(),
            entry: entry.to_string(),
            id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_is_taken_once_per_window_unless_it_was_turned_away() {
        let delivered = Delivered::default();
        let window = Duration::from_secs(600);
        let first = delivered.claim("pager", "sig-1".into(), window);
        assert!(first.is_some());
        assert!(
            delivered.claim("pager", "sig-1".into(), window).is_none(),
            "played again"
        );
        assert!(delivered.claim("other", "sig-1".into(), window).is_some(), "per entry");
        let busy = delivered.claim("pager", "sig-2".into(), window).unwrap();
        busy.release();
        assert!(
            delivered.claim("pager", "sig-2".into(), window).is_some(),
            "turned away: may come again"
        );
        // Past its window it is forgotten.
        assert!(delivered.claim("pager", "old".into(), Duration::ZERO).is_some());
        assert!(delivered.claim("pager", "old".into(), window).is_some());
    }
}
