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
//! ([`autoscale`]).

pub mod autoscale;
pub mod reload;
pub mod slots;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use kube::runtime::watcher;
use orkestra_kube::objects::Objects;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use crate::outcome::health::{Event, HealthBoard};
use crate::pipeline::declarative::Declarative;
use crate::pipeline::enqueue::Admission;
use crate::pipeline::kordinator::Kordinator;
use crate::pipeline::mux::MuxReconciler;
use crate::pipeline::observe::{self, Enqueue, Source, Trigger};
pub use crate::pipeline::roster::CrdHandle;
use crate::pipeline::roster::Roster;
use crate::pipeline::tuning::Tuning;
use crate::runtime::slots::{ComponentStore, Declared, belongs, slot_names};
use orkestra_katalog::DependencyCondition;
use orkestra_katalog::compile::Compiled;
use orkestra_wasm::{Components, Slot};

/// How often a pending CRD checks its dependencies and whether its CRD exists.
const PENDING_RETRY: Duration = Duration::from_millis(500);

/// Runtime errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no custom reconciler may be registered for unknown CRD \"{0}\"")]
    UnknownCrd(String),
    #[error("{0}")]
    Wasm(String),
}

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
}

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
    pub async fn apply(&self, katalog: Compiled) -> Result<Applied, String> {
        let (reply, answer) = oneshot::channel();
        let gone = || "the runtime is not running; nothing was applied".to_string();
        self.sender.send(Apply { katalog, reply }).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())
    }
}

/// A Katalog's CRDs, ready to run.
pub struct Runtime {
    client: kube::Client,
    reconcilers: HashMap<String, MuxReconciler>,
    health: HealthBoard,
    /// One connection pool for every external call of the runtime.
    http: reqwest::Client,
    /// Every declared Wasm component, by slot name, and the engine they run on.
    slots: Declared,
    roster: Roster,
    peers: crate::pipeline::cross::Peers,
    lifecycle: Arc<Lifecycle>,
    /// Keep each CRD's CR events (the Live API shows them).
    event_log: bool,
    ownership: crate::ha::Ownership,
    identities: Option<Arc<crate::pipeline::identities::Identities>>,
    applies: mpsc::Receiver<Apply>,
    pipelines: Pipelines,
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
        let mut slots = Declared::new(client.clone(), http.clone(), store);
        slots
            .declare_all(katalog.enabled(), crate::runtime::slots::wants_fuel(katalog.enabled()))
            .map_err(Error::Wasm)?;
        let handles = katalog.enabled().map(|compiled| {
            health.register(&compiled.name, compiled.failure_threshold);
            CrdHandle::new(compiled.clone())
        });
        let roster = Roster::new(Arc::new(katalog.clone()), handles.collect::<Vec<_>>());
        let (sender, applies) = mpsc::channel(4);
        Ok(Self {
            peers: crate::pipeline::cross::Peers::new(roster.clone(), health.clone(), http.clone()),
            client,
            reconcilers: HashMap::new(),
            health,
            http,
            slots,
            roster: roster.clone(),
            lifecycle: Arc::default(),
            event_log: false,
            ownership: crate::ha::Ownership::default(),
            identities: None,
            applies,
            pipelines: Pipelines { sender, roster },
        })
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

    /// Components that declare a `serviceAccount` act as it, impersonating it with
    /// `config` (the host's own, which must be allowed to impersonate those accounts).
    pub fn with_identities(mut self, config: kube::Config) -> Self {
        self.identities = Some(Arc::new(crate::pipeline::identities::Identities::new(config)));
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
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let slots = self.slots.components.slots();
        // Without components there is nothing to load; the file watch reads the slots anew
        // each round, so it follows slots a reload adds.
        tracing::info!(components = slots.len(), "loading Wasm components");
        // In the background, each on its own: a slow registry or a long compile holds only
        // the CRDs that component serves (they wait for its first load), never the
        // runtime's start or other CRDs. One that does not load fails only its own CRs.
        for slot in slots {
            tokio::spawn(async move { slot.reload().await });
        }
        let file_watch = tokio::spawn(self.slots.components.clone().watch_files(COMPONENT_POLL));
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
                    CrdHandle::new(crd.clone())
                }
            };
            self.health.register(&name, crd.failure_threshold);
            self.roster.insert(handle.clone());
            running.insert(name, self.start(handle));
        }
        self.roster.set_katalog(Arc::new(katalog));
        applied
    }

    /// Starts one CRD's run: its reconcilers (a registered one, or the declarative reconciler
    /// with its components), then its task.
    fn start(&self, handle: CrdHandle) -> Running {
        let (stop, stopped) = watch::channel(false);
        let components = &self.slots.components;
        let functions = self.roster.katalog().notes.functions.clone();
        let mux = self.reconcilers.get(&*handle.crd.name).cloned().unwrap_or_else(|| {
            let declarative = |slot: Option<Arc<Slot>>| {
                let reconciler = Declarative::new(
                    self.client.clone(),
                    handle.crd.clone(),
                    handle.counters.clone(),
                    self.peers.clone(),
                    self.http.clone(),
                )
                .with_children(handle.children.clone())
                .with_identities(self.identities.clone());
                Arc::new(match slot {
                    Some(slot) => reconciler.with_component(slot, functions.clone()),
                    None => reconciler,
                })
            };
            let mut mux = MuxReconciler::new(declarative(components.get(&handle.crd.name)));
            // A target with a component of its own gets its own reconciler.
            for target in handle.crd.targets.keys() {
                if let Some(slot) = components.get(&format!("{}/{target}", handle.crd.name)) {
                    mux = mux.with_target(target.clone(), declarative(Some(slot)));
                }
            }
            mux
        });
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
            http: self.http.clone(),
            peers: self.peers.clone(),
            event_log: self.event_log,
            ownership: self.ownership.clone(),
        };
        Running {
            stop,
            task: tokio::spawn(crd_run.run(stopped)),
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

/// One CRD's life.
struct CrdRun {
    /// The CRD's components: each reload offers every CR again.
    slots: Vec<Arc<Slot>>,
    client: kube::Client,
    handle: CrdHandle,
    mux: MuxReconciler,
    health: HealthBoard,
    http: reqwest::Client,
    /// The runtime's CRDs, for the autoscaler's `cross.<crd>.metrics`.
    peers: crate::pipeline::cross::Peers,
    event_log: bool,
    ownership: crate::ha::Ownership,
}

impl CrdRun {
    async fn run(self, mut stopped: watch::Receiver<bool>) {
        let crd = self.handle.crd.clone();
        let Some((resource, scope)) = self.wait_until_startable(&mut stopped).await else {
            return;
        };
        let resource = Arc::new(resource);
        let admission: Arc<dyn Enqueue> = Admission::new(
            crd.clone(),
            self.handle.cache.clone(),
            self.handle.queue.clone(),
            self.handle.stats.clone(),
            self.handle.tuning.clone(),
            self.http.clone(),
        );

        let mut observers = JoinSet::new();
        let namespace = crd.namespace.clone().filter(|_| scope == Scope::Namespaced);
        let primary_api = match Objects::<DynamicObject>::within(self.client.clone(), namespace.as_deref(), &resource) {
            Ok(objects) => objects.api().clone(),
            Err(error) => {
                tracing::error!(crd = %crd.name, %error, "the CRD's namespace is not a namespace; not started");
                return;
            }
        };
        let mut config = watcher::Config::default();
        if let Some(labels) = &crd.label_selector {
            config = config.labels(labels);
        }
        if let Some(fields) = &crd.field_selector {
            config = config.fields(fields);
        }
        let (ready_tx, ready_rx) = oneshot::channel();
        let mut ready = Some(ready_tx);
        let (cache, declared, enqueue) = (self.handle.cache.clone(), crd.declared_sentinels(), admission.clone());
        // Held echoes that turn out to be others' changes go on through the one enqueue path.
        self.handle.own.connect(admission.clone());
        self.handle.children.own_writes().connect(admission.clone());
        let own = self.handle.own.clone();
        observers.spawn(observe::supervise(format!("{} primary", crd.name), move || {
            let observer =
                observe::PrimaryObserver::new(cache.clone(), declared, enqueue.clone(), own.clone(), ready.take());
            observe::watch_primary(primary_api.clone(), config.clone(), observer)
        }));
        self.start_secondary(&mut observers, &admission).await;
        // Nobody can read the events of a CRD out of the Live API or closed to cross reads.
        if self.event_log && crd.endpoints.enabled && crd.cross_access {
            self.start_event_log(&mut observers, namespace.as_deref()).await;
        }

        let stop_requested = async {
            // The guard wait_for returns is not Send: drop it here.
            let _ = stopped.wait_for(|s| *s).await;
        };
        tokio::select! {
            _ = ready_rx => {}
            () = stop_requested => {
                observers.shutdown().await;
                return;
            }
        }
        self.health.record(&crd.name, Event::Started);
        tracing::info!(crd = %crd.name, gvk = %crd.gvk, workers = crd.workers, cached = self.handle.cache.len(), "CRD started");

        let kordinator = Arc::new(Kordinator {
            client: self.client.clone(),
            http: self.http.clone(),
            crd: crd.clone(),
            resource,
            cache: self.handle.cache.clone(),
            queue: self.handle.queue.clone(),
            mux: self.mux.clone(),
            health: self.health.clone(),
            counters: self.handle.counters.clone(),
            tuning: self.handle.tuning.clone(),
            ownership: self.ownership.clone(),
            own: self.handle.own.clone(),
            budget: self.handle.budget.clone(),
        });
        let mut workers = JoinSet::new();
        for _ in 0..Tuning::tasks(&crd) {
            workers.spawn(kordinator.clone().work());
        }
        let autoscaler = crd.autoscale.clone().map(|rule| {
            tokio::spawn(crate::runtime::autoscale::run(
                crd.clone(),
                rule,
                self.handle.tuning.clone(),
                self.handle.queue.clone(),
                self.handle.counters.clone(),
                self.peers.clone(),
            ))
        });
        let resync = {
            let cache = self.handle.cache.clone();
            let admission = admission.clone();
            let mut period = self.handle.tuning.resync();
            tokio::spawn(async move {
                let mut start = 0usize;
                loop {
                    // A new period (the autoscaler's) counts from when it is set.
                    let wait = *period.borrow_and_update();
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        changed = period.changed() => match changed {
                            Ok(()) => continue,
                            Err(_) => return,
                        },
                    }
                    // Round-robin: with a bounded queue the first keys offered win, so each
                    // resync starts one further along and every CR gets its turn.
                    let mut keys = cache.keys();
                    keys.sort();
                    if !keys.is_empty() {
                        start %= keys.len();
                        keys.rotate_left(start);
                        start += 1;
                    }
                    for key in keys {
                        admission.offer(Trigger::new(key, Source::Resync));
                    }
                }
            })
        };

        let mut reoffers = JoinSet::new();
        for slot in &self.slots {
            let mut reloads = slot.reloads();
            let cache = self.handle.cache.clone();
            let admission = admission.clone();
            // A swapped (or refused) component should show on its CRs now, not at the next
            // event: its output or its Component condition changes.
            reoffers.spawn(async move {
                while reloads.changed().await.is_ok() {
                    for key in cache.keys() {
                        admission.offer(Trigger::new(key, Source::Resync));
                    }
                }
            });
        }

        // CRs this replica now owns (elected, or its share grew) are offered again.
        let mut changes = self.ownership.changes();
        let (cache, offer) = (self.handle.cache.clone(), admission.clone());
        reoffers.spawn(async move {
            while changes.changed().await.is_ok() {
                for key in cache.keys() {
                    offer.offer(Trigger::new(key, Source::Resync));
                }
            }
        });

        let _ = stopped.wait_for(|s| *s).await;
        reoffers.shutdown().await;
        resync.abort();
        if let Some(autoscaler) = autoscaler {
            autoscaler.abort();
        }
        observers.shutdown().await;
        self.handle.queue.shutdown();
        self.handle.tuning.close();
        while workers.join_next().await.is_some() {}
        tracing::info!(crd = %crd.name, "CRD stopped");
    }

    /// Pending until dependencies are met and the API server serves the kind.
    async fn wait_until_startable(&self, stopped: &mut watch::Receiver<bool>) -> Option<(ApiResource, Scope)> {
        let crd = &self.handle.crd;
        let gvk = GroupVersionKind::gvk(&crd.group, &crd.version, &crd.kind);
        let mut logged = false;
        // What the last log line said the CRD waits for: say it again when it changes.
        let mut said: Vec<String> = Vec::new();
        loop {
            if *stopped.borrow() {
                return None;
            }
            let mut unmet: Vec<String> = crd
                .depends_on
                .iter()
                .filter_map(|(name, condition)| {
                    let health = self.health.get(name);
                    let met = health.as_ref().is_some_and(|h| match condition {
                        DependencyCondition::Started => h.is_started(),
                        DependencyCondition::Healthy => h.is_healthy(),
                    });
                    // Say what a dependency that reconciles fine still waits for.
                    let why = health.and_then(|h| h.waiting_for());
                    (!met).then(|| why.map_or_else(|| name.clone(), |why| format!("{name} ({why})")))
                })
                .collect();
            // Its own components' first load (a pull from a slow registry, a compile): this
            // CRD waits for them, no other does.
            unmet.extend(
                self.slots
                    .iter()
                    .filter(|slot| *slot.reloads().borrow() == 0)
                    .map(|slot| format!("component {} (loading)", slot.name)),
            );
            if unmet.is_empty() {
                match kube::discovery::pinned_kind(&self.client, &gvk).await {
                    Ok((resource, caps)) => return Some((resource, caps.scope)),
                    Err(error) if !logged => {
                        tracing::warn!(crd = %crd.name, gvk = %crd.gvk, %error, "the API server does not serve this kind yet; waiting for its CRD");
                        logged = true;
                    }
                    Err(_) => {}
                }
            } else if unmet != said {
                tracing::info!(crd = %crd.name, waiting_for = ?unmet, "pending on dependencies");
                said = unmet;
            }
            tokio::select! {
                () = tokio::time::sleep(PENDING_RETRY) => {}
                () = self.health.changed() => {}
                _ = stopped.changed() => {}
            }
        }
    }

    async fn start_secondary(&self, observers: &mut JoinSet<()>, admission: &Arc<dyn Enqueue>) {
        let crd = &self.handle.crd;
        let primary = observe::secondary::PrimaryKind { crd: crd.clone() };
        for watch in &crd.watches {
            let entry = &watch.entry;
            let Some(api) = self
                .api_for(&entry.api_version, &entry.kind, entry.namespace.as_deref())
                .await
            else {
                continue;
            };
            let mut config = watcher::Config::default();
            if let Some(name) = &entry.name {
                config = config.fields(&format!("metadata.name={name}"));
            }
            if !entry.label_selector.is_empty() {
                let labels: Vec<String> = entry.label_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
                config = config.labels(&labels.join(","));
            }
            let (watch, primary, cache) = (watch.clone(), primary.clone(), self.handle.cache.clone());
            let (declared, admission) = (crd.declared_sentinels(), admission.clone());
            observers.spawn(observe::supervise(
                format!("{} watch of {}", crd.name, entry.kind),
                move || {
                    observe::watch_secondary(
                        api.clone(),
                        config.clone(),
                        watch.clone(),
                        primary.clone(),
                        cache.clone(),
                        declared,
                        admission.clone(),
                    )
                },
            ));
        }
        if !crd.events.is_empty()
            && let Some(api) = self
                .api_for("events.k8s.io/v1", "Event", crd.namespace.as_deref())
                .await
        {
            let (events, primary, cache) = (crd.events.clone(), primary.clone(), self.handle.cache.clone());
            let admission = admission.clone();
            observers.spawn(observe::supervise(format!("{} events", crd.name), move || {
                observe::watch_events(
                    api.clone(),
                    events.clone(),
                    primary.clone(),
                    cache.clone(),
                    admission.clone(),
                )
            }));
        }
        // Always, even beside an explicit watch of the kind: only this watch keeps the
        // children the applier reads and prunes from, and it holds only this CRD's.
        for (api_version, kind) in &crd.owned_kinds {
            let Some(api) = self.api_for(api_version, kind, crd.namespace.as_deref()).await else {
                continue;
            };
            // Only this CRD's children: what the applier needs, and no more held in memory.
            let owned_by_us = format!(
                "{}={}",
                orkestra_expr::labels::OWNER_KIND_LABEL,
                orkestra_katalog::ownership::kind_label(&crd.kind, &crd.group)
            );
            let config = watcher::Config::default().labels(&owned_by_us);
            let (primary, admission) = (primary.clone(), admission.clone());
            let children = self.handle.children.register(api_version, kind);
            let (watched, own) = (
                (api_version.clone(), kind.clone()),
                self.handle.children.own_writes().clone(),
            );
            observers.spawn(observe::supervise(
                format!("{} children of kind {kind}", crd.name),
                move || {
                    observe::watch_owned(
                        api.clone(),
                        config.clone(),
                        primary.clone(),
                        admission.clone(),
                        (children.clone(), watched.clone(), own.clone()),
                    )
                },
            ));
        }
    }

    /// The watch of the Events about this CRD's CRs (never an enqueue: the Live API's log).
    async fn start_event_log(&self, observers: &mut JoinSet<()>, namespace: Option<&str>) {
        let crd = &self.handle.crd;
        let Some(api) = self.api_for("v1", "Event", namespace).await else {
            return;
        };
        let api_version = match crd.group.is_empty() {
            true => crd.version.clone(),
            false => format!("{}/{}", crd.group, crd.version),
        };
        let config = watcher::Config::default().fields(&format!(
            "involvedObject.kind={},involvedObject.apiVersion={api_version}",
            crd.kind
        ));
        let log = self.handle.events.clone();
        observers.spawn(observe::supervise(
            format!("{} events of its CRs", crd.name),
            move || observe::cr_events::watch(api.clone(), config.clone(), log.clone()),
        ));
    }

    /// An API for a secondary kind, found through discovery; `None` (logged) when unknown.
    async fn api_for(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Option<Api<DynamicObject>> {
        match orkestra_kube::discovery::resolve(&self.client, api_version, kind).await {
            Ok((resource, scope)) => {
                let namespace = namespace.filter(|_| scope == Scope::Namespaced);
                match Objects::within(self.client.clone(), namespace, &resource) {
                    Ok(objects) => Some(objects.api().clone()),
                    Err(error) => {
                        tracing::warn!(crd = %self.handle.crd.name, %kind, %error, "cannot watch this kind there");
                        None
                    }
                }
            }
            Err(error) => {
                tracing::warn!(crd = %self.handle.crd.name, %api_version, %kind, %error, "cannot watch this kind: not served");
                None
            }
        }
    }
}
