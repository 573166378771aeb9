//! The clusters intents may be applied to (`gateway.clusters`): a client per cluster, made
//! at start-up from Secrets of the gateway's own cluster (a kubeconfig, or a token with a
//! CA), and `local`, the gateway's own. A cluster whose Secret cannot be read does not stop
//! the gateway: its applies fail with that reason, the others go on.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use orkestra_katalog::Compiled;
use orkestra_katalog::model::{ClusterEntry, LOCAL_CLUSTER};

use crate::secrets::read;

/// Every cluster the gateway can write to, by name.
pub struct Clusters {
    local: kube::Client,
    remote: BTreeMap<String, Result<kube::Client, String>>,
}

impl Clusters {
    /// Only the gateway's own cluster.
    pub fn local_only(local: kube::Client) -> Arc<Self> {
        Arc::new(Self {
            local,
            remote: BTreeMap::new(),
        })
    }

    /// Clients for the Katalog's `gateway.clusters`.
    pub async fn connect(local: kube::Client, compiled: &Compiled, namespace: &str) -> Arc<Self> {
        let mut remote = BTreeMap::new();
        let entries = compiled.katalog.gateway.as_ref().map(|g| &g.clusters);
        for (name, entry) in entries.into_iter().flatten() {
            let client = client_for(&local, entry, namespace).await;
            match &client {
                Ok(_) => tracing::info!(cluster = %name, endpoint = %entry.endpoint, "gateway cluster ready"),
                Err(why) => tracing::warn!(cluster = %name, %why, "gateway cluster unavailable; its applies will fail"),
            }
            remote.insert(name.clone(), client);
        }
        Arc::new(Self { local, remote })
    }

    /// The client of a cluster: `None` for a name that is not a cluster, `Err` for one that
    /// could not be reached at start-up.
    pub fn client(&self, name: &str) -> Option<Result<&kube::Client, &str>> {
        if name == LOCAL_CLUSTER {
            return Some(Ok(&self.local));
        }
        self.remote.get(name).map(|c| c.as_ref().map_err(String::as_str))
    }

    /// Every cluster's name, `local` first.
    pub fn names(&self) -> Vec<&str> {
        std::iter::once(LOCAL_CLUSTER)
            .chain(self.remote.keys().map(String::as_str))
            .collect()
    }
}

async fn client_for(local: &kube::Client, entry: &ClusterEntry, namespace: &str) -> Result<kube::Client, String> {
    let kubeconfig = match (&entry.secret_ref, &entry.token_ref) {
        (Some(secret), _) => {
            let text = read(local, secret, namespace).await?;
            Kubeconfig::from_yaml(&text).map_err(|e| format!("the kubeconfig in Secret {}: {e}", secret.name))?
        }
        (None, Some(token)) => {
            let token = read(local, token, namespace).await?;
            let mut cluster = json!({"server": entry.endpoint});
            match &entry.ca_ref {
                Some(ca) => {
                    let pem = read(local, ca, namespace).await?;
                    cluster["certificate-authority-data"] =
                        json!(base64::engine::general_purpose::STANDARD.encode(pem));
                }
                None => cluster["insecure-skip-tls-verify"] = json!(entry.insecure),
            }
            let document = json!({
                "apiVersion": "v1", "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": token.trim()}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            });
            serde_json::from_value(document).map_err(|e| format!("building a client for {}: {e}", entry.endpoint))?
        }
        (None, None) => return Err("no credentials (secretRef or tokenRef)".into()),
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("the cluster's configuration: {e}"))?;
    kube::Client::try_from(config).map_err(|e| format!("a client for {}: {e}", entry.endpoint))
}
