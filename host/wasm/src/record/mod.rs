//! Record and replay at the host-function boundary. Every side effect of a component goes
//! through the host's imports (kube, log, the WASI clocks and random sources), so a
//! [`Recording`] is the call's input, each import's answer and the output, and a replay
//! serves the imports from it: deterministic, offline, against the recorded component or a
//! changed one. The [`Tape`] takes a call down or plays it back; the sessions keep what was
//! taken down; `crate::replay` drives a replayed call through the host.

mod recording;
mod redact;
mod session;
mod tape;

pub use crate::capability::kube::exchange::{Named, identity};
pub use recording::{
    CallResult, EventRecord, Exchange, FORMAT, HookName, KubeAnswer, KubeCall, LimitsRecord, OutcomeRecord, Recorded,
    Recording, RequestRecord, ResponseRecord, WasiReads,
};
pub use redact::{REDACTED, redact_secrets};
pub(crate) use session::Session;
pub use session::{Ask, DEFAULT_FOLDER_BYTES, Entry, Folder, MAX_BYTES, MAX_COUNT, Recordings, SessionView};
pub use tape::Beyond;
pub(crate) use tape::Tape;
