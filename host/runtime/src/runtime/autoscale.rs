//! The operator autoscaler (`runtime.autoscale`). Every `interval` it reads the CRD's live
//! metrics; while its conditions hold, the CRD runs with the `do` workers, queue depth limit
//! and resync (its [`Tuning`]), and once they have not held for `cooldown` the configured
//! values return. A restart always starts from the configured values.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::outcome::counters::Counters;
use crate::pipeline::cross::Peers;
use crate::pipeline::queue::WorkQueue;
use crate::pipeline::tuning::Tuning;
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::Template;
use orkestra_katalog::compile::{Autoscale, CompiledCrd};

/// The autoscaler's decision for one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Scale,
    Restore,
}

/// When to scale and when to come back: at once when the conditions hold, after `cooldown`
/// of their not holding.
#[derive(Debug)]
pub struct Hysteresis {
    cooldown: Duration,
    held_at: Option<Instant>,
    active: bool,
}

impl Hysteresis {
    pub fn new(cooldown: Duration) -> Self {
        Self {
            cooldown,
            held_at: None,
            active: false,
        }
    }

    pub fn step(&mut self, holds: bool, now: Instant) -> Option<Step> {
        if holds {
            self.held_at = Some(now);
            return (!std::mem::replace(&mut self.active, true)).then_some(Step::Scale);
        }
        let cooled = self.held_at.is_none_or(|at| now.duration_since(at) >= self.cooldown);
        (self.active && cooled).then(|| {
            self.active = false;
            Step::Restore
        })
    }
}

/// `metrics.*` as autoscale conditions read them: the live metrics, with the error rate and
/// the p95 duration of the last minute and how busy the workers are now.
pub fn metrics(tuning: &Tuning, queue: &WorkQueue, counters: &Counters) -> Value {
    let mut metrics = crate::pipeline::feedback::live_metrics(queue, tuning, counters);
    let busy = (queue.running() * 100 / tuning.workers().max(1)).min(100);
    let recent = counters.recent(std::time::Instant::now());
    for (key, value) in [
        ("workersBusyPercent", busy as u64),
        ("workersIdlePercent", 100 - busy as u64),
        ("reconcileDurationP95Ms", recent.p95_ms),
        ("errorRatePercent", recent.error_rate_percent),
    ] {
        metrics[key] = json!(value);
    }
    metrics
}

/// Runs the autoscaler of one CRD until dropped.
pub async fn run(
    crd: Arc<CompiledCrd>,
    rule: Autoscale,
    tuning: Arc<Tuning>,
    queue: WorkQueue,
    counters: Arc<Counters>,
    peers: Peers,
) {
    let notes: &[Template] = &crd.notes;
    let mut tick = tokio::time::interval(rule.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut hysteresis = Hysteresis::new(rule.cooldown);
    loop {
        tick.tick().await;
        let live = metrics(&tuning, &queue, &counters);
        let subject = Value::Null;
        let mut resolver = Resolver::new(&subject, notes);
        resolver.set("metrics", live.clone());
        // Siblings of the same runtime by CRD name (`cross.loader.metrics.queueDepth`).
        resolver.set("cross", peers.all_metrics());
        let holds = rule.conditions.passes(&resolver, None);
        match hysteresis.step(holds, Instant::now()) {
            Some(Step::Scale) => {
                tuning.apply(&rule);
                tracing::info!(workers = tuning.workers(), queue_depth = tuning.max_depth(), resync = ?*tuning.resync().borrow(), metrics = %live, "autoscale: conditions hold, scaled");
            }
            Some(Step::Restore) => {
                tuning.restore();
                tracing::info!(
                    workers = tuning.workers(),
                    "autoscale: cooled down, configured values back"
                );
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_scales_at_once_and_comes_back_only_after_the_cooldown() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut hysteresis = Hysteresis::new(Duration::from_secs(60));
        assert_eq!(hysteresis.step(false, at(0)), None, "nothing to restore yet");
        assert_eq!(hysteresis.step(true, at(15)), Some(Step::Scale));
        assert_eq!(hysteresis.step(true, at(30)), None, "already scaled");
        assert_eq!(hysteresis.step(false, at(45)), None, "cooling down");
        assert_eq!(
            hysteresis.step(true, at(60)),
            None,
            "held again: the cooldown starts over"
        );
        assert_eq!(hysteresis.step(false, at(100)), None);
        assert_eq!(hysteresis.step(false, at(120)), Some(Step::Restore));
        assert_eq!(hysteresis.step(false, at(135)), None);
    }
}
