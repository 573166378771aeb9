//! Every slot of a runtime: added, replaced, removed, reloaded, and their files watched.

use super::*;

/// Every slot of a runtime.
#[derive(Clone, Default)]
pub struct Components {
    slots: Arc<RwLock<Vec<Arc<Slot>>>>,
    keeper: Arc<RwLock<Option<Arc<Keeper>>>>,
}

impl Components {
    /// Adds the slot `name` (replacing one of that name).
    pub fn add(&self, name: &str, host: &Arc<WasmHost>, spec: Arc<Spec>) -> Arc<Slot> {
        let slot = Slot::new(name.into(), host.clone(), spec);
        if let Some(keeper) = self.keeper.read().clone() {
            slot.keep_with(keeper);
        }
        let mut slots = self.slots.write();
        slots.retain(|s| &*s.name != name);
        slots.push(slot.clone());
        slot
    }

    /// Keeps every slot's rollout state with `keeper`, those added later too; each resumes
    /// from what was kept at its next load.
    pub fn keep_with(&self, keeper: Arc<Keeper>) {
        *self.keeper.write() = Some(keeper.clone());
        for slot in self.slots() {
            slot.keep_with(keeper.clone());
        }
    }

    /// Each slot's canary counts made here, by slot name.
    pub fn counted(&self) -> BTreeMap<String, Counted> {
        let slots = self.slots();
        slots
            .iter()
            .filter_map(|s| Some((s.name.to_string(), s.counted()?)))
            .collect()
    }

    /// Hands each slot what the other shard members counted on it (`reports`: by member,
    /// then by slot).
    pub fn hear(&self, reports: &BTreeMap<String, BTreeMap<String, Counted>>) {
        for slot in self.slots() {
            let for_slot: BTreeMap<String, Counted> = reports
                .iter()
                .filter_map(|(member, slots)| Some((member.clone(), slots.get(&*slot.name)?.clone())))
                .collect();
            slot.hear(&for_slot);
        }
    }

    /// Drops the slot `name` (its CRD no longer declares it); calls under way finish.
    pub fn remove(&self, name: &str) {
        self.slots.write().retain(|s| &*s.name != name);
    }

    pub fn slots(&self) -> Vec<Arc<Slot>> {
        self.slots.read().clone()
    }

    /// The Wasm host its slots run on (every slot shares one), once a slot exists.
    pub fn host(&self) -> Option<Arc<WasmHost>> {
        let slots = self.slots.read();
        slots.first().map(|slot| slot.host().clone())
    }

    pub fn get(&self, name: &str) -> Option<Arc<Slot>> {
        self.slots().into_iter().find(|s| &*s.name == name)
    }

    /// Reloads the slots `picked` selects, all at once (a slow registry holds only its own
    /// slot); returns each one's name and outcome.
    pub async fn reload_where(&self, picked: impl Fn(&Slot) -> bool) -> Vec<(Arc<str>, Result<(), LoadError>)> {
        let picked: Vec<Arc<Slot>> = self.slots().into_iter().filter(|s| picked(s)).collect();
        let reloads = picked
            .iter()
            .map(|slot| async move { (slot.name.clone(), slot.reload().await) });
        futures::future::join_all(reloads).await
    }

    pub fn statuses(&self) -> Vec<SlotStatus> {
        self.slots().iter().map(|s| s.status()).collect()
    }

    /// Polls the component files every `period` and reloads a slot whose file changed.
    pub async fn watch_files(self, period: Duration) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for slot in self.slots() {
                if slot.file_changed() {
                    tracing::info!(component = %slot.name, "component file changed; reloading");
                    let _ = slot.reload().await;
                }
            }
        }
    }
}
