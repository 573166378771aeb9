//! Live changes without a restart: a changed Katalog file is compiled again and handed to
//! the running runtime, which starts the CRDs added, stops the removed and restarts those
//! whose pipeline changed, leaving every other CRD's workers, queue and caches alone; then
//! the component slots declared anew or changed load. A Katalog that does not load changes
//! nothing: the last good one keeps running, and the outcome says why. The admin endpoint
//! reloads on request (`ork reload`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use orkestra_katalog::{Admission, CrdDeletionProtection, CrdEntry, Katalog, Serve};
use orkestra_wasm::{Components, LoadError, Slot};

use crate::runtime::Pipelines;

/// What a reload did.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// Slots that were reloaded.
    pub reloaded: Vec<String>,
    /// CRDs added to the Katalog and started.
    pub started: Vec<String>,
    /// CRDs whose pipeline changed, restarted with the new one.
    pub restarted: Vec<String>,
    /// CRDs removed from the Katalog and stopped.
    pub stopped: Vec<String>,
    /// Why a slot, a CRD or the Katalog did not load; what ran before keeps running.
    pub errors: Vec<String>,
    /// Changes that apply only when the process starts (the webhooks, the gateway, HA).
    pub restart_needed: Vec<String>,
}

/// Reloads the Katalog from its files and the components it declares.
#[derive(Clone)]
pub struct Reloader {
    files: Vec<PathBuf>,
    components: Components,
    pipelines: Pipelines,
    /// Installs the Katalog's CRDs before applying it (`ork dev`, which installs them at
    /// start too), so a CRD added to the file starts at once.
    installs: Option<kube::Client>,
    /// Told what each reload of a changed file did (`ork dev` prints it).
    reports: Option<Report>,
    /// Where the OCI motifs the Katalog imports come from; without it, it may import none.
    motifs: Option<crate::runtime::motifs::Source>,
    /// A file's text as the cluster holds it (the ConfigMap a mounted Katalog comes from),
    /// read instead of the file: the kubelet updates the mount a minute or more later.
    texts: Arc<parking_lot::Mutex<std::collections::BTreeMap<PathBuf, String>>>,
}

/// What is told of each reload of a changed file.
pub type Report = Arc<dyn Fn(&Outcome) + Send + Sync>;

impl Reloader {
    pub fn new(files: Vec<PathBuf>, components: Components, pipelines: Pipelines) -> Self {
        Self {
            files,
            components,
            pipelines,
            installs: None,
            reports: None,
            motifs: None,
            texts: Arc::default(),
        }
    }

    /// Pulls the OCI motifs the Katalog imports from `source`.
    pub fn pulling_motifs(mut self, source: crate::runtime::motifs::Source) -> Self {
        self.motifs = Some(source);
        self
    }

    /// Calls `report` with what each reload of a changed file did.
    pub fn reporting(mut self, report: Report) -> Self {
        self.reports = Some(report);
        self
    }

    /// Installs (or updates) the Katalog's CRDs with `client` before each apply.
    pub fn installing_crds(mut self, client: kube::Client) -> Self {
        self.installs = Some(client);
        self
    }

    /// Reads the Katalog again, applies it, and reloads every slot declared anew or changed
    /// (all slots when `force`), or only the slot `only`.
    pub async fn reload(&self, force: bool, only: Option<&str>) -> Outcome {
        let mut outcome = Outcome::default();
        let loads = self.apply(&mut outcome).await;
        let picked =
            |slot: &Slot| (force || loads.iter().any(|c| *c == *slot.name)) && only.is_none_or(|o| o == &*slot.name);
        for (name, result) in self.components.reload_where(picked).await {
            match result {
                Ok(()) => outcome.reloaded.push(name.to_string()),
                Err(LoadError { source_ref, cause }) => {
                    outcome.errors.push(format!("{name}: component {source_ref}: {cause}"));
                }
            }
        }
        outcome
    }

    /// Compiles the Katalog again and has the runtime apply it; returns the slots to load.
    async fn apply(&self, outcome: &mut Outcome) -> Vec<String> {
        if self.files.is_empty() {
            return Vec::new();
        }
        let loaded = match self.sources() {
            Ok(sources) => match &self.motifs {
                Some(source) => crate::runtime::motifs::load_sources(&sources, source).await,
                None => orkestra_katalog::load_sources(&sources).map_err(Into::into),
            },
            Err(error) => Err(error.into()),
        };
        let katalog = match loaded {
            Ok(katalog) => katalog,
            Err(error) => {
                tracing::warn!(%error, "the Katalog did not load; the last good one keeps running");
                outcome.errors.push(format!(
                    "the Katalog did not load (the last good one keeps running): {error}"
                ));
                return Vec::new();
            }
        };
        if let Some(client) = &self.installs {
            let waited = std::time::Duration::from_secs(60);
            if let Err(error) = orkestra_kube::crd_install::install_crds(client, &katalog.katalog, waited).await {
                tracing::warn!(%error, "the Katalog's CRDs did not install; a CRD added waits for its kind");
                outcome.errors.push(format!("installing the CRDs: {error}"));
            }
        }
        let before = self.pipelines.katalog();
        outcome.restart_needed = restart_only(&before.katalog, &katalog.katalog);
        for part in &outcome.restart_needed {
            tracing::warn!(%part, "changed in the Katalog; it applies at the next restart");
        }
        match self.pipelines.apply(katalog).await {
            Ok(applied) => {
                outcome.started = applied.started;
                outcome.restarted = applied.restarted;
                outcome.stopped = applied.stopped;
                outcome.errors.extend(applied.errors);
                applied.loads
            }
            Err(error) => {
                outcome.errors.push(error.to_string());
                Vec::new()
            }
        }
    }

    /// Each Katalog file's text: as the cluster holds it, else as read.
    fn sources(&self) -> Result<Vec<(PathBuf, String)>, orkestra_katalog::Error> {
        let mut sources = orkestra_katalog::read_sources(&self.files)?;
        let texts = self.texts.lock();
        for (path, text) in &mut sources {
            if let Some(held) = texts.get(path) {
                text.clone_from(held);
            }
        }
        Ok(sources)
    }

    /// The Katalog file `file` now holds `text` in the cluster: reloads when that is not
    /// what the runtime read last (the first text is taken as read when the file has it).
    pub async fn reload_text(&self, file: PathBuf, text: String) -> Option<Outcome> {
        {
            let mut texts = self.texts.lock();
            let last = match texts.get(&file) {
                Some(held) => Some(held.clone()),
                None => std::fs::read_to_string(&file).ok(),
            };
            if last.as_deref() == Some(text.as_str()) {
                texts.insert(file, text);
                return None;
            }
            texts.insert(file, text);
        }
        tracing::info!("the Katalog's ConfigMap changed; applying it");
        let outcome = self.reload(false, None).await;
        self.told(&outcome);
        Some(outcome)
    }

    /// Says what a reload that nobody asked for did.
    fn told(&self, outcome: &Outcome) {
        for error in &outcome.errors {
            tracing::warn!("{error}");
        }
        if let Some(report) = &self.reports {
            report(outcome);
        }
    }

    /// Polls the Katalog files every `period`; on a change, reloads.
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
            tracing::info!("the Katalog changed; applying it");
            let outcome = self.reload(false, None).await;
            self.told(&outcome);
        }
    }
}

/// The parts of a CRD entry the webhooks and the gateway read once, at start.
fn hooked(e: &CrdEntry) -> (&Admission, &Option<CrdDeletionProtection>, &Option<Serve>) {
    (&e.admission, &e.deletion_protection, &e.serve)
}

/// What changed between two Katalogs that only a new process applies: the parts read once at
/// start (the admission and conversion webhooks, deletion protection, the gateway, HA).
fn restart_only(before: &Katalog, after: &Katalog) -> Vec<String> {
    let mut parts = Vec::new();
    if before.ha != after.ha {
        parts.push("ha".to_string());
    }
    if before.gateway != after.gateway || before.security != after.security {
        parts.push("gateway".to_string());
    }
    for (name, crd) in &after.crds {
        let entry = &crd.entry;
        let changed = match before.crds.get(name) {
            Some(old) => hooked(&old.entry) != hooked(entry),
            None => {
                entry.admission != Default::default() || entry.deletion_protection.is_some() || entry.serve.is_some()
            }
        };
        if changed {
            parts.push(format!(
                "{name}: the webhooks and the gateway (admission, deletion protection, serve)"
            ));
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn katalog(extra: &str) -> Katalog {
        let text = format!(
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    web:\n      apiTypes: {{group: a.io, version: v1, kind: Web}}\n{extra}      operatorBox:\n        reconcile:\n          onReconcile:\n            configMaps: [{{data: {{a: b}}}}]\n"
        );
        orkestra_katalog::load_sources(&[("k.yaml".into(), text)])
            .unwrap()
            .katalog
    }

    #[test]
    fn only_what_is_read_at_start_is_said_to_need_a_restart() {
        let plain = katalog("");
        assert!(restart_only(&plain, &plain).is_empty());
        let guarded = katalog("      deletionProtection: {protectCRs: true}\n");
        assert_eq!(
            restart_only(&plain, &guarded),
            ["web: the webhooks and the gateway (admission, deletion protection, serve)"]
        );
        let mut ha = plain.clone();
        ha.ha = Some(Default::default());
        assert_eq!(restart_only(&plain, &ha), ["ha"]);
    }
}
