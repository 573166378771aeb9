//! Health of one CRD: reconcile outcomes in, a state out (pending, started, healthy,
//! degraded, gated), with the counters the Live API and the `.health` resolver key show.
//!
//! Pure: a state and one step function; the runtime feeds it events.

use serde::Serialize;

/// Where a CRD stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum State {
    /// Not started: waiting for its CRD, its dependencies, or start-up.
    Pending,
    /// Workers running, no successful reconcile yet.
    Started,
    /// The last reconcile succeeded (or failures stay under the threshold).
    Healthy,
    /// `failureThreshold` reconciles in a row failed, or the CRD disappeared.
    Degraded,
    /// The reconcile gate held back the last item: idle by design, not failing.
    Gated,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Started,
    Succeeded,
    Failed(String),
    Gated,
    /// The CRD (the API resource) is gone from the cluster.
    Disappeared,
}

/// The health record of one CRD.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub state: State,
    pub consecutive_fails: u32,
    pub total_reconciles: u64,
    pub failed_reconciles: u64,
    /// Kept after recovery, as upstream does.
    pub last_error: Option<String>,
    pub failure_threshold: u32,
}

impl Health {
    pub fn new(failure_threshold: u32) -> Self {
        Self {
            state: State::Pending,
            consecutive_fails: 0,
            total_reconciles: 0,
            failed_reconciles: 0,
            last_error: None,
            failure_threshold: failure_threshold.max(1),
        }
    }

    /// Healthy for dependents: at least one successful reconcile and no failure since.
    /// (A dependency with no CRs never gets there: depend on it as `started`.)
    pub fn is_healthy(&self) -> bool {
        matches!(self.state, State::Healthy | State::Gated) && self.consecutive_fails == 0 && self.total_reconciles > 0
    }

    /// Started for dependents: workers are running.
    pub fn is_started(&self) -> bool {
        self.state != State::Pending
    }

    /// The next record after `event`.
    pub fn step(&self, event: Event) -> Health {
        let mut next = self.clone();
        match event {
            Event::Started => next.state = State::Started,
            Event::Succeeded => {
                next.state = State::Healthy;
                next.consecutive_fails = 0;
                next.total_reconciles += 1;
            }
            Event::Failed(error) => {
                next.consecutive_fails += 1;
                next.total_reconciles += 1;
                next.failed_reconciles += 1;
                next.last_error = Some(error);
                if next.consecutive_fails >= next.failure_threshold {
                    next.state = State::Degraded;
                }
            }
            Event::Gated => {
                if self.state != State::Degraded {
                    next.state = State::Gated;
                }
            }
            Event::Disappeared => next.state = State::Degraded,
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(threshold: u32, events: &[Event]) -> Health {
        events.iter().fold(Health::new(threshold), |h, e| h.step(e.clone()))
    }

    #[test]
    fn states_follow_the_documented_transitions() {
        let fail = || Event::Failed("boom".into());
        let table: &[(&[Event], State, u32)] = &[
            (&[], State::Pending, 0),
            (&[Event::Started], State::Started, 0),
            (&[Event::Started, Event::Succeeded], State::Healthy, 0),
            (&[Event::Started, fail(), fail()], State::Started, 2),
            (&[Event::Started, fail(), fail(), fail()], State::Degraded, 3),
            (
                &[Event::Started, fail(), fail(), fail(), Event::Succeeded],
                State::Healthy,
                0,
            ),
            (&[Event::Started, Event::Succeeded, Event::Gated], State::Gated, 0),
            (&[Event::Started, Event::Gated, Event::Succeeded], State::Healthy, 0),
            (
                &[Event::Started, fail(), fail(), fail(), Event::Gated],
                State::Degraded,
                3,
            ),
            (
                &[Event::Started, Event::Succeeded, Event::Disappeared],
                State::Degraded,
                0,
            ),
        ];
        for (events, state, fails) in table {
            let health = run(3, events);
            assert_eq!((health.state, health.consecutive_fails), (*state, *fails), "{events:?}");
        }
    }

    #[test]
    fn counters_and_last_error_are_kept() {
        let health = run(5, &[Event::Started, Event::Failed("first".into()), Event::Succeeded]);
        assert_eq!((health.total_reconciles, health.failed_reconciles), (2, 1));
        assert_eq!(health.last_error.as_deref(), Some("first"), "kept after recovery");
        assert!(health.is_healthy() && health.is_started());
        assert!(!Health::new(5).is_started());
        assert!(!run(1, &[Event::Started, Event::Failed("x".into())]).is_healthy());
    }
}

/// The health of every CRD of a runtime, shared by the Kordinators (writers), dependents
/// waiting on `dependsOn`, and readers such as the Live API.
#[derive(Debug, Clone, Default)]
pub struct HealthBoard {
    records: std::sync::Arc<std::sync::RwLock<std::collections::BTreeMap<String, Health>>>,
    changed: std::sync::Arc<tokio::sync::Notify>,
}

impl HealthBoard {
    /// Registers a CRD as pending.
    pub fn register(&self, crd: &str, failure_threshold: u32) {
        self.write().insert(crd.to_string(), Health::new(failure_threshold));
        self.changed.notify_waiters();
    }

    /// Applies an event to a CRD's record.
    pub fn record(&self, crd: &str, event: Event) {
        let mut records = self.write();
        if let Some(health) = records.get_mut(crd) {
            let next = health.step(event);
            let changed = next.state != health.state;
            *health = next;
            drop(records);
            if changed {
                self.changed.notify_waiters();
            }
        }
    }

    pub fn get(&self, crd: &str) -> Option<Health> {
        self.records
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(crd)
            .cloned()
    }

    /// Every record, by CRD name.
    pub fn all(&self) -> std::collections::BTreeMap<String, Health> {
        self.records
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Resolves at the next state change.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, std::collections::BTreeMap<String, Health>> {
        self.records.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
