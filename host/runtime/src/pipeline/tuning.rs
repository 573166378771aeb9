//! What one CRD runs with now: its workers, the queue's reference depth and its resync
//! period. The configured values, or the autoscaler's while its conditions hold.
//!
//! Workers are slots of a semaphore: the CRD runs as many worker tasks as it may ever need,
//! each takes a slot before it takes an item. Fewer slots take effect as running items
//! finish (nothing in flight is cut short); more take effect at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use orkestra_katalog::compile::{Autoscale, CompiledCrd};

/// What one CRD runs with now: workers, the queue's reference depth and the resync period.
#[derive(Debug)]
pub struct Tuning {
    slots: Arc<Semaphore>,
    workers: AtomicUsize,
    /// Slots to take out of service as they are handed back (a scale-down while busy).
    debt: Arc<AtomicUsize>,
    max_depth: AtomicUsize,
    resync: watch::Sender<Duration>,
    scaled: AtomicBool,
    configured: (usize, usize, Duration),
}

/// A worker's slot; handed back (or retired, after a scale-down) when dropped.
pub struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    debt: Arc<AtomicUsize>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let retire = self
            .debt
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |d| d.checked_sub(1))
            .is_ok();
        if let (true, Some(permit)) = (retire, self.permit.take()) {
            permit.forget();
        }
    }
}

impl Tuning {
    /// The configured values of `crd`.
    pub fn new(crd: &CompiledCrd) -> Self {
        let configured = (crd.workers, crd.behaviour.max_depth, crd.resync);
        Self {
            slots: Arc::new(Semaphore::new(crd.workers)),
            workers: AtomicUsize::new(crd.workers),
            debt: Arc::default(),
            max_depth: AtomicUsize::new(configured.1),
            resync: watch::Sender::new(configured.2),
            scaled: AtomicBool::new(false),
            configured,
        }
    }

    /// How many worker tasks the CRD needs: enough for the most it may ever run.
    pub fn tasks(crd: &CompiledCrd) -> usize {
        crd.most_workers()
    }

    /// Waits for a free slot; `None` once the CRD stops.
    pub async fn slot(&self) -> Option<Slot> {
        let permit = self.slots.clone().acquire_owned().await.ok()?;
        Some(Slot {
            permit: Some(permit),
            debt: self.debt.clone(),
        })
    }

    /// Wakes every waiting worker so it can see the CRD stop.
    pub fn close(&self) {
        self.slots.close();
    }

    pub fn workers(&self) -> usize {
        self.workers.load(Ordering::Relaxed)
    }

    pub fn max_depth(&self) -> usize {
        self.max_depth.load(Ordering::Relaxed)
    }

    pub fn resync(&self) -> watch::Receiver<Duration> {
        self.resync.subscribe()
    }

    /// Whether the autoscaler's values are in force.
    pub fn scaled(&self) -> bool {
        self.scaled.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, workers: usize, max_depth: usize, resync: Duration, scaled: bool) {
        let before = self.workers.swap(workers, Ordering::AcqRel);
        if workers > before {
            // Cancel retirements still pending before adding slots.
            let mut more = workers - before;
            while more > 0
                && self
                    .debt
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |d| d.checked_sub(1))
                    .is_ok()
            {
                more -= 1;
            }
            self.slots.add_permits(more);
        } else if workers < before {
            let fewer = before - workers;
            let idle = self.slots.forget_permits(fewer);
            self.debt.fetch_add(fewer - idle, Ordering::AcqRel);
        }
        self.max_depth.store(max_depth, Ordering::Relaxed);
        self.resync
            .send_if_modified(|current| std::mem::replace(current, resync) != resync);
        self.scaled.store(scaled, Ordering::Relaxed);
    }

    pub(crate) fn apply(&self, rule: &Autoscale) {
        let (workers, max_depth, resync) = self.configured;
        self.set(
            rule.workers.unwrap_or(workers),
            rule.queue_depth.unwrap_or(max_depth),
            rule.resync.unwrap_or(resync),
            true,
        );
    }

    pub(crate) fn restore(&self) {
        let (workers, max_depth, resync) = self.configured;
        self.set(workers, max_depth, resync, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fewer_workers_wait_for_running_items_and_more_cancel_pending_retirements() {
        let tuning = Tuning::new(&crate::testing::compile_for_test("        reconcile: {workers: 2}\n"));
        let resync = Duration::from_secs(30);
        // Both workers busy, then down to one: the first slot handed back is retired.
        let (first, second) = (tuning.slot().await.unwrap(), tuning.slot().await.unwrap());
        tuning.set(1, 0, resync, true);
        assert_eq!(tuning.workers(), 1);
        drop(first);
        assert_eq!(tuning.slots.available_permits(), 0, "retired, not handed back");
        drop(second);
        assert_eq!(tuning.slots.available_permits(), 1);
        // Up to two, both busy, down to one and up to three before either finishes: the
        // pending retirement is cancelled rather than added to.
        tuning.set(2, 0, resync, true);
        let (first, second) = (tuning.slot().await.unwrap(), tuning.slot().await.unwrap());
        tuning.set(1, 0, resync, true);
        tuning.set(3, 0, resync, true);
        assert_eq!(tuning.slots.available_permits(), 1);
        drop((first, second));
        assert_eq!(tuning.slots.available_permits(), 3);
        tuning.close();
        assert!(tuning.slot().await.is_none(), "a stopped CRD hands out no slot");
    }
}
