//! Drives the `ork` binary as a user would: spawn, read its output, signal it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

pub const ORK: &str = env!("CARGO_BIN_EXE_ork");

/// Runs `ork` to completion.
pub fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(ORK)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("ork runs")
}

/// A running `ork` whose stdout and stderr lines are collected.
pub struct Ork {
    child: Child,
    lines: Receiver<String>,
    pub seen: Vec<String>,
}

impl Ork {
    pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(ORK);
        command.args(args).envs(env.iter().copied());
        Self::spawn_command(command)
    }

    /// Runs `command` (which execs `ork` in the end), collecting its output.
    pub fn spawn_command(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ork starts");
        let (sender, lines) = channel();
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let out = sender.clone();
        std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .for_each(|l| drop(out.send(l)))
        });
        std::thread::spawn(move || {
            BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
                .for_each(|l| drop(sender.send(l)))
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line containing `needle`; panics with everything seen on timeout or exit.
    pub fn wait_for(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!(
                    "no line with {needle:?} within {timeout:?}; output:\n{}",
                    self.seen.join("\n")
                ),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "ork exited before printing {needle:?}; output:\n{}",
                        self.seen.join("\n")
                    )
                }
            }
        }
    }

    /// A line containing `needle` it printed already, or the next one.
    pub fn said(&mut self, needle: &str, timeout: Duration) -> String {
        match self.seen.iter().find(|line| line.contains(needle)) {
            Some(line) => line.clone(),
            None => self.wait_for(needle, timeout),
        }
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid fits")
    }

    /// Sends `signal` and waits for the exit status.
    pub fn signal_and_wait(&mut self, signal: i32, timeout: Duration) -> ExitStatus {
        // SAFETY: kill(2) on the pid of our own child.
        unsafe {
            libc::kill(self.pid(), signal);
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "ork did not exit within {timeout:?} after signal {signal}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Ork {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pids of processes whose command line mentions `dir` (the control plane components of an
/// instance all name its directory in their flags).
pub fn processes_mentioning(dir: &Path) -> Vec<u32> {
    let needle = dir.display().to_string();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(&needle) && pid != std::process::id() {
            pids.push(pid);
        }
    }
    pids
}

/// Waits until no process mentions `dir`, returning the survivors on timeout.
pub fn wait_no_processes(dir: &Path, timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = processes_mentioning(dir);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
