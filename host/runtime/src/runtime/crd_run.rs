//! One CRD's run, from pending to stopped: it waits for its dependencies and for the API
//! server to serve its kind, starts its watches (the primary informer, `observe.watch`,
//! `observe.events`, the owned kinds) and its workers (while its CRs list, or after the
//! list where it watches other objects), then its autoscaler and resync after the first
//! complete list, and on stop lets in-flight reconciles finish.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use kube::runtime::watcher;
use orkestra_kube::objects::Objects;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::outcome::health::{Event, HealthBoard};
use crate::pipeline::enqueue::Admission;
use crate::pipeline::kordinator::Kordinator;
use crate::pipeline::mux::MuxReconciler;
use crate::pipeline::observe::{self, Enqueue};
pub use crate::pipeline::roster::CrdHandle;
use crate::pipeline::tuning::Tuning;
use orkestra_katalog::DependencyCondition;
use orkestra_wasm::Slot;

/// How often a pending CRD checks its dependencies and whether its CRD exists.
const PENDING_RETRY: Duration = Duration::from_millis(500);
/// How long the initial list's settled CRs wait for the children's lists at most.
const SETTLED_WAIT: Duration = Duration::from_secs(10);

/// One CRD's life.
pub(super) struct CrdRun {
    /// The CRD's components: each reload offers every CR again.
    pub(super) slots: Vec<Arc<Slot>>,
    pub(super) client: kube::Client,
    pub(super) handle: CrdHandle,
    pub(super) mux: MuxReconciler,
    pub(super) health: HealthBoard,
    pub(super) externals: orkestra_effects::external::Externals,
    /// The runtime's CRDs, for the autoscaler's `cross.<crd>.metrics`.
    pub(super) peers: crate::pipeline::cross::Peers,
    pub(super) event_log: bool,
    pub(super) ownership: crate::ha::Ownership,
    pub(super) permissions: Arc<crate::outcome::permissions::Permissions>,
}

/// How long a CRD's workers wait for the first permission check.
const PERMISSION_CHECK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl CrdRun {
    pub(super) async fn run(self, mut stopped: watch::Receiver<bool>) {
        let crd = self.handle.crd.clone();
        let Some((resource, scope)) = self.wait_until_startable(&mut stopped).await else {
            return;
        };
        tracing::debug!(gvk = %crd.gvk, "served; listing its CRs");
        let resource = Arc::new(resource);
        let admission: Arc<dyn Enqueue> = Admission::new(
            crd.clone(),
            self.handle.cache.clone(),
            self.handle.queue.clone(),
            self.handle.stats.clone(),
            self.handle.tuning.clone(),
            self.externals.clone(),
        );

        let mut observers = JoinSet::new();
        let namespace = crd.namespace.clone().filter(|_| scope == Scope::Namespaced);
        let primary_api = match Objects::<DynamicObject>::within(self.client.clone(), namespace.as_deref(), &resource) {
            Ok(objects) => objects.api().clone(),
            Err(error) => {
                tracing::error!(%error, "the CRD's namespace is not a namespace; not started");
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
        // A reconcile that follows a write reads that write, not the version before.
        self.handle.own.read_back_into(cache.read_back(declared));
        self.handle.children.read_back();
        self.handle.children.own_writes().connect(admission.clone());
        let own = self.handle.own.clone();
        observers.spawn(
            observe::supervise(format!("{} primary", crd.name), move || {
                let observer =
                    observe::PrimaryObserver::new(cache.clone(), declared, enqueue.clone(), own.clone(), ready.take());
                observe::watch_primary(primary_api.clone(), config.clone(), observer)
            })
            .in_current_span(),
        );
        let kordinator = Arc::new(Kordinator {
            client: self.client.clone(),
            externals: self.externals.clone(),
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
            stamps: Arc::new(crate::pipeline::feedback::StampSource {
                crd: crd.clone(),
                health: self.health.clone(),
                tuning: self.handle.tuning.clone(),
                counters: self.handle.counters.clone(),
            }),
        });
        // The workers start while the CRs list: what the list offers at once is only new and
        // changed CRs (a user's work; the settled ones are held, below), which need not wait
        // for the whole list, as controller-runtime's priority queue does not either. A CRD
        // that reacts to other objects (`observe.watch`, `observe.events`) waits for the list
        // and those watches instead: its watches take what exists when they list as history,
        // so a reconcile before them could miss the change that should run it again.
        let early = crd.watches.is_empty() && crd.events.is_empty();
        let mut workers = JoinSet::new();
        if early {
            self.start_workers(&kordinator, &mut workers).await;
        }
        let stop_requested = async {
            // The guard wait_for returns is not Send: drop it here.
            let _ = stopped.wait_for(|s| *s).await;
        };
        let settled = tokio::select! {
            listed = ready_rx => listed.unwrap_or_default(),
            () = stop_requested => {
                observers.shutdown().await;
                self.handle.queue.shutdown();
                while workers.join_next().await.is_some() {}
                return;
            }
        };
        // The other watches list after the CRs do: on a start over many objects their lists
        // would share the API server and this process with the CRs' list, and nothing waits
        // for them (a child not listed yet is read on its own; settled CRs wait, below).
        self.start_secondary(&mut observers, &admission).await;
        observers.spawn(
            super::permissions::offer_on_change(
                self.permissions.clone(),
                crd.name.clone(),
                self.handle.cache.clone(),
                admission.clone(),
            )
            .in_current_span(),
        );
        // Nobody can read the events of a CRD out of the Live API or closed to cross reads.
        if self.event_log && crd.endpoints.enabled && crd.cross_access {
            self.start_event_log(&mut observers, namespace.as_deref()).await;
        }
        if !early {
            self.start_workers(&kordinator, &mut workers).await;
        }
        self.health.record(&crd.name, Event::Started);
        tracing::info!(gvk = %crd.gvk, workers = crd.workers, cached = self.handle.cache.len(), "CRD started");

        let autoscaler = crd.autoscale.clone().map(|rule| {
            tokio::spawn(
                crate::runtime::autoscale::run(
                    crd.clone(),
                    rule,
                    self.handle.tuning.clone(),
                    self.handle.queue.clone(),
                    self.handle.counters.clone(),
                    self.peers.clone(),
                )
                .in_current_span(),
            )
        });
        let resync = tokio::spawn(
            super::resync::run(
                self.handle.cache.clone(),
                admission.clone(),
                self.handle.tuning.resync(),
            )
            .in_current_span(),
        );

        let mut reoffers = JoinSet::new();
        // The first list's settled CRs are background work: each reconcile reads its children,
        // which before their own list come one GET at a time, while a new or changed CR should
        // not wait behind them. So they are offered once the children have listed (or after
        // SETTLED_WAIT, for a watch that cannot list), new and changed CRs at once.
        let (children, offer) = (self.handle.children.clone(), admission.clone());
        reoffers.spawn(
            async move {
                let began = tokio::time::Instant::now();
                let _ = tokio::time::timeout(SETTLED_WAIT, children.until_listed()).await;
                tracing::debug!(settled = settled.len(), waited = ?began.elapsed(), "the initial list's settled CRs offered");
                for trigger in settled {
                    offer.offer(trigger);
                }
            }
            .in_current_span(),
        );
        for slot in &self.slots {
            let mut reloads = slot.reloads();
            let cache = self.handle.cache.clone();
            let admission = admission.clone();
            // A swapped (or refused) component should show on its CRs now, not at the next
            // event: its output or its Component condition changes.
            reoffers.spawn(
                async move {
                    while reloads.changed().await.is_ok() {
                        admission.offer_all(&cache);
                    }
                }
                .in_current_span(),
            );
        }

        // CRs this replica now owns (elected, or its share grew) are offered again.
        let mut changes = self.ownership.changes();
        let (cache, offer) = (self.handle.cache.clone(), admission.clone());
        reoffers.spawn(
            async move {
                while changes.changed().await.is_ok() {
                    offer.offer_all(&cache);
                }
            }
            .in_current_span(),
        );

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
        tracing::info!("CRD stopped");
    }

    /// The CRD's workers, once the first permission check has answered: what the runtime may
    /// not do is named before the first reconcile (the check runs beside the lists, so it has
    /// answered by then but on a slow API server).
    async fn start_workers(&self, kordinator: &Arc<Kordinator>, workers: &mut JoinSet<()>) {
        self.permissions.first_check(PERMISSION_CHECK_WAIT).await;
        for _ in 0..Tuning::tasks(&self.handle.crd) {
            workers.spawn(kordinator.clone().work().in_current_span());
        }
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
                        tracing::warn!(gvk = %crd.gvk, %error, "the API server does not serve this kind yet; waiting for its CRD");
                        logged = true;
                    }
                    Err(_) => {}
                }
            } else if unmet != said {
                tracing::info!(waiting_for = ?unmet, "pending on dependencies");
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
            observers.spawn(
                observe::supervise(format!("{} watch of {}", crd.name, entry.kind), move || {
                    observe::watch_secondary(
                        api.clone(),
                        config.clone(),
                        watch.clone(),
                        primary.clone(),
                        cache.clone(),
                        declared,
                        admission.clone(),
                    )
                })
                .in_current_span(),
            );
        }
        if !crd.events.is_empty()
            && let Some(api) = self
                .api_for("events.k8s.io/v1", "Event", crd.namespace.as_deref())
                .await
        {
            let (events, primary, cache) = (crd.events.clone(), primary.clone(), self.handle.cache.clone());
            let admission = admission.clone();
            observers.spawn(
                observe::supervise(format!("{} events", crd.name), move || {
                    observe::watch_events(
                        api.clone(),
                        events.clone(),
                        primary.clone(),
                        cache.clone(),
                        admission.clone(),
                    )
                })
                .in_current_span(),
            );
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
            observers.spawn(
                observe::supervise(format!("{} children of kind {kind}", crd.name), move || {
                    observe::watch_owned(
                        api.clone(),
                        config.clone(),
                        primary.clone(),
                        admission.clone(),
                        (children.clone(), watched.clone(), own.clone()),
                    )
                })
                .in_current_span(),
            );
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
        observers.spawn(
            observe::supervise(format!("{} events of its CRs", crd.name), move || {
                observe::cr_events::watch(api.clone(), config.clone(), log.clone())
            })
            .in_current_span(),
        );
    }

    /// An API for a secondary kind, found through discovery; `None` (logged) when unknown.
    async fn api_for(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Option<Api<DynamicObject>> {
        match orkestra_kube::discovery::resolve(&self.client, api_version, kind).await {
            Ok((resource, scope)) => {
                let namespace = namespace.filter(|_| scope == Scope::Namespaced);
                match Objects::within(self.client.clone(), namespace, &resource) {
                    Ok(objects) => Some(objects.api().clone()),
                    Err(error) => {
                        tracing::warn!(%kind, %error, "cannot watch this kind there");
                        None
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%api_version, %kind, %error, "cannot watch this kind: not served");
                None
            }
        }
    }
}
