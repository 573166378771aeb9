//! Reconciles at once per namespace, over every CRD. A CRD's queue asks, under its own lock,
//! whether an item's namespace has room ([`Room::has_room`]) and takes a [`Permit`] for the
//! item it picks; an item of a namespace at its cap stays queued in its place and the queue
//! serves another namespace's. The cap holds even when no other namespace waits in this
//! queue: the one it leaves room for may be waiting in another CRD's. But a namespace always
//! has room for one reconcile in each CRD, so its backlog in one CRD never stops its CRs of
//! another: a namespace runs at most its cap, plus one in each other CRD.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::MutexGuard;
use tokio::sync::futures::Notified;

use super::{Tenants, tenant_of};
use orkestra_katalog::compile::TenantRules;

/// One namespace's reconciles running: in all, and by CRD.
#[derive(Debug, Default)]
pub(super) struct Running {
    total: usize,
    by_crd: HashMap<Arc<str>, usize>,
}

/// The namespaces' room, as one CRD's queue sees it, held while it picks its next item (its
/// own lock is taken first, then this one; a [`Permit`] dropped takes only this one).
pub struct Room<'t> {
    tenants: &'t Arc<Tenants>,
    crd: &'t Arc<str>,
    rules: Arc<TenantRules>,
    running: MutexGuard<'t, HashMap<Arc<str>, Running>>,
}

impl Room<'_> {
    /// Whether the CR `key`'s namespace may start one more reconcile.
    pub fn has_room(&self, key: &str) -> bool {
        tenant_of(key).is_none_or(|namespace| self.has_room_in(namespace))
    }

    /// Whether `namespace` may start one more reconcile of this CRD: under its cap, or none of
    /// this CRD running.
    pub fn has_room_in(&self, namespace: &str) -> bool {
        self.running.get(namespace).is_none_or(|running| {
            running.total < self.rules.of(namespace).reconciles || !running.by_crd.contains_key(self.crd)
        })
    }

    /// Counts a reconcile of `key` (`None` for a cluster-scoped CR, which is not counted).
    pub fn enter(mut self, key: &str) -> Option<Permit> {
        let namespace: Arc<str> = tenant_of(key)?.into();
        let running = self.running.entry(namespace.clone()).or_default();
        running.total += 1;
        *running.by_crd.entry(self.crd.clone()).or_insert(0) += 1;
        Some(Permit {
            tenants: self.tenants.clone(),
            crd: self.crd.clone(),
            namespace,
        })
    }
}

/// One reconcile of a namespace, counted until dropped.
pub struct Permit {
    tenants: Arc<Tenants>,
    crd: Arc<str>,
    namespace: Arc<str>,
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Permit").field(&self.namespace).field(&self.crd).finish()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let cap = self.tenants.rules().of(&self.namespace).reconciles;
        let mut all = self.tenants.running();
        let Some(running) = all.get_mut(&*self.namespace) else {
            return;
        };
        let was = running.total;
        running.total = was.saturating_sub(1);
        if let Some(count) = running.by_crd.get_mut(&self.crd) {
            *count -= 1;
            if *count == 0 {
                running.by_crd.remove(&self.crd);
            }
        }
        if running.total == 0 {
            all.remove(&*self.namespace);
        }
        drop(all);
        // Only a namespace that was at its cap can have items held back.
        if was >= cap {
            self.tenants.freed.notify_waiters();
        }
    }
}

impl Tenants {
    /// The namespaces' room now, for the queue of `crd` picking its next item.
    pub fn room<'t>(self: &'t Arc<Self>, crd: &'t Arc<str>) -> Room<'t> {
        Room {
            rules: self.rules(),
            running: self.running(),
            tenants: self,
            crd,
        }
    }

    /// Resolves when, after this call, a namespace at its cap ends a reconcile or the
    /// rules change. Create it before looking at the room, so no wake-up is missed.
    pub fn freed(&self) -> Notified<'_> {
        self.freed.notified()
    }

    /// Reconciles running now, by namespace, most first.
    pub fn reconciling(&self) -> Vec<(Arc<str>, usize)> {
        let mut running: Vec<(Arc<str>, usize)> = self.running().iter().map(|(n, r)| (n.clone(), r.total)).collect();
        running.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenants(reconciles: usize) -> Arc<Tenants> {
        let limits = orkestra_katalog::compile::TenantLimits {
            reconciles,
            api: None,
            wasm_calls: 16,
            wasm_cpu: 0.5,
        };
        let mut namespaces = std::collections::BTreeMap::new();
        namespaces.insert(
            "big".to_string(),
            orkestra_katalog::compile::TenantLimits {
                reconciles: 3,
                ..limits
            },
        );
        Arc::new(Tenants::new(TenantRules {
            default: limits,
            namespaces,
        }))
    }

    #[tokio::test]
    async fn a_namespace_at_its_cap_has_room_only_for_a_first_reconcile_in_another_crd() {
        let tenants = tenants(2);
        let (app, db): (Arc<str>, Arc<str>) = ("app".into(), "db".into());
        let first = tenants.room(&app).enter("noisy/a").unwrap();
        let second = tenants.room(&app).enter("noisy/b").unwrap();
        let room = tenants.room(&app);
        assert!(!room.has_room("noisy/c"), "two of two running");
        assert!(room.has_room("quiet/a"), "another namespace is not held");
        assert!(room.has_room("cluster-wide"), "a cluster-scoped CR is not counted");
        assert!(room.enter("cluster-wide").is_none());
        // Another CRD still runs one of the namespace's CRs, and no more.
        let third = tenants.room(&db).enter("noisy/x").unwrap();
        assert!(!tenants.room(&db).has_room("noisy/y"));
        assert_eq!(tenants.reconciling(), [("noisy".into(), 3)]);
        // Ending one of a namespace at its cap wakes the queues waiting for it.
        let freed = tenants.freed();
        drop((first, third));
        tokio::time::timeout(std::time::Duration::from_secs(1), freed)
            .await
            .expect("woken");
        assert!(tenants.room(&app).has_room("noisy/c"));
        drop(second);
        assert!(tenants.reconciling().is_empty(), "a namespace at zero is forgotten");
        // A namespace named in the rules has its own cap.
        let held: Vec<Permit> = ["big/1", "big/2", "big/3"]
            .iter()
            .map(|key| tenants.room(&app).enter(key).unwrap())
            .collect();
        assert!(!tenants.room(&app).has_room("big/4"));
        drop(held);
    }
}
