//! Text under a key of a Secret, read directly, or through [`Recent`]: read again once a
//! value is older than a bound, so a rotated webhook secret is taken in without a restart
//! while a flood of deliveries costs the API server one read per bound and key.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use orkestra_kube::objects;
use parking_lot::Mutex;

use orkestra_katalog::model::SecretKey;

/// The text under a key of a Secret (its namespace defaults to `namespace`).
pub async fn read(client: &kube::Client, secret: &SecretKey, namespace: &str) -> Result<String, String> {
    let namespace = secret.namespace.as_deref().unwrap_or(namespace);
    let api = objects::namespaced::<Secret>(client.clone(), namespace).map_err(|e| e.to_string())?;
    let found = api
        .get_opt(&secret.name)
        .await
        .map_err(|e| format!("reading Secret {namespace}/{}: {e}", secret.name))?
        .ok_or_else(|| format!("Secret {namespace}/{} does not exist", secret.name))?;
    let value = found
        .data
        .as_ref()
        .and_then(|d| d.get(&secret.key))
        .ok_or_else(|| format!("Secret {namespace}/{} has no key {:?}", secret.name, secret.key))?;
    String::from_utf8(value.0.clone())
        .map_err(|_| format!("Secret {namespace}/{} key {:?} is not text", secret.name, secret.key))
}

/// A Secret key: its namespace, name and key.
type Key = (String, String, String);
/// A value as last read, and when.
type Read = (Instant, Result<String, String>);

/// Secret values read at most once per `fresh_for` each (a failed read too).
pub struct Recent {
    client: kube::Client,
    namespace: String,
    fresh_for: Duration,
    values: Mutex<HashMap<Key, Read>>,
}

impl Recent {
    pub fn new(client: kube::Client, namespace: &str, fresh_for: Duration) -> Self {
        Self {
            client,
            namespace: namespace.to_string(),
            fresh_for,
            values: Mutex::default(),
        }
    }

    /// The value under `secret`'s key, trimmed of surrounding whitespace (a trailing newline
    /// from `kubectl create secret --from-file` is not part of a shared secret).
    pub async fn get(&self, secret: &SecretKey) -> Result<String, String> {
        let namespace = secret.namespace.clone().unwrap_or_else(|| self.namespace.clone());
        let key = (namespace, secret.name.clone(), secret.key.clone());
        let held = self.values.lock().get(&key).cloned();
        if let Some((at, value)) = held
            && at.elapsed() < self.fresh_for
        {
            return value;
        }
        let value = read(&self.client, secret, &self.namespace)
            .await
            .map(|v| v.trim().to_string());
        self.values.lock().insert(key, (Instant::now(), value.clone()));
        value
    }
}
