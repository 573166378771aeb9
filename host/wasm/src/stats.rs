//! What one component's calls did: how each ended, how long it took and where that time
//! went, the most memory an instance held, the grants it was denied, and the swaps of its
//! slot. The Live API's `/components` and the runtime's `/metrics` read these. Outcomes and
//! phases are fixed sets: a guest cannot add a label.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::metrics::histogram::Histogram;
use serde::Serialize;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    Ok,
    /// The component answered with an error of its own.
    GuestError,
    Timeout,
    Memory,
    Trap,
    ResultTooLarge,
    TooMany,
    Forbidden,
    Instantiate,
    /// It burnt its `limits.fuel`.
    Fuel,
}

impl CallOutcome {
    pub const ALL: [CallOutcome; 10] = [
        CallOutcome::Ok,
        CallOutcome::GuestError,
        CallOutcome::Timeout,
        CallOutcome::Memory,
        CallOutcome::Trap,
        CallOutcome::ResultTooLarge,
        CallOutcome::TooMany,
        CallOutcome::Forbidden,
        CallOutcome::Instantiate,
        CallOutcome::Fuel,
    ];

    pub fn label(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::GuestError => "error",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Memory => "memory",
            CallOutcome::Trap => "trap",
            CallOutcome::ResultTooLarge => "result_too_large",
            CallOutcome::TooMany => "too_many",
            CallOutcome::Forbidden => "forbidden",
            CallOutcome::Instantiate => "instantiate",
            CallOutcome::Fuel => "fuel",
        }
    }

    /// Whether the host stopped the call (everything but a normal answer).
    pub fn is_trap(self) -> bool {
        !matches!(self, CallOutcome::Ok | CallOutcome::GuestError)
    }
}

/// The phases of a call that got an instance. Tells a component's own work from the host's
/// per-instance cost, which for an interpreted guest can be most of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A store, its WASI context and limits, and the instance from the pre-instantiated
    /// template.
    Instantiate,
    /// The export: lowering the request, the guest's code, lifting its answer.
    Run,
    /// Handing the instance back to the pool, which resets the pages the call dirtied.
    Teardown,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Instantiate, Phase::Run, Phase::Teardown];

    pub fn label(self) -> &'static str {
        match self {
            Phase::Instantiate => "instantiate",
            Phase::Run => "run",
            Phase::Teardown => "teardown",
        }
    }
}

/// Why a warm instance was given up after a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retired {
    /// It served `instances.maxCalls`.
    Calls,
    /// It held more than `instances.memoryHighWater` after the call.
    HighWater,
    /// The call did not end well (a trap, a limit, a denial).
    Failed,
    /// It held files open after the call: they close with it.
    OpenFiles,
}

impl Retired {
    pub const ALL: [Retired; 4] = [Retired::Calls, Retired::HighWater, Retired::Failed, Retired::OpenFiles];

    pub fn label(self) -> &'static str {
        match self {
            Retired::Calls => "max_calls",
            Retired::HighWater => "memory_high_water",
            Retired::Failed => "failed_call",
            Retired::OpenFiles => "open_files",
        }
    }
}

/// Wall time of each phase of one call, in the order of [`Phase::ALL`].
pub type Phases = [Duration; Phase::ALL.len()];

/// Call durations kept for the percentiles.
const RECENT: usize = 512;
/// Swaps remembered per slot.
const HISTORY: usize = 32;

/// One swap of a slot, or a version that did not load.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Swap {
    pub at: String,
    /// The revision serving afterwards (unchanged when the load failed).
    pub revision: u64,
    pub digest: Option<String>,
    pub error: Option<String>,
}

impl Swap {
    /// `digest` serving as `revision`, as of now.
    pub fn served(revision: u64, digest: &str) -> Self {
        Self {
            at: jiff::Timestamp::now().to_string(),
            revision,
            digest: Some(digest.to_string()),
            error: None,
        }
    }
}

/// Call figures of one slot (across its swaps).
#[derive(Debug)]
pub struct CallStats {
    outcomes: [AtomicU64; CallOutcome::ALL.len()],
    /// Seconds per call.
    pub durations: Histogram,
    recent: Mutex<VecDeque<Duration>>,
    /// Seconds per phase, in the order of [`Phase::ALL`].
    phase_durations: [Histogram; Phase::ALL.len()],
    recent_phases: Mutex<VecDeque<Phases>>,
    /// The most bytes of memory and tables one instance held.
    memory_high_water: AtomicU64,
    /// Kube calls or children refused by the grants.
    denials: AtomicU64,
    /// Fuel burnt by all calls, and by the last one (metered runtimes only).
    fuel: AtomicU64,
    fuel_last: AtomicU64,
    history: Mutex<VecDeque<Swap>>,
    last_error: Mutex<Option<String>>,
    /// Calls on a fresh instance, and on a warm one.
    fresh: AtomicU64,
    reused: AtomicU64,
    /// Warm instances given up after a call, by [`Retired::ALL`].
    retired: [AtomicU64; Retired::ALL.len()],
}

impl Default for CallStats {
    fn default() -> Self {
        use prometheus_client::metrics::histogram::exponential_buckets;
        // 10 µs to about 20 s; a phase from 1 µs (a small guest's instantiation takes a few).
        let phase = || Histogram::new(exponential_buckets(1e-6, 2.5, 18));
        Self {
            outcomes: Default::default(),
            durations: Histogram::new(exponential_buckets(1e-5, 2.5, 16)),
            recent: Mutex::default(),
            phase_durations: [phase(), phase(), phase()],
            recent_phases: Mutex::default(),
            memory_high_water: AtomicU64::new(0),
            denials: AtomicU64::new(0),
            fuel: AtomicU64::new(0),
            fuel_last: AtomicU64::new(0),
            history: Mutex::default(),
            last_error: Mutex::default(),
            fresh: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            retired: Default::default(),
        }
    }
}

/// Percentiles and counts as `/components` shows them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsView {
    pub calls: u64,
    pub outcomes: std::collections::BTreeMap<&'static str, u64>,
    pub traps: u64,
    pub denials: u64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Median of each phase over the recent calls that got an instance, by phase label;
    /// empty before the first.
    pub phases_p50_ms: std::collections::BTreeMap<&'static str, f64>,
    pub memory_high_water_bytes: u64,
    /// Fuel burnt by all calls and by the last one; absent where fuel is not metered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fuel: Option<FuelView>,
    pub last_call_error: Option<String>,
    pub swaps: Vec<Swap>,
    pub instances: InstancesView,
}

/// How calls got their instances.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstancesView {
    /// Calls on a new instance.
    pub fresh: u64,
    /// Calls on a warm instance kept from an earlier call.
    pub reused: u64,
    /// Warm instances given up after a call, by reason.
    pub retired: std::collections::BTreeMap<&'static str, u64>,
}

/// Fuel figures of a slot.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FuelView {
    pub consumed: u64,
    pub last_call: u64,
}

impl CallStats {
    /// Notes the fuel one call burnt.
    pub fn observe_fuel(&self, burnt: u64) {
        self.fuel.fetch_add(burnt, Ordering::Relaxed);
        self.fuel_last.store(burnt, Ordering::Relaxed);
    }

    /// Notes that a call got its instance: a warm one (`reused`) or a new one.
    pub fn instance(&self, reused: bool) {
        let counter = if reused { &self.reused } else { &self.fresh };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Notes a warm instance given up after a call.
    pub fn retired(&self, why: Retired) {
        self.retired[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Calls on a fresh instance and on a warm one.
    pub fn instances(&self) -> (u64, u64) {
        (self.fresh.load(Ordering::Relaxed), self.reused.load(Ordering::Relaxed))
    }

    /// Warm instances given up after a call for `why`.
    pub fn retirements(&self, why: Retired) -> u64 {
        // Declared in the order of `Retired::ALL`.
        self.retired[why as usize].load(Ordering::Relaxed)
    }

    /// Notes one finished call (`error`: what went wrong, if it did).
    pub fn record(&self, took: Duration, outcome: CallOutcome, error: Option<String>) {
        self.outcomes[CallOutcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0)].fetch_add(1, Ordering::Relaxed);
        self.durations.observe(took.as_secs_f64());
        push_recent(&self.recent, took);
        if let Some(error) = error {
            *self.last_error.lock() = Some(error);
        }
    }

    /// Notes where the time of one call that got an instance went.
    pub fn observe_phases(&self, phases: Phases) {
        for (histogram, took) in self.phase_durations.iter().zip(phases) {
            histogram.observe(took.as_secs_f64());
        }
        push_recent(&self.recent_phases, phases);
    }

    /// Seconds per call spent in `phase`.
    pub fn phase_durations(&self, phase: Phase) -> &Histogram {
        // Declared in the order of `Phase::ALL`.
        &self.phase_durations[phase as usize]
    }

    pub fn observe_memory(&self, bytes: usize) {
        self.memory_high_water.fetch_max(bytes as u64, Ordering::Relaxed);
    }

    pub fn denied(&self) {
        self.denials.fetch_add(1, Ordering::Relaxed);
    }

    pub fn swapped(&self, swap: Swap) {
        let mut history = self.history.lock();
        if history.len() == HISTORY {
            history.pop_front();
        }
        history.push_back(swap);
    }

    pub fn count(&self, outcome: CallOutcome) -> u64 {
        let index = CallOutcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0);
        self.outcomes[index].load(Ordering::Relaxed)
    }

    pub fn denials(&self) -> u64 {
        self.denials.load(Ordering::Relaxed)
    }

    pub fn memory_high_water(&self) -> u64 {
        self.memory_high_water.load(Ordering::Relaxed)
    }

    pub fn view(&self) -> StatsView {
        let outcomes: std::collections::BTreeMap<&'static str, u64> =
            CallOutcome::ALL.iter().map(|o| (o.label(), self.count(*o))).collect();
        let recent = sorted(self.recent.lock().iter().copied());
        let phases: Vec<Phases> = self.recent_phases.lock().iter().copied().collect();
        StatsView {
            calls: outcomes.values().sum(),
            traps: CallOutcome::ALL
                .iter()
                .filter(|o| o.is_trap())
                .map(|o| self.count(*o))
                .sum(),
            outcomes,
            denials: self.denials(),
            p50_ms: percentile_ms(&recent, 50),
            p99_ms: percentile_ms(&recent, 99),
            phases_p50_ms: Phase::ALL
                .iter()
                .enumerate()
                .filter_map(|(i, phase)| {
                    let times = sorted(phases.iter().map(|p| p[i]));
                    Some((phase.label(), percentile_ms(&times, 50)?))
                })
                .collect(),
            memory_high_water_bytes: self.memory_high_water(),
            fuel: match self.fuel.load(Ordering::Relaxed) {
                0 => None,
                consumed => Some(FuelView {
                    consumed,
                    last_call: self.fuel_last.load(Ordering::Relaxed),
                }),
            },
            last_call_error: self.last_error.lock().clone(),
            swaps: self.history.lock().iter().cloned().collect(),
            instances: InstancesView {
                fresh: self.instances().0,
                reused: self.instances().1,
                retired: Retired::ALL
                    .iter()
                    .map(|why| (why.label(), self.retirements(*why)))
                    .collect(),
            },
        }
    }
}

/// Appends to one of the bounded windows of recent calls.
fn push_recent<T>(window: &Mutex<VecDeque<T>>, item: T) {
    let mut window = window.lock();
    if window.len() == RECENT {
        window.pop_front();
    }
    window.push_back(item);
}

fn sorted(times: impl Iterator<Item = Duration>) -> Vec<Duration> {
    let mut times: Vec<Duration> = times.collect();
    times.sort();
    times
}

/// The `p`th percentile of `sorted`, in milliseconds (nearest rank).
fn percentile_ms(sorted: &[Duration], p: usize) -> Option<f64> {
    let rank = (sorted.len() * p).div_ceil(100).saturating_sub(1);
    sorted.get(rank).map(|d| d.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_percentiles_and_the_memory_high_water_are_kept() {
        let stats = CallStats::default();
        for ms in 1..=100 {
            stats.record(Duration::from_millis(ms), CallOutcome::Ok, None);
        }
        stats.record(
            Duration::from_secs(1),
            CallOutcome::Timeout,
            Some("did not finish within its timeout".into()),
        );
        stats.observe_memory(4096);
        stats.observe_memory(1024);
        stats.denied();
        let view = stats.view();
        assert_eq!((view.calls, view.traps, view.denials), (101, 1, 1));
        assert_eq!(view.outcomes["timeout"], 1);
        assert_eq!(view.p50_ms, Some(51.0));
        assert_eq!(view.p99_ms, Some(100.0));
        assert_eq!(view.memory_high_water_bytes, 4096, "the most, not the last");
        assert!(view.last_call_error.unwrap().contains("timeout"));
        assert!(view.phases_p50_ms.is_empty(), "no call reported its phases");
    }

    #[test]
    fn each_phase_has_its_own_median_and_histogram() {
        let stats = CallStats::default();
        let us = Duration::from_micros;
        for i in 1..=5 {
            stats.observe_phases([us(10 * i), us(100 * i), us(i)]);
        }
        let view = stats.view();
        let p50 = |phase: &str| (view.phases_p50_ms[phase] * 1e3).round();
        assert_eq!((p50("instantiate"), p50("run"), p50("teardown")), (30.0, 300.0, 3.0));
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("run", "", stats.phase_durations(Phase::Run).clone());
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("run_count 5"), "{text}");
    }
}
