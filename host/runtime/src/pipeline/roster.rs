//! The CRDs a runtime runs now, and the Katalog they came from. A live reload swaps entries
//! in and out; everything that reads "the runtime's CRDs" (cross reads, the Live API,
//! `/metrics`) reads them here, so it sees each reload at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use orkestra_katalog::compile::{Compiled, CompiledCrd};
use parking_lot::RwLock;

use crate::outcome::counters::Counters;
use crate::pipeline::enqueue::Stats;
use crate::pipeline::observe::cr_events::EventLog;
use crate::pipeline::observe::{Cache, Children};
use crate::pipeline::queue::WorkQueue;
use crate::pipeline::tuning::Tuning;

/// Everything observable about one running CRD.
#[derive(Clone)]
pub struct CrdHandle {
    pub crd: Arc<CompiledCrd>,
    pub queue: WorkQueue,
    pub cache: Cache,
    /// Its children as the owned-kind watches see them.
    pub children: Children,
    /// The runtime's writes to its CRs (status, finalizers, stamps), whose echoes are no
    /// trigger.
    pub own: Arc<crate::pipeline::observe::own_writes::OwnWrites>,
    /// What each CR's writes may cost.
    pub budget: Arc<crate::outcome::budget::WriteBudget>,
    pub stats: Arc<Stats>,
    pub counters: Arc<Counters>,
    /// Workers, queue depth and resync now (the autoscaler moves them).
    pub tuning: Arc<Tuning>,
    /// Its CRs' events, for the Live API (kept only while it is served).
    pub events: EventLog,
    /// What each namespace may take of the runtime, shared by every CRD.
    pub tenants: Arc<crate::tenants::Tenants>,
}

impl CrdHandle {
    /// A CRD about to start: empty queue and caches; its queue holds each namespace to
    /// `tenants`' caps.
    pub fn new(crd: Arc<CompiledCrd>, tenants: Arc<crate::tenants::Tenants>) -> Self {
        Self {
            tuning: Arc::new(Tuning::new(&crd)),
            queue: WorkQueue::with_rules(crd.flows.clone()).sharing(tenants.clone(), crd.name.clone()),
            tenants,
            crd,
            cache: Cache::default(),
            children: Children::default(),
            own: Arc::default(),
            budget: Arc::default(),
            stats: Arc::new(Stats::default()),
            counters: Arc::new(Counters::default()),
            events: EventLog::default(),
        }
    }

    /// The CRD's new pipeline, started afresh, keeping what outlives a restart: its counters
    /// (`/metrics` series never go back), its write budget and its CR event log.
    pub fn restarted(&self, crd: Arc<CompiledCrd>) -> Self {
        Self {
            counters: self.counters.clone(),
            budget: self.budget.clone(),
            events: self.events.clone(),
            ..Self::new(crd, self.tenants.clone())
        }
    }
}

struct Now {
    katalog: Arc<Compiled>,
    crds: BTreeMap<String, CrdHandle>,
}

/// The running CRDs, by name, shared by every reader of the runtime.
#[derive(Clone)]
pub struct Roster {
    now: Arc<RwLock<Now>>,
}

impl Roster {
    pub fn new(katalog: Arc<Compiled>, crds: impl IntoIterator<Item = CrdHandle>) -> Self {
        let crds = crds.into_iter().map(|h| (h.crd.name.to_string(), h)).collect();
        Self {
            now: Arc::new(RwLock::new(Now { katalog, crds })),
        }
    }

    fn read(&self) -> parking_lot::RwLockReadGuard<'_, Now> {
        self.now.read()
    }

    fn write(&self) -> parking_lot::RwLockWriteGuard<'_, Now> {
        self.now.write()
    }

    /// The Katalog the running CRDs were compiled from (the last one that loaded).
    pub fn katalog(&self) -> Arc<Compiled> {
        self.read().katalog.clone()
    }

    /// Every running CRD, in name order.
    pub fn crds(&self) -> Vec<CrdHandle> {
        self.read().crds.values().cloned().collect()
    }

    pub fn get(&self, name: &str) -> Option<CrdHandle> {
        self.read().crds.get(name).cloned()
    }

    /// The compiled CRDs, by name: what a reload compares with.
    pub fn running(&self) -> BTreeMap<String, Arc<CompiledCrd>> {
        self.read()
            .crds
            .iter()
            .map(|(name, h)| (name.clone(), h.crd.clone()))
            .collect()
    }

    pub(crate) fn set_katalog(&self, katalog: Arc<Compiled>) {
        self.write().katalog = katalog;
    }

    pub(crate) fn insert(&self, handle: CrdHandle) {
        self.write().crds.insert(handle.crd.name.to_string(), handle);
    }

    pub(crate) fn remove(&self, name: &str) -> Option<CrdHandle> {
        self.write().crds.remove(name)
    }
}
