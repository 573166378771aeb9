//! Wasm calls at once per tenant (`spec.tenants.wasmCalls`): a call waits for its tenant's
//! share before it takes one of the host's, so one tenant's calls, over every component,
//! never hold all of the host's. A tenant is a namespace, or a cluster-scoped custom resource
//! on its own (see [`super::Caller::tenant`]). The rules can change while calls run; those
//! running finish as they are.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard, RwLock};
use tokio::sync::Notify;

use orkestra_katalog::compile::TenantRules;

/// Namespaces remembered before the idle ones are forgotten.
const KEPT: usize = 1024;

#[derive(Debug, Default)]
struct Share {
    running: usize,
    /// One waiter is woken per call that ends.
    ended: Arc<Notify>,
}

/// Each namespace's calls running, held to its share.
#[derive(Debug)]
pub(crate) struct TenantCalls {
    rules: RwLock<Arc<TenantRules>>,
    shares: Mutex<HashMap<String, Share>>,
}

/// A call counted against its namespace's share until dropped.
pub(crate) struct Turn<'t> {
    calls: &'t TenantCalls,
    namespace: String,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut shares = self.calls.shares();
        if let Some(share) = shares.get_mut(&self.namespace) {
            share.running = share.running.saturating_sub(1);
            share.ended.notify_one();
        }
    }
}

impl TenantCalls {
    pub(crate) fn new(rules: TenantRules) -> Self {
        Self {
            rules: RwLock::new(Arc::new(rules)),
            shares: Mutex::default(),
        }
    }

    fn shares(&self) -> MutexGuard<'_, HashMap<String, Share>> {
        self.shares.lock()
    }

    /// New rules; calls waiting look again (a share may have grown).
    pub(crate) fn set_rules(&self, rules: TenantRules) {
        *self.rules.write() = Arc::new(rules);
        for share in self.shares().values() {
            share.ended.notify_waiters();
        }
    }

    /// The calls at once the rules give `tenant`.
    pub(crate) fn calls_of(&self, tenant: &str) -> usize {
        self.rules.read().of(tenant).wasm_calls
    }

    /// The cores of guest CPU the rules give `tenant`.
    pub(crate) fn cpu_of(&self, tenant: &str) -> f64 {
        self.rules.read().of(tenant).wasm_cpu
    }

    /// Waits for room in `namespace`'s share (a tenant's key).
    pub(crate) async fn enter(&self, namespace: &str) -> Turn<'_> {
        loop {
            let cap = self.calls_of(namespace);
            let ended = {
                let mut shares = self.shares();
                if shares.len() >= KEPT && !shares.contains_key(namespace) {
                    shares.retain(|_, share| share.running > 0);
                }
                let share = shares.entry(namespace.to_string()).or_default();
                if share.running < cap {
                    share.running += 1;
                    return Turn {
                        calls: self,
                        namespace: namespace.to_string(),
                    };
                }
                share.ended.clone()
            };
            // A call that ended between the look and here left its wake-up stored.
            ended.notified().await;
        }
    }

    /// Calls running now, by namespace, most first.
    pub(crate) fn running(&self) -> Vec<(String, usize)> {
        let mut running: Vec<(String, usize)> = self
            .shares()
            .iter()
            .filter(|(_, share)| share.running > 0)
            .map(|(namespace, share)| (namespace.clone(), share.running))
            .collect();
        running.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        running
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orkestra_katalog::compile::TenantLimits;
    use std::time::Duration;

    fn rules(wasm_calls: usize) -> TenantRules {
        TenantRules {
            default: TenantLimits {
                reconciles: 1,
                api: None,
                wasm_calls,
                wasm_cpu: 0.5,
            },
            namespaces: Default::default(),
        }
    }

    #[tokio::test]
    async fn a_namespace_waits_for_its_own_share_and_another_does_not() {
        let calls = TenantCalls::new(rules(2));
        let first = calls.enter("noisy").await;
        let _second = calls.enter("noisy").await;
        let third = calls.enter("noisy");
        tokio::pin!(third);
        let wait = Duration::from_millis(50);
        assert!(
            tokio::time::timeout(wait, &mut third).await.is_err(),
            "two of two running"
        );
        let quiet = tokio::time::timeout(wait, calls.enter("quiet")).await;
        let quiet = quiet.expect("another namespace does not wait");
        assert_eq!(calls.running(), [("noisy".to_string(), 2), ("quiet".to_string(), 1)]);
        drop(quiet);
        drop(first);
        let _third = tokio::time::timeout(wait, &mut third)
            .await
            .expect("the ended call's room");
        // A bigger share lets a waiting call in at once.
        let fourth = calls.enter("noisy");
        tokio::pin!(fourth);
        assert!(tokio::time::timeout(wait, &mut fourth).await.is_err());
        calls.set_rules(rules(4));
        assert!(tokio::time::timeout(wait, &mut fourth).await.is_ok(), "a share grown");
    }
}
