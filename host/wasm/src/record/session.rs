//! Recording on demand: a session on one slot takes down its next calls (of one custom
//! resource, or of any), up to a count and a number of bytes, into files under the folder the
//! platform named for recordings. Without that folder nothing is ever recorded: a recording
//! holds what the component was allowed to read. The folder as a whole is bounded too
//! ([`Folder::max_bytes`], what is there at start included), so no number of sessions can
//! fill the disk (or a pod's `emptyDir`) it sits on.

use crate::error::Error;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// The folder recordings may be written to, and how much it may hold in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    pub dir: PathBuf,
    pub max_bytes: u64,
}

/// What the folder holds in all unless the platform says otherwise: half of the Helm chart's
/// 1 GiB `emptyDir`.
pub const DEFAULT_FOLDER_BYTES: u64 = 512 << 20;
/// Entries of the folder counted at start (past it, the rest is taken as full).
const COUNTED_AT_START: usize = 100_000;

/// Bytes of the files under `dir` (what recordings already hold after a restart).
fn size_of(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut seen = 0usize;
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > COUNTED_AT_START {
                return u64::MAX;
            }
            match entry.metadata() {
                Ok(meta) if meta.is_dir() => folders.push(entry.path()),
                Ok(meta) => total = total.saturating_add(meta.len()),
                Err(_) => {}
            }
        }
    }
    total
}

use serde::{Deserialize, Serialize};

use super::recording::{CallResult, Recording};
use super::tape::Tape;

/// Most calls one session may take down.
pub const MAX_COUNT: u32 = 1000;
/// Most bytes one session may write, all its recordings together.
pub const MAX_BYTES: usize = 256 << 20;
/// Most bytes of one recording (a call reading more is not recorded).
const MAX_RECORDING: usize = 32 << 20;
/// Recordings the runtime remembers to serve by id, newest kept.
const INDEXED: usize = 10_000;

/// What a session is asked to take down.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ask {
    /// The slot (`crd`, or `crd/target`).
    pub component: String,
    /// Calls to record (default 10, at most 1000).
    #[serde(default)]
    pub count: Option<u32>,
    /// Bytes all of them may take (default 16 MiB, at most 256 MiB).
    #[serde(default)]
    pub bytes: Option<usize>,
    /// Only calls for this custom resource (`namespace/name`, or `name`).
    #[serde(default)]
    pub key: Option<String>,
}

impl Ask {
    /// The session's bounds; an error names the field past its limit.
    fn bounds(&self) -> Result<(u32, usize), Error> {
        let count = self.count.unwrap_or(10);
        if count == 0 || count > MAX_COUNT {
            return Err(Error::Recording(format!(
                "count: {count} is not between 1 and {MAX_COUNT}"
            )));
        }
        let bytes = self.bytes.unwrap_or(16 << 20);
        if bytes == 0 || bytes > MAX_BYTES {
            return Err(Error::Recording(format!(
                "bytes: {bytes} is not between 1 and {MAX_BYTES}"
            )));
        }
        if let Some(key) = &self.key
            && key
                .split('/')
                .any(|part| orkestra_expr::names::check_name(part).is_err())
        {
            return Err(Error::Recording(format!("key: {key:?} is not namespace/name or name")));
        }
        Ok((count, bytes))
    }
}

/// A slot's session as the Live API shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub component: String,
    pub started_at: String,
    pub key: Option<String>,
    /// Calls still to record.
    pub left: u32,
    pub bytes_left: usize,
    /// Calls taken down and written.
    pub recorded: Vec<Entry>,
    /// Calls that were to be recorded but did not fit (the session's bytes, or the folder's).
    pub dropped: u32,
    /// Why the last one was dropped.
    pub dropped_why: Option<String>,
}

/// One written recording.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// What `GET /recordings/{id}` serves it by.
    pub id: String,
    pub component: String,
    pub key: String,
    pub at: String,
    pub bytes: usize,
    /// `ok`, `requeue`, `error: Reason`, `failed` or `no-export`.
    pub outcome: String,
    #[serde(skip)]
    path: PathBuf,
}

/// A slot's session.
pub(crate) struct Session {
    view: SessionView,
}

impl Session {
    /// The tape for the next call, when the session still records and the call is one it
    /// wants.
    pub(crate) fn turn(&mut self, key: &str) -> Option<Tape> {
        let view = &mut self.view;
        if view.left == 0 || view.key.as_deref().is_some_and(|k| k != key) {
            return None;
        }
        view.left -= 1;
        Some(Tape::taking(view.bytes_left.min(MAX_RECORDING)))
    }

    /// A call it was to take down did not fit, for `why`.
    pub(crate) fn dropped(&mut self, why: &str) {
        self.view.dropped += 1;
        self.view.dropped_why = Some(why.to_string());
    }

    pub(crate) fn view(&self) -> SessionView {
        self.view.clone()
    }
}

/// The runtime's recordings: where they are written and which exist.
pub struct Recordings {
    folder: Option<Folder>,
    /// Bytes the folder holds: what was there at start and what was written since.
    held: AtomicU64,
    next: AtomicU64,
    index: Mutex<VecDeque<Entry>>,
}

impl Recordings {
    /// Recordings written under `folder`; none at all without one.
    pub fn new(folder: Option<Folder>) -> Self {
        let held = folder.as_ref().map_or(0, |f| size_of(&f.dir));
        Self {
            folder,
            held: AtomicU64::new(held),
            next: AtomicU64::new(1),
            index: Mutex::new(VecDeque::new()),
        }
    }

    pub fn enabled(&self) -> bool {
        self.folder.is_some()
    }

    /// Bytes the folder holds now and may hold in all.
    pub fn usage(&self) -> Option<(u64, u64)> {
        let folder = self.folder.as_ref()?;
        Some((self.held.load(Ordering::Relaxed), folder.max_bytes))
    }

    /// Why the folder takes no more, if it is full.
    fn full(&self, more: u64) -> Option<String> {
        let (held, max) = self.usage()?;
        (held.saturating_add(more) > max).then(|| {
            format!(
                "the recordings folder holds {held} of its {max} bytes (--recordings-max-bytes); remove recordings from it first"
            )
        })
    }

    /// A new session for `ask`, or why not.
    pub(crate) fn session(&self, ask: &Ask) -> Result<Session, Error> {
        if self.folder.is_none() {
            return Err(Error::Recording(
                "this runtime records nothing: the platform enables recordings by starting it with --recordings DIR"
                    .into(),
            ));
        }
        let (count, bytes) = ask.bounds()?;
        if let Some(full) = self.full(1) {
            return Err(Error::Recording(full));
        }
        Ok(Session {
            view: SessionView {
                component: ask.component.clone(),
                started_at: jiff::Timestamp::now().to_string(),
                key: ask.key.clone(),
                left: count,
                bytes_left: bytes,
                recorded: Vec::new(),
                dropped: 0,
                dropped_why: None,
            },
        })
    }

    /// Writes `recording` for `session`, if its bytes still fit; the entry, or why not.
    pub(crate) async fn write(&self, session: &Mutex<Option<Session>>, recording: &Recording) -> Result<Entry, Error> {
        let Some(Folder { dir, .. }) = &self.folder else {
            return Err(Error::Recording("recordings are off".into()));
        };
        let text = serde_json::to_vec_pretty(recording)
            .map_err(|e| Error::Recording(format!("cannot encode the recording: {e}")))?;
        let id = format!(
            "{}-{}",
            jiff::Timestamp::now().as_millisecond(),
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        // The slot's name is the Katalog's (a CRD and a target name); nothing a tenant
        // sends names a file.
        let folder = dir.join(recording.component.slot.replace('/', "+"));
        let path = folder.join(format!("{id}.json"));
        {
            let mut guard = session.lock();
            let Some(active) = guard.as_mut() else {
                return Err(Error::Recording("the session was stopped".into()));
            };
            if text.len() > active.view.bytes_left {
                let why = format!(
                    "the recording is {} bytes; the session has {} left",
                    text.len(),
                    active.view.bytes_left
                );
                active.dropped(&why);
                return Err(Error::Recording(why));
            }
            // Taken from the folder's bound under the session's lock: two sessions cannot
            // both take its last bytes.
            let size = text.len() as u64;
            let taken = self.held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                let max = self.folder.as_ref().map_or(0, |f| f.max_bytes);
                (held.saturating_add(size) <= max).then_some(held + size)
            });
            if taken.is_err() {
                let why = self
                    .full(size)
                    .unwrap_or_else(|| "the recordings folder is full".into());
                active.dropped(&why);
                return Err(Error::Recording(why));
            }
            active.view.bytes_left -= text.len();
        }
        tokio::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&folder)
            .await
            .map_err(|e| Error::Recording(format!("cannot make {}: {e}", folder.display())))?;
        write_private(&path, &text).await?;
        let entry = Entry {
            id,
            component: recording.component.slot.clone(),
            key: recording.request.key.clone(),
            at: recording.at.clone(),
            bytes: text.len(),
            outcome: outcome_of(&recording.result),
            path,
        };
        if let Some(active) = session.lock().as_mut() {
            active.view.recorded.push(entry.clone());
        }
        let mut index = self.index.lock();
        if index.len() >= INDEXED {
            index.pop_front();
        }
        index.push_back(entry.clone());
        Ok(entry)
    }

    /// A recording by the id it was listed with.
    pub async fn read(&self, id: &str) -> Option<Vec<u8>> {
        let path = {
            let index = self.index.lock();
            index.iter().find(|e| e.id == id)?.path.clone()
        };
        tokio::fs::read(path).await.ok()
    }
}

/// Readable by the runtime's own user only: it holds what the component could read.
async fn write_private(path: &Path, text: &[u8]) -> Result<(), Error> {
    use tokio::io::AsyncWriteExt as _;
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create_new(true).mode(0o600);
    let mut file = options
        .open(path)
        .await
        .map_err(|e| Error::Recording(format!("cannot write {}: {e}", path.display())))?;
    file.write_all(text)
        .await
        .map_err(|e| Error::Recording(format!("cannot write {}: {e}", path.display())))
}

fn outcome_of(result: &CallResult) -> String {
    use super::recording::OutcomeRecord;
    match result {
        CallResult::Response(response) => match &response.outcome {
            OutcomeRecord::Ok => "ok".into(),
            OutcomeRecord::RequeueAfterMs(_) => "requeue".into(),
            OutcomeRecord::Error { reason, .. } => format!("error: {reason}"),
        },
        CallResult::NoExport => "no-export".into(),
        CallResult::Failed(_) => "failed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(dir: &str, max_bytes: u64) -> Folder {
        Folder {
            dir: PathBuf::from(dir),
            max_bytes,
        }
    }

    #[test]
    fn the_folder_counts_what_it_held_at_start_and_is_refused_past_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("site")).unwrap();
        std::fs::write(dir.path().join("site/old.json"), vec![b'x'; 900]).unwrap();
        let recordings = Recordings::new(Some(folder(dir.path().to_str().unwrap(), 1000)));
        assert_eq!(recordings.usage(), Some((900, 1000)));
        assert!(recordings.session(&ask(None, None, None)).is_ok(), "100 bytes are left");
        let full = Recordings::new(Some(folder(dir.path().to_str().unwrap(), 900)));
        let refused = full.session(&ask(None, None, None)).err().unwrap();
        assert!(
            refused
                .to_string()
                .starts_with("the recordings folder holds 900 of its 900 bytes"),
            "{refused}"
        );
    }

    fn ask(count: Option<u32>, bytes: Option<usize>, key: Option<&str>) -> Ask {
        Ask {
            component: "site".into(),
            count,
            bytes,
            key: key.map(String::from),
        }
    }

    #[test]
    fn a_session_is_refused_without_a_folder_and_past_its_bounds() {
        let off = Recordings::new(None);
        assert!(
            off.session(&ask(None, None, None))
                .err()
                .unwrap()
                .to_string()
                .contains("--recordings DIR")
        );
        let on = Recordings::new(Some(folder("/nonexistent", 1 << 30)));
        for (bad, field) in [
            (ask(Some(0), None, None), "count: 0"),
            (ask(Some(1001), None, None), "count: 1001"),
            (ask(None, Some(MAX_BYTES + 1), None), "bytes: "),
            (ask(None, None, Some("a/../b")), "key: "),
        ] {
            let error = on.session(&bad).err().unwrap();
            assert!(error.to_string().starts_with(field), "{error}");
        }
    }

    #[test]
    fn a_session_takes_its_count_of_the_calls_it_wants_then_no_more() {
        let on = Recordings::new(Some(folder("/nonexistent", 1 << 30)));
        let mut session = on.session(&ask(Some(2), Some(1000), Some("a/blog"))).unwrap();
        assert!(session.turn("a/other").is_none(), "another CR's call");
        assert!(session.turn("a/blog").is_some());
        assert!(session.turn("a/blog").is_some());
        assert!(session.turn("a/blog").is_none(), "its count is spent");
        assert_eq!(session.view().left, 0);
    }
}
