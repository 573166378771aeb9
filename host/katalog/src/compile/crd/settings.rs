//! A compiled CRD's run settings: how a failed reconcile is retried in the worker, how the
//! queue behaves at capacity, the autoscaler's rule, and the Live API switches.

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
