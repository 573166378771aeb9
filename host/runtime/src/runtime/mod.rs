//! The runtime: every enabled CRD of a Katalog run through the pipeline, each isolated from
//! the others (own informers, queue, workers, health).
//!
//! Per CRD, top to bottom:
//! 1. pending until every `dependsOn` entry is started (or healthy) and the CRD is served
//!    by the API server (a CRD installed later starts then);
//! 2. observe: the primary informer, `observe.watch`, `observe.events` and the implicit
//!    watches on owned kinds, all handing triggers to one [`Admission`];
//! 3. after the first complete list: `workers` Kordinator workers, and a resync that
//!    offers every cached CR again;
//! 4. on shutdown (in reverse dependency order): intake stops, in-flight reconciles finish.
//!
//! The runtime supervises these per-CRD runs: a reload ([`Pipelines::apply`]) starts a CRD
//! added to the Katalog, stops a removed one and restarts one whose pipeline changed, while
//! every other CRD keeps its workers, queue and caches.
//!
//! Beside it: the component slots each CRD declares ([`slots`]), live reloads of the Katalog
//! file ([`reload`]), and the autoscaler that moves a CRD's workers and queue depth
//! ([`autoscale`]), and the check of the runtime's permissions ([`permissions`]).

pub mod autoscale;
mod canary_counts;
mod crd_run;
mod list_pages;
mod rehearse;
mod resync;
pub use rehearse::{Rehearsed, key_of};
pub mod motifs;
pub mod permissions;
pub mod reload;
pub mod rollout_state;
pub mod slots;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tracing::Instrument;

use crate::error::Error;
use crate::outcome::health::HealthBoard;
use crate::outcome::permissions::Permissions;
use crate::pipeline::declarative::Declarative;
use crate::pipeline::mux::MuxReconciler;
pub use crate::pipeline::roster::CrdHandle;
use crate::pipeline::roster::Roster;
use crate::runtime::slots::{ComponentStore, Declared, belongs, slot_names};
use crate::tenants::Tenants;
use crd_run::CrdRun;
use orkestra_katalog::compile::Compiled;
use orkestra_wasm::{Components, Slot};

/// Everything the Live API and `/metrics` read of a running runtime.
#[derive(Clone)]
pub struct Inspect {
    /// The running CRDs and their Katalog, as of the last reload.
    pub roster: Roster,
    pub health: HealthBoard,
    pub components: Components,
    pub peers: crate::pipeline::cross::Peers,
    pub lifecycle: Arc<Lifecycle>,
    /// Whether this replica reconciles, and which CRs (leader election, shards).
    pub ownership: crate::ha::Ownership,
    /// What each namespace takes of the runtime now.
    pub tenants: Arc<Tenants>,
    /// What the gateway this runtime serves says of itself (`GET /gateway`); `None` when it
    /// serves none.
    pub gateway: Option<GatewayStats>,
    /// The permissions the runtime was found to lack.
    pub permissions: Arc<Permissions>,
}

/// The statistics of a gateway the runtime serves, read when asked.
pub type GatewayStats = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

impl Inspect {
    /// The Katalog the runtime runs now.
    pub fn katalog(&self) -> Arc<Compiled> {
        self.roster.katalog()
    }

    /// Every running CRD.
    pub fn crds(&self) -> Vec<CrdHandle> {
        self.roster.crds()
    }

    /// A CRD the Live API shows (its `endpoints.enabled` is on).
    pub fn crd(&self, name: &str) -> Option<CrdHandle> {
        self.roster.get(name).filter(|h| h.crd.endpoints.enabled)
    }
}

/// The runtime's own life, for the probes.
#[derive(Debug, Default)]
pub struct Lifecycle {
    /// Every CRD's task runs (each started, or pending on its dependencies or its kind).
    started: std::sync::atomic::AtomicBool,
    /// Shutdown began: in-flight reconciles finish, nothing new starts.
    stopping: std::sync::atomic::AtomicBool,
}

impl Lifecycle {
    pub fn is_started(&self) -> bool {
        self.started.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// What applying a reloaded Katalog did to the running CRDs.
#[derive(Debug, Default)]
pub struct Applied {
    /// CRDs added to the Katalog (or enabled), now started.
    pub started: Vec<String>,
    /// CRDs whose pipeline changed: stopped and started again with the new one.
    pub restarted: Vec<String>,
    /// CRDs removed from the Katalog (or disabled), now stopped.
    pub stopped: Vec<String>,
    /// Component slots declared anew or changed: the reloader loads them.
    pub loads: Vec<String>,
    /// CRDs whose change could not be applied (each keeps running as it was), and why.
    pub errors: Vec<String>,
}

/// A Katalog for the running runtime to apply.
struct Apply {
    katalog: Compiled,
    reply: oneshot::Sender<Applied>,
}

/// The way into a running runtime for reloads: a Katalog sent here is applied CRD by CRD.
#[derive(Clone)]
pub struct Pipelines {
    sender: mpsc::Sender<Apply>,
    roster: Roster,
}

impl Pipelines {
    /// The Katalog the runtime runs now.
    pub fn katalog(&self) -> Arc<Compiled> {
        self.roster.katalog()
    }

    /// Applies `katalog` (waits while the runtime starts, if it has not yet).
    pub async fn apply(&self, katalog: Compiled) -> Result<Applied, Error> {
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(Apply { katalog, reply })
            .await
            .map_err(|_| Error::NotRunning)?;
        answer.await.map_err(|_| Error::NotRunning)
    }
}

/// A Katalog's CRDs, ready to run.
pub struct Runtime {
    client: kube::Client,
    reconcilers: HashMap<String, MuxReconciler>,
    health: HealthBoard,
    /// The Katalog's external calls, on the runtime's one connection pool (or only noted,
    /// for a plan).
    externals: orkestra_effects::external::Externals,
    /// Every declared Wasm component, by slot name, and the engine they run on.
    slots: Declared,
    roster: Roster,
    peers: crate::pipeline::cross::Peers,
    lifecycle: Arc<Lifecycle>,
    /// Keep each CRD's CR events (the Live API shows them).
    event_log: bool,
    ownership: crate::ha::Ownership,
    /// The namespace whose ConfigMap keeps the components' rollout state across restarts
    /// (`None`: kept in memory only).
    rollout_state: Option<String>,
    identities: Option<Arc<crate::pipeline::identities::Identities>>,
    /// What each namespace may take of the runtime, over every CRD.
    tenants: Arc<Tenants>,
    applies: mpsc::Receiver<Apply>,
    pipelines: Pipelines,
    permissions: Arc<Permissions>,
    /// The runtime's own needs besides its CRDs' ([`Runtime::with_permission_check`]);
    /// `None`: no check.
    permission_needs: Option<orkestra_katalog::rbac::Needs>,
}

/// How often component files are checked for a new version.
pub const COMPONENT_POLL: Duration = Duration::from_millis(100);

/// A started CRD's task and the switch that stops it.
struct Running {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops intake and waits for in-flight reconciles to finish.
    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

impl Runtime {
    /// Runs every enabled CRD of the compiled Katalog; each gets the declarative reconciler unless another is
    /// registered with [`Runtime::with_reconciler`].
    pub fn new(client: kube::Client, katalog: &Compiled) -> Result<Self, Error> {
        Self::with_components(client, katalog, ComponentStore::default())
    }

    /// [`Runtime::new`], pulling `oci://` components with the registries of `store` and
    /// keeping compiled ones in its cache folder. The Wasm engine is created only when a CRD
    /// declares a component.
    pub fn with_components(client: kube::Client, katalog: &Compiled, store: ComponentStore) -> Result<Self, Error> {
        let health = HealthBoard::default();
        let http = reqwest::Client::new();
        let tenants = Arc::new(Tenants::new(katalog.tenants.clone()));
        // Every request of the runtime, a component's included, goes through its namespace's
        // rate; its own watches' list pages go a few at a time.
        let client = tenants.limit(list_pages::paced(client));
        let mut slots = Declared::new(client.clone(), http.clone(), store, tenants.clone());
        slots.declare_all(katalog.enabled(), crate::runtime::slots::wants_fuel(katalog.enabled()))?;
        let handles = katalog.enabled().map(|compiled| {
            health.register(&compiled.name, compiled.failure_threshold);
            CrdHandle::new(compiled.clone(), tenants.clone())
        });
        let roster = Roster::new(Arc::new(katalog.clone()), handles.collect::<Vec<_>>());
        let (sender, applies) = mpsc::channel(4);
        Ok(Self {
            peers: crate::pipeline::cross::Peers::new(roster.clone(), health.clone(), http.clone()),
            client,
            reconcilers: HashMap::new(),
            health,
            externals: orkestra_effects::external::Externals::live(http),
            slots,
            roster: roster.clone(),
            lifecycle: Arc::default(),
            event_log: false,
            ownership: crate::ha::Ownership::default(),
            rollout_state: None,
            identities: None,
            tenants,
            applies,
            pipelines: Pipelines { sender, roster },
            permissions: Arc::default(),
            permission_needs: None,
        })
    }

    /// Makes none of the Katalog's external calls (a rehearsal: `ork plan`): each is noted
    /// instead, for [`Runtime::calls_not_made`].
    pub fn rehearsing(mut self) -> Self {
        self.externals = orkestra_effects::external::Externals::rehearsal();
        self
    }

    /// The external calls a rehearsal would have made since the last time it was asked.
    pub fn calls_not_made(&self) -> Vec<orkestra_effects::external::NotMade> {
        self.externals.not_made()
    }

    /// Keeps each CRD's CR events while it runs (one watch of Events per CRD), for the Live
    /// API.
    pub fn with_event_log(mut self) -> Self {
        self.event_log = true;
        self
    }

    /// Reconciles only the CRs `ownership` gives this replica (see [`crate::ha`]).
    pub fn with_ownership(mut self, ownership: crate::ha::Ownership) -> Self {
        self.ownership = ownership;
        self
    }

    /// Keeps the components' rollout state in a ConfigMap of `namespace`
    /// ([`rollout_state`]): a restart or a take-over resumes a canary and keeps a rolled back
    /// version refused.
    pub fn with_rollout_state(mut self, namespace: String) -> Self {
        self.rollout_state = Some(namespace);
        self
    }

    /// Components that declare a `serviceAccount` act as it, impersonating it with
    /// `config` (the host's own, which must be allowed to impersonate those accounts).
    pub fn with_identities(mut self, config: kube::Config) -> Self {
        let identities = crate::pipeline::identities::Identities::new(config, self.tenants.clone());
        self.identities = Some(Arc::new(identities));
        self
    }

    /// Everything the Live API and `/metrics` read of this runtime.
    pub fn inspect(&self) -> Inspect {
        Inspect {
            roster: self.roster.clone(),
            health: self.health.clone(),
            components: self.slots.components.clone(),
            peers: self.peers.clone(),
            lifecycle: self.lifecycle.clone(),
            ownership: self.ownership.clone(),
            tenants: self.tenants.clone(),
            gateway: None,
            permissions: self.permissions.clone(),
        }
    }

    /// Its CRDs as cross reads and the Live API see them.
    pub fn peers(&self) -> crate::pipeline::cross::Peers {
        self.peers.clone()
    }

    /// Where reloads send a Katalog to apply while this runtime runs.
    pub fn pipelines(&self) -> Pipelines {
        self.pipelines.clone()
    }

    /// The Wasm components, for reloads and the Live API.
    pub fn components(&self) -> Components {
        self.slots.components.clone()
    }

    /// Replaces the reconcilers of a CRD (a constructor, or per-target routing); they stay
    /// when a reload restarts the CRD.
    pub fn with_reconciler(mut self, crd: &str, mux: MuxReconciler) -> Result<Self, Error> {
        if self.roster.get(crd).is_none() {
            return Err(Error::UnknownCrd(crd.to_string()));
        }
        self.reconcilers.insert(crd.to_string(), mux);
        Ok(self)
    }

    /// The health of every CRD.
    pub fn health(&self) -> HealthBoard {
        self.health.clone()
    }

    /// The queue, cache and counters of a CRD.
    pub fn crd(&self, name: &str) -> Option<CrdHandle> {
        self.roster.get(name)
    }

    /// Runs until `shutdown` resolves, applying the Katalogs reloads send meanwhile; then
    /// stops the CRDs in reverse dependency order, letting in-flight reconciles finish.
    ///
    /// Guarantees: each CRD runs in a task of its own (a `crd` span on all it logs), so a
    /// CRD whose kind is not served, whose dependencies are unmet, or whose reconciles fail
    /// or panic holds back only itself; components load in the background, each failing
    /// only the CRs it serves. It never returns an error: what cannot run is reported on the
    /// CRD's health record and in the log, and the rest runs.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let slots = self.slots.components.slots();
        // Without components there is nothing to load; the file watch reads the slots anew
        // each round, so it follows slots a reload adds.
        tracing::info!(components = slots.len(), "loading Wasm components");
        let mut keeping = match (&self.rollout_state, slots.is_empty()) {
            (Some(namespace), false) => self.keep_rollouts(namespace).await,
            _ => Vec::new(),
        };
        if !slots.is_empty() && self.ownership.mode() == crate::ha::Mode::Shard {
            let components = self.slots.components.clone();
            keeping.push(tokio::spawn(canary_counts::share(components, self.ownership.clone())));
        }
        // In the background, each on its own: a slow registry or a long compile holds only
        // the CRDs that component serves (they wait for its first load), never the
        // runtime's start or other CRDs. One that does not load fails only its own CRs.
        for slot in slots {
            tokio::spawn(async move { slot.reload().await });
        }
        let file_watch = tokio::spawn(self.slots.components.clone().watch_files(COMPONENT_POLL));
        // Before anything reconciles: what the runtime may not do is named, not found out CR
        // by CR.
        keeping.extend(self.check_permissions());
        let mut running: BTreeMap<String, Running> = BTreeMap::new();
        for handle in self.roster.crds() {
            running.insert(handle.crd.name.to_string(), self.start(handle));
        }
        self.lifecycle.started.store(true, std::sync::atomic::Ordering::Release);
        let shutdown = std::pin::pin!(shutdown);
        let mut shutdown = shutdown;
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(apply) = self.applies.recv() => {
                    let applied = self.apply(apply.katalog, &mut running).await;
                    let _ = apply.reply.send(applied);
                }
            }
        }
        self.lifecycle
            .stopping
            .store(true, std::sync::atomic::Ordering::Release);
        file_watch.abort();
        keeping.iter().for_each(|task| task.abort());
        tracing::info!("shutting down: stopping intake, finishing in-flight reconciles");
        for name in start_order(&self.roster.crds()).iter().rev() {
            if let Some(run) = running.remove(name) {
                run.stop().await;
            }
        }
    }

    /// Applies a reloaded Katalog: CRDs removed stop, CRDs added start, CRDs whose pipeline
    /// (or set of components) changed restart with it; the others keep running untouched.
    async fn apply(&mut self, katalog: Compiled, running: &mut BTreeMap<String, Running>) -> Applied {
        let mut applied = Applied::default();
        self.tenants.set_rules(katalog.tenants.clone());
        self.slots.tenants_changed();
        let was = self.roster.running();
        let fuel = crate::runtime::slots::wants_fuel(katalog.enabled());
        for name in was
            .keys()
            .filter(|name| !katalog.enabled().any(|c| &*c.name == name.as_str()))
        {
            if let Some(run) = running.remove(name) {
                run.stop().await;
            }
            self.roster.remove(name);
            self.health.unregister(name);
            self.slots.forget(name);
            tracing::info!(crd = %name, "removed from the Katalog: stopped");
            applied.stopped.push(name.clone());
        }
        for crd in katalog.enabled() {
            let name = crd.name.to_string();
            let before = was.get(&name);
            let same = before.is_some_and(|b| b.runs_like(crd) && slot_names(b) == slot_names(crd));
            match self.slots.declare(crd, fuel) {
                Ok(loads) => applied.loads.extend(loads),
                Err(why) => {
                    tracing::warn!(crd = %name, %why, "the CRD's change is not applied; it runs as it was");
                    applied.errors.push(format!("{name}: {why}; it runs as it was"));
                    continue;
                }
            }
            if same {
                continue;
            }
            let handle = match self.roster.get(&name) {
                Some(old) => {
                    if let Some(run) = running.remove(&name) {
                        run.stop().await;
                    }
                    tracing::info!(crd = %name, "the CRD's pipeline changed: restarted with it");
                    applied.restarted.push(name.clone());
                    old.restarted(crd.clone())
                }
                None => {
                    tracing::info!(crd = %name, "added to the Katalog: starting");
                    applied.started.push(name.clone());
                    CrdHandle::new(crd.clone(), self.tenants.clone())
                }
            };
            self.health.register(&name, crd.failure_threshold);
            self.roster.insert(handle.clone());
            running.insert(name, self.start(handle));
        }
        self.roster.set_katalog(Arc::new(katalog));
        self.recheck_permissions().await;
        applied
    }

    /// The reconcilers of a CRD: a registered one, or the declarative reconciler with its
    /// components (a target with a component of its own gets its own).
    fn mux(&self, handle: &CrdHandle) -> MuxReconciler {
        if let Some(mux) = self.reconcilers.get(&*handle.crd.name) {
            return mux.clone();
        }
        let components = &self.slots.components;
        let functions = self.roster.katalog().notes.functions.clone();
        let declarative = |slot: Option<Arc<Slot>>| {
            let reconciler = Declarative::new(
                self.client.clone(),
                handle.crd.clone(),
                handle.counters.clone(),
                self.peers.clone(),
                self.externals.clone(),
            )
            .with_children(handle.children.clone())
            .with_identities(self.identities.clone())
            .with_permissions(self.permissions.clone());
            Arc::new(match slot {
                Some(slot) => reconciler.with_component(slot, functions.clone()),
                None => reconciler,
            })
        };
        let mut mux = MuxReconciler::new(declarative(components.get(&handle.crd.name)));
        for target in handle.crd.targets.keys() {
            if let Some(slot) = components.get(&format!("{}/{target}", handle.crd.name)) {
                mux = mux.with_target(target.clone(), declarative(Some(slot)));
            }
        }
        mux
    }

    /// Starts one CRD's run: its reconcilers, then its task.
    fn start(&self, handle: CrdHandle) -> Running {
        let (stop, stopped) = watch::channel(false);
        let components = &self.slots.components;
        let mux = self.mux(&handle);
        let crd_run = CrdRun {
            slots: components
                .slots()
                .into_iter()
                .filter(|s| belongs(&s.name, &handle.crd.name))
                .collect(),
            client: self.client.clone(),
            handle,
            mux,
            health: self.health.clone(),
            externals: self.externals.clone(),
            peers: self.peers.clone(),
            event_log: self.event_log,
            ownership: self.ownership.clone(),
            permissions: self.permissions.clone(),
        };
        // At error level so its field reaches every event the filter lets through (quiet
        // by default is `warn`); everything the run spawns carries it on.
        let span = tracing::error_span!("crd", crd = %crd_run.handle.crd.name);
        Running {
            stop,
            task: tokio::spawn(crd_run.run(stopped).instrument(span)),
        }
    }
}

/// CRD names in dependency order (dependencies first); cycles were rejected at load.
fn start_order(crds: &[CrdHandle]) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    let mut remaining: Vec<&CrdHandle> = crds.iter().collect();
    while !remaining.is_empty() {
        let before = remaining.len();
        remaining.retain(|c| {
            let ready = c
                .crd
                .depends_on
                .iter()
                .all(|(d, _)| order.contains(d) || !crds.iter().any(|o| &*o.crd.name == d));
            if ready {
                order.push(c.crd.name.to_string());
            }
            !ready
        });
        if remaining.len() == before {
            order.extend(remaining.drain(..).map(|c| c.crd.name.to_string()));
        }
    }
    order
}
