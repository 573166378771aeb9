//! The periodic resync of one CRD: every CR offered again once per period (background work,
//! served after users' changes), spread over the period rather than all at once.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::pipeline::observe::{Cache, Enqueue, Source, Trigger};

/// How often a share of the CRs is offered: 50,000 settled CRs offered together would hold
/// the CPU for seconds each period, and a user's change would wait behind that.
const TICK: Duration = Duration::from_millis(100);

/// Offers every CR in `cache` once per `period` (which the autoscaler may change), until the
/// period's sender is gone.
pub(super) async fn run(cache: Cache, offer: Arc<dyn Enqueue>, mut period: watch::Receiver<Duration>) {
    let mut start = 0usize;
    'periods: loop {
        // A new period (the autoscaler's) counts from when it is set.
        let wait = *period.borrow_and_update();
        let began = Instant::now();
        // Round-robin: with a bounded queue the first keys offered win, so each resync
        // starts one further along and every CR gets its turn.
        let mut keys = cache.keys();
        keys.sort();
        if !keys.is_empty() {
            start %= keys.len();
            keys.rotate_left(start);
            start += 1;
        }
        let mut offered = 0;
        for (at, count) in schedule(keys.len(), wait) {
            tokio::select! {
                () = tokio::time::sleep_until(began + at) => {}
                changed = period.changed() => match changed {
                    Ok(()) => continue 'periods,
                    Err(_) => return,
                },
            }
            for key in &keys[offered..offered + count] {
                offer.offer(Trigger::new(key.clone(), Source::Resync));
            }
            offered += count;
        }
        tokio::select! {
            () = tokio::time::sleep_until(began + wait) => {}
            changed = period.changed() => if changed.is_err() { return },
        }
        // CRs that came during the period are offered at its end, as every CR is offered
        // once a period at most a period after it was first seen.
        let known: HashSet<&str> = keys.iter().map(String::as_str).collect();
        for key in cache.keys().into_iter().filter(|k| !known.contains(k.as_str())) {
            offer.offer(Trigger::new(key, Source::Resync));
        }
    }
}

/// When, from a period's start, each share of `keys` CRs is offered, and how many: one share
/// per [`TICK`] (no more shares than CRs), the last at the period's end, so each CR is
/// offered once a period, a period after it was last.
fn schedule(keys: usize, period: Duration) -> Vec<(Duration, usize)> {
    let ticks = usize::try_from(period.as_millis() / TICK.as_millis()).unwrap_or(usize::MAX);
    let shares = ticks.clamp(1, keys.max(1));
    let (each, extra) = (keys / shares, keys % shares);
    (0..shares)
        .map(|i| {
            let at = period.mul_f64((i + 1) as f64 / shares as f64);
            (at, each + usize::from(i < extra))
        })
        .filter(|(_, count)| *count > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::pipeline::observe::Offered;

    #[tokio::test(start_paused = true)]
    async fn every_cr_is_offered_once_a_period_those_that_came_during_one_at_its_end() {
        let cache = Cache::default();
        for key in ["ns/a", "ns/b"] {
            cache.insert(key.into(), &json!({"metadata": {"name": key}}));
        }
        let offered = Arc::new(Offered::default());
        let (_period, receiver) = watch::channel(Duration::from_secs(10));
        tokio::spawn(run(cache.clone(), offered.clone(), receiver));
        // Two CRs: one at the period's half, one at its end.
        tokio::time::sleep(Duration::from_millis(5_100)).await;
        assert_eq!(*offered.0.lock(), ["ns/a"], "spread over the period");
        cache.insert("ns/c".into(), &json!({"metadata": {"name": "c"}}));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(*offered.0.lock(), ["ns/a", "ns/b", "ns/c"], "the newcomer at the end");
        // The next period starts one further along (round-robin), all three spread over it.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(offered.0.lock()[3..], ["ns/b", "ns/c", "ns/a"]);
    }

    #[test]
    fn a_period_s_crs_are_offered_in_shares_spread_over_it_each_once() {
        let period = Duration::from_secs(30);
        let shares = schedule(50_000, period);
        assert_eq!(shares.len(), 300, "one share a tick");
        assert_eq!(shares.iter().map(|(_, n)| n).sum::<usize>(), 50_000);
        assert!(shares.iter().all(|(_, n)| (166..=167).contains(n)), "even shares");
        assert_eq!(shares[0].0, Duration::from_millis(100), "none at once");
        assert_eq!(shares.last().map(|(at, _)| *at), Some(period));
        assert!(shares.windows(2).all(|w| w[0].0 < w[1].0));
        // Fewer CRs than ticks: one each, spread over the period all the same.
        let few = schedule(3, period);
        assert_eq!(
            few,
            vec![(Duration::from_secs(10), 1), (Duration::from_secs(20), 1), (period, 1)]
        );
        assert!(schedule(0, period).is_empty());
        // A period shorter than a tick: all at its end.
        assert_eq!(
            schedule(5, Duration::from_millis(20)),
            vec![(Duration::from_millis(20), 5)]
        );
    }
}
