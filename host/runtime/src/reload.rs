//! Live changes without a restart: a changed Katalog file re-declares the components it
//! names (each slot whose declaration changed reloads), and the admin endpoint reloads on
//! request (`ork reload`). Other Katalog changes need a restart, and the log says so.

use std::path::PathBuf;
use std::time::SystemTime;

use crate::compiled::{CompiledCrd, Notes};
use orkestra_wasm::{Components, LoadError, Slot};

/// What a reload did.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// Slots that were reloaded.
    pub reloaded: Vec<String>,
    /// Why a slot (or the Katalog) did not load; what served before keeps serving.
    pub errors: Vec<String>,
}

/// Reloads the Katalog from its files and the components it declares.
#[derive(Clone)]
pub struct Reloader {
    files: Vec<PathBuf>,
    components: Components,
}

impl Reloader {
    pub fn new(files: Vec<PathBuf>, components: Components) -> Self {
        Self { files, components }
    }

    /// Reads the Katalog again and reloads every slot whose declaration changed (all slots
    /// when `force`), or only the slot `only`.
    pub async fn reload(&self, force: bool, only: Option<&str>) -> Outcome {
        let mut outcome = Outcome::default();
        let changed = match self.redeclare() {
            Ok(changed) => changed,
            Err(error) => {
                outcome.errors.push(error);
                Vec::new()
            }
        };
        let picked =
            |slot: &Slot| (force || changed.iter().any(|c| *c == *slot.name)) && only.is_none_or(|o| o == &*slot.name);
        for (name, result) in self.components.reload_where(picked).await {
            match result {
                Ok(()) => outcome.reloaded.push(name.to_string()),
                Err(LoadError { source_ref, message }) => {
                    outcome
                        .errors
                        .push(format!("{name}: component {source_ref}: {message}"));
                }
            }
        }
        outcome
    }

    /// Declares the Katalog's current component specs; returns the slots that changed.
    fn redeclare(&self) -> Result<Vec<String>, String> {
        if self.files.is_empty() {
            return Ok(Vec::new());
        }
        let katalog = orkestra_katalog::load(&self.files).map_err(|e| format!("the Katalog did not load: {e}"))?;
        let notes = Notes::compile(&katalog).map_err(|e| e.to_string())?;
        let mut changed = Vec::new();
        for crd in katalog.crds.values().filter(|c| c.entry.enabled) {
            let compiled = CompiledCrd::compile_in(&katalog, crd, &notes).map_err(|e| e.to_string())?;
            for (name, spec) in crate::runtime::component_specs(&compiled) {
                match self.components.get(&name) {
                    Some(slot) if *slot.declared() != *spec => {
                        slot.declare(spec);
                        changed.push(name);
                    }
                    Some(_) => {}
                    None => {
                        tracing::warn!(component = %name, "a component added to the Katalog starts with the next restart")
                    }
                }
            }
        }
        Ok(changed)
    }

    /// Polls the Katalog files every `period`; on a change, re-declares and reloads.
    pub async fn watch(self, period: std::time::Duration) {
        let stamps = |files: &[PathBuf]| -> Vec<Option<SystemTime>> {
            files
                .iter()
                .map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
                .collect()
        };
        let mut seen = stamps(&self.files);
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            let now = stamps(&self.files);
            if now == seen {
                continue;
            }
            seen = now;
            tracing::info!("the Katalog changed; re-reading its components");
            let outcome = self.reload(false, None).await;
            for error in &outcome.errors {
                tracing::warn!("{error}");
            }
        }
    }
}
