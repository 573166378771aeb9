//! The bounded pool deliveries are worked in: at most [`RUNNING`] at once, at most
//! [`PENDING`] waiting or running in all, and at most [`PER_ENTRY`] of those from one entry,
//! so one busy (or hostile) source cannot starve the others. A delivery past a bound is
//! refused at once, and none runs longer than [`DEADLINE`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

pub const RUNNING: usize = 4;
pub const PENDING: usize = 64;
pub const PER_ENTRY: usize = 16;
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Why a delivery was not taken.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Busy {
    #[error("the gateway has {PENDING} deliveries in hand; try again shortly")]
    Full,
    #[error("webhook \"{0}\" has {PER_ENTRY} deliveries in hand; try again shortly")]
    Entry(String),
}

#[derive(Clone)]
pub struct Workers {
    running: Arc<Semaphore>,
    held: Arc<Mutex<Held>>,
}

#[derive(Default)]
struct Held {
    total: usize,
    by_entry: HashMap<String, usize>,
}

/// A place in the pool, given back when dropped (the work ended, failed or timed out).
pub struct Slot {
    held: Arc<Mutex<Held>>,
    entry: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.total = held.total.saturating_sub(1);
        if let Some(n) = held.by_entry.get_mut(&self.entry) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.by_entry.remove(&self.entry);
            }
        }
    }
}

impl Default for Workers {
    fn default() -> Self {
        Self {
            running: Arc::new(Semaphore::new(RUNNING)),
            held: Arc::default(),
        }
    }
}

impl Workers {
    /// A place for one delivery of `entry`, or why there is none.
    pub fn take(&self, entry: &str) -> Result<Slot, Busy> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.total >= PENDING {
            return Err(Busy::Full);
        }
        let mine = held.by_entry.entry(entry.to_string()).or_default();
        if *mine >= PER_ENTRY {
            return Err(Busy::Entry(entry.to_string()));
        }
        *mine += 1;
        held.total += 1;
        Ok(Slot {
            held: self.held.clone(),
            entry: entry.to_string(),
        })
    }

    /// Runs `work` in its slot once a worker is free, within the deadline; `None` when it
    /// ran out of time.
    pub async fn run<T>(&self, slot: Slot, work: impl Future<Output = T>) -> Option<T> {
        let _slot = slot;
        let _worker = self.running.acquire().await.ok()?;
        tokio::time::timeout(DEADLINE, work).await.ok()
    }

    /// Runs `work` in its slot in the background.
    pub fn spawn(&self, slot: Slot, work: impl Future<Output = ()> + Send + 'static) {
        let workers = self.clone();
        tokio::spawn(async move {
            if workers.run(slot, work).await.is_none() {
                tracing::warn!(deadline = ?DEADLINE, "a webhook delivery ran out of time");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_entry_cannot_take_the_whole_pool() {
        let workers = Workers::default();
        let mine: Vec<Slot> = (0..PER_ENTRY).map(|_| workers.take("noisy").unwrap()).collect();
        assert_eq!(workers.take("noisy").err(), Some(Busy::Entry("noisy".into())));
        // Another entry still gets in.
        let other = workers.take("quiet").unwrap();
        drop(mine);
        assert!(workers.take("noisy").is_ok());
        drop(other);
    }

    #[tokio::test]
    async fn the_pool_refuses_past_its_bound_and_frees_what_ends() {
        let workers = Workers::default();
        let slots: Vec<Slot> = (0..PENDING)
            .map(|i| workers.take(&format!("e{}", i % 8)).unwrap())
            .collect();
        assert_eq!(workers.take("late").err(), Some(Busy::Full));
        let mut slots = slots.into_iter();
        let ran = workers.run(slots.next().unwrap(), async { 7 }).await;
        assert_eq!(ran, Some(7));
        assert!(workers.take("late").is_ok(), "the slot came back when its work ended");
    }

    #[tokio::test(start_paused = true)]
    async fn work_past_the_deadline_is_dropped() {
        let workers = Workers::default();
        let slot = workers.take("slow").unwrap();
        let ran = workers.run(slot, std::future::pending::<()>()).await;
        assert_eq!(ran, None);
        assert!(workers.held.lock().unwrap().by_entry.is_empty());
    }
}
