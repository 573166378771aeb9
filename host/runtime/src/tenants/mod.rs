//! What one namespace (a tenant) may take of the whole runtime, over every CRD: its
//! reconciles at once ([`reconciles`], which every CRD's queue consults as it picks its next
//! item) and its API requests ([`api`], a token bucket per namespace in front of the API
//! client). Its Wasm calls at once are held by the Wasm host, from the same rules.
//!
//! The rules are `spec.tenants` of the Katalog; a reload replaces them, and what is running
//! finishes under the old ones.

pub mod api;
pub mod reconciles;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard, RwLock};
use tokio::sync::Notify;

use orkestra_katalog::compile::TenantRules;

/// The runtime's shares, one for every CRD it runs.
#[derive(Debug)]
pub struct Tenants {
    rules: RwLock<Arc<TenantRules>>,
    /// Reconciles running, by namespace (none kept at zero).
    running: Mutex<HashMap<Arc<str>, reconciles::Running>>,
    /// Rung when a namespace at its cap ends a reconcile, or the rules change: queues whose
    /// next item waits for room look again.
    freed: Notify,
    api: api::Buckets,
}

impl Tenants {
    pub fn new(rules: TenantRules) -> Self {
        Self {
            rules: RwLock::new(Arc::new(rules)),
            running: Mutex::default(),
            freed: Notify::new(),
            api: api::Buckets::default(),
        }
    }

    pub fn rules(&self) -> Arc<TenantRules> {
        self.rules.read().clone()
    }

    /// New rules (a reload); queues waiting for a namespace's room look again.
    pub fn set_rules(&self, rules: TenantRules) {
        *self.rules.write() = Arc::new(rules);
        self.api.forget();
        self.freed.notify_waiters();
    }

    fn running(&self) -> MutexGuard<'_, HashMap<Arc<str>, reconciles::Running>> {
        self.running.lock()
    }
}

/// The tenant of the CR `key`: its namespace; a cluster-scoped CR has none (only a cluster
/// admin makes those) and is never held back.
pub fn tenant_of(key: &str) -> Option<&str> {
    key.split_once('/').map(|(namespace, _)| namespace)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_namespaces_wasm_share_is_bounded_by_the_hosts_calls() {
        // The Katalog checks `wasmCalls` against its own copy of the host's figure.
        assert_eq!(
            orkestra_katalog::compile::WASM_CALLS_MAX,
            orkestra_wasm::MAX_CONCURRENT_CALLS
        );
        assert_eq!(super::tenant_of("team-a/web"), Some("team-a"));
        assert_eq!(super::tenant_of("cluster-wide"), None);
    }
}
