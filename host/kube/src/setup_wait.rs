//! `setup.wait`: once `ork dev` has applied a CRD's setup files, the objects its CRs need
//! (a source ConfigMap, a Deployment `Available`) are waited for before the sample CRs go
//! in, each until its own timeout. A wait that ends names the object, what it lacked and
//! for how long, and the last answer of the API server when it was not a plain "not found".

use std::time::Duration;

use kube::api::DynamicObject;
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use orkestra_katalog::model::SetupWait;
use serde_json::Value;
use tokio::time::Instant;

use crate::objects::Objects;

/// How often a missing object is looked for again.
const POLL: Duration = Duration::from_millis(250);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("setup.wait: {what}: {source}")]
    Kind {
        what: String,
        #[source]
        source: crate::manifests::Error,
    },
    #[error("setup.wait: {what} cannot be named in a request: {source}")]
    Name {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("setup.wait: {what} {lacked} after {timeout:?}{last}")]
    TimedOut {
        what: String,
        lacked: String,
        timeout: Duration,
        /// The API server's last refusal, if it was one (`: forbidden ...`).
        last: String,
    },
}

/// Waits for each object in order (a namespaced one without a namespace is looked for in
/// `default_namespace`); returns how long each took.
pub async fn wait_for(
    client: &kube::Client,
    waits: &[SetupWait],
    default_namespace: &str,
) -> Result<Vec<(String, Duration)>, Error> {
    let mut waited = Vec::new();
    for wait in waits {
        let began = Instant::now();
        let what = wait.describe();
        let (group, version) = wait.api_version.split_once('/').unwrap_or(("", &wait.api_version));
        let gvk = GroupVersionKind::gvk(group, version, &wait.kind);
        let (resource, caps) = crate::manifests::resolve_kind(client, &gvk)
            .await
            .map_err(|source| Error::Kind {
                what: what.clone(),
                source,
            })?;
        let namespace = match caps.scope {
            Scope::Namespaced => Some(wait.namespace.as_deref().unwrap_or(default_namespace)),
            Scope::Cluster => None,
        };
        let what = wait.describe_in(namespace);
        let named = |source| Error::Name {
            what: what.clone(),
            source,
        };
        let objects = Objects::<DynamicObject>::within(client.clone(), namespace, &resource).map_err(named)?;
        let deadline = began + wait.timeout;
        let mut last = String::new();
        loop {
            let lacked = match objects.get_opt(&wait.name).await {
                Ok(Some(object)) => match &wait.condition {
                    Some(condition) if !holds(&object.data, condition) => format!("is not {condition}"),
                    _ => break,
                },
                Ok(None) => "did not appear".to_string(),
                // A name the rules refuse never becomes right by waiting.
                Err(error @ kube::Error::BuildRequest(_)) => return Err(named(error)),
                Err(error) => {
                    last = format!(" (last answer: {error})");
                    "could not be read".to_string()
                }
            };
            if Instant::now() >= deadline {
                return Err(Error::TimedOut {
                    what: what.clone(),
                    lacked,
                    timeout: wait.timeout,
                    last,
                });
            }
            tokio::time::sleep(POLL.min(deadline - Instant::now())).await;
        }
        waited.push((what, began.elapsed()));
    }
    Ok(waited)
}

/// Whether the object's `status.conditions` has `condition` with status `True`.
fn holds(object: &Value, condition: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == condition && c["status"] == "True")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_condition_holds_only_when_its_status_is_true() {
        let object = json!({"status": {"conditions": [
            {"type": "Available", "status": "True"}, {"type": "Progressing", "status": "False"}]}});
        assert!(holds(&object, "Available"));
        assert!(!holds(&object, "Progressing"));
        assert!(!holds(&object, "Ready"));
        assert!(!holds(&json!({}), "Available"));
    }
}
