//! `orkestra:operator/log`: a guest's log lines, bounded in length and, per call, in bytes
//! (at their cost to the host), under the `guest` target with the component and CR key.

use wasmtime::component::HasData;

use super::super::bindings::log as wit_log;
use super::super::caller::Caller;

/// Longest log line kept; longer ones are cut.
const LOG_LINE_LIMIT: usize = 1024;
/// What a log line costs the host beyond its text (timestamp, level, target, the component
/// and key fields): an empty line is not free.
const LOG_LINE_COST: usize = 96;

/// The log capability's part of a call's store.
#[derive(Debug, Default)]
pub struct LogState {
    /// Bytes the guest may still log (each line at its cost to the host).
    pub bytes_left: usize,
    /// Lines dropped once the budget was spent.
    pub dropped: u64,
    /// The last error-level line the guest logged (a panic message), to explain a trap.
    pub last_error: Option<String>,
}

impl LogState {
    /// A full budget of `bytes`.
    pub fn new(bytes: usize) -> Self {
        Self {
            bytes_left: bytes,
            ..Self::default()
        }
    }
}

/// What the log function sees of a call's store.
pub struct LogView<'a> {
    pub state: &'a mut LogState,
    pub caller: &'a Caller,
    pub tape: Option<&'a dyn LogTap>,
}

/// Where a recorded call's log lines are taken down too.
pub trait LogTap: Send + Sync {
    fn logged(&self, line: &str);
}

/// The log capability, as the linker knows it.
pub struct Log;

impl HasData for Log {
    type Data<'a> = LogView<'a>;
}

impl wit_log::Host for LogView<'_> {
    #[tracing::instrument(level = "trace", name = "log.log", skip_all)]
    fn log(&mut self, level: wit_log::Level, message: String) -> wasmtime::Result<()> {
        let message = orkestra_expr::text::bounded(message, LOG_LINE_LIMIT);
        if matches!(level, wit_log::Level::Error) {
            // Kept even past the budget: it explains a trap (a panic logs here first).
            self.state.last_error = Some(message.clone());
        }
        let (component, key) = (&*self.caller.component, &self.caller.key);
        let cost = message.len() + component.len() + key.len() + LOG_LINE_COST;
        if cost > self.state.bytes_left {
            self.state.bytes_left = 0;
            self.state.dropped += 1;
            return Ok(());
        }
        self.state.bytes_left -= cost;
        if let Some(tape) = self.tape {
            let name = match level {
                wit_log::Level::Debug => "debug",
                wit_log::Level::Info => "info",
                wit_log::Level::Warn => "warn",
                wit_log::Level::Error => "error",
            };
            tape.logged(&format!("{name}: {message}"));
        }
        match level {
            wit_log::Level::Debug => tracing::debug!(target: "guest", component, key, "{message}"),
            wit_log::Level::Info => tracing::info!(target: "guest", component, key, "{message}"),
            wit_log::Level::Warn => tracing::warn!(target: "guest", component, key, "{message}"),
            wit_log::Level::Error => tracing::error!(target: "guest", component, key, "{message}"),
        }
        Ok(())
    }
}
