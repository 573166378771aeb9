//! Hot swap. A slot is one declared component of a CRD or serve target: what serves now
//! (a loaded template with the spec it was loaded for) and what is declared. A reload loads
//! the declared spec off the hot path and swaps it in atomically; calls in flight keep the
//! `Arc` of the old one and finish on it; a load that fails leaves the old one serving and
//! records why.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::bindings::types::{Outcome, Request, Response};
use super::call::{CallError, Hook};
use super::engine::WasmHost;
use super::kept::{Keeper, Kept, KeptCanary, Resume, Version};
use super::load::{Active, LoadError, Loaded};
use super::pool::Pool;
use super::record::{Ask, CallResult, FORMAT, Recorded, Recording, Session, SessionView, Tape};
use super::rollout::{
    Canary, CanaryView, Counted, Rollouts, Step, StepKind, Verdict, in_share, refused_message, short,
};
use super::stats::{CallOutcome, CallStats, StatsView, Swap};
use super::store::Caller;
use orkestra_katalog::component::{Source, Spec};

pub use super::engine::SLOT_CALLS;

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
        self.active.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Why the declared version does not serve, if it does not.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn declared(&self) -> Arc<Spec> {
        self.declared.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Declares another spec (a changed Katalog); takes effect at the next reload.
    pub fn declare(&self, spec: Arc<Spec>) {
        *self.declared.lock().unwrap_or_else(|e| e.into_inner()) = spec;
    }

    /// Changes after every finished reload.
    pub fn reloads(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reloads.subscribe()
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
        self.reloads.send_modify(|n| *n += 1);
        result
    }

    async fn load_and_swap(&self) -> Result<(), LoadError> {
        let _one = self.reloading.lock().await;
        let spec = self.declared();
        let stamp = file_stamp(&spec.source);
        let result = self.host.load(&spec).await;
        *self.stamp.lock().unwrap_or_else(|e| e.into_inner()) = stamp;
        match result {
            Ok(loaded) => {
                let loaded = Arc::new(loaded);
                let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner()).take();
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
                let mut active = self.active.write().unwrap_or_else(|e| e.into_inner());
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
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
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
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error.to_string());
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
        tape: Option<Tape>,
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

    fn rollouts(&self) -> std::sync::MutexGuard<'_, Rollouts> {
        self.rollouts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts `loaded` as a canary where the spec declares a rollout and another version
    /// serves; says whether it did (or refused it, as rolled back before). Otherwise the
    /// caller swaps it in for every CR.
    fn roll_out(&self, loaded: &Arc<Loaded>, spec: &Arc<Spec>) -> bool {
        let (Some(policy), Some(stable)) = (spec.rollout, self.active()) else {
            return false;
        };
        if stable.loaded.digest == loaded.digest {
            return false;
        }
        let mut rollouts = self.rollouts();
        // The version already rolling out, loaded again (a reload of the whole Katalog): its
        // rollout goes on as it was.
        if rollouts
            .canary
            .as_ref()
            .is_some_and(|c| c.active.loaded.digest == loaded.digest)
        {
            return true;
        }
        if rollouts.refusal(&loaded.digest).is_some() {
            tracing::warn!(component = %self.name, digest = %loaded.digest, "this version was rolled back; it is not rolled out again until the declaration changes");
            return true;
        }
        let revision = stable.revision.max(rollouts.newest()) + 1;
        let canary = Arc::new(Active {
            loaded: loaded.clone(),
            spec: spec.clone(),
            revision,
        });
        if let Some(replaced) = rollouts.canary.take() {
            rollouts.step(
                StepKind::Cancelled,
                &replaced.active,
                "a newer version replaced it".into(),
            );
        }
        let message = format!(
            "serves {}% of the CRs; every CR after {:?} unless more than {}% of its reconciles fail",
            policy.share, policy.promote_after, policy.max_error_percent
        );
        tracing::info!(component = %self.name, revision, digest = %loaded.digest, share = policy.share, "rolling out a new version");
        rollouts.step(StepKind::Started, &canary, message);
        rollouts.canary = Some(Arc::new(Canary::new(canary, policy)));
        self.stats.swapped(Swap::served(revision, &loaded.digest));
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.judge_after(policy.promote_after, revision);
        true
    }

    /// Judges the canary `revision` once `period` has passed.
    fn judge_after(&self, period: Duration, revision: u64) {
        let me = self.me.clone();
        tokio::spawn(async move {
            tokio::time::sleep(period).await;
            if let Some(slot) = me.upgrade() {
                slot.judge(revision);
            }
        });
    }

    /// The version that serves the CR `key`, and which one it is.
    pub fn serving(&self, key: &str) -> Option<(Arc<Active>, Role)> {
        let canary = self.rollouts().canary.clone();
        match canary {
            Some(canary) if in_share(key, canary.policy.share) => Some((
                canary.active.clone(),
                Role::Canary {
                    share: canary.policy.share,
                },
            )),
            _ => self.active().map(|active| (active, Role::Stable)),
        }
    }

    /// A reconcile that `active` served for `tenant` ended (`ok`: without a failure of the
    /// component's own): counted for a canary, which is rolled back as soon as its failures
    /// pass the bound in most of the tenants it served.
    pub fn feedback(&self, active: &Active, tenant: &Arc<str>, ok: bool) {
        let canary = self.rollouts().canary.clone();
        let Some(canary) = canary.filter(|c| c.active.revision == active.revision) else {
            return;
        };
        canary.count(tenant, ok);
        if matches!(canary.verdict(), Verdict::RollBack(_)) {
            self.judge(active.revision);
        } else if canary.due_to_keep() {
            self.keep();
        }
    }

    /// Promotes or rolls back the canary `revision`, as its verdict says (on the replica
    /// that decides rollouts; the others follow what it keeps).
    fn judge(&self, revision: u64) {
        if !self.decides() {
            return;
        }
        let verdict = {
            let rollouts = self.rollouts();
            match &rollouts.canary {
                Some(canary) if canary.active.revision == revision => canary.verdict(),
                _ => return,
            }
        };
        match verdict {
            Verdict::Wait => {}
            Verdict::Promote => {
                let _ = self.decide(revision, None);
            }
            Verdict::RollBack(why) => {
                let _ = self.decide(revision, Some(why));
            }
        }
    }

    /// Ends the canary `revision` (any canary: `None`): promoted, or rolled back for `why`.
    /// The step, or why there was none to end.
    fn decide(&self, revision: u64, rolled_back: Option<String>) -> Result<Step, String> {
        let mut rollouts = self.rollouts();
        let Some(canary) = rollouts
            .canary
            .take_if(|c| revision == 0 || c.active.revision == revision)
        else {
            return Err(format!("component {} is not rolling out a version", self.name));
        };
        let view = canary.view();
        match rolled_back {
            None => {
                let message = format!(
                    "serves every CR; {} of its {} reconciles failed",
                    view.failed, view.reconciles
                );
                tracing::info!(component = %self.name, revision = view.revision, digest = %view.digest, "rollout promoted");
                rollouts.step(StepKind::Promoted, &canary.active, message);
                *self.active.write().unwrap_or_else(|e| e.into_inner()) = Some(canary.active.clone());
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
            Some(why) => {
                let stable = self.active().map(|a| short(&a.loaded.digest)).unwrap_or_default();
                let message = format!("rolled back: {why}; sha256 {stable} serves every CR again");
                tracing::warn!(component = %self.name, revision = view.revision, digest = %view.digest, "{message}");
                rollouts.step(StepKind::RolledBack, &canary.active, message);
                rollouts.refuse(&view.digest, why.clone());
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(refused_message(&view.digest, &why));
            }
        }
        let step = rollouts.history.back().cloned();
        drop(rollouts);
        self.keep();
        // Every CR of the slot runs again on the version that now serves it.
        self.reloads.send_modify(|n| *n += 1);
        step.ok_or_else(|| "no step was recorded".into())
    }

    /// Promotes the rollout under way now, before its period ends.
    pub fn promote(&self) -> Result<Step, String> {
        self.deciding()?;
        self.decide(0, None)
    }

    /// Rolls the rollout under way back now.
    pub fn roll_back(&self) -> Result<Step, String> {
        self.deciding()?;
        self.decide(0, Some("rolled back on request".into()))
    }

    fn deciding(&self) -> Result<(), String> {
        match self.decides() {
            true => Ok(()),
            false => Err(format!(
                "this replica does not decide the rollouts of component {}: the leader does (in shard mode, the one member that holds them); ask it",
                self.name
            )),
        }
    }

    /// Whether the version last declared was rolled back (and the one before serves).
    pub fn rolled_back(&self) -> bool {
        let rollouts = self.rollouts();
        let last = rollouts.history.back();
        last.is_some_and(|s| s.step == StepKind::RolledBack && rollouts.refusal(&s.digest).is_some())
    }

    /// The last step of its rollouts, if one ran.
    pub fn last_step(&self) -> Option<Step> {
        self.rollouts().history.back().cloned()
    }

    fn rollout_view(&self, declared: &Spec) -> Option<RolloutView> {
        let rollouts = self.rollouts();
        let policy = declared.rollout.map(|p| {
            serde_json::json!({
                "share": p.share,
                "promoteAfterMs": p.promote_after.as_millis() as u64,
                "maxErrorPercent": p.max_error_percent,
                "minReconciles": p.min_reconciles,
            })
        });
        if policy.is_none() && rollouts.history.is_empty() {
            return None;
        }
        Some(RolloutView {
            policy,
            canary: rollouts.canary.as_ref().map(|c| c.view()),
            refused: rollouts.last_refused().map(str::to_string),
            refusals: rollouts.refusals.iter().cloned().collect(),
            history: rollouts.history.iter().cloned().collect(),
        })
    }

    /// Keeps its rollout state with `keeper` from now on, and resumes from what it kept at
    /// the next load.
    pub fn keep_with(&self, keeper: Arc<Keeper>) {
        *self.kept.lock().unwrap_or_else(|e| e.into_inner()) = keeper.take(&self.name);
        *self.keeper.write().unwrap_or_else(|e| e.into_inner()) = Some(keeper);
    }

    fn keeper(&self) -> Option<Arc<Keeper>> {
        self.keeper.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether this replica decides its rollouts (one without a keeper always does).
    fn decides(&self) -> bool {
        self.keeper().is_none_or(|k| k.decides())
    }

    /// Hands its rollout state to the keeper: only a slot that declares a rollout or ran one
    /// has any, so other slots never cost a write.
    fn keep(&self) {
        let Some(keeper) = self.keeper().filter(|k| k.decides()) else {
            return;
        };
        let declares = self.declared().rollout.is_some();
        let version = |active: &Active| Version {
            digest: active.loaded.digest.clone(),
            revision: active.revision,
            source: active.spec.source.to_string(),
        };
        let kept = {
            let rollouts = self.rollouts();
            if !declares && rollouts.history.is_empty() && rollouts.refusals.is_empty() {
                return;
            }
            let canary = rollouts.canary.as_ref().map(|c| KeptCanary {
                version: version(&c.active),
                started_at: c.started_at,
                promote_by: c.started_at + c.policy.promote_after,
                share: c.policy.share,
                tallies: c.tallies_by_tenant(),
            });
            Kept {
                slot: self.name.to_string(),
                stable: self.active().map(|a| version(&a)),
                canary,
                refused: rollouts.refusals.iter().cloned().collect(),
                history: rollouts.history.iter().cloned().collect(),
            }
        };
        keeper.keep(kept);
    }

    /// At its first load, with a state kept by an earlier process: the rollouts' history and
    /// refusals carry on, and what serves follows [`super::kept::resume`]. A version rolled
    /// back stays refused, a canary goes on with its share and the rest of its period. Says
    /// whether it decided what serves (else the declared version is swapped in as usual).
    async fn resume(&self, kept: Kept, loaded: &Arc<Loaded>, spec: &Arc<Spec>) -> bool {
        kept.restore_into(&mut self.rollouts());
        match super::kept::resume(&kept, &loaded.digest, spec.rollout) {
            Resume::AsDeclared => {
                let Some(same) = kept.stable.as_ref().filter(|v| v.digest == loaded.digest) else {
                    return false;
                };
                // The version that served before: under the revision it had.
                self.stats.swapped(Swap::served(same.revision, &loaded.digest));
                let active = Active {
                    loaded: loaded.clone(),
                    spec: spec.clone(),
                    revision: same.revision,
                };
                *self.active.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(active));
                true
            }
            Resume::Refused(refusal) => {
                let error = match self.serve_kept_stable(&kept, loaded, spec).await {
                    Ok(()) => refused_message(&refusal.digest, &refusal.reason),
                    Err(missing) => format!(
                        "sha256 {} was rolled back ({}) and the last good version is not available here ({missing}): nothing serves until the declared component changes",
                        short(&refusal.digest),
                        refusal.reason
                    ),
                };
                tracing::warn!(component = %self.name, digest = %refusal.digest, "{error}");
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
                true
            }
            Resume::Canary(canary) => {
                let Some(policy) = spec.rollout else {
                    return false;
                };
                if let Err(missing) = self.serve_kept_stable(&kept, loaded, spec).await {
                    tracing::error!(component = %self.name, %missing, "the rollout's last good version is not available here: only the canary's share of the CRs is served");
                }
                let revision = canary.version.revision;
                let active = Arc::new(Active {
                    loaded: loaded.clone(),
                    spec: spec.clone(),
                    revision,
                });
                let resumed = Canary::resumed(active, policy, canary.started_at, canary.tallies);
                let left = resumed.left();
                tracing::info!(component = %self.name, revision, digest = %loaded.digest, left_ms = left.as_millis() as u64, "rollout resumed");
                self.rollouts().canary = Some(Arc::new(resumed));
                self.judge_after(left, revision);
                true
            }
            Resume::NewVersion => {
                self.serve_kept_stable(&kept, loaded, spec).await.is_ok() && self.roll_out(loaded, spec)
            }
        }
    }

    /// Serves the last good version `kept` names for every CR, when it is another than
    /// `loaded` and kept here; why not, otherwise.
    async fn serve_kept_stable(&self, kept: &Kept, loaded: &Loaded, spec: &Arc<Spec>) -> Result<(), String> {
        let version = match &kept.stable {
            Some(version) if version.digest != loaded.digest => version,
            _ => return Err("no other version was kept".into()),
        };
        let stable = self.load_kept(version, spec).await?;
        *self.active.write().unwrap_or_else(|e| e.into_inner()) = Some(stable);
        Ok(())
    }

    /// The kept version `version` under `spec`, loaded by its digest (from the host's store
    /// of kept components: never from a source the kept state names).
    async fn load_kept(&self, version: &Version, spec: &Arc<Spec>) -> Result<Arc<Active>, String> {
        let pinned = Arc::new(Spec {
            sha256: Some(version.digest.clone()),
            ..(**spec).clone()
        });
        let loaded = self.host.load_kept(&pinned).await.map_err(|e| e.to_string())?;
        self.stats.swapped(Swap::served(version.revision, &loaded.digest));
        Ok(Arc::new(Active {
            loaded: Arc::new(loaded),
            spec: pinned,
            revision: version.revision,
        }))
    }

    /// On a replica that stands by: takes what the deciding one kept, so that a take-over
    /// starts where it was (a version it rolled back no longer serves here, one it promoted
    /// serves every CR, its canary's counts go on).
    pub fn follow(&self, kept: &Kept) {
        if self.decides() {
            return;
        }
        let mut rollouts = self.rollouts();
        kept.restore_into(&mut rollouts);
        let Some(canary) = rollouts.canary.clone() else {
            return;
        };
        let digest = canary.active.loaded.digest.as_str();
        if let Some(refusal) = rollouts.refusal(digest) {
            let message = refused_message(digest, &refusal.reason);
            rollouts.canary = None;
            *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(message);
        } else if kept.stable.as_ref().is_some_and(|s| s.digest == digest) {
            rollouts.canary = None;
            *self.active.write().unwrap_or_else(|e| e.into_inner()) = Some(canary.active.clone());
        } else if let Some(theirs) = kept.canary.as_ref().filter(|c| c.version.digest == digest) {
            canary.follow_tallies(&theirs.tallies);
        }
    }

    /// What this process counted on its canary, for a shard member to report to the one
    /// that decides (none without a canary, or before it served a reconcile here).
    pub fn counted(&self) -> Option<Counted> {
        let canary = self.rollouts().canary.clone()?;
        Some(canary.counted_here()).filter(|c| !c.tallies.is_empty())
    }

    /// Takes what the other shard members counted on its canary (`reports`, by member; a
    /// report of another version is left out). On the replica that decides, a canary whose
    /// failures pass the bound once every member's reconciles are counted is rolled back
    /// at once.
    pub fn hear(&self, reports: &BTreeMap<String, Counted>) {
        let Some(canary) = self.rollouts().canary.clone() else {
            return;
        };
        let digest = &canary.active.loaded.digest;
        let heard = reports
            .iter()
            .filter(|(_, counted)| &counted.digest == digest)
            .map(|(member, counted)| (member.clone(), counted.tallies.clone()))
            .collect();
        canary.hear(heard);
        if matches!(canary.verdict(), Verdict::RollBack(_)) {
            self.judge(canary.active.revision);
        }
    }

    /// Starts recording its calls as `ask` says (replacing a session under way); the
    /// session, or why not (recordings are off, a bound is out of range).
    pub fn record(&self, ask: &Ask) -> Result<SessionView, String> {
        let session = self.host.recordings.session(ask)?;
        let view = session.view();
        tracing::info!(component = %self.name, count = view.left, bytes = view.bytes_left, key = ?view.key, "recording calls");
        *self.recording.lock().unwrap_or_else(|e| e.into_inner()) = Some(session);
        Ok(view)
    }

    /// Stops recording; the session as it ended.
    pub fn stop_recording(&self) -> Option<SessionView> {
        let ended = self.recording.lock().unwrap_or_else(|e| e.into_inner()).take();
        ended.map(|session| session.view())
    }

    /// The recording session, if one was started.
    pub fn recording(&self) -> Option<SessionView> {
        let session = self.recording.lock().unwrap_or_else(|e| e.into_inner());
        session.as_ref().map(Session::view)
    }

    /// The tape of the next call of `key`, when a session wants it.
    fn turn(&self, key: &str) -> Option<Tape> {
        let mut session = self.recording.lock().unwrap_or_else(|e| e.into_inner());
        session.as_mut()?.turn(key)
    }

    /// Writes the recording of a call taken down on `tape`; a call that read past the
    /// session's bytes is counted as dropped.
    async fn keep_recording(
        &self,
        active: &Active,
        (hook, key, request): (Hook, &str, &Request),
        result: &Result<Option<Response>, CallError>,
        tape: &Tape,
    ) {
        let Some(taken) = tape.taken() else {
            if let Some(session) = self.recording.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                session.dropped("the call read more than its recording may hold");
            }
            tracing::warn!(component = %self.name, key, "a call read more than its recording may hold; not recorded");
            return;
        };
        let spec = &active.spec;
        let mut recording = Recording {
            format: FORMAT,
            at: jiff::Timestamp::now().to_string(),
            component: Recorded {
                slot: self.name.to_string(),
                world: spec.world.name().into(),
                source: spec.source.to_string(),
                digest: active.loaded.digest.clone(),
                revision: active.revision,
                limits: (&spec.limits).into(),
            },
            hook: hook.into(),
            request: request.into(),
            kube: taken.kube,
            wasi: taken.reads,
            logs: taken.logs,
            result: CallResult::of(result),
            secrets_redacted: false,
        };
        if !spec.grants.records_secrets() {
            recording.redact();
        }
        match self.host.recordings.write(&self.recording, &recording).await {
            Ok(entry) => {
                tracing::info!(component = %self.name, key, id = %entry.id, bytes = entry.bytes, "call recorded")
            }
            Err(error) => tracing::warn!(component = %self.name, key, %error, "call not recorded"),
        }
    }

    /// Whether the component file changed since the last load.
    fn file_changed(&self) -> bool {
        let spec = self.declared();
        let now = file_stamp(&spec.source);
        now.is_some() && now != *self.stamp.lock().unwrap_or_else(|e| e.into_inner())
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

/// Every slot of a runtime.
#[derive(Clone, Default)]
pub struct Components {
    slots: Arc<RwLock<Vec<Arc<Slot>>>>,
    keeper: Arc<RwLock<Option<Arc<Keeper>>>>,
}

impl Components {
    /// Adds the slot `name` (replacing one of that name).
    pub fn add(&self, name: &str, host: &Arc<WasmHost>, spec: Arc<Spec>) -> Arc<Slot> {
        let slot = Slot::new(name.into(), host.clone(), spec);
        if let Some(keeper) = self.keeper.read().unwrap_or_else(|e| e.into_inner()).clone() {
            slot.keep_with(keeper);
        }
        let mut slots = self.slots.write().unwrap_or_else(|e| e.into_inner());
        slots.retain(|s| &*s.name != name);
        slots.push(slot.clone());
        slot
    }

    /// Keeps every slot's rollout state with `keeper`, those added later too; each resumes
    /// from what was kept at its next load.
    pub fn keep_with(&self, keeper: Arc<Keeper>) {
        *self.keeper.write().unwrap_or_else(|e| e.into_inner()) = Some(keeper.clone());
        for slot in self.slots() {
            slot.keep_with(keeper.clone());
        }
    }

    /// Each slot's canary counts made here, by slot name.
    pub fn counted(&self) -> BTreeMap<String, Counted> {
        let slots = self.slots();
        slots
            .iter()
            .filter_map(|s| Some((s.name.to_string(), s.counted()?)))
            .collect()
    }

    /// Hands each slot what the other shard members counted on it (`reports`: by member,
    /// then by slot).
    pub fn hear(&self, reports: &BTreeMap<String, BTreeMap<String, Counted>>) {
        for slot in self.slots() {
            let for_slot: BTreeMap<String, Counted> = reports
                .iter()
                .filter_map(|(member, slots)| Some((member.clone(), slots.get(&*slot.name)?.clone())))
                .collect();
            slot.hear(&for_slot);
        }
    }

    /// Drops the slot `name` (its CRD no longer declares it); calls under way finish.
    pub fn remove(&self, name: &str) {
        self.slots
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|s| &*s.name != name);
    }

    pub fn slots(&self) -> Vec<Arc<Slot>> {
        self.slots.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The Wasm host its slots run on (every slot shares one), once a slot exists.
    pub fn host(&self) -> Option<Arc<WasmHost>> {
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        slots.first().map(|slot| slot.host().clone())
    }

    pub fn get(&self, name: &str) -> Option<Arc<Slot>> {
        self.slots().into_iter().find(|s| &*s.name == name)
    }

    /// Reloads the slots `picked` selects, all at once (a slow registry holds only its own
    /// slot); returns each one's name and outcome.
    pub async fn reload_where(&self, picked: impl Fn(&Slot) -> bool) -> Vec<(Arc<str>, Result<(), LoadError>)> {
        let picked: Vec<Arc<Slot>> = self.slots().into_iter().filter(|s| picked(s)).collect();
        let reloads = picked
            .iter()
            .map(|slot| async move { (slot.name.clone(), slot.reload().await) });
        futures::future::join_all(reloads).await
    }

    pub fn statuses(&self) -> Vec<SlotStatus> {
        self.slots().iter().map(|s| s.status()).collect()
    }

    /// Polls the component files every `period` and reloads a slot whose file changed.
    pub async fn watch_files(self, period: Duration) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for slot in self.slots() {
                if slot.file_changed() {
                    tracing::info!(component = %slot.name, "component file changed; reloading");
                    let _ = slot.reload().await;
                }
            }
        }
    }
}
