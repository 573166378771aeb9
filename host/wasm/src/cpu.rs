//! Guest CPU per tenant (`spec.tenants.wasmCpu`): every call's guest code runs in slices
//! between epoch ticks, and each slice is charged to its tenant's bucket of CPU time, which
//! refills at the tenant's rate (cores) and holds one second of it. A tenant past its
//! bucket has its calls wait at their next yield until it refills, so guests that compute
//! without end (within their timeouts, sixteen at a time) take their tenant's share of the
//! machine and leave the rest to every other tenant and to the runtime itself.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

/// Tenants remembered before the full ones (quiet long enough) are forgotten.
const KEPT: usize = 1024;

#[derive(Debug)]
struct Bucket {
    /// CPU time it may still spend, in seconds (below zero: owed).
    left: f64,
    at: Instant,
    /// What its calls used and waited, in all.
    used: f64,
    waited: f64,
}

/// One call's CPU time since it was last charged: what it ran before it last waited
/// (`accrued`), and since it last ran on (`resumed`). Time it waits (a kube call or file read
/// pending on I/O, a clock sleep, a yield to the async runtime) is not its CPU; host work it
/// causes without waiting (its imports, lowering its arguments) is.
#[derive(Debug)]
pub struct CpuClock {
    base: Instant,
    /// Nanoseconds after `base`.
    resumed: AtomicU64,
    accrued: AtomicU64,
}

impl Default for CpuClock {
    fn default() -> Self {
        Self {
            base: Instant::now(),
            resumed: AtomicU64::new(0),
            accrued: AtomicU64::new(0),
        }
    }
}

impl CpuClock {
    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    /// The call runs again from now.
    pub fn mark(&self) {
        self.resumed.store(self.nanos(Instant::now()), Ordering::Relaxed);
    }

    /// The call waits from now: what it ran since it resumed is kept.
    pub fn pause(&self) {
        let now = self.nanos(Instant::now());
        let ran = now.saturating_sub(self.resumed.load(Ordering::Relaxed));
        self.accrued.fetch_add(ran, Ordering::Relaxed);
        self.resumed.store(now, Ordering::Relaxed);
    }

    /// Its code's time since it was last charged, up to `now`; charged now.
    pub fn take(&self, now: Instant) -> Duration {
        let now = self.nanos(now);
        let ran = now.saturating_sub(self.resumed.swap(now, Ordering::Relaxed));
        Duration::from_nanos(self.accrued.swap(0, Ordering::Relaxed).saturating_add(ran))
    }
}

/// Runs `call` with `clock` running only while it is polled. Metering at the poll, not at
/// every crossing between guest and host (wasmtime's call hooks), takes two clock reads per
/// wait instead of two per import and per argument allocation: on a fresh instance's call
/// that is most of the accounting's cost, and only waits need leaving out.
pub async fn metered<F: Future>(clock: &CpuClock, call: F) -> F::Output {
    let mut call = std::pin::pin!(call);
    std::future::poll_fn(|cx| {
        clock.mark();
        let polled = call.as_mut().poll(cx);
        if polled.is_pending() {
            clock.pause();
        }
        polled
    })
    .await
}

/// Every tenant's bucket of guest CPU.
#[derive(Debug, Default)]
pub(crate) struct TenantCpu {
    buckets: Mutex<HashMap<Arc<str>, Bucket>>,
}

/// What one tenant's guests used and waited for CPU, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct CpuUse {
    pub used: f64,
    pub waited: f64,
}

impl TenantCpu {
    fn buckets(&self) -> MutexGuard<'_, HashMap<Arc<str>, Bucket>> {
        self.buckets.lock()
    }

    /// Charges `spent` of guest CPU to `tenant`, whose rate is `cores`: how long its call
    /// should wait before it runs on (zero while the tenant is within its share).
    pub(crate) fn charge(&self, tenant: &Arc<str>, spent: Duration, cores: f64, now: Instant) -> Duration {
        let cores = cores.max(0.001);
        let mut buckets = self.buckets();
        if buckets.len() >= KEPT && !buckets.contains_key(tenant) {
            buckets.retain(|_, b| b.left < cores);
        }
        let bucket = buckets.entry(tenant.clone()).or_insert(Bucket {
            left: cores,
            at: now,
            used: 0.0,
            waited: 0.0,
        });
        let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * cores;
        bucket.left = (bucket.left + refill).min(cores) - spent.as_secs_f64();
        bucket.at = now;
        bucket.used += spent.as_secs_f64();
        if bucket.left >= 0.0 {
            return Duration::ZERO;
        }
        // Until what it owes is paid back: every call of the tenant waits that long, so
        // however many compute at once, together they get its rate.
        let wait = Duration::from_secs_f64(-bucket.left / cores);
        bucket.waited += wait.as_secs_f64();
        wait
    }

    /// What each tenant's guests used and waited, most used first.
    pub(crate) fn usage(&self) -> Vec<(String, CpuUse)> {
        let buckets = self.buckets();
        let mut usage: Vec<(String, CpuUse)> = buckets
            .iter()
            .map(|(tenant, b)| {
                (
                    tenant.to_string(),
                    CpuUse {
                        used: b.used,
                        waited: b.waited,
                    },
                )
            })
            .collect();
        usage.sort_by(|a, b| b.1.used.total_cmp(&a.1.used).then(a.0.cmp(&b.0)));
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_spends_its_second_of_cpu_then_waits_for_its_rate_and_another_does_not() {
        let cpu = TenantCpu::default();
        let (noisy, quiet): (Arc<str>, Arc<str>) = ("noisy".into(), "quiet".into());
        let start = Instant::now();
        let slice = Duration::from_millis(10);
        // Computing without a pause at half a core's rate: its half second in hand lasts a
        // second, then it owes.
        let mut waited = Duration::ZERO;
        for i in 0..200 {
            waited += cpu.charge(&noisy, slice, 0.5, start + slice * i);
        }
        assert!(waited > Duration::from_millis(400), "{waited:?}");
        assert_eq!(cpu.charge(&quiet, slice, 0.5, start), Duration::ZERO, "another tenant");
        // Idle long enough, its bucket is full again.
        let later = start + Duration::from_secs(10);
        assert_eq!(cpu.charge(&noisy, slice, 0.5, later), Duration::ZERO);
        let usage = cpu.usage();
        assert_eq!(usage[0].0, "noisy");
        assert!((usage[0].1.used - 2.01).abs() < 1e-6, "{usage:?}");
        assert!(usage[0].1.waited > 0.4, "{usage:?}");
    }

    #[test]
    fn time_in_host_calls_is_not_the_guests() {
        let clock = CpuClock::default();
        clock.mark();
        std::thread::sleep(Duration::from_millis(20));
        clock.pause();
        // A host call of 200 ms.
        std::thread::sleep(Duration::from_millis(200));
        clock.mark();
        std::thread::sleep(Duration::from_millis(20));
        let spent = clock.take(Instant::now());
        assert!(spent >= Duration::from_millis(40), "{spent:?}");
        assert!(spent < Duration::from_millis(150), "the host call counted: {spent:?}");
        assert!(clock.take(Instant::now()) < Duration::from_millis(5), "charged once");
    }

    /// Busy for `time`, as a guest computing is.
    fn spin(time: Duration) {
        let until = Instant::now() + time;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    #[tokio::test]
    async fn a_metered_call_is_charged_for_its_work_and_not_its_waits() {
        let clock = CpuClock::default();
        metered(&clock, async {
            spin(Duration::from_millis(20));
            // A host call pending on I/O.
            tokio::time::sleep(Duration::from_millis(200)).await;
            spin(Duration::from_millis(20));
        })
        .await;
        let spent = clock.take(Instant::now());
        assert!(spent >= Duration::from_millis(40), "{spent:?}");
        assert!(spent < Duration::from_millis(150), "the wait counted: {spent:?}");
    }
}
