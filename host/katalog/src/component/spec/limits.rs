//! A component's per-call limits (`limits`), checked against the most the host allows.

use std::time::Duration;

use crate::error::Error;
use crate::model::ComponentLimits;

/// Per-call limits: what one call may use, and what the host spends on its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Wall-clock time of one call, host calls included.
    pub timeout: Duration,
    /// Bytes of all the instance's linear memories and tables together.
    pub memory: usize,
    /// Bytes of what one call returns (resources, status, events).
    pub result_size: usize,
    /// Kube calls per call; each page of a list counts.
    pub kube_calls: u32,
    /// Bytes of objects the kube interface hands the guest per call.
    pub kube_bytes: usize,
    /// Child resources per call.
    pub children: usize,
    /// Events per call.
    pub events: usize,
    /// Log bytes per call, each line costing its text plus what the host adds to it.
    pub log_bytes: usize,
    /// Time the host may spend applying what one call returned.
    pub apply_timeout: Duration,
    /// Fuel one call may burn (`None`: unmetered).
    pub fuel: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(2),
            memory: 64 << 20,
            result_size: 1 << 20,
            kube_calls: 50,
            kube_bytes: 4 << 20,
            children: 100,
            events: 10,
            log_bytes: 64 << 10,
            apply_timeout: Duration::from_secs(30),
            fuel: None,
        }
    }
}

/// Upper bounds a Katalog cannot exceed: the pool reserves memory slots of this size.
pub const MAX_MEMORY: usize = 1 << 30;
const MAX_TIMEOUT: Duration = Duration::from_secs(300);
const MAX_CHILDREN: u32 = 1000;
const MAX_EVENTS: u32 = 100;
const MAX_KUBE_CALLS: u32 = 10_000;

impl Limits {
    pub(super) fn compile(spec: &ComponentLimits) -> Result<Self, Error> {
        let mut limits = Limits::default();
        let duration = |field: &str, text: &str| -> Result<Duration, Error> {
            let value = orkestra_expr::duration::parse(text)
                .map_err(|e| Error::ComponentSpec(format!("limits.{field}: {e}")))?;
            if value.is_zero() || value > MAX_TIMEOUT {
                return Err(Error::ComponentSpec(format!(
                    "limits.{field}: {text:?} must be above 0 and at most 5m"
                )));
            }
            Ok(value)
        };
        let bytes = |field: &str, text: &str, max: usize| -> Result<usize, Error> {
            let n = orkestra_expr::template::funcs::quantity::parse(text)
                .map_err(|e| Error::ComponentSpec(format!("limits.{field}: {e}")))?;
            if !(n >= 1.0 && n <= max as f64) {
                return Err(Error::ComponentSpec(format!(
                    "limits.{field}: {text:?} must be between 1 and {max} bytes"
                )));
            }
            Ok(n as usize)
        };
        let count = |field: &str, n: u32, max: u32| -> Result<usize, Error> {
            if n > max {
                return Err(Error::ComponentSpec(format!(
                    "limits.{field}: {n} is above the most a call may have, {max}"
                )));
            }
            Ok(n as usize)
        };
        if let Some(text) = &spec.timeout {
            limits.timeout = duration("timeout", text)?;
        }
        if let Some(text) = &spec.memory {
            limits.memory = bytes("memory", text, MAX_MEMORY)?;
        }
        if let Some(text) = &spec.result_size {
            limits.result_size = bytes("resultSize", text, 64 << 20)?;
        }
        if let Some(calls) = spec.kube_calls {
            limits.kube_calls = count("kubeCalls", calls, MAX_KUBE_CALLS)? as u32;
        }
        if let Some(text) = &spec.kube_bytes {
            limits.kube_bytes = bytes("kubeBytes", text, 256 << 20)?;
        }
        if let Some(n) = spec.children {
            limits.children = count("children", n, MAX_CHILDREN)?;
        }
        if let Some(n) = spec.events {
            limits.events = count("events", n, MAX_EVENTS)?;
        }
        if let Some(text) = &spec.log_bytes {
            limits.log_bytes = bytes("logBytes", text, 16 << 20)?;
        }
        if let Some(text) = &spec.apply_timeout {
            limits.apply_timeout = duration("applyTimeout", text)?;
        }
        if let Some(fuel) = spec.fuel {
            if fuel == 0 {
                return Err(Error::ComponentSpec(
                    "limits.fuel: 0 would stop the first instruction; give at least 1".into(),
                ));
            }
            limits.fuel = Some(fuel);
        }
        Ok(limits)
    }
}
