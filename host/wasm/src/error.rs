//! What the Wasm host refuses outside a load or a call (those have [`crate::LoadError`] and
//! [`crate::CallError`], each with its own Ready reason): an object without its identity, a
//! store or an engine it cannot open, a rollout action, a recording, a replay, a module it
//! cannot make a component, a registry's refusal, a motif. Messages say what is wrong and
//! what to do.

/// A refusal of the Wasm host, by what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An object a guest hands over (or a tape holds) without its apiVersion, kind or name.
    #[error("{0}")]
    Identity(String),
    /// A local store (the blob store, the compiled-artifact cache) that cannot be opened.
    #[error("{0}")]
    Store(String),
    /// A rollout action this replica cannot take now.
    #[error("{0}")]
    Rollout(String),
    /// A recording session that cannot start (recordings are off, a bound is out of range),
    /// or a recording it cannot keep (past its bytes, the folder full, a failed write).
    #[error("{0}")]
    Recording(String),
    /// A recording that cannot be replayed: its component, its spec or a call's answer.
    #[error("{0}")]
    Replay(String),
    /// The engine that cannot start: its configuration, its pool, its cache.
    #[error("{0}")]
    Engine(String),
    /// A core module that cannot be made a component (the reason names what is missing).
    #[error("{0}")]
    Componentize(String),
    /// A pull from or a push to an OCI registry that failed (the registry's answer, or what
    /// the artifact lacks).
    #[error("{0}")]
    Registry(String),
    /// A pulled motif that is not whole or not text.
    #[error("{0}")]
    Motif(String),
}

/// Where the text is the value (a Live API answer, a finding's message), an error is its
/// message.
impl From<Error> for String {
    fn from(error: Error) -> Self {
        error.to_string()
    }
}
