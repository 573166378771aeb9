//! Write budgets: what a CR that never settles may cost the API server. Every write a
//! reconcile makes (status, metadata, children, Events, a component's kube writes) is counted
//! ([`Meter`]) and charged to the CR's bucket (a burst, refilled at a steady rate); a CR
//! whose bucket is empty waits, its next reconcile held back until the bucket can pay for a
//! write. A CR that has spent half its burst is hot: it also draws on the CRD's shared pool,
//! so many hot CRs of one tenant together stay within the pool's rate, while a CR that
//! settles never comes near either and costs nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A burst and the rate it refills at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub burst: f64,
    pub per_second: f64,
}

/// Per CR: 60 writes at once, then five a second (a CR changed every second, with a child,
/// its status and an Event to write each time, never waits).
pub const PER_CR: Rate = Rate {
    burst: 60.0,
    per_second: 5.0,
};
/// Per CRD, shared by its hot CRs: 300 at once, then 50 a second.
pub const HOT_POOL: Rate = Rate {
    burst: 300.0,
    per_second: 50.0,
};

/// Tokens at an instant; refilled at a [`Rate`] as it is used.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    pub(crate) fn full(rate: Rate, now: Instant) -> Self {
        Self {
            tokens: rate.burst,
            at: now,
        }
    }

    fn refill(&mut self, rate: Rate, now: Instant) {
        let earned = now.saturating_duration_since(self.at).as_secs_f64() * rate.per_second;
        self.tokens = (self.tokens + earned).min(rate.burst);
        self.at = now;
    }

    /// Takes a token now, in debt if there is none: how long until the debt is paid (the
    /// time to wait before acting on the token).
    pub(crate) fn reserve(&mut self, rate: Rate, now: Instant) -> Duration {
        self.refill(rate, now);
        self.tokens -= 1.0;
        match self.tokens < 0.0 {
            true => Duration::from_secs_f64(-self.tokens / rate.per_second),
            false => Duration::ZERO,
        }
    }

    /// Whether it holds its whole burst (nothing to remember).
    pub(crate) fn is_full(&self, rate: Rate, now: Instant) -> bool {
        let mut refilled = *self;
        refilled.refill(rate, now);
        refilled.tokens >= rate.burst
    }

    /// How long until it holds one token.
    fn wait(&self, rate: Rate) -> Option<Duration> {
        (self.tokens < 1.0).then(|| Duration::from_secs_f64((1.0 - self.tokens) / rate.per_second))
    }
}

/// The write budgets of one CRD's CRs.
#[derive(Debug)]
pub struct WriteBudget {
    per_cr: Rate,
    pool_rate: Rate,
    crs: Mutex<HashMap<String, Bucket>>,
    pool: Mutex<Bucket>,
}

impl Default for WriteBudget {
    fn default() -> Self {
        Self::new(PER_CR, HOT_POOL)
    }
}

impl WriteBudget {
    pub fn new(per_cr: Rate, pool: Rate) -> Self {
        Self {
            per_cr,
            pool_rate: pool,
            crs: Mutex::default(),
            pool: Mutex::new(Bucket::full(pool, Instant::now())),
        }
    }

    /// Whether `key` may reconcile now, or how long it must wait for its budget.
    pub fn admit(&self, key: &str) -> Result<(), Duration> {
        self.admit_at(key, Instant::now())
    }

    fn admit_at(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let mut crs = self.crs.lock();
        let Some(bucket) = crs.get_mut(key) else {
            return Ok(());
        };
        bucket.refill(self.per_cr, now);
        if bucket.tokens >= self.per_cr.burst {
            // Settled: nothing to remember.
            crs.remove(key);
            return Ok(());
        }
        if let Some(wait) = bucket.wait(self.per_cr) {
            return Err(wait);
        }
        if self.hot(bucket) {
            let mut pool = self.pool.lock();
            pool.refill(self.pool_rate, now);
            if let Some(wait) = pool.wait(self.pool_rate) {
                return Err(wait);
            }
        }
        Ok(())
    }

    fn hot(&self, bucket: &Bucket) -> bool {
        bucket.tokens < self.per_cr.burst / 2.0
    }

    /// Charges `writes` to `key` (and to the pool while it is hot).
    pub fn charge(&self, key: &str, writes: u32) {
        self.charge_at(key, writes, Instant::now());
    }

    fn charge_at(&self, key: &str, writes: u32, now: Instant) {
        if writes == 0 {
            return;
        }
        let mut crs = self.crs.lock();
        let bucket = crs
            .entry(key.to_string())
            .or_insert_with(|| Bucket::full(self.per_cr, now));
        bucket.refill(self.per_cr, now);
        bucket.tokens -= f64::from(writes);
        if self.hot(bucket) {
            let mut pool = self.pool.lock();
            pool.refill(self.pool_rate, now);
            pool.tokens -= f64::from(writes);
        }
    }

    /// Forgets `key` (its CR is gone).
    pub fn forget(&self, key: &str) {
        self.crs.lock().remove(key);
    }

    /// CRs with budget spent (for `/metrics` and tests).
    pub fn tracked(&self) -> usize {
        self.crs.lock().len()
    }
}

/// Counts the writes of one reconcile. Set around it by the Kordinator; every write site
/// calls [`count`], which finds it through the task.
#[derive(Debug, Clone, Default)]
pub struct Meter(Arc<AtomicU32>);

impl Meter {
    pub fn writes(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    pub fn add(&self, writes: u32) {
        self.0.fetch_add(writes, Ordering::Relaxed);
    }

    /// Runs `work` with this meter counting its writes.
    pub async fn measure<T>(&self, work: impl Future<Output = T>) -> T {
        METER.scope(self.clone(), work).await
    }

    /// The meter of the reconcile this task runs, if any.
    pub fn current() -> Option<Meter> {
        METER.try_with(Clone::clone).ok()
    }
}

tokio::task_local! {
    static METER: Meter;
}

/// One write, counted against the reconcile this task runs (no-op outside one).
pub fn count() {
    if let Some(meter) = Meter::current() {
        meter.add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Rate = Rate {
        burst: 4.0,
        per_second: 1.0,
    };

    #[test]
    fn a_settled_cr_is_never_held_and_one_that_keeps_writing_is_held_to_the_rate() {
        let budget = WriteBudget::new(SMALL, HOT_POOL);
        let start = Instant::now();
        assert!(budget.admit_at("a", start).is_ok(), "never charged");
        budget.charge_at("a", 3, start);
        assert!(budget.admit_at("a", start).is_ok(), "one token left");
        budget.charge_at("a", 3, start);
        let wait = budget.admit_at("a", start).unwrap_err();
        assert_eq!(wait, Duration::from_secs(3), "2 tokens short at one a second");
        assert!(budget.admit_at("a", start + Duration::from_secs(3)).is_ok());
        assert!(budget.admit_at("b", start).is_ok(), "another CR is not affected");
        // Refilled to its burst, it is forgotten.
        assert!(budget.admit_at("a", start + Duration::from_secs(60)).is_ok());
        assert_eq!(budget.tracked(), 0);
    }

    #[test]
    fn hot_crs_share_the_pool() {
        let pool = Rate {
            burst: 10.0,
            per_second: 2.0,
        };
        let budget = WriteBudget::new(
            Rate {
                burst: 100.0,
                per_second: 100.0,
            },
            pool,
        );
        let start = Instant::now();
        // Each CR spends more than half its burst at once: hot, and the pool pays too.
        for key in ["a", "b"] {
            budget.charge_at(key, 60, start);
        }
        let wait = budget.admit_at("a", start).unwrap_err();
        assert!(wait > Duration::from_secs(50), "{wait:?}: the pool is 110 short");
        budget.charge_at("cold", 10, start);
        assert!(
            budget.admit_at("cold", start).is_ok(),
            "a CR that is not hot does not wait on the pool"
        );
    }

    #[tokio::test]
    async fn a_meter_counts_the_writes_of_its_own_task_only() {
        let meter = Meter::default();
        count();
        meter
            .measure(async {
                count();
                count();
            })
            .await;
        assert_eq!(meter.writes(), 2);
    }
}
