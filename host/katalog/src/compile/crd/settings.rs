//! A compiled CRD's run settings: how a failed reconcile is retried in the worker, how the
//! queue behaves at capacity, the autoscaler's rule, and the Live API switches.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use orkestra_expr::condition::Conditions;
use orkestra_expr::template::Functions;

use super::super::{Error, conditions};

/// `queue.retryBackoff`: retries of a failed reconcile inside the worker, before the error
/// goes back to the queue's own backoff.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    pub initial: Duration,
    pub max: Duration,
    pub multiplier: f64,
    /// Retries after the first failure.
    pub attempts: u32,
}

impl RetryPolicy {
    /// Upstream's defaults: 500ms, doubling, at most 30s, 3 retries.
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        initial: Duration::from_millis(500),
        max: Duration::from_secs(30),
        multiplier: 2.0,
        attempts: 3,
    };

    pub(super) fn from_spec(spec: &crate::model::RetryBackoff) -> Result<Self, Error> {
        let parse = |key: &str, text: &Option<String>, default| match text.as_deref() {
            Some(text) => orkestra_expr::duration::parse(text).map_err(|e| Error::at(key, e)),
            None => Ok(default),
        };
        let multiplier = match spec.multiplier {
            Some(m) if m < 1.0 || !m.is_finite() => {
                return Err(Error::at("multiplier", format!("{m} must be 1 or more")));
            }
            m => m.unwrap_or(Self::DEFAULT.multiplier),
        };
        Ok(Self {
            initial: parse("initial", &spec.initial, Self::DEFAULT.initial)?,
            max: parse("max", &spec.max, Self::DEFAULT.max)?,
            multiplier,
            attempts: spec.max_attempts.unwrap_or(Self::DEFAULT.attempts),
        })
    }

    /// The wait before retry `n` (1-based).
    pub fn delay(&self, n: u32) -> Duration {
        let factor = self
            .multiplier
            .powi(i32::try_from(n.saturating_sub(1)).unwrap_or(i32::MAX));
        self.initial.mul_f64(factor.min(1e9)).min(self.max)
    }
}

/// Queue behaviour at capacity (always from the CRD-level box).
#[derive(Debug, Clone, Default)]
pub struct Behaviour {
    /// Reference depth; 0 means unlimited.
    pub max_depth: usize,
    /// At depth >= maxDepth: drop (tier 1 when `conditions` is empty; tier 2 otherwise).
    pub on_limit: Option<(bool, Conditions)>,
    /// At `percent`% of maxDepth: drop when the conditions (if any) pass.
    pub on_threshold: Option<(u32, Conditions)>,
}

/// `queue.fairness` and `queue.priority`: how a CRD's queued CRs are grouped into flows
/// served in turn, each flow's weight, and how much longer than a user's change background
/// work (resyncs, the initial list, requeues) may wait in its flow.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRules {
    pub by: FlowBy,
    /// Items served from a flow per turn, by flow name (others: 1).
    pub weights: HashMap<String, u32>,
    /// Zero: no priorities, arrival order.
    pub aging: Duration,
}

/// What puts CRs in one flow.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FlowBy {
    /// Their namespace (cluster-scoped CRs share one).
    #[default]
    Namespace,
    /// The value of this label (CRs without it share one).
    Label(String),
    /// All in one flow.
    None,
}

impl FlowBy {
    /// The flow of the CR `key`: `given` where the caller read it (a label's value).
    pub fn flow(&self, key: &str, given: Option<Arc<str>>) -> Arc<str> {
        match (self, given) {
            (_, Some(flow)) => flow,
            (FlowBy::Namespace, None) => key.split_once('/').map_or("", |(namespace, _)| namespace).into(),
            (FlowBy::Label(_) | FlowBy::None, None) => "".into(),
        }
    }
}

/// Background work waits at most this much longer than a user's change, by default.
pub const AGING: Duration = Duration::from_secs(10);
const MAX_AGING: Duration = Duration::from_secs(3600);
const MAX_WEIGHT: u32 = 100;
const MAX_WEIGHTS: usize = 1000;

impl Default for FlowRules {
    fn default() -> Self {
        Self {
            by: FlowBy::Namespace,
            weights: HashMap::new(),
            aging: AGING,
        }
    }
}

impl FlowRules {
    /// Errors name the field under `queue`.
    pub(super) fn compile(
        fairness: Option<&crate::model::Fairness>,
        priority: Option<&crate::model::QueuePriority>,
    ) -> Result<Self, Error> {
        let mut rules = FlowRules::default();
        if let Some(fairness) = fairness {
            rules.by = match fairness.by.as_deref().map(str::trim) {
                None | Some("namespace") => FlowBy::Namespace,
                Some("none") => FlowBy::None,
                Some(other) => match other.strip_prefix("label:").map(str::trim) {
                    Some(key) if orkestra_expr::names::is_label_key(key) => FlowBy::Label(key.to_string()),
                    Some(key) => {
                        return Err(Error::at("fairness.by", format!("{key:?} is not a label key")));
                    }
                    None => {
                        return Err(Error::at(
                            "fairness.by",
                            format!("{other:?} is none of namespace, label:<key>, none"),
                        ));
                    }
                },
            };
            if fairness.weights.len() > MAX_WEIGHTS {
                return Err(Error::at(
                    "fairness.weights",
                    format!("{} flows named; at most {MAX_WEIGHTS}", fairness.weights.len()),
                ));
            }
            for (flow, weight) in &fairness.weights {
                if !(1..=MAX_WEIGHT).contains(weight) {
                    return Err(Error::at(
                        format!("fairness.weights.{flow}"),
                        format!("{weight} must be between 1 and {MAX_WEIGHT}"),
                    ));
                }
            }
            rules.weights = fairness.weights.clone().into_iter().collect();
        }
        if let Some(text) = priority.and_then(|p| p.aging.as_deref()) {
            let aging = orkestra_expr::duration::parse(text).map_err(|e| Error::at("priority.aging", e))?;
            if aging > MAX_AGING {
                return Err(Error::at("priority.aging", format!("{text:?} is above 1h")));
            }
            rules.aging = aging;
        }
        Ok(rules)
    }
}

/// `runtime.autoscale`: while `conditions` hold over the CRD's live metrics (checked every
/// `interval`), its workers, queue depth limit and resync take the `do` values; once they
/// have not held for `cooldown`, the configured ones return.
#[derive(Debug, Clone)]
pub struct Autoscale {
    pub interval: Duration,
    pub cooldown: Duration,
    pub conditions: Conditions,
    pub workers: Option<usize>,
    pub queue_depth: Option<usize>,
    pub resync: Option<Duration>,
}

const AUTOSCALE_INTERVAL: Duration = Duration::from_secs(15);
const AUTOSCALE_COOLDOWN: Duration = Duration::from_secs(120);

impl Autoscale {
    pub(super) fn compile(spec: &crate::model::Autoscale, functions: &Functions) -> Result<Self, Error> {
        let duration = |key: &str, text: &Option<String>, default: Duration| match text {
            Some(text) => orkestra_expr::duration::parse(text).map_err(|e| Error::at(key, e)),
            None => Ok(default),
        };
        Ok(Self {
            interval: duration("interval", &spec.interval, AUTOSCALE_INTERVAL)?.max(Duration::from_millis(100)),
            cooldown: duration("cooldown", &spec.cooldown, AUTOSCALE_COOLDOWN)?,
            conditions: conditions(&spec.conditions.when, &spec.conditions.or, functions)
                .map_err(|e| e.within("conditions"))?,
            workers: spec.do_.workers.map(|w| (w as usize).clamp(1, 50)),
            queue_depth: spec.do_.queue_depth.map(|d| d as usize),
            resync: spec
                .do_
                .resync
                .as_ref()
                .map(|text| orkestra_expr::duration::parse(text).map_err(|e| Error::at("do.resync", e)))
                .transpose()?,
        })
    }
}

/// The per-CRD Live API switches (`endpoints: {enabled, health, info}`, each default on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    /// Off: the CRD is not in the Live API at all.
    pub enabled: bool,
    /// `/katalog/{crd}/health`.
    pub health: bool,
    /// `/katalog/{crd}` (its configuration and live figures).
    pub info: bool,
}

impl Endpoints {
    pub(super) fn of(spec: Option<&serde_json::Value>) -> Self {
        let on = |key: &str| spec.and_then(|e| e[key].as_bool()).unwrap_or(true);
        let enabled = on("enabled");
        Self {
            enabled,
            health: enabled && on("health"),
            info: enabled && on("info"),
        }
    }
}
