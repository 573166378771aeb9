//! Live changes without a restart: a changed Katalog file is compiled again and compared
//! with what runs. Each component slot whose declaration changed reloads; a CRD whose
//! pipeline changed otherwise (templates, gates, status, ...) needs a restart, and the
//! outcome and the log say which. The admin endpoint reloads on request (`ork reload`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use orkestra_katalog::compile::CompiledCrd;
use orkestra_wasm::{Components, LoadError, Slot};

/// What a reload did.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// Slots that were reloaded.
    pub reloaded: Vec<String>,
    /// Why a slot (or the Katalog) did not load; what served before keeps serving.
    pub errors: Vec<String>,
    /// CRDs whose Katalog entry changed beyond their components: the change applies at the
    /// next restart.
    pub restart_needed: Vec<String>,
}

/// Reloads the Katalog from its files and the components it declares.
#[derive(Clone)]
pub struct Reloader {
    files: Vec<PathBuf>,
    components: Components,
    /// The compiled CRDs the runtime runs, by name.
    running: Arc<BTreeMap<String, Arc<CompiledCrd>>>,
}

impl Reloader {
    pub fn new(files: Vec<PathBuf>, components: Components, running: BTreeMap<String, Arc<CompiledCrd>>) -> Self {
        Self {
            files,
            components,
            running: Arc::new(running),
        }
    }

    /// Reads the Katalog again and reloads every slot whose declaration changed (all slots
    /// when `force`), or only the slot `only`.
    pub async fn reload(&self, force: bool, only: Option<&str>) -> Outcome {
        let mut outcome = Outcome::default();
        let changed = match self.redeclare(&mut outcome.restart_needed) {
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

    /// Compiles the Katalog again and declares its current component specs; returns the
    /// slots that changed, and adds to `restart_needed` the CRDs that changed otherwise.
    fn redeclare(&self, restart_needed: &mut Vec<String>) -> Result<Vec<String>, String> {
        if self.files.is_empty() {
            return Ok(Vec::new());
        }
        let katalog = orkestra_katalog::load(&self.files).map_err(|e| format!("the Katalog did not load: {e}"))?;
        let mut changed = Vec::new();
        let now: Vec<&str> = katalog.enabled().map(|c| &*c.name).collect();
        for gone in self.running.keys().filter(|name| !now.contains(&name.as_str())) {
            tracing::warn!(crd = %gone, "a CRD removed from the Katalog (or disabled) keeps running until the next restart");
            restart_needed.push(gone.clone());
        }
        for compiled in katalog.enabled() {
            match self.running.get(&*compiled.name) {
                Some(running) if running.runs_like(compiled) => {}
                Some(_) => {
                    tracing::warn!(crd = %compiled.name, "the CRD's pipeline changed in the Katalog; it applies at the next restart");
                    restart_needed.push(compiled.name.to_string());
                }
                None => {
                    tracing::warn!(crd = %compiled.name, "a CRD added to the Katalog starts with the next restart");
                    restart_needed.push(compiled.name.to_string());
                }
            }
            for (name, spec) in crate::runtime::component_specs(compiled) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn katalog(data: &str) -> String {
        format!(
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    web:\n      apiTypes: {{group: a.io, version: v1, kind: Web}}\n      operatorBox:\n        reconcile:\n          onReconcile:\n            configMaps: [{{data: {{a: '{data}'}}}}]\n"
        )
    }

    #[tokio::test]
    async fn a_changed_pipeline_is_reported_as_needing_a_restart_and_an_unchanged_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("katalog.yaml");
        std::fs::write(&file, katalog("{{ .spec.a }}")).unwrap();
        let running = orkestra_katalog::load(std::slice::from_ref(&file)).unwrap().crds;
        let reloader = Reloader::new(vec![file.clone()], Components::default(), running);
        // Only formatting changed: the same compiled form.
        std::fs::write(&file, katalog("{{ .spec.a }}") + "# a comment\n").unwrap();
        let outcome = reloader.reload(false, None).await;
        assert!(
            outcome.restart_needed.is_empty() && outcome.errors.is_empty(),
            "{outcome:?}"
        );
        std::fs::write(&file, katalog("{{ .spec.b }}")).unwrap();
        assert_eq!(reloader.reload(false, None).await.restart_needed, ["web"]);
        std::fs::write(&file, "kind: nonsense\n").unwrap();
        let outcome = reloader.reload(false, None).await;
        assert!(outcome.errors[0].starts_with("the Katalog did not load"), "{outcome:?}");
    }
}
