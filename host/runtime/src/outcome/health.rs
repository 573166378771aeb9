//! Health of one CRD: reconcile outcomes in, a state out (pending, started, healthy,
//! degraded, gated), with the counters the Live API and the `.health` resolver key show.
//!
//! Pure: a state and one step function; the runtime feeds it events.

use serde::Serialize;

use orkestra_katalog::FailureThreshold;

/// How many of the latest reconciles a rate threshold looks at, and how many it needs.
const RATE_WINDOW: u32 = 20;
const RATE_MINIMUM: u32 = 4;

/// Where a CRD stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum State {
    /// Not started: waiting for its CRD, its dependencies, or start-up.
    Pending,
    /// Workers running, no successful reconcile yet (or, with `healthyWhen: childrenReady`,
    /// some CR's children are not ready yet).
    Started,
    /// The last reconcile succeeded (or failures stay under the threshold).
    Healthy,
    /// `failureThreshold` reconciles in a row failed, or the CRD disappeared.
    Degraded,
    /// The reconcile gate held back the last item: idle by design, not failing.
    Gated,
}

impl State {
    pub const ALL: [State; 5] = [
        State::Pending,
        State::Started,
        State::Healthy,
        State::Degraded,
        State::Gated,
    ];

    /// As the Live API and `/metrics` write it.
    pub fn label(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Started => "started",
            State::Healthy => "healthy",
            State::Degraded => "degraded",
            State::Gated => "gated",
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Started,
    /// A reconcile of CR `key` succeeded; `waiting` says which of its children is not ready
    /// yet, when its CRD waits for them (else `None`, as for a CR deleted or gone).
    Succeeded {
        key: String,
        waiting: Option<String>,
    },
    Failed(String),
    Gated,
    /// The CRD (the API resource) is gone from the cluster.
    Disappeared,
}

/// The health record of one CRD.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub state: State,
    pub consecutive_fails: u32,
    pub total_reconciles: u64,
    pub failed_reconciles: u64,
    /// Kept after recovery, as upstream does.
    pub last_error: Option<String>,
    pub failure_threshold: FailureThreshold,
    /// The latest outcomes, newest in bit 0 (1: failed), and how many of them are known.
    #[serde(skip)]
    recent: (u32, u32),
    /// CRs whose children are not all ready, with the first holdout of each.
    #[serde(skip)]
    pub waiting: std::collections::BTreeMap<String, String>,
}

impl Health {
    pub fn new(failure_threshold: FailureThreshold) -> Self {
        Self {
            state: State::Pending,
            consecutive_fails: 0,
            total_reconciles: 0,
            failed_reconciles: 0,
            last_error: None,
            failure_threshold: match failure_threshold {
                FailureThreshold::InARow(n) => FailureThreshold::InARow(n.max(1)),
                rate => rate,
            },
            recent: (0, 0),
            waiting: Default::default(),
        }
    }

    /// Healthy for dependents: at least one successful reconcile, no failure since, and no
    /// CR waiting for its children. (A dependency with no CRs never gets there: depend on it
    /// as `started`.)
    pub fn is_healthy(&self) -> bool {
        matches!(self.state, State::Healthy | State::Gated)
            && self.consecutive_fails == 0
            && self.total_reconciles > 0
            && self.waiting.is_empty()
    }

    /// Why the CRD is not healthy though it reconciles: one CR's first unready child, and
    /// how many CRs wait.
    pub fn waiting_for(&self) -> Option<String> {
        let (key, why) = self.waiting.iter().next()?;
        Some(match self.waiting.len() {
            1 => format!("{key} waits for {why}"),
            n => format!("{key} waits for {why} ({} more custom resources wait)", n - 1),
        })
    }

    /// Started for dependents: workers are running.
    pub fn is_started(&self) -> bool {
        self.state != State::Pending
    }

    fn remember(&mut self, failed: bool) {
        let (bits, known) = self.recent;
        let mask = (1u32 << RATE_WINDOW) - 1;
        self.recent = (((bits << 1) | u32::from(failed)) & mask, (known + 1).min(RATE_WINDOW));
    }

    /// Whether the failures so far reach `failureThreshold`.
    fn over_threshold(&self) -> bool {
        match self.failure_threshold {
            FailureThreshold::InARow(n) => self.consecutive_fails >= n,
            FailureThreshold::Rate(rate) => {
                let (bits, known) = self.recent;
                known >= RATE_MINIMUM && f64::from(bits.count_ones()) / f64::from(known) >= rate
            }
        }
    }

    /// The next record after `event`.
    pub fn step(&self, event: Event) -> Health {
        let mut next = self.clone();
        match event {
            // A CRD's workers may finish reconciles while its list still runs: what they
            // said stands.
            Event::Started if self.state == State::Pending => next.state = State::Started,
            Event::Started => {}
            Event::Succeeded { key, waiting } => {
                match waiting {
                    Some(why) => next.waiting.insert(key, why),
                    None => next.waiting.remove(&key),
                };
                next.state = match next.waiting.is_empty() {
                    true => State::Healthy,
                    false => State::Started,
                };
                next.consecutive_fails = 0;
                next.total_reconciles += 1;
                next.remember(false);
            }

            Event::Failed(error) => {
                next.consecutive_fails += 1;
                next.total_reconciles += 1;
                next.failed_reconciles += 1;
                next.last_error = Some(error);
                next.remember(true);
                if next.over_threshold() {
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
        events
            .iter()
            .fold(Health::new(FailureThreshold::InARow(threshold)), |h, e| {
                h.step(e.clone())
            })
    }

    fn ok(key: &str) -> Event {
        Event::Succeeded {
            key: key.into(),
            waiting: None,
        }
    }

    fn waits(key: &str) -> Event {
        Event::Succeeded {
            key: key.into(),
            waiting: Some("Deployment web: 0 of 1 replicas available".into()),
        }
    }

    #[test]
    fn states_follow_the_documented_transitions() {
        let fail = || Event::Failed("boom".into());
        let table: &[(&[Event], State, u32)] = &[
            (&[], State::Pending, 0),
            (&[Event::Started], State::Started, 0),
            (&[Event::Started, ok("a")], State::Healthy, 0),
            (&[Event::Started, fail(), fail()], State::Started, 2),
            (&[Event::Started, fail(), fail(), fail()], State::Degraded, 3),
            (&[Event::Started, fail(), fail(), fail(), ok("a")], State::Healthy, 0),
            (&[Event::Started, ok("a"), Event::Gated], State::Gated, 0),
            (&[Event::Started, Event::Gated, ok("a")], State::Healthy, 0),
            (
                &[Event::Started, fail(), fail(), fail(), Event::Gated],
                State::Degraded,
                3,
            ),
            (&[Event::Started, ok("a"), Event::Disappeared], State::Degraded, 0),
            // Workers that ran while the CRs listed: the list's end keeps what they said.
            (&[ok("a"), Event::Started], State::Healthy, 0),
            (&[Event::Gated, Event::Started], State::Gated, 0),
            (&[fail(), fail(), fail(), Event::Started], State::Degraded, 3),
        ];
        for (events, state, fails) in table {
            let health = run(3, events);
            assert_eq!((health.state, health.consecutive_fails), (*state, *fails), "{events:?}");
        }
    }

    #[test]
    fn counters_and_last_error_are_kept() {
        let health = run(5, &[Event::Started, Event::Failed("first".into()), ok("a")]);
        assert_eq!((health.total_reconciles, health.failed_reconciles), (2, 1));
        assert_eq!(health.last_error.as_deref(), Some("first"), "kept after recovery");
        assert!(health.is_healthy() && health.is_started());
        assert!(!Health::new(FailureThreshold::InARow(5)).is_started());
        assert!(!run(1, &[Event::Started, Event::Failed("x".into())]).is_healthy());
    }

    #[test]
    fn a_rate_threshold_degrades_on_the_share_of_recent_failures_not_on_a_streak() {
        let fail = || Event::Failed("x".into());
        let half = |events: &[Event]| {
            events
                .iter()
                .fold(Health::new(FailureThreshold::Rate(0.5)), |h, e| h.step(e.clone()))
        };
        // Alternating: never two failures in a row, yet half of them failed.
        let alternating = half(&[Event::Started, ok("a"), fail(), ok("a"), fail()]);
        assert_eq!(alternating.state, State::Degraded, "{alternating:?}");
        assert_eq!(
            half(&[Event::Started, fail(), fail()]).state,
            State::Started,
            "too few to judge"
        );
        let mostly_fine = half(&[Event::Started, ok("a"), ok("a"), ok("a"), ok("a"), fail()]);
        assert_eq!(mostly_fine.state, State::Healthy, "one in five");
        assert_eq!(
            alternating.step(ok("a")).state,
            State::Healthy,
            "a success recovers, as upstream"
        );
    }

    #[test]
    fn a_crd_waiting_for_children_is_started_until_every_cr_has_them_ready() {
        let health = run(3, &[Event::Started, waits("ns/a"), ok("ns/b")]);
        assert_eq!(health.state, State::Started, "b is fine, a still waits");
        assert!(!health.is_healthy());
        assert_eq!(
            health.waiting_for().as_deref(),
            Some("ns/a waits for Deployment web: 0 of 1 replicas available")
        );
        let ready = health.step(ok("ns/a"));
        assert_eq!(ready.state, State::Healthy);
        assert!(ready.is_healthy() && ready.waiting_for().is_none());

        let two = run(3, &[Event::Started, waits("ns/a"), waits("ns/b")]);
        assert!(two.waiting_for().unwrap().ends_with("(1 more custom resources wait)"));
        let deleted = two.step(ok("ns/a")).step(ok("ns/b"));
        assert_eq!(
            deleted.state,
            State::Healthy,
            "no CR left waiting (a deleted CR's run waits for nothing)"
        );
        assert!(deleted.is_healthy());
        let failing = run(3, &[Event::Started, waits("ns/a"), Event::Failed("x".into())]);
        assert_eq!(failing.state, State::Started);
        assert!(!failing.is_healthy() && failing.waiting_for().is_some());
    }
}

/// The health of every CRD of a runtime, shared by the Kordinators (writers), dependents
/// waiting on `dependsOn`, and readers such as the Live API.
#[derive(Debug, Clone, Default)]
pub struct HealthBoard {
    records: std::sync::Arc<parking_lot::RwLock<std::collections::BTreeMap<String, Health>>>,
    changed: std::sync::Arc<tokio::sync::Notify>,
}

impl HealthBoard {
    /// Registers a CRD as pending.
    pub fn register(&self, crd: &str, failure_threshold: FailureThreshold) {
        self.write().insert(crd.to_string(), Health::new(failure_threshold));
        self.changed.notify_waiters();
    }

    /// Forgets a CRD the Katalog no longer runs.
    pub fn unregister(&self, crd: &str) {
        self.write().remove(crd);
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
        self.records.read().get(crd).cloned()
    }

    /// Every record, by CRD name.
    pub fn all(&self) -> std::collections::BTreeMap<String, Health> {
        self.records.read().clone()
    }

    /// Resolves at the next state change.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    fn write(&self) -> parking_lot::RwLockWriteGuard<'_, std::collections::BTreeMap<String, Health>> {
        self.records.write()
    }
}
