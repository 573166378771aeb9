//! Hot swap. A slot is one declared component of a CRD or serve target: what serves now
//! (a loaded template with the spec it was loaded for) and what is declared. A reload loads
//! the declared spec off the hot path and swaps it in atomically; calls in flight keep the
//! `Arc` of the old one and finish on it; a load that fails leaves the old one serving and
//! records why.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use parking_lot::{Mutex, RwLock};
use serde::Serialize;

use super::bindings::types::{Outcome, Request, Response};
use super::caller::Caller;
use super::capability::Tap;
use super::engine::WasmHost;
use super::hook::{CallError, Hook};
use super::kept::{Keeper, Kept, KeptCanary, Resume, Version};
use super::load::{Active, LoadError, Loaded};
use super::pool::Pool;
use super::record::{Ask, CallResult, FORMAT, Recorded, Recording, Session, SessionView, Tape};
use super::rollout::{
    Canary, CanaryView, Counted, Rollouts, Step, StepKind, Verdict, in_share, refused_message, short,
};
use super::stats::{CallOutcome, CallStats, StatsView, Swap};
use orkestra_katalog::component::{Source, Spec};

pub use super::engine::SLOT_CALLS;
pub use components::Components;

mod components;
mod recording;
mod rollout;

/// What a call on a tenant's pool gets past its own timeout before it is given up on.
const POOL_GRACE: Duration = Duration::from_secs(1);

/// Size and modification time of a component file, to notice a replaced file.
type FileStamp = Option<(SystemTime, u64)>;

/// One swappable component.
pub struct Slot {
    /// `crd`, or `crd/target` for a target's own component.
    pub name: Arc<str>,
    host: Arc<WasmHost>,
    declared: Mutex<Arc<Spec>>,
    active: RwLock<Option<Arc<Active>>>,
    last_error: Mutex<Option<String>>,
    stamp: Mutex<FileStamp>,
    /// One reload at a time per slot.
    reloading: tokio::sync::Mutex<()>,
    /// Counts finished reloads (swapped or failed), so the runtime can reconcile the
    /// slot's custom resources again.
    reloads: tokio::sync::watch::Sender<u64>,
    /// What its calls did, across swaps, and its swap history.
    pub stats: Arc<CallStats>,
    /// Where its calls run when it has file grants (made at the first such call).
    pool: std::sync::OnceLock<Result<Pool, String>>,
    /// Its share of the host's calls at once ([`SLOT_CALLS`]).
    calls: tokio::sync::Semaphore,
    /// Its calls being recorded, if any are.
    recording: Mutex<Option<Session>>,
    /// A new version rolling out, and the rollouts' last steps.
    rollouts: Mutex<Rollouts>,
    /// Where its rollout state is kept across restarts, and what was kept (taken at the
    /// first load).
    keeper: RwLock<Option<Arc<Keeper>>>,
    kept: Mutex<Option<Kept>>,
    /// Itself, for the timer that ends a rollout.
    me: Weak<Slot>,
}

/// Which version serves a CR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The one version, or the last good one while a rollout runs.
    Stable,
    /// The new version of a rollout, on its share of the CRs.
    Canary { share: u32 },
}

/// A slot's rollout as the Live API shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutView {
    /// As declared: `{share, promoteAfterMs, maxErrorPercent, minReconciles}`, or null.
    pub policy: Option<serde_json::Value>,
    /// The new version serving its share now, if one is.
    pub canary: Option<CanaryView>,
    /// The digest last rolled back: not rolled out again while it is declared.
    pub refused: Option<String>,
    /// Every version rolled back and why, oldest first.
    pub refusals: Vec<super::rollout::Refusal>,
    /// The last steps, oldest first.
    pub history: Vec<Step>,
}

/// A slot as the Live API shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SlotStatus {
    pub name: String,
    pub world: &'static str,
    pub source: String,
    /// 0 until a version loads; each swap adds one.
    pub revision: u64,
    pub digest: Option<String>,
    pub loaded_at: Option<String>,
    pub load_ms: Option<f64>,
    pub cached: Option<bool>,
    /// Why the declared version is not the one serving (or why nothing serves).
    pub last_error: Option<String>,
    /// What the declared version may do, in words.
    pub grants: Vec<String>,
    pub limits: serde_json::Value,
    /// How calls get their instance: `{reuse: fresh}` or `{reuse: warm, maxCalls,
    /// memoryHighWaterBytes}`.
    pub instances: serde_json::Value,
    /// Its calls: outcomes, latency, memory, denials, swaps.
    pub calls: StatsView,
    /// A rollout under way and the last ones' steps (null when it declares none and ran none).
    pub rollout: Option<RolloutView>,
}

impl Slot {
    pub fn new(name: Arc<str>, host: Arc<WasmHost>, spec: Arc<Spec>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            name,
            host,
            stamp: Mutex::new(file_stamp(&spec.source)),
            declared: Mutex::new(spec),
            active: RwLock::new(None),
            last_error: Mutex::new(None),
            reloading: tokio::sync::Mutex::new(()),
            reloads: tokio::sync::watch::Sender::new(0),
            stats: Arc::default(),
            pool: std::sync::OnceLock::new(),
            calls: tokio::sync::Semaphore::new(SLOT_CALLS),
            recording: Mutex::new(None),
            rollouts: Mutex::new(Rollouts::default()),
            keeper: RwLock::new(None),
            kept: Mutex::new(None),
            me: me.clone(),
        })
    }

    pub fn host(&self) -> &Arc<WasmHost> {
        &self.host
    }

    /// What serves now.
    pub fn active(&self) -> Option<Arc<Active>> {
        self.active.read().clone()
    }

    /// Why the declared version does not serve, if it does not.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    pub fn declared(&self) -> Arc<Spec> {
        self.declared.lock().clone()
    }

    /// Declares another spec (a changed Katalog); takes effect at the next reload.
    pub fn declare(&self, spec: Arc<Spec>) {
        *self.declared.lock() = spec;
    }

    /// Changes whenever what serves may have changed: after every finished reload, and when
    /// a rollout is decided here or followed from the replica that decides.
    pub fn reloads(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reloads.subscribe()
    }

    /// Tells the watchers of [`Slot::reloads`]: every CR of the slot runs again on what now
    /// serves it, so its output and Component condition say so now, not at its next resync.
    fn serves_anew(&self) {
        self.reloads.send_modify(|n| *n += 1);
    }

    /// Loads the declared spec and swaps it in; on failure the old version keeps serving.
    ///
    /// Guarantees: one reload of a slot at a time; calls in flight finish on the version
    /// they started with, and every call after the swap runs the new one. The error is the
    /// [`LoadError`] of the load (also kept as the slot's last error for the Live API);
    /// watchers of [`Slot::reloads`] hear of every reload, failed or not.
    #[tracing::instrument(level = "debug", name = "component.reload", skip_all, fields(slot = %self.name))]
    pub async fn reload(&self) -> Result<(), LoadError> {
        let result = self.load_and_swap().await;
        self.serves_anew();
        result
    }

    async fn load_and_swap(&self) -> Result<(), LoadError> {
        let _one = self.reloading.lock().await;
        let spec = self.declared();
        let stamp = file_stamp(&spec.source);
        let result = self.host.load(&spec).await;
        *self.stamp.lock() = stamp;
        match result {
            Ok(loaded) => {
                let loaded = Arc::new(loaded);
                let kept = self.kept.lock().take();
                let resumed = match kept {
                    Some(kept) => self.resume(kept, &loaded, &spec).await,
                    None => false,
                };
                if resumed || self.roll_out(&loaded, &spec) {
                    self.keep();
                    return Ok(());
                }
                // The rollouts' lock before the version's, as everywhere.
                let mut rollouts = self.rollouts();
                let mut active = self.active.write();
                let revision = active.as_ref().map_or(0, |a| a.revision).max(rollouts.newest()) + 1;
                tracing::info!(
                    component = %self.name, revision, digest = %loaded.digest,
                    load_ms = loaded.load_time.as_secs_f64() * 1e3, cached = loaded.cached,
                    "component serving"
                );
                self.stats.swapped(Swap::served(revision, &loaded.digest));
                // A version that serves every CR at once ends a rollout under way.
                if let Some(canary) = rollouts.canary.take() {
                    let message = "another version was declared and serves every CR".to_string();
                    rollouts.step(StepKind::Cancelled, &canary.active, message);
                }
                rollouts.forgive(&loaded.digest);
                *active = Some(Arc::new(Active { loaded, spec, revision }));
                *self.last_error.lock() = None;
                drop((active, rollouts));
                self.keep();
                Ok(())
            }
            Err(error) => {
                let serving = self.active().map(|a| a.revision);
                match serving {
                    Some(revision) => {
                        tracing::warn!(component = %self.name, %error, revision, "new version did not load; the previous one keeps serving")
                    }
                    None => {
                        tracing::error!(component = %self.name, %error, "component did not load; its custom resources cannot reconcile")
                    }
                }
                self.stats.swapped(Swap {
                    at: jiff::Timestamp::now().to_string(),
                    revision: serving.unwrap_or(0),
                    digest: None,
                    error: Some(error.to_string()),
                });
                *self.last_error.lock() = Some(error.to_string());
                Err(error)
            }
        }
    }

    /// Runs `hook` of `active` (this slot's serving version) for one request, and counts it.
    ///
    /// Guarantees: a fresh instance per call, or with `instances.reuse: warm` one kept from
    /// an earlier call of a CR of the same namespace on this same version (never another
    /// namespace's, never one whose last call failed); every call held to the spec's limits
    /// (time, memory, fuel, kube calls and bytes, log bytes, result size); a component with
    /// file grants runs on threads of its own; at most [`SLOT_CALLS`] calls of one slot run
    /// at once, so other slots always find room, and at most the namespace's share
    /// (`spec.tenants.wasmCalls`) of one namespace, so other namespaces do. Errors are
    /// [`CallError`]s naming the limit hit or the trap; none affects another call or slot.
    #[tracing::instrument(level = "debug", name = "component.call", skip_all, fields(slot = %self.name, hook = ?hook))]
    pub async fn call(
        &self,
        active: &Active,
        hook: Hook,
        caller: Caller,
        request: &Request,
    ) -> Result<Option<Response>, CallError> {
        let started = std::time::Instant::now();
        // Its namespace's share first (a quarter of the host's calls by default), then the
        // component's (half of them), then one of the host's: neither a namespace nor a
        // component can hold all of them, and a namespace waiting for its share holds
        // nothing another needs.
        let _turn = self.host.tenants.enter(&caller.tenant()).await;
        let Ok(_share) = self.calls.acquire().await else {
            return Err(CallError::Instantiate("the component is shutting down".into()));
        };
        let tape = self.turn(&caller.key);
        let recorded = tape.clone().map(|tape| (tape, caller.key.clone()));
        let tape = tape.map(|tape| Arc::new(tape) as Arc<dyn Tap>);
        let result = match active.spec.files.is_empty() {
            _ if super::failpoint::trap_now() => Err(CallError::Trapped(format!(
                "injected by {}: the guest did not run",
                super::failpoint::TRAP_EVERY
            ))),
            true => {
                let (loaded, spec, stats) = (&active.loaded, &active.spec, &self.stats);
                self.host
                    .call_on_tape(loaded, spec, hook, caller, request, stats, tape)
                    .await
            }
            false => self.call_on_pool(active, (hook, caller, request), tape).await,
        };
        if let Some((tape, key)) = recorded {
            self.keep_recording(active, (hook, &key, request), &result, &tape).await;
        }
        let outcome = match &result {
            Ok(Some(response)) if matches!(response.outcome, Outcome::Error(_)) => CallOutcome::GuestError,
            Ok(_) => CallOutcome::Ok,
            Err(error) => error.outcome(),
        };
        let error = result.as_ref().err().map(ToString::to_string);
        self.stats.record(started.elapsed(), outcome, error);
        result
    }

    /// A call of a component with file grants, on its own threads ([`Pool`]). The call keeps
    /// its own deadline; this one also covers a pool whose threads are all stuck.
    async fn call_on_pool(
        &self,
        active: &Active,
        (hook, caller, request): (Hook, Caller, &Request),
        tape: Option<Arc<dyn Tap>>,
    ) -> Result<Option<Response>, CallError> {
        let pool = self
            .pool
            .get_or_init(|| Pool::new(&self.name).map_err(|e| e.to_string()));
        let pool = pool
            .as_ref()
            .map_err(|e| CallError::Instantiate(format!("cannot start its threads: {e}")))?;
        let (host, loaded, spec) = (self.host.clone(), active.loaded.clone(), active.spec.clone());
        let (stats, request) = (self.stats.clone(), request.clone());
        let timeout = spec.limits.timeout;
        // Its own runtime does not carry the reconcile's task: the tenant goes along by hand.
        let tenant = caller.tenant();
        let call = orkestra_kube::tenant::scope(tenant, async move {
            host.call_on_tape(&loaded, &spec, hook, caller, &request, &stats, tape)
                .await
        });
        let Some(mut task) = pool.spawn(call) else {
            return Err(CallError::Instantiate("its threads are shutting down".into()));
        };
        match tokio::time::timeout(timeout + POOL_GRACE, &mut task).await {
            Ok(Ok(result)) => result,
            Ok(Err(failed)) => Err(CallError::Trapped(format!("the call's task ended: {failed}"))),
            Err(_) => {
                task.abort();
                Err(CallError::Timeout(timeout))
            }
        }
    }

    /// Whether the component file changed since the last load.
    fn file_changed(&self) -> bool {
        let spec = self.declared();
        let now = file_stamp(&spec.source);
        now.is_some() && now != *self.stamp.lock()
    }

    pub fn status(&self) -> SlotStatus {
        let active = self.active();
        let declared = self.declared();
        SlotStatus {
            name: self.name.to_string(),
            world: declared.world.name(),
            source: declared.source.to_string(),
            revision: active.as_ref().map_or(0, |a| a.revision),
            digest: active.as_ref().map(|a| a.loaded.digest.clone()),
            loaded_at: active.as_ref().map(|a| {
                jiff::Timestamp::try_from(a.loaded.loaded_at)
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            }),
            load_ms: active.as_ref().map(|a| a.loaded.load_time.as_secs_f64() * 1e3),
            cached: active.as_ref().map(|a| a.loaded.cached),
            last_error: self.last_error(),
            grants: declared.grants.describe(),
            limits: limits_view(&declared.limits),
            instances: match declared.instances.warm() {
                None => serde_json::json!({"reuse": "fresh"}),
                Some(warm) => serde_json::json!({
                    "reuse": "warm",
                    "maxCalls": warm.max_calls,
                    "memoryHighWaterBytes": warm.high_water,
                }),
            },
            calls: self.stats.view(),
            rollout: self.rollout_view(&declared),
        }
    }
}

fn limits_view(limits: &orkestra_katalog::component::Limits) -> serde_json::Value {
    serde_json::json!({
        "timeoutMs": limits.timeout.as_millis() as u64,
        "memoryBytes": limits.memory,
        "resultSizeBytes": limits.result_size,
        "kubeCalls": limits.kube_calls,
        "kubeBytes": limits.kube_bytes,
        "children": limits.children,
        "events": limits.events,
        "logBytes": limits.log_bytes,
        "applyTimeoutMs": limits.apply_timeout.as_millis() as u64,
    })
}

fn file_stamp(source: &Source) -> FileStamp {
    match source {
        Source::Path(path) => std::fs::metadata(path)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len()))),
        // Fetched by pin: the bytes cannot change under the same declaration.
        Source::Url(_) | Source::Oci(_) => None,
    }
}
