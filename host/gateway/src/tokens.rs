//! The Serve API's bearer tokens, by name: from an environment variable of the gateway, or
//! from a Secret the gateway reads and, when the Secret does not exist yet, creates with a
//! random token (and replaces once that token is older than `rotateAfter`). Secrets are read
//! again every minute, so a token rotated by someone else is taken in without a restart. A
//! bearer is compared with every token in constant time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use orkestra_kube::objects;
use parking_lot::RwLock;
use rand::RngCore;

use orkestra_katalog::model::{TokenSecret, TokenSource};

/// When the gateway made a token Secret's value (RFC 3339).
pub const GENERATED_AT: &str = "orkestra.orkspace.io/generated-at";
/// How often token Secrets are read again.
const REFRESH: Duration = Duration::from_secs(60);

/// Token errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("token \"{name}\": the environment variable {var} is not set")]
    MissingEnv { name: String, var: String },
    #[error("token \"{name}\": Secret {namespace}/{secret}: {source}")]
    Secret {
        name: String,
        namespace: String,
        secret: String,
        source: kube::Error,
    },
    #[error("token \"{name}\": Secret {namespace}/{secret} has no text under key {key:?}")]
    NoKey {
        name: String,
        namespace: String,
        secret: String,
        key: String,
    },
    #[error("token \"{1}\": rotateAfter: {0}")]
    Rotate(String, String),
}

impl orkestra_kube::transient::Transient for Error {
    fn is_transient(&self) -> bool {
        matches!(self, Error::Secret { source, .. } if source.is_transient())
    }
}

/// The tokens, by name.
#[derive(Debug, Default)]
pub struct Tokens {
    values: RwLock<BTreeMap<String, String>>,
}

impl Tokens {
    /// Reads every token the Katalog declares; the first that cannot be had stops the start.
    pub async fn load(client: &kube::Client, sources: &[TokenSource], namespace: &str) -> Result<Arc<Self>, Error> {
        let tokens = Arc::new(Self::default());
        // Read again from the start: a Secret another replica made meanwhile (409) is read.
        orkestra_kube::transient::retry("reading the gateway's tokens", || {
            tokens.refresh(client, sources, namespace)
        })
        .await?;
        Ok(tokens)
    }

    /// Tokens given directly (tests, and a gateway with no Secrets to read).
    pub fn with(values: impl IntoIterator<Item = (String, String)>) -> Arc<Self> {
        Arc::new(Self {
            values: RwLock::new(values.into_iter().collect()),
        })
    }

    async fn refresh(&self, client: &kube::Client, sources: &[TokenSource], namespace: &str) -> Result<(), Error> {
        let mut values = BTreeMap::new();
        for source in sources {
            let value = match (source.env_var(), &source.secret_ref) {
                (Some(var), _) => std::env::var(var)
                    .ok()
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| Error::MissingEnv {
                        name: source.name.clone(),
                        var: var.to_string(),
                    })?,
                (None, Some(secret)) => secret_value(client, &source.name, secret, namespace).await?,
                // OIDC entries are verified per request (`crate::oidc`).
                (None, None) => continue,
            };
            values.insert(source.name.clone(), value);
        }
        *self.values.write() = values;
        Ok(())
    }

    /// Reads the Secrets again every minute, until the task is dropped.
    pub fn keep_fresh(
        self: &Arc<Self>,
        client: kube::Client,
        sources: Vec<TokenSource>,
        namespace: String,
    ) -> tokio::task::JoinHandle<()> {
        let tokens = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REFRESH).await;
                if let Err(error) = tokens.refresh(&client, &sources, &namespace).await {
                    tracing::warn!(%error, "reading the gateway's tokens again failed; keeping the last ones");
                }
            }
        })
    }

    /// The name of the token `bearer` is.
    pub fn identify(&self, bearer: &str) -> Option<String> {
        let values = self.values.read();
        // Every token is compared, whichever matches, so timing tells nothing.
        let mut found = None;
        for (name, value) in values.iter() {
            if same(bearer.as_bytes(), value.as_bytes()) {
                found = Some(name.clone());
            }
        }
        found
    }

    /// Whether any token is known.
    pub fn is_empty(&self) -> bool {
        self.values.read().is_empty()
    }
}

pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    let mut differ = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        differ |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
    }
    differ == 0
}

/// The token of a Secret, made (or renewed) here when the gateway owns it.
async fn secret_value(
    client: &kube::Client,
    name: &str,
    spec: &TokenSecret,
    default_namespace: &str,
) -> Result<String, Error> {
    let namespace = spec.namespace.clone().unwrap_or_else(|| default_namespace.to_string());
    let key = spec.key.clone().unwrap_or_else(|| "token".into());
    let failed = |source| Error::Secret {
        name: name.to_string(),
        namespace: namespace.clone(),
        secret: spec.name.clone(),
        source,
    };
    let rotate_after = spec
        .rotate_after
        .as_deref()
        .map(orkestra_expr::duration::parse)
        .transpose()
        .map_err(|e| Error::Rotate(e.to_string(), name.to_string()))?;
    let api = objects::namespaced::<Secret>(client.clone(), &namespace).map_err(failed)?;
    let existing = api.get_opt(&spec.name).await.map_err(failed)?;
    let generated = existing.as_ref().and_then(|s| {
        let at = s.metadata.annotations.as_ref()?.get(GENERATED_AT)?;
        at.parse::<jiff::Timestamp>().ok()
    });
    let stale = match (generated, rotate_after) {
        (Some(at), Some(after)) => jiff::Timestamp::now().duration_since(at).as_secs() >= after.as_secs() as i64,
        _ => false,
    };
    if let Some(secret) = existing.as_ref().filter(|_| !stale) {
        return secret
            .data
            .as_ref()
            .and_then(|d| d.get(&key))
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| Error::NoKey {
                name: name.to_string(),
                namespace: namespace.clone(),
                secret: spec.name.clone(),
                key: key.clone(),
            });
    }
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(spec.name.clone()),
            namespace: Some(namespace.clone()),
            annotations: Some([(GENERATED_AT.to_string(), jiff::Timestamp::now().to_string())].into()),
            labels: Some([(orkestra_expr::labels::MANAGED_LABEL.to_string(), "true".to_string())].into()),
            resource_version: existing.as_ref().and_then(|s| s.metadata.resource_version.clone()),
            ..ObjectMeta::default()
        },
        data: Some([(key, ByteString(token.clone().into_bytes()))].into()),
        ..Secret::default()
    };
    match existing {
        Some(_) => api
            .replace(&spec.name, &PostParams::default(), &secret)
            .await
            .map_err(failed)?,
        None => api.create(&PostParams::default(), &secret).await.map_err(failed)?,
    };
    tracing::info!(token = %name, secret = %spec.name, %namespace, renewed = stale, "gateway token written to its Secret");
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_is_known_by_its_exact_value() {
        let tokens = Tokens::with([
            ("ci".to_string(), "s3cret".to_string()),
            ("ops".to_string(), "other".to_string()),
        ]);
        assert_eq!(tokens.identify("s3cret").as_deref(), Some("ci"));
        assert_eq!(tokens.identify("s3cre"), None);
        assert_eq!(tokens.identify("s3cret!"), None);
        assert_eq!(tokens.identify(""), None);
    }
}
