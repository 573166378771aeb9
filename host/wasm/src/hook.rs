//! Which export a call runs, and each way a call can fail: what a call's caller, its figures
//! and its recording name, apart from the machinery that makes the call (`call.rs`).

use super::stats::CallOutcome;

/// Which export a call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `on-reconcile` of a hook, `reconcile` of a constructor.
    Reconcile,
    /// `on-delete` of a hook, `finalize` of a constructor.
    Delete,
    /// `on-not-found` (hooks only; a constructor is not called).
    NotFound,
}

/// How a call failed; each has its own Ready reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("did not finish within its timeout of {0:?}")]
    Timeout(std::time::Duration),
    #[error("{0}")]
    MemoryLimit(String),
    #[error("burnt its limits.fuel of {0}")]
    Fuel(u64),
    #[error("trapped: {0}")]
    Trapped(String),
    #[error("returned {size} bytes; its resultSize limit is {limit}")]
    ResultTooLarge { size: usize, limit: usize },
    #[error("{0}")]
    Forbidden(String),
    #[error("cannot start an instance: {0}")]
    Instantiate(String),
    /// More children or events than its limits allow; nothing of the call is used.
    #[error("returned {count} {what}; its limits.{what} is {limit}")]
    TooMany {
        what: &'static str,
        count: usize,
        limit: usize,
    },
}

impl CallError {
    /// How the call ended, as the call figures count it.
    pub fn outcome(&self) -> CallOutcome {
        match self {
            CallError::Timeout(_) => CallOutcome::Timeout,
            CallError::MemoryLimit(_) => CallOutcome::Memory,
            CallError::Fuel(_) => CallOutcome::Fuel,
            CallError::Trapped(_) => CallOutcome::Trap,
            CallError::ResultTooLarge { .. } => CallOutcome::ResultTooLarge,
            CallError::Forbidden(_) => CallOutcome::Forbidden,
            CallError::Instantiate(_) => CallOutcome::Instantiate,
            CallError::TooMany { .. } => CallOutcome::TooMany,
        }
    }
}
