//! `orkestra:operator/log`: a guest's log lines, bounded in length and, per call, in bytes
//! (at their cost to the host), under the `guest` target with the component and CR key.

use super::super::bindings::log as wit_log;
use super::super::store::CallState;

/// Longest log line kept; longer ones are cut.
const LOG_LINE_LIMIT: usize = 1024;
/// What a log line costs the host beyond its text (timestamp, level, target, the component
/// and key fields): an empty line is not free.
const LOG_LINE_COST: usize = 96;

impl wit_log::Host for CallState {
    #[tracing::instrument(level = "trace", name = "log.log", skip_all)]
    fn log(&mut self, level: wit_log::Level, message: String) -> wasmtime::Result<()> {
        let message = orkestra_expr::text::bounded(message, LOG_LINE_LIMIT);
        if matches!(level, wit_log::Level::Error) {
            // Kept even past the budget: it explains a trap (a panic logs here first).
            self.last_error = Some(message.clone());
        }
        let (component, key) = (&*self.caller.component, &self.caller.key);
        let cost = message.len() + component.len() + key.len() + LOG_LINE_COST;
        if cost > self.log_bytes_left {
            self.log_bytes_left = 0;
            self.logs_dropped += 1;
            return Ok(());
        }
        self.log_bytes_left -= cost;
        if let Some(tape) = &self.tape {
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
