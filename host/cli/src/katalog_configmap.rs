//! `ork run --katalog-configmap NAMESPACE/NAME`: the Katalog as the cluster holds it. The
//! runtime watches the ConfigMap its Katalog file is mounted from (the Helm chart's), so a
//! `helm upgrade` with a changed Katalog applies live as soon as the ConfigMap changes,
//! not when the kubelet gets round to the mounted file (a minute or more).

use std::path::PathBuf;

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{WatchStreamExt, watcher};
use orkestra::runtime::reload::Reloader;
use orkestra_katalog::rbac::{Needs, Scope};

/// The ConfigMap a Katalog file is mounted from.
#[derive(Debug, Clone)]
pub struct KatalogConfigMap {
    namespace: String,
    name: String,
    /// The Katalog file the ConfigMap's key of the same file name holds.
    file: PathBuf,
}

/// `NAMESPACE/NAME`, as `--katalog-configmap` takes it.
impl std::fmt::Display for KatalogConfigMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl KatalogConfigMap {
    /// `reference` (`NAMESPACE/NAME`) holding `file` under its file name.
    pub fn new(reference: &str, file: PathBuf) -> anyhow::Result<Self> {
        let (namespace, name) = reference
            .split_once('/')
            .with_context(|| format!("--katalog-configmap {reference}: give NAMESPACE/NAME"))?;
        orkestra_expr::names::check_namespace(namespace)
            .map_err(|e| anyhow::anyhow!("--katalog-configmap {reference}: {e}"))?;
        anyhow::ensure!(
            orkestra_expr::names::is_dns1123_subdomain(name),
            "--katalog-configmap {reference}: {name:?} is not a ConfigMap name (lowercase letters, digits, '-' and '.')"
        );
        Ok(Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
            file,
        })
    }

    /// The ConfigMap `reference` names, holding the one Katalog file of `files`; `None`
    /// without a reference.
    pub fn of_files(reference: Option<&str>, files: &[PathBuf]) -> anyhow::Result<Option<Self>> {
        match (reference, files) {
            (None, _) => Ok(None),
            (Some(reference), [file]) => Ok(Some(Self::new(reference, file.clone())?)),
            (Some(_), _) => anyhow::bail!("--katalog-configmap follows one Katalog file: give one -f"),
        }
    }

    /// What watching it takes: get, list and watch of that one ConfigMap.
    pub fn needs(&self, needs: &mut Needs) {
        for verb in ["get", "list", "watch"] {
            let scope = Scope::Namespace(self.namespace.clone());
            needs.add_named(scope, "", "configmaps", verb, &self.name);
        }
    }

    /// Follows the ConfigMap until the runtime stops, reloading when the Katalog's key
    /// changes. A missing key or ConfigMap changes nothing; the mounted file still counts.
    pub async fn follow(self, client: kube::Client, reloader: Reloader) {
        let key = self
            .file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let api = match orkestra_kube::objects::namespaced::<ConfigMap>(client, &self.namespace) {
            Ok(objects) => objects.api().clone(),
            Err(error) => {
                tracing::warn!(%error, "cannot follow the Katalog's ConfigMap");
                return;
            }
        };
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        let mut changes = std::pin::pin!(watcher(api, config).default_backoff().applied_objects());
        while let Some(change) = changes.next().await {
            let configmap = match change {
                Ok(configmap) => configmap,
                Err(error) => {
                    tracing::warn!(configmap = %self, %error, "cannot watch the Katalog's ConfigMap; retrying");
                    continue;
                }
            };
            let Some(text) = configmap.data.and_then(|mut d| d.remove(&key)) else {
                tracing::warn!(configmap = %self, %key, "the Katalog's ConfigMap has no such key; the mounted file still counts");
                continue;
            };
            if let Some(outcome) = reloader.reload_text(self.file.clone(), text).await {
                tracing::info!(
                    started = ?outcome.started, restarted = ?outcome.restarted, stopped = ?outcome.stopped,
                    errors = outcome.errors.len(), "applied the Katalog from its ConfigMap"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_is_namespace_and_name_each_a_valid_name() {
        let file = PathBuf::from("/etc/orkestra/katalog/katalog.yaml");
        let followed = KatalogConfigMap::new("ops/ops-orkestra-katalog", file.clone()).unwrap();
        let mut needs = Needs::default();
        followed.needs(&mut needs);
        let each: Vec<String> = needs.each().iter().map(ToString::to_string).collect();
        assert_eq!(
            each,
            [
                "get configmaps ops-orkestra-katalog in namespace ops",
                "list configmaps ops-orkestra-katalog in namespace ops",
                "watch configmaps ops-orkestra-katalog in namespace ops",
            ]
        );
        for (reference, said) in [
            ("ops-orkestra-katalog", "give NAMESPACE/NAME"),
            ("ops/?watch=true", "--katalog-configmap ops/?watch=true:"),
            ("Ops/katalog", "--katalog-configmap Ops/katalog:"),
        ] {
            let error = KatalogConfigMap::new(reference, file.clone()).unwrap_err().to_string();
            assert!(error.contains(said), "{reference}: {error}");
        }
    }
}
