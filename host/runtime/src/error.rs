//! What the runtime refuses when it is set up or handed a Katalog: an unknown CRD, a Wasm
//! engine that does not start, a runtime that has stopped, HA settings that cannot run, an
//! object a simulation cannot take.

/// A refusal of the runtime, by what was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no custom reconciler may be registered for unknown CRD \"{0}\"")]
    UnknownCrd(String),
    #[error("{0}")]
    Wasm(String),
    /// A Katalog handed to a runtime that has stopped.
    #[error("the runtime is not running; nothing was applied")]
    NotRunning,
    /// An object a simulation's stand-in cluster cannot take (the message names what it
    /// lacks).
    #[error("{0}")]
    Simulation(String),
    /// High-availability settings that cannot run (the message names the setting).
    #[error("{0}")]
    Ha(String),
}
