//! Reconciles at once per namespace, over every CRD. A CRD's queue asks, under its own lock,
//! whether an item's namespace has room ([`Room::has_room`]) and takes a [`Permit`] for the
//! item it picks; an item of a namespace at its cap stays queued in its place and the queue
//! serves another namespace's. The cap holds even when no other namespace waits in this
//! queue: the one it leaves room for may be waiting in another CRD's.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, MutexGuard};

use tokio::sync::futures::Notified;

use super::{Tenants, tenant_of};
use orkestra_katalog::compile::TenantRules;

/// The namespaces' room, held while a queue picks its next item (its own lock is taken
/// first, then this one; a [`Permit`] dropped takes only this one).
pub struct Room<'t> {
    tenants: &'t Arc<Tenants>,
    rules: Arc<TenantRules>,
    running: MutexGuard<'t, HashMap<Arc<str>, usize>>,
}

impl Room<'_> {
    /// Whether the CR `key`'s namespace may start one more reconcile.
    pub fn has_room(&self, key: &str) -> bool {
        tenant_of(key).is_none_or(|namespace| self.has_room_in(namespace))
    }

    /// Whether `namespace` may start one more reconcile.
    pub fn has_room_in(&self, namespace: &str) -> bool {
        self.running.get(namespace).copied().unwrap_or(0) < self.rules.of(namespace).reconciles
    }

    /// Counts a reconcile of `key` (`None` for a cluster-scoped CR, which is not counted).
    pub fn enter(mut self, key: &str) -> Option<Permit> {
        let namespace: Arc<str> = tenant_of(key)?.into();
        *self.running.entry(namespace.clone()).or_insert(0) += 1;
        Some(Permit {
            tenants: self.tenants.clone(),
            namespace,
        })
    }
}

/// One reconcile of a namespace, counted until dropped.
pub struct Permit {
    tenants: Arc<Tenants>,
    namespace: Arc<str>,
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Permit").field(&self.namespace).finish()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let cap = self.tenants.rules().of(&self.namespace).reconciles;
        let mut running = self.tenants.running();
        let Some(count) = running.get_mut(&*self.namespace) else {
            return;
        };
        let was = *count;
        *count -= 1;
        if *count == 0 {
            running.remove(&*self.namespace);
        }
        drop(running);
        // Only a namespace that was at its cap can have items held back.
        if was >= cap {
            self.tenants.freed.notify_waiters();
        }
    }
}

impl Tenants {
    /// The namespaces' room now, for a queue picking its next item.
    pub fn room(self: &Arc<Self>) -> Room<'_> {
        Room {
            rules: self.rules(),
            running: self.running(),
            tenants: self,
        }
    }

    /// Resolves when, after this call, a namespace at its cap ends a reconcile or the
    /// rules change. Create it before looking at the room, so no wake-up is missed.
    pub fn freed(&self) -> Notified<'_> {
        self.freed.notified()
    }

    /// Reconciles running now, by namespace, most first.
    pub fn reconciling(&self) -> Vec<(Arc<str>, usize)> {
        let mut running: Vec<(Arc<str>, usize)> = self.running().iter().map(|(n, c)| (n.clone(), *c)).collect();
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
    async fn a_namespace_at_its_cap_has_no_room_until_one_of_its_reconciles_ends() {
        let tenants = tenants(2);
        let first = tenants.room().enter("noisy/a").unwrap();
        let second = tenants.room().enter("noisy/b").unwrap();
        let room = tenants.room();
        assert!(!room.has_room("noisy/c"), "two of two running");
        assert!(room.has_room("quiet/a"), "another namespace is not held");
        assert!(room.has_room("cluster-wide"), "a cluster-scoped CR is not counted");
        assert!(room.enter("cluster-wide").is_none());
        assert_eq!(tenants.reconciling(), [("noisy".into(), 2)]);
        // Ending one of a namespace at its cap wakes the queues waiting for it.
        let freed = tenants.freed();
        drop(first);
        tokio::time::timeout(std::time::Duration::from_secs(1), freed)
            .await
            .expect("woken");
        assert!(tenants.room().has_room("noisy/c"));
        drop(second);
        assert!(tenants.reconciling().is_empty(), "a namespace at zero is forgotten");
        // A namespace named in the rules has its own cap.
        let held: Vec<Permit> = ["big/1", "big/2", "big/3"]
            .iter()
            .map(|key| tenants.room().enter(key).unwrap())
            .collect();
        assert!(!tenants.room().has_room("big/4"));
        drop(held);
    }
}
