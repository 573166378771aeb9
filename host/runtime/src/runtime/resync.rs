//! The periodic resync of one CRD: every CR offered again once per period (background work,
//! served after users' changes), spread over the period rather than all at once.

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
        let shares = schedule(keys.len(), wait);
        let mut keys = keys.into_iter();
        for (at, count) in shares {
            tokio::select! {
                () = tokio::time::sleep_until(began + at) => {}
                changed = period.changed() => match changed {
                    Ok(()) => continue 'periods,
                    Err(_) => return,
                },
            }
            for key in keys.by_ref().take(count) {
                offer.offer(Trigger::new(key, Source::Resync));
            }
        }
        tokio::select! {
            () = tokio::time::sleep_until(began + wait) => {}
            changed = period.changed() => if changed.is_err() { return },
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
    use super::*;

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
