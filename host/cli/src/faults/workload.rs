//! What a scenario runs and what it observes: the Katalog's sample CRs put in a namespace of
//! their own, the state they settle in (each CR's Ready status and the children it owns),
//! and their deletion down to the last finalizer and child.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{Discovery, Scope};
use orkestra_kube::objects::Objects;
use serde_json::Value;

/// How long nothing may change for a convergence to count as settled.
const SETTLE: Duration = Duration::from_millis(1500);

/// One sample CR: its kind and the object as written (namespace set per scenario).
#[derive(Clone)]
pub struct Sample {
    resource: ApiResource,
    namespaced: bool,
    object: Value,
}

impl Sample {
    pub fn name(&self) -> String {
        self.object["metadata"]["name"].as_str().unwrap_or_default().to_string()
    }

    /// Its kind's objects where it goes (names are checked and encoded on the way).
    fn api(&self, client: &kube::Client, namespace: &str) -> Result<Objects<DynamicObject>, kube::Error> {
        let namespace = self.namespaced.then_some(namespace);
        Objects::within(client.clone(), namespace, &self.resource)
    }

    /// `Kind/name` (and the namespace it was put in, when it has one).
    pub fn label(&self, namespace: &str) -> String {
        match self.namespaced {
            true => format!("{} {namespace}/{}", self.resource.kind, self.name()),
            false => format!("{} {}", self.resource.kind, self.name()),
        }
    }
}

/// The sample CRs of every enabled CRD (`crFiles`), those of the Katalog's own kinds.
pub fn samples(katalog: &orkestra_katalog::Compiled, discovery: &Discovery) -> anyhow::Result<Vec<Sample>> {
    let mut samples = Vec::new();
    for crd in katalog.katalog.crds.values().filter(|c| c.entry.enabled) {
        for file in &crd.entry.cr_files {
            let path = crd.resolve(file);
            for document in orkestra_kube::manifests::read_documents(&path)? {
                let Some((resource, namespaced)) = resource_of(&document, discovery) else {
                    continue;
                };
                let own = katalog
                    .enabled()
                    .any(|c| c.kind == resource.kind && c.group == resource.group);
                if own {
                    samples.push(Sample {
                        resource,
                        namespaced,
                        object: document,
                    });
                }
            }
        }
    }
    Ok(samples)
}

fn resource_of(document: &Value, discovery: &Discovery) -> Option<(ApiResource, bool)> {
    let api_version = document["apiVersion"].as_str()?;
    let kind = document["kind"].as_str()?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = discovery.resolve_gvk(&gvk)?;
    Some((resource, caps.scope == Scope::Namespaced))
}

/// Applies every sample into `namespace` (server-side, as a user would). A write the API
/// server could not complete (a 5xx: a webhook that failed or answered late) is tried again,
/// as the user would, for up to `within`; a refusal is final.
pub async fn apply(client: &kube::Client, samples: &[Sample], namespace: &str, within: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + within;
    for sample in samples {
        let mut object = sample.object.clone();
        if sample.namespaced {
            object["metadata"]["namespace"] = Value::from(namespace);
        }
        let params = PatchParams::apply("ork-test-faults").force();
        loop {
            let applied = async {
                sample
                    .api(client, namespace)?
                    .patch(&sample.name(), &params, &Patch::Apply(&object))
                    .await
            };
            match applied.await {
                Ok(_) => break,
                Err(kube::Error::Api(status)) if status.code >= 500 && Instant::now() < until => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => anyhow::bail!("applying {}: {e}", sample.label(namespace)),
            }
        }
    }
    Ok(())
}

/// Where the samples settled: each CR's Ready status and the children it owns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// `Kind/name` → the Ready condition's status (`-` when it has none).
    pub ready: BTreeMap<String, String>,
    /// `Kind/name` of each owned child, with how many there are of it.
    pub children: BTreeMap<String, usize>,
}

/// The kinds the runtime may create (its RBAC), as discovery names them.
pub fn child_kinds(katalog: &orkestra_katalog::Compiled, discovery: &Discovery) -> Vec<ApiResource> {
    let needs = orkestra_katalog::rbac::Needs::of(katalog);
    let mut kinds = Vec::new();
    for group in discovery.groups() {
        for (resource, _) in group.recommended_resources() {
            if needs.creates(&resource.group, &resource.plural) {
                kinds.push(resource);
            }
        }
    }
    kinds
}

/// Reads the samples and their children once.
async fn observe(
    client: &kube::Client,
    samples: &[Sample],
    kinds: &[ApiResource],
    namespace: &str,
) -> Option<(Settled, Vec<String>)> {
    let mut settled = Settled::default();
    let mut versions = Vec::new();
    let mut owners = BTreeSet::new();
    for sample in samples {
        let object = sample
            .api(client, namespace)
            .ok()?
            .get_opt(&sample.name())
            .await
            .ok()??;
        let status = serde_json::to_value(&object.data).ok()?;
        let ready = status["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .and_then(|c| c["status"].as_str())
            .unwrap_or("-")
            .to_string();
        // A CR the runtime holds back (a reconcile gate) may have no Ready condition: it
        // settles as it is, and the baseline says whether that is where it belongs.
        let observed = status["status"]["observedGeneration"].as_i64();
        if observed.is_some_and(|g| Some(g) != object.metadata.generation) {
            return None;
        }
        settled
            .ready
            .insert(format!("{}/{}", sample.resource.kind, sample.name()), ready);
        versions.push(object.metadata.resource_version.clone().unwrap_or_default());
        owners.extend(object.metadata.uid.clone());
    }
    for kind in kinds {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), kind);
        let list = api.list(&ListParams::default()).await.ok()?;
        for child in list.items {
            let owned = child
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| owners.contains(&o.uid));
            if owned {
                let key = format!("{}/{}", kind.kind, child.metadata.name.clone().unwrap_or_default());
                *settled.children.entry(key).or_default() += 1;
                versions.push(child.metadata.resource_version.clone().unwrap_or_default());
            }
        }
    }
    Some((settled, versions))
}

/// Waits until the samples settle: every status observed its generation (where it says),
/// the runtime is `idle`, and nothing changed for a while. With `want` (the baseline's), a
/// settled state that differs is waited on until `within` passes, as a runtime backing off
/// may still get there. The state, when to, and whether it ever held still; `None` when
/// nothing could be read `within`.
pub async fn settle<F, Fut>(
    client: &kube::Client,
    samples: &[Sample],
    kinds: &[ApiResource],
    namespace: &str,
    within: Duration,
    want: Option<&Settled>,
    idle: F,
) -> Option<(Settled, Duration, bool)>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    let mut last: Option<(Vec<String>, Instant)> = None;
    let mut still: Option<(Settled, Duration)> = None;
    let mut latest: Option<Settled> = None;
    while started.elapsed() < within {
        match observe(client, samples, kinds, namespace).await {
            Some((settled, versions)) if idle().await => {
                latest = Some(settled.clone());
                match &last {
                    Some((seen, since)) if *seen == versions => {
                        if since.elapsed() >= SETTLE {
                            let at = since.duration_since(started);
                            if want.is_none_or(|w| *w == settled) {
                                return Some((settled, at, true));
                            }
                            still = Some((settled, at));
                        }
                    }
                    _ => last = Some((versions, Instant::now())),
                }
            }
            _ => last = None,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    match still {
        Some((settled, at)) => Some((settled, at, true)),
        None => latest.map(|settled| (settled, within, false)),
    }
}

/// Deletes the samples; what is left `within` (CRs still there: a finalizer never removed;
/// children of theirs still there: not collected).
pub async fn delete(
    client: &kube::Client,
    samples: &[Sample],
    kinds: &[ApiResource],
    namespace: &str,
    children: &BTreeMap<String, usize>,
    within: Duration,
) -> Vec<String> {
    let started = Instant::now();
    loop {
        let mut left = Vec::new();
        for sample in samples {
            let Ok(api) = sample.api(client, namespace) else {
                continue;
            };
            if let Ok(Some(object)) = api.get_opt(&sample.name()).await {
                // Asked again while it is not being deleted: a webhook may have failed the
                // request, as it may any write.
                if object.metadata.deletion_timestamp.is_none() {
                    let _ = api.delete(&sample.name(), &DeleteParams::background()).await;
                }
                let finalizers = object.metadata.finalizers.unwrap_or_default().join(", ");
                left.push(format!("{} (finalizers: {finalizers})", sample.label(namespace)));
            }
        }
        for kind in kinds {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), kind);
            let Ok(list) = api.list(&ListParams::default()).await else {
                continue;
            };
            for child in list.items {
                let key = format!("{}/{}", kind.kind, child.metadata.name.clone().unwrap_or_default());
                let in_scenario = child.metadata.namespace.as_deref().is_none_or(|n| n == namespace);
                if children.contains_key(&key) && in_scenario && child.metadata.deletion_timestamp.is_none() {
                    left.push(format!("child {key}"));
                }
            }
        }
        if left.is_empty() || started.elapsed() >= within {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
