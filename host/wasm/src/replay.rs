//! A recording replayed: the component (the recorded one, or another given in its place)
//! called on a fresh instance with the recorded input, its imports served from the tape, and
//! what it did this time handed back for comparison.

use std::path::Path;
use std::sync::Arc;

use super::caller::Caller;
use super::engine::WasmHost;
use super::error::Error;
use super::record::{Beyond, CallResult, KubeCall, Recording, Tape};
use super::stats::CallStats;
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
    /// recorded from, found by its digest in this host's cache of components (a runtime with
    /// recordings on keeps each component it loads there). What the recording names as the
    /// component's source (a path, a URL) is never read: a recording is data from
    /// elsewhere. Errors say what could not be loaded.
    pub async fn replay(&self, recording: &Recording, component: Option<&Path>) -> Result<Replayed, Error> {
        let kept;
        let component = match component {
            Some(path) => path,
            None => {
                kept = self.kept_component(&recording.component.digest)?;
                kept.as_path()
            }
        };
        let spec = spec_for(recording, component)?;
        let loaded = self
            .load(&spec)
            .await
            .map_err(|error| Error::Replay(format!("{}: {error}", component.display())))?;
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
            .call_on_tape(
                &loaded,
                &spec,
                hook,
                caller,
                &request,
                &stats,
                Some(Arc::new(tape.clone())),
            )
            .await;
        let mut result = CallResult::of(&result);
        // Compared with what the recording kept, which had its Secrets redacted.
        if recording.secrets_redacted
            && let CallResult::Response(response) = &mut result
        {
            response.redact();
        }
        let played = tape
            .played_back()
            .ok_or_else(|| Error::Replay("the replay's tape was not playing".into()))?;
        Ok(Replayed {
            digest: loaded.digest.clone(),
            result,
            kube: played.asked,
            beyond: played.beyond,
        })
    }
}

impl WasmHost {
    /// The file of the component of `digest` in this host's cache, or why there is none.
    fn kept_component(&self, digest: &str) -> Result<std::path::PathBuf, Error> {
        if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
            return Err(Error::Replay(format!(
                "component.digest: {digest:?} is not a sha256 digest"
            )));
        }
        self.blobs.path_of(digest).ok_or_else(|| {
            Error::Replay(format!(
                "the recorded component (sha256 {}) is not in this machine's component cache ({}); pass --component FILE (a replay never reads the source a recording names)",
                &digest[..12],
                self.blobs.dir().display()
            ))
        })
    }
}

/// The spec a replay loads: `component` (a local file), under the recorded limits; no grants
/// are needed, the tape answers.
fn spec_for(recording: &Recording, component: &Path) -> Result<Spec, Error> {
    let world = match recording.component.world.as_str() {
        "hook" => World::Hook,
        "constructor" => World::Constructor,
        other => {
            return Err(Error::Replay(format!(
                "component.world: {other:?} is neither hook nor constructor"
            )));
        }
    };
    let source = component
        .to_str()
        .ok_or_else(|| Error::Replay("--component: the path is not UTF-8".into()))?;
    let declared = Declared {
        component: source,
        sha256: None,
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
    let mut spec =
        Spec::compile(world, declared, Path::new(".")).map_err(|e| Error::Replay(format!("component: {e}")))?;
    spec.limits = recording.component.limits.limits();
    Ok(spec)
}
