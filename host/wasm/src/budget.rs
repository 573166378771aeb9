//! The engine's instance pool, budgeted. Every instance (a call's, or a warm one kept between
//! calls) holds its component's [`Footprint`] of the pool from before it is instantiated
//! until it is dropped, so the pool itself is never found exhausted: a call that does not fit
//! first gives up kept instances (its own tenant's, its own component's, then the least
//! recently used of anyone's: they are only a cache), then waits for room.
//!
//! A tenant (a namespace, or a cluster-scoped custom resource on its own) may hold its share
//! of the pool: the share of the host's calls `spec.tenants.wasmCalls` gives it, applied to
//! every part of the pool. A component may hold half of it, as it may run half the calls. So
//! neither one tenant nor one component can take what another's instantiation needs.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;

use super::footprint::Footprint;

/// Where a reservation did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Short {
    /// The tenant's share.
    Tenant,
    /// The component's share.
    Component,
    /// The pool as a whole.
    Pool,
}

#[derive(Default)]
struct Ledger {
    used: Footprint,
    tenants: HashMap<Arc<str>, Footprint>,
    components: HashMap<Arc<str>, Footprint>,
}

struct Inner {
    total: Footprint,
    ledger: Mutex<Ledger>,
    freed: Notify,
}

impl Inner {
    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock()
    }
}

/// The pool's budget: what it holds in all and for whom.
#[derive(Clone)]
pub struct PoolBudget {
    inner: Arc<Inner>,
}

/// Part of the pool held for one instance, given back when dropped.
pub struct Hold {
    inner: Arc<Inner>,
    pub tenant: Arc<str>,
    pub component: Arc<str>,
    pub footprint: Footprint,
}

impl Drop for Hold {
    fn drop(&mut self) {
        {
            let mut ledger = self.inner.ledger();
            let Ledger {
                used,
                tenants,
                components,
            } = &mut *ledger;
            *used = used.minus(&self.footprint);
            for (map, key) in [(tenants, &self.tenant), (components, &self.component)] {
                if let Some(held) = map.get_mut(key) {
                    *held = held.minus(&self.footprint);
                    if held.is_empty() {
                        map.remove(key);
                    }
                }
            }
        }
        self.inner.freed.notify_waiters();
    }
}

impl PoolBudget {
    /// A budget over a pool of `total`.
    pub fn new(total: Footprint) -> Self {
        Self {
            inner: Arc::new(Inner {
                total,
                ledger: Mutex::default(),
                freed: Notify::new(),
            }),
        }
    }

    pub fn total(&self) -> Footprint {
        self.inner.total
    }

    /// `need` for `tenant` and `component`, if it fits within `tenant_share`, `component_share`
    /// and the pool; otherwise where it does not.
    pub fn try_hold(
        &self,
        need: Footprint,
        (tenant, tenant_share): (&Arc<str>, Footprint),
        (component, component_share): (&Arc<str>, Footprint),
    ) -> Result<Hold, Short> {
        let mut ledger = self.inner.ledger();
        let of = |map: &HashMap<Arc<str>, Footprint>, key: &Arc<str>| map.get(key).copied().unwrap_or_default();
        if of(&ledger.tenants, tenant).plus(&need).over(&tenant_share).is_some() {
            return Err(Short::Tenant);
        }
        if of(&ledger.components, component)
            .plus(&need)
            .over(&component_share)
            .is_some()
        {
            return Err(Short::Component);
        }
        if ledger.used.plus(&need).over(&self.inner.total).is_some() {
            return Err(Short::Pool);
        }
        let Ledger {
            used,
            tenants,
            components,
        } = &mut *ledger;
        *used = used.plus(&need);
        for (map, key) in [(tenants, tenant), (components, component)] {
            let held = map.entry(key.clone()).or_default();
            *held = held.plus(&need);
        }
        Ok(Hold {
            inner: self.inner.clone(),
            tenant: tenant.clone(),
            component: component.clone(),
            footprint: need,
        })
    }

    /// Resolves at the next release after it is enabled (see [`tokio::sync::Notify`]).
    pub fn freed(&self) -> tokio::sync::futures::Notified<'_> {
        self.inner.freed.notified()
    }

    /// What the pool holds in all.
    pub fn used(&self) -> Footprint {
        self.inner.ledger().used
    }

    /// What each tenant holds now, most core instances first.
    pub fn tenants(&self) -> Vec<(String, Footprint)> {
        let ledger = self.inner.ledger();
        let mut held: Vec<(String, Footprint)> = ledger.tenants.iter().map(|(t, f)| (t.to_string(), *f)).collect();
        held.sort_by(|a, b| {
            (b.1.core_instances, b.1.instances)
                .cmp(&(a.1.core_instances, a.1.instances))
                .then(a.0.cmp(&b.0))
        });
        held
    }

    /// What `tenant` holds now.
    pub fn held_by(&self, tenant: &str) -> Footprint {
        self.inner.ledger().tenants.get(tenant).copied().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(n: u32) -> Footprint {
        Footprint {
            instances: n,
            core_instances: n * 8,
            memories: n * 4,
            tables: n * 8,
        }
    }

    #[tokio::test]
    async fn holds_are_refused_past_each_share_and_given_back_when_dropped() {
        let budget = PoolBudget::new(pool(8));
        let (a, b, c): (Arc<str>, Arc<str>, Arc<str>) = ("team-a".into(), "team-b".into(), "site".into());
        let fat = Footprint {
            instances: 1,
            core_instances: 16,
            memories: 1,
            tables: 1,
        };
        let tenant_share = pool(8).share(1, 4);
        let component_share = pool(8).share(1, 2);
        let hold = |tenant: &Arc<str>| budget.try_hold(fat, (tenant, tenant_share), (&c, component_share));
        let first = hold(&a).unwrap();
        assert_eq!(hold(&a).err(), Some(Short::Tenant), "16 of a's 16 core instances held");
        let second = hold(&b).unwrap();
        assert_eq!(hold(&b).err(), Some(Short::Tenant), "b too: its own share, not a's");
        assert_eq!(budget.held_by("team-a").core_instances, 16);
        let third = budget.try_hold(fat, (&"team-c".into(), tenant_share), (&c, component_share));
        assert_eq!(third.err(), Some(Short::Component), "the component holds half the pool");
        let freed = budget.freed();
        tokio::pin!(freed);
        freed.as_mut().enable();
        drop(first);
        freed.await;
        assert_eq!(budget.held_by("team-a"), Footprint::default());
        let again = hold(&a).expect("a's share is free again");
        drop(second);
        assert_eq!(budget.tenants()[0].0, "team-a");
        drop(again);
        // Many small tenants fill the pool itself.
        let small = Footprint {
            instances: 1,
            core_instances: 1,
            memories: 1,
            tables: 1,
        };
        let mut held = Vec::new();
        let mut refused = None;
        for i in 0..64 {
            let tenant: Arc<str> = format!("t{i}").into();
            match budget.try_hold(
                small,
                (&tenant, tenant_share),
                (&format!("c{i}").into(), component_share),
            ) {
                Ok(h) => held.push(h),
                Err(short) => {
                    refused = Some(short);
                    break;
                }
            }
        }
        assert_eq!(refused, Some(Short::Pool));
        assert_eq!(budget.used().instances, 8);
    }
}
