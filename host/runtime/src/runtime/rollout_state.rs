//! Where the runtime keeps its components' rollout state: one ConfigMap it owns,
//! `orkestra-rollouts-<katalog>` in its own namespace, a key per component holding what
//! [`orkestra_wasm::kept`] describes (the version serving every CR, the canary under way,
//! the versions rolled back and why, the last steps). It is read before the components'
//! first load, written whenever a rollout moves (and every few seconds while a canary
//! counts), and watched by replicas that stand by, so that a restart or a take-over carries
//! on where the last decision left it.
//!
//! Only a Katalog that declares a rollout touches it: the others cost no read and no write.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use orkestra_kube::objects::Objects;
use orkestra_wasm::Components;
use orkestra_wasm::kept::{Keeper, Kept};
use serde_json::json;

/// How long a failed write waits before the newest state is written again.
const RETRY: Duration = Duration::from_secs(2);

/// The ConfigMap of one runtime's rollout state.
#[derive(Clone)]
pub struct RolloutState {
    api: Objects<ConfigMap>,
    namespace: String,
    name: String,
    katalog: String,
}

impl RolloutState {
    pub fn new(client: kube::Client, namespace: &str, katalog: &str) -> Result<Self, kube::Error> {
        Ok(Self {
            api: orkestra_kube::objects::namespaced(client, namespace)?,
            namespace: namespace.to_string(),
            name: configmap_name(katalog),
            katalog: katalog.to_string(),
        })
    }

    /// `namespace/name`, as logs and docs say it.
    pub fn place(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// What was kept, slot by slot. A state that cannot be read is skipped with a warning:
    /// its slot then starts as without one.
    pub async fn read(&self) -> Result<Vec<Kept>, kube::Error> {
        let Some(map) = self.api.get_opt(&self.name).await? else {
            return Ok(Vec::new());
        };
        Ok(parse(&self.place(), &map))
    }

    /// Writes each state handed to `keeper`'s receiver, the newest of each slot when several
    /// wait; a failed write is tried again with the newest state.
    pub async fn write(self, mut received: tokio::sync::mpsc::UnboundedReceiver<Kept>) {
        let mut waiting: BTreeMap<String, Kept> = BTreeMap::new();
        loop {
            if waiting.is_empty() {
                match received.recv().await {
                    Some(kept) => drop(waiting.insert(kept.slot.clone(), kept)),
                    None => return,
                }
            }
            while let Ok(kept) = received.try_recv() {
                waiting.insert(kept.slot.clone(), kept);
            }
            let mut failed = None;
            for kept in std::mem::take(&mut waiting).into_values() {
                if let Err(error) = self.patch(&kept).await {
                    failed = Some(error);
                    waiting.insert(kept.slot.clone(), kept);
                }
            }
            if let Some(error) = failed {
                tracing::warn!(configmap = %self.place(), %error, "cannot keep the rollout state; trying again");
                tokio::time::sleep(RETRY).await;
            }
        }
    }

    /// Applies one slot's state as that slot's own field manager: server-side apply drops a
    /// key its manager leaves out, so with one manager for every slot, a write of one slot
    /// would lose the states of the others.
    async fn patch(&self, kept: &Kept) -> Result<(), kube::Error> {
        let text = serde_json::to_string(kept).unwrap_or_default();
        let map = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "labels": {
                    "app.kubernetes.io/managed-by": "orkestra",
                    "orkestra.io/katalog": crate::ha::dns_label(&self.katalog, "katalog"),
                    "orkestra.io/state": "rollouts",
                },
            },
            "data": {key(&kept.slot): text},
        });
        let params = PatchParams::apply(&manager(&kept.slot)).force();
        self.api.patch(&self.name, &params, &Patch::Apply(&map)).await.map(drop)
    }

    /// On a replica that stands by: each change of the ConfigMap is handed to the slots it
    /// names ([`orkestra_wasm::Slot::follow`]).
    pub async fn follow(self, components: Components) {
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        let mut stream = watcher::watcher(self.api.api().clone(), config)
            .default_backoff()
            .boxed();
        while let Some(event) = stream.next().await {
            let maps = match event {
                Ok(watcher::Event::Apply(map) | watcher::Event::InitApply(map)) => vec![map],
                Ok(_) => continue,
                Err(error) => {
                    tracing::debug!(configmap = %self.place(), %error, "watching the rollout state");
                    continue;
                }
            };
            for kept in maps.iter().flat_map(|m| parse(&self.place(), m)) {
                if let Some(slot) = components.get(&kept.slot) {
                    slot.follow(&kept);
                }
            }
        }
    }
}

/// Starts keeping `components`' rollout state in `state`: reads what was kept (before any
/// slot loads), then writes as rollouts move; `decides` says whether this replica decides
/// (the others follow). Returns the tasks, or the read's error.
pub async fn keep(
    state: RolloutState,
    components: &Components,
    decides: impl Fn() -> bool + Send + Sync + 'static,
    follows: bool,
) -> Result<Vec<tokio::task::JoinHandle<()>>, kube::Error> {
    let read = state.read().await?;
    tracing::info!(configmap = %state.place(), components = read.len(), "rollout state read");
    let (keeper, received) = Keeper::new(read, decides);
    components.keep_with(Arc::new(keeper));
    let mut tasks = vec![tokio::spawn(state.clone().write(received))];
    if follows {
        tasks.push(tokio::spawn(state.follow(components.clone())));
    }
    Ok(tasks)
}

fn parse(place: &str, map: &ConfigMap) -> Vec<Kept> {
    let data = map.data.as_ref().into_iter().flatten();
    data.filter_map(|(key, text)| match serde_json::from_str::<Kept>(text) {
        Ok(kept) => Some(kept),
        Err(error) => {
            tracing::warn!(configmap = %place, key, %error, "a kept rollout state does not read; its component starts without it");
            None
        }
    })
    .collect()
}

/// The field manager of slot `slot`'s writes: `orkestra-rollouts-` and a hash of the slot,
/// within the API server's 128 characters whatever the slot's name.
fn manager(slot: &str) -> String {
    format!("orkestra-rollouts-{}", crate::ha::short_hash(slot, 8))
}

/// `orkestra-rollouts-<katalog>`, a valid name whatever the Katalog's name.
pub fn configmap_name(katalog: &str) -> String {
    format!("orkestra-rollouts-{}", crate::ha::dns_label(katalog, "katalog"))
}

/// A ConfigMap key for slot `slot` (`crd` or `crd/target`): its characters outside
/// `[-._a-zA-Z0-9]` become `_`; the slot's own name is inside the value.
fn key(slot: &str) -> String {
    slot.chars()
        .map(|c| match c.is_ascii_alphanumeric() || "-._".contains(c) {
            true => c,
            false => '_',
        })
        .collect()
}

impl super::Runtime {
    /// Reads the components' kept rollout state from `namespace` before any loads, and keeps
    /// it from then on. A state that cannot be read after a few tries is said loudly: the
    /// components then start as if none had been kept.
    pub(super) async fn keep_rollouts(&self, namespace: &str) -> Vec<tokio::task::JoinHandle<()>> {
        let name = self.roster.katalog().katalog.name.clone();
        let state = match RolloutState::new(self.client.clone(), namespace, &name) {
            Ok(state) => state,
            Err(error) => {
                tracing::error!(%namespace, %error, "the rollout state cannot be kept there");
                return Vec::new();
            }
        };
        let ownership = self.ownership.clone();
        let follows = ownership.mode() != crate::ha::Mode::None;
        let mut tries = 0;
        loop {
            let decides = ownership.clone();
            let decides = move || decides.decides_rollouts();
            match keep(state.clone(), &self.slots.components, decides, follows).await {
                Ok(tasks) => return tasks,
                Err(kube::Error::Api(status)) if status.code == 403 => {
                    tracing::error!(configmap = %state.place(), %status.message, "the runtime may not read its rollout state (RBAC: get, list, watch, patch on this ConfigMap and create on configmaps, as `ork manifests` grants): the components start without it");
                    return Vec::new();
                }
                Err(error) if tries < 4 => {
                    tries += 1;
                    tracing::warn!(configmap = %state.place(), %error, "cannot read the rollout state yet");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                Err(error) => {
                    tracing::error!(configmap = %state.place(), %error, "cannot read the rollout state: the components start without it, and a version rolled back before may serve again");
                    return Vec::new();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys_are_valid_for_any_katalog_and_slot() {
        assert_eq!(configmap_name("My Katalog!"), "orkestra-rollouts-my-katalog");
        assert_eq!(key("site/blue"), "site_blue");
        assert_eq!(key("site"), "site");
        assert_ne!(manager("site"), manager("site/blue"));
        assert_eq!(manager(&"x".repeat(300)).len(), "orkestra-rollouts-".len() + 16);
    }

    #[test]
    fn an_unreadable_state_is_skipped_and_the_others_read() {
        let map = ConfigMap {
            data: Some(BTreeMap::from([
                (
                    "site".to_string(),
                    r#"{"slot":"site","stable":null,"canary":null}"#.to_string(),
                ),
                ("other".to_string(), "not json".to_string()),
            ])),
            ..ConfigMap::default()
        };
        let read = parse("ns/map", &map);
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].slot, "site");
    }
}
