//! The identities components act as: a client per ServiceAccount that impersonates it, so
//! what a component does through the kube interface, and the children it returns, reach the
//! API server as that account and the cluster's RBAC holds besides the Katalog's grants.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Clients kept at most; a CRD whose CRs span many namespaces makes one per namespace.
const KEPT: usize = 256;

/// Impersonating clients made from the host's own configuration (which must be allowed to
/// `impersonate` the accounts: `ork manifests` grants it).
pub struct Identities {
    config: kube::Config,
    clients: Mutex<HashMap<String, kube::Client>>,
    /// Their requests are held to their namespace's rate like the host's own.
    tenants: Arc<crate::tenants::Tenants>,
}

impl Identities {
    pub fn new(config: kube::Config, tenants: Arc<crate::tenants::Tenants>) -> Self {
        Self {
            config,
            clients: Mutex::default(),
            tenants,
        }
    }

    /// A client acting as `user` (`system:serviceaccount:NS:NAME`).
    pub fn client(&self, user: &str) -> Result<kube::Client, String> {
        let mut clients = self.clients.lock();
        if let Some(client) = clients.get(user) {
            return Ok(client.clone());
        }
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(user.to_string());
        // The API server adds a ServiceAccount's own groups to an impersonated account.
        config.auth_info.impersonate_groups = None;
        let client =
            kube::Client::try_from(config).map_err(|e| format!("cannot make a client acting as {user}: {e}"))?;
        let client = self.tenants.limit(client);
        if clients.len() >= KEPT {
            clients.clear();
        }
        clients.insert(user.to_string(), client.clone());
        Ok(client)
    }
}
