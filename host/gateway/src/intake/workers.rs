//! The bounded pool deliveries are worked in: at most [`RUNNING`] at once per entry (each
//! entry has workers of its own, so an entry whose provider is slow stalls only itself), at
//! most [`PENDING`] waiting or running in all, and at most [`PER_ENTRY`] of those from one
//! entry, so one busy (or hostile) source cannot starve the others. A delivery past a bound
//! is refused at once, and none runs longer than [`DEADLINE`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Semaphore;

/// Deliveries of one entry worked at once.
pub const RUNNING: usize = 2;
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

#[derive(Clone, Default)]
pub struct Workers {
    held: Arc<Mutex<Held>>,
}

#[derive(Default)]
struct Held {
    total: usize,
    by_entry: HashMap<String, usize>,
    /// Each entry's workers, made at its first delivery.
    running: HashMap<String, Arc<Semaphore>>,
}

/// A place in the pool, given back when dropped (the work ended, failed or timed out).
pub struct Slot {
    held: Arc<Mutex<Held>>,
    entry: String,
    running: Arc<Semaphore>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.held.lock();
        held.total = held.total.saturating_sub(1);
        if let Some(n) = held.by_entry.get_mut(&self.entry) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.by_entry.remove(&self.entry);
            }
        }
    }
}

impl Workers {
    /// A place for one delivery of `entry`, or why there is none.
    pub fn take(&self, entry: &str) -> Result<Slot, Busy> {
        let mut held = self.held.lock();
        if held.total >= PENDING {
            return Err(Busy::Full);
        }
        let mine = held.by_entry.entry(entry.to_string()).or_default();
        if *mine >= PER_ENTRY {
            return Err(Busy::Entry(entry.to_string()));
        }
        *mine += 1;
        held.total += 1;
        let running = held
            .running
            .entry(entry.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(RUNNING)))
            .clone();
        Ok(Slot {
            held: self.held.clone(),
            entry: entry.to_string(),
            running,
        })
    }

    /// Whether `entry` would get a place now (checked before its body is read; [`take`]
    /// decides).
    ///
    /// [`take`]: Workers::take
    pub fn has_room(&self, entry: &str) -> Result<(), Busy> {
        let held = self.held.lock();
        if held.total >= PENDING {
            return Err(Busy::Full);
        }
        match held.by_entry.get(entry).copied().unwrap_or(0) >= PER_ENTRY {
            true => Err(Busy::Entry(entry.to_string())),
            false => Ok(()),
        }
    }

    /// Runs `work` in its slot once one of its entry's workers is free, within the deadline
    /// (waiting included); `None` when it ran out of time.
    pub async fn run<T>(&self, slot: Slot, work: impl Future<Output = T>) -> Option<T> {
        let running = slot.running.clone();
        let _slot = slot;
        tokio::time::timeout(DEADLINE, async {
            let _worker = running.acquire().await.ok()?;
            Some(work.await)
        })
        .await
        .ok()
        .flatten()
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
    async fn a_stalled_entry_holds_its_own_workers_only() {
        let workers = Workers::default();
        // The slow entry's workers, each stuck on its provider.
        for _ in 0..RUNNING {
            let slot = workers.take("slow").unwrap();
            workers.spawn(slot, std::future::pending());
        }
        tokio::task::yield_now().await;
        let waiting = workers.take("slow").unwrap();
        let behind = workers.run(waiting, async { "ran" });
        tokio::pin!(behind);
        assert!(
            tokio::time::timeout(Duration::from_secs(1), &mut behind).await.is_err(),
            "the slow entry's next delivery waits for its own workers"
        );
        let other = workers.take("quick").unwrap();
        let ran = tokio::time::timeout(Duration::from_millis(10), workers.run(other, async { "ran" })).await;
        assert_eq!(ran.unwrap(), Some("ran"), "another entry's runs at once");
        assert_eq!(workers.has_room("quick"), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn work_past_the_deadline_is_dropped() {
        let workers = Workers::default();
        let slot = workers.take("slow").unwrap();
        let ran = workers.run(slot, std::future::pending::<()>()).await;
        assert_eq!(ran, None);
        assert!(workers.held.lock().by_entry.is_empty());
    }
}
