//! Warm instances (`instances.reuse: warm`): an instance kept after a call that ended well,
//! to serve a later call of the same component version for a CR of the same tenant (see
//! [`super::Caller::tenant`]: never one shared by two tenants), skipping instantiation (for
//! an interpreted guest, most of a call). Kept only while idle, holding no open file, and
//! bounded: per tenant, per component and in all, with the least recently used given up
//! first, and none kept longer than [`IDLE_FOR`] unused. A kept instance keeps its part of
//! the pool ([`Hold`]); a call that needs room gives kept instances up ([`WarmStores::give_up`]).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use wasmtime::Store;
use wasmtime::component::Instance;

use super::budget::{Hold, Short};
use super::store::CallState;
use orkestra_katalog::component::{Limits, Mount};

/// Idle instances the host keeps in all.
pub const MAX_IDLE: usize = 32;
/// Idle instances one component version may keep.
const PER_COMPONENT: usize = 16;
/// Idle instances one tenant may keep of one component version (calls of a tenant's CRs can
/// run at once, each on an instance of its own).
const PER_TENANT: usize = 4;
/// An instance unused this long is given up at the next call that looks.
pub(super) const IDLE_FOR: Duration = Duration::from_secs(60);

/// Which component version an instance belongs to: held by its [`super::Loaded`], so an
/// instance of a version that was swapped out is recognised and dropped.
#[derive(Default)]
pub(super) struct Lineage;

/// An instance between calls.
pub(super) struct Idle {
    pub store: Store<CallState>,
    pub instance: Instance,
    /// Calls it has served.
    pub calls: u32,
    /// The limits and file grants it was made with; a call under other ones does not use it.
    pub limits: Limits,
    pub files: Vec<Mount>,
    lineage: Weak<Lineage>,
    /// Its part of the pool, with the tenant and component it is kept for.
    pub hold: Hold,
    since: Instant,
}

impl Idle {
    pub fn new(
        store: Store<CallState>,
        instance: Instance,
        calls: u32,
        (limits, files): (Limits, &[Mount]),
        lineage: &Arc<Lineage>,
        hold: Hold,
    ) -> Self {
        Self {
            store,
            instance,
            calls,
            limits,
            files: files.to_vec(),
            lineage: Arc::downgrade(lineage),
            hold,
            since: Instant::now(),
        }
    }

    fn tenant(&self) -> &str {
        &self.hold.tenant
    }

    fn of(&self, lineage: &Arc<Lineage>) -> bool {
        std::ptr::eq(self.lineage.as_ptr(), Arc::as_ptr(lineage))
    }

    fn stale(&self, now: Instant) -> bool {
        self.lineage.strong_count() == 0 || now.duration_since(self.since) >= IDLE_FOR
    }
}

/// The host's idle instances, most recently used last.
#[derive(Default)]
pub(super) struct WarmStores {
    idle: Mutex<Vec<Idle>>,
}

impl WarmStores {
    /// The most recently used idle instance of `lineage` for `tenant` made under `limits`
    /// and `files`, if one is kept.
    pub fn take(&self, lineage: &Arc<Lineage>, tenant: &str, limits: &Limits, files: &[Mount]) -> Option<Idle> {
        let (taken, stale) = {
            let mut idle = self.idle.lock();
            let stale = drain_stale(&mut idle);
            let found = idle
                .iter()
                .rposition(|i| i.of(lineage) && i.tenant() == tenant && i.limits == *limits && i.files == files);
            (found.map(|at| idle.remove(at)), stale)
        };
        // Handing an instance back to the pool resets its memory: outside the lock.
        drop(stale);
        taken
    }

    /// Keeps `instance` for a later call, giving up older ones past the bounds.
    pub fn put(&self, instance: Idle) {
        let given_up = {
            let mut idle = self.idle.lock();
            let mut given_up = drain_stale(&mut idle);
            let same_tenant = |i: &Idle| i.lineage.ptr_eq(&instance.lineage) && i.tenant() == instance.tenant();
            let same_component = |i: &Idle| i.lineage.ptr_eq(&instance.lineage);
            for (kept, bound) in [
                (&same_tenant as &dyn Fn(&Idle) -> bool, PER_TENANT),
                (&same_component, PER_COMPONENT),
                (&|_: &Idle| true, MAX_IDLE),
            ] {
                if idle.iter().filter(|i| kept(i)).count() >= bound
                    && let Some(oldest) = idle.iter().position(kept)
                {
                    given_up.push(idle.remove(oldest));
                }
            }
            idle.push(instance);
            given_up
        };
        drop(given_up);
    }

    /// Gives up the least recently used idle instance that holds what a call short of room
    /// in `short` needs: one of `tenant`'s, of `component`'s, or anyone's. Whether there was one.
    pub fn give_up(&self, short: Short, tenant: &str, component: &str) -> bool {
        let given_up = {
            let mut idle = self.idle.lock();
            let at = idle.iter().position(|i| match short {
                Short::Tenant => i.tenant() == tenant,
                Short::Component => &*i.hold.component == component,
                Short::Pool => true,
            });
            at.map(|at| idle.remove(at))
        };
        // Handing an instance back to the pool resets its memory: outside the lock.
        given_up.is_some()
    }

    /// Idle instances kept now.
    pub fn len(&self) -> usize {
        self.idle.lock().len()
    }

    /// Idle instances kept now for each tenant.
    pub fn per_tenant(&self) -> std::collections::HashMap<String, usize> {
        let idle = self.idle.lock();
        let mut counts = std::collections::HashMap::new();
        for instance in idle.iter() {
            *counts.entry(instance.tenant().to_string()).or_default() += 1;
        }
        counts
    }
}

/// Takes out the instances of swapped-out versions and those idle too long.
fn drain_stale(idle: &mut Vec<Idle>) -> Vec<Idle> {
    let now = Instant::now();
    idle.extract_if(.., |i| i.stale(now)).collect()
}
