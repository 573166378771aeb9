//! One supervised child process of the control plane: spawned in its own process group,
//! killed by the kernel if the thread that spawned it dies, logged to a file, stopped with
//! SIGTERM and then SIGKILL.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::error::Error;

/// A running child process and the log file its output goes to.
#[derive(Debug)]
pub struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
    /// What it was started with, to start it again.
    program: PathBuf,
    args: Vec<String>,
}

impl Process {
    /// Spawns `program` with `args`, stdout and stderr appended to `log`.
    ///
    /// The child gets its own process group, so a Ctrl-C at the terminal reaches only `ork`,
    /// which then stops the children in order. `PR_SET_PDEATHSIG` makes the kernel kill the
    /// child if the spawning thread dies first (for example when `ork` is killed with
    /// SIGKILL), so no control plane outlives its owner. Spawn from a thread that lives as
    /// long as the control plane: the signal follows the thread, not the process.
    pub fn spawn(name: &'static str, program: &Path, args: &[String], log: &Path) -> Result<Self, Error> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|source| Error::Io {
                action: format!("open log file {}", log.display()),
                source,
            })?;
        let err = out.try_clone().map_err(|source| Error::Io {
            action: format!("open log file {}", log.display()),
            source,
        })?;
        let mut command = Command::new(program);
        command.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: the closure runs in the forked child before exec and only calls
        // async-signal-safe functions (setpgid, prctl, getppid).
        unsafe {
            command.pre_exec(|| {
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl: then nobody would kill us.
                if libc::getppid() == 1 {
                    return Err(std::io::Error::other("parent exited before the child started"));
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|source| Error::Spawn {
            name,
            program: program.to_path_buf(),
            source,
        })?;
        Ok(Self {
            name,
            child,
            log: log.to_path_buf(),
            program: program.to_path_buf(),
            args: args.to_vec(),
        })
    }

    /// SIGKILL, as a crash would: no clean shutdown.
    pub fn kill(&mut self) {
        signal_group(self.child.id(), libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// Starts it again as it was first started (after [`Process::kill`] or an exit).
    pub fn restart(&mut self) -> Result<(), Error> {
        *self = Self::spawn(self.name, &self.program, &self.args, &self.log)?;
        Ok(())
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The short name of the component (`etcd`, `kube-apiserver`, ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Returns an error naming the component and the end of its log if it has exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(Error::ExitedEarly {
                name: self.name,
                status,
                log: self.log.clone(),
                tail: log_tail(&self.log, 15),
            }),
            Ok(None) => Ok(()),
            Err(source) => Err(Error::Io {
                action: format!("check {}", self.name),
                source,
            }),
        }
    }

    /// Sends SIGTERM to the whole process group without waiting.
    pub fn terminate(&self) {
        signal_group(self.child.id(), libc::SIGTERM);
    }

    /// Waits for the process to exit; after `grace` it is killed. Returns its exit status.
    pub fn wait(&mut self, grace: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                Ok(None) => {
                    signal_group(self.child.id(), libc::SIGKILL);
                    return self.child.wait().ok();
                }
                Err(_) => return None,
            }
        }
    }

    /// SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.terminate();
        self.wait(grace)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop(Duration::from_secs(5));
        }
    }
}

fn signal_group(pid: u32, signal: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return };
    // SAFETY: kill(2) with a negative pid signals the process group we created for the child.
    unsafe {
        libc::kill(-pid, signal);
    }
}

/// The last `lines` lines of a log file, for error messages.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
