//! A slot's recordings: sessions of its calls, each call kept on tape for `ork replay`.
use super::*;
use crate::error::Error;

impl Slot {
    /// Starts recording its calls as `ask` says (replacing a session under way); the
    /// session, or why not (recordings are off, a bound is out of range).
    pub fn record(&self, ask: &Ask) -> Result<SessionView, Error> {
        let session = self.host.recordings.session(ask)?;
        let view = session.view();
        tracing::info!(component = %self.name, count = view.left, bytes = view.bytes_left, key = ?view.key, "recording calls");
        *self.recording.lock() = Some(session);
        Ok(view)
    }

    /// Stops recording; the session as it ended.
    pub fn stop_recording(&self) -> Option<SessionView> {
        let ended = self.recording.lock().take();
        ended.map(|session| session.view())
    }

    /// The recording session, if one was started.
    pub fn recording(&self) -> Option<SessionView> {
        let session = self.recording.lock();
        session.as_ref().map(Session::view)
    }

    /// The tape of the next call of `key`, when a session wants it.
    pub(super) fn turn(&self, key: &str) -> Option<Tape> {
        let mut session = self.recording.lock();
        session.as_mut()?.turn(key)
    }

    /// Writes the recording of a call taken down on `tape`; a call that read past the
    /// session's bytes is counted as dropped.
    pub(super) async fn keep_recording(
        &self,
        active: &Active,
        (hook, key, request): (Hook, &str, &Request),
        result: &Result<Option<Response>, CallError>,
        tape: &Tape,
    ) {
        let Some(taken) = tape.taken() else {
            if let Some(session) = self.recording.lock().as_mut() {
                session.dropped("the call read more than its recording may hold");
            }
            tracing::warn!(component = %self.name, key, "a call read more than its recording may hold; not recorded");
            return;
        };
        let spec = &active.spec;
        let mut recording = Recording {
            format: FORMAT,
            at: jiff::Timestamp::now().to_string(),
            component: Recorded {
                slot: self.name.to_string(),
                world: spec.world.name().into(),
                source: spec.source.to_string(),
                digest: active.loaded.digest.clone(),
                revision: active.revision,
                limits: (&spec.limits).into(),
            },
            hook: hook.into(),
            request: request.into(),
            kube: taken.kube,
            wasi: taken.reads,
            logs: taken.logs,
            result: CallResult::of(result),
            secrets_redacted: false,
        };
        if !spec.grants.records_secrets() {
            recording.redact();
        }
        match self.host.recordings.write(&self.recording, &recording).await {
            Ok(entry) => {
                tracing::info!(component = %self.name, key, id = %entry.id, bytes = entry.bytes, "call recorded")
            }
            Err(error) => tracing::warn!(component = %self.name, key, %error, "call not recorded"),
        }
    }
}
