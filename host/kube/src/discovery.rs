//! Finding a kind on the API server, falling back to the earlier API version of kinds whose
//! schema did not change at GA, so Katalogs written for current clusters also run on older
//! ones. Only a server before 1.23 takes a fallback (batch/v1 CronJob and policy/v1 are GA
//! since 1.21, autoscaling/v2 since 1.23): the v1.20.2 control plane built on machines
//! without Go, or an old cluster. A current server never does.

use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;

/// Earlier API versions of a kind, tried in order when the newest one is not served.
fn older_versions(api_version: &str, kind: &str) -> &'static [&'static str] {
    match (api_version, kind) {
        ("batch/v1", "CronJob") => &["batch/v1beta1"],
        ("autoscaling/v2", "HorizontalPodAutoscaler") => &["autoscaling/v2beta2"],
        ("policy/v1", "PodDisruptionBudget") => &["policy/v1beta1"],
        _ => &[],
    }
}

/// The resource and scope of `api_version` `kind`, or of the first older version served.
/// The returned resource's `api_version` is the one to write objects as.
pub async fn resolve(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
) -> Result<(ApiResource, Scope), kube::Error> {
    let find = |candidate: &str| {
        let (group, version) = candidate.rsplit_once('/').unwrap_or(("", candidate));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        async move { kube::discovery::pinned_kind(client, &gvk).await }
    };
    let newest = match find(api_version).await {
        Ok((resource, caps)) => return Ok((resource, caps.scope)),
        Err(error) => error,
    };
    for older in older_versions(api_version, kind) {
        if let Ok((resource, caps)) = find(older).await {
            return Ok((resource, caps.scope));
        }
    }
    Err(newest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kinds_with_an_unchanged_schema_fall_back() {
        assert_eq!(older_versions("batch/v1", "CronJob"), ["batch/v1beta1"]);
        assert!(older_versions("batch/v1", "Job").is_empty());
        assert!(older_versions("apps/v1", "Deployment").is_empty());
    }
}

type KindKey = (String, String);

/// Kinds resolved once per `(apiVersion, kind)` rather than once per write.
#[derive(Clone, Default)]
pub struct KindCache(std::sync::Arc<parking_lot::Mutex<std::collections::HashMap<KindKey, (ApiResource, Scope)>>>);

impl KindCache {
    /// [`resolve`], remembered.
    pub async fn resolve(
        &self,
        client: &kube::Client,
        api_version: &str,
        kind: &str,
    ) -> Result<(ApiResource, Scope), kube::Error> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(found) = self.0.lock().get(&key) {
            return Ok(found.clone());
        }
        let found = resolve(client, api_version, kind).await?;
        self.0.lock().insert(key, found.clone());
        Ok(found)
    }
}
