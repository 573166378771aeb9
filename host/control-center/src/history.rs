//! A short memory of what each runtime said: one point per poll for the last hour, from
//! which the charts draw reconcile rate, error rate, queue depth and p99 latency, per
//! runtime or per CRD.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde_json::Value;

/// How far back the charts look.
pub const WINDOW: Duration = Duration::from_secs(3600);

/// One CRD at one poll.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CrdPoint {
    /// Reconciles and failed reconciles so far (counters: rates come from their deltas).
    pub total: u64,
    pub failed: u64,
    pub queue_depth: u64,
    /// p99 of the reconciles of the minute before, in milliseconds.
    pub p99_ms: u64,
}

/// One poll of one runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Seconds since the Unix epoch.
    pub at: f64,
    /// `None`: the runtime did not answer.
    pub crds: Option<BTreeMap<String, CrdPoint>>,
}

impl Point {
    /// What `/katalog` says, at `at`.
    pub fn of(at: f64, katalog: Option<&Value>) -> Self {
        let crds = katalog.map(|katalog| {
            katalog["crds"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|crd| {
                    let n = |v: &Value| v.as_u64().unwrap_or(0);
                    let point = CrdPoint {
                        total: n(&crd["reconciles"]["total"]),
                        failed: n(&crd["reconciles"]["failed"]),
                        queue_depth: n(&crd["queue"]["depth"]),
                        p99_ms: n(&crd["reconcileP99Ms"]),
                    };
                    (crd["name"].as_str().unwrap_or_default().to_string(), point)
                })
                .collect()
        });
        Self { at, crds }
    }
}

/// The points of one runtime, oldest first.
#[derive(Debug, Clone, Default)]
pub struct History {
    points: VecDeque<Point>,
}

/// The four series of a chart set, each `(time, value)`; a gap (the runtime down) is
/// `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub reconcile_rate: Vec<(f64, Option<f64>)>,
    pub error_rate: Vec<(f64, Option<f64>)>,
    pub queue_depth: Vec<(f64, Option<f64>)>,
    pub p99_ms: Vec<(f64, Option<f64>)>,
}

impl History {
    /// Adds a point, forgetting those older than [`WINDOW`].
    pub fn push(&mut self, point: Point) {
        let horizon = point.at - WINDOW.as_secs_f64();
        self.points.push_back(point);
        while self.points.front().is_some_and(|p| p.at < horizon) {
            self.points.pop_front();
        }
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Whether two answers are there to draw a line between.
    pub fn has_data(&self) -> bool {
        self.points.iter().filter(|p| p.crds.is_some()).count() > 1
    }

    /// The series of the CRDs `only` picks (every CRD: the runtime's).
    pub fn series(&self, only: Option<&str>) -> Series {
        let mut series = Series::default();
        let pick = |crds: &BTreeMap<String, CrdPoint>| -> Vec<CrdPoint> {
            crds.iter()
                .filter(|(name, _)| only.is_none_or(|o| o == name.as_str()))
                .map(|(_, p)| *p)
                .collect()
        };
        for (before, now) in self.points.iter().zip(self.points.iter().skip(1)) {
            let at = now.at;
            let (Some(then), Some(crds)) = (&before.crds, &now.crds) else {
                for list in [
                    &mut series.reconcile_rate,
                    &mut series.error_rate,
                    &mut series.queue_depth,
                    &mut series.p99_ms,
                ] {
                    list.push((at, None));
                }
                continue;
            };
            let (then, crds) = (pick(then), pick(crds));
            let delta = |f: fn(&CrdPoint) -> u64| -> u64 {
                let sum = |points: &[CrdPoint]| points.iter().map(f).sum::<u64>();
                // A restarted runtime counts from 0 again: no negative rate.
                sum(&crds).saturating_sub(sum(&then))
            };
            let (reconciled, failed) = (delta(|p| p.total), delta(|p| p.failed));
            let seconds = (now.at - before.at).max(1e-3);
            series.reconcile_rate.push((at, Some(reconciled as f64 / seconds)));
            series.error_rate.push((
                at,
                Some(if reconciled == 0 {
                    0.0
                } else {
                    failed as f64 * 100.0 / reconciled as f64
                }),
            ));
            series
                .queue_depth
                .push((at, Some(crds.iter().map(|p| p.queue_depth).sum::<u64>() as f64)));
            series
                .p99_ms
                .push((at, Some(crds.iter().map(|p| p.p99_ms).max().unwrap_or(0) as f64)));
        }
        series
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn katalog(total: u64, failed: u64, depth: u64) -> Value {
        json!({"crds": [
            {"name": "web", "reconciles": {"total": total, "failed": failed}, "queue": {"depth": depth}, "reconcileP99Ms": 40},
            {"name": "db", "reconciles": {"total": 10, "failed": 0}, "queue": {"depth": 1}, "reconcileP99Ms": 90},
        ]})
    }

    #[test]
    fn rates_come_from_deltas_and_a_down_runtime_leaves_a_gap() {
        let mut history = History::default();
        history.push(Point::of(0.0, Some(&katalog(100, 0, 2))));
        history.push(Point::of(10.0, Some(&katalog(150, 5, 4))));
        history.push(Point::of(20.0, None));
        history.push(Point::of(30.0, Some(&katalog(170, 5, 0))));
        let all = history.series(None);
        assert_eq!(all.reconcile_rate[0], (10.0, Some(5.0)), "50 reconciles in 10 s");
        assert_eq!(all.error_rate[0], (10.0, Some(10.0)), "5 of 50 failed");
        assert_eq!(all.queue_depth[0], (10.0, Some(5.0)), "both CRDs' queues");
        assert_eq!(all.p99_ms[0], (10.0, Some(90.0)), "the slowest CRD");
        assert_eq!(all.reconcile_rate[1], (20.0, None), "down: a gap");
        assert_eq!(all.reconcile_rate[2], (30.0, None));
        assert_eq!(history.series(Some("db")).p99_ms[0], (10.0, Some(90.0)));
        assert_eq!(history.series(Some("web")).queue_depth[0], (10.0, Some(4.0)));
    }

    #[test]
    fn only_the_last_hour_is_kept() {
        let mut history = History::default();
        for i in 0..500 {
            history.push(Point::of(f64::from(i) * 10.0, None));
        }
        assert_eq!(history.len(), 361);
    }
}
