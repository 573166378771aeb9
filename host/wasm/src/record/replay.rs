//! A recording replayed: the component (the recorded one, or another given in its place)
//! called on a fresh instance with the recorded input, its imports served from the tape, and
//! what it did this time handed back for comparison.

use std::path::Path;

use super::super::engine::WasmHost;
use super::super::stats::CallStats;
use super::super::store::Caller;
use super::recording::{CallResult, KubeCall, Recording};
use super::tape::{Beyond, Tape};
use orkestra_katalog::component::{Declared, Spec, World};

/// What a replayed call did.
#[derive(Debug, Clone)]
pub struct Replayed {
    /// The digest of the component that ran.
    pub digest: String,
    pub result: CallResult,
    /// Its kube calls, in order.
    pub kube: Vec<KubeCall>,
    /// What it read past the end of the recording.
    pub beyond: Beyond,
}

impl WasmHost {
    /// Replays `recording` against `component` (a file), or against the component it was
    /// recorded from, which must still have the recorded digest. Errors say what could not
    /// be loaded.
    pub async fn replay(&self, recording: &Recording, component: Option<&Path>) -> Result<Replayed, String> {
        let spec = spec_for(recording, component)?;
        let loaded = self.load(&spec).await.map_err(|error| match component {
            Some(path) => format!("{}: {error}", path.display()),
            None => format!(
                "the recorded component ({}) does not load as recorded: {error}; pass --component to replay against another",
                recording.component.source
            ),
        })?;
        let request = recording.request.request();
        let caller = Caller {
            component: recording.component.slot.as_str().into(),
            key: recording.request.key.clone(),
            namespace: recording.request.namespace().map(String::from),
            manager: "orkestra-replay".into(),
            client: None,
            owner_uid: None,
            writes: Default::default(),
        };
        let tape = Tape::playing(recording);
        let stats = CallStats::default();
        let hook = recording.hook.into();
        let result = self
            .call_on_tape(&loaded, &spec, hook, caller, &request, &stats, Some(tape.clone()))
            .await;
        let mut result = CallResult::of(&result);
        // Compared with what the recording kept, which had its Secrets redacted.
        if recording.secrets_redacted
            && let CallResult::Response(response) = &mut result
        {
            response.redact();
        }
        let played = tape.played_back().ok_or("the replay's tape was not playing")?;
        Ok(Replayed {
            digest: loaded.digest.clone(),
            result,
            kube: played.asked,
            beyond: played.beyond,
        })
    }
}

/// The spec a replay loads: the component given (any digest) or the recorded one (pinned to
/// its digest), under the recorded limits; no grants are needed, the tape answers.
fn spec_for(recording: &Recording, component: Option<&Path>) -> Result<Spec, String> {
    let world = match recording.component.world.as_str() {
        "hook" => World::Hook,
        "constructor" => World::Constructor,
        other => return Err(format!("component.world: {other:?} is neither hook nor constructor")),
    };
    let (source, pin) = match component {
        Some(path) => (path.to_str().ok_or("--component: the path is not UTF-8")?, None),
        None => (
            recording.component.source.as_str(),
            Some(recording.component.digest.as_str()),
        ),
    };
    let declared = Declared {
        component: source,
        sha256: pin,
        limits: &Default::default(),
        deletion: &Default::default(),
        instances: &Default::default(),
        capabilities: &[],
        run_first: false,
        args: None,
        service_account: None,
        files: &[],
        rollout: None,
    };
    let mut spec = Spec::compile(world, declared, Path::new(".")).map_err(|e| format!("component: {e}"))?;
    spec.limits = recording.component.limits.limits();
    Ok(spec)
}
