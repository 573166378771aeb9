//! A fault a campaign injects into the runtime it tests (`ork test --faults`): with
//! `ORK_FAULT_TRAP_EVERY=N` in its environment, every N-th component call traps before its
//! guest runs, as a guest that fails now and then would. Only the environment of the
//! process sets it: nothing a Katalog, a CR or a component supplies reaches it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The variable that arms it.
pub const TRAP_EVERY: &str = "ORK_FAULT_TRAP_EVERY";

static EVERY: OnceLock<Option<u64>> = OnceLock::new();
static CALLS: AtomicU64 = AtomicU64::new(0);

/// Whether this call is one to trap.
pub fn trap_now() -> bool {
    let every = EVERY.get_or_init(|| {
        let every = std::env::var(TRAP_EVERY).ok()?.parse::<u64>().ok().filter(|n| *n > 0)?;
        tracing::warn!(
            every,
            "fault injection armed: every {every}th component call traps ({TRAP_EVERY})"
        );
        Some(every)
    });
    every.is_some_and(|every| (CALLS.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(every))
}
