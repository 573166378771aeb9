//! Progress for long steps: a spinner with elapsed time on a terminal, plain lines otherwise
//! (CI logs).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
}

impl Progress {
    /// Starts showing `message`.
    pub fn start(message: impl Into<String>) -> Self {
        let message = message.into();
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        let progress = Self {
            bar,
            started: Instant::now(),
        };
        progress.set(message);
        progress
    }

    /// Replaces the message; on a plain log it is printed as a new line.
    pub fn set(&self, message: impl Into<String>) {
        let message = message.into();
        match &self.bar {
            Some(bar) => bar.set_message(message),
            None => eprintln!("[{:>4}s] {message}", self.started.elapsed().as_secs()),
        }
    }

    /// Shows a transient detail (the latest build output line) on a terminal only.
    pub fn detail(&self, headline: &str, detail: &str) {
        if let Some(bar) = &self.bar {
            let detail: String = detail.chars().take(80).collect();
            bar.set_message(format!("{headline}\n  {detail}"));
        }
    }

    /// Removes the spinner.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
