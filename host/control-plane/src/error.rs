//! What stops a control plane from installing, starting or running, each naming its cause
//! and its fix.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// The command that builds the binaries, named in every "missing binary" error.
pub const INSTALL_COMMAND: &str = "ork control-plane install";

/// Errors of starting, running or installing a control plane. None is retryable as is: each
/// names the cause and the fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A binary is not where it should be.
    #[error(
        "{name} not found at {}: run `{INSTALL_COMMAND}` to build it{}",
        path.display(),
        var.map(|var| format!(", or set {var} to an existing binary")).unwrap_or_default()
    )]
    MissingBinary {
        name: &'static str,
        path: PathBuf,
        /// The environment variable that points at an existing binary instead, if any.
        var: Option<&'static str>,
    },
    /// A helper program (openssl) is missing.
    #[error("`{tool}` is needed to {purpose} but was not found: install it (Debian: apt-get install {package})")]
    MissingTool {
        tool: &'static str,
        purpose: &'static str,
        package: &'static str,
    },
    /// The requested port is taken.
    #[error("port {port} on 127.0.0.1 is already in use: pick another with --port, or omit --port to use a free one")]
    PortInUse { port: u16 },
    /// The instance directory cannot be written.
    #[error("cannot write to {}: choose a writable directory with --dir", dir.display())]
    DirNotWritable {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Another control plane uses this directory.
    #[error("{} is in use by another running control plane: stop it or choose another --dir", dir.display())]
    DirInUse { dir: PathBuf },
    /// A process could not be started.
    #[error("could not start {name} ({})", program.display())]
    Spawn {
        name: &'static str,
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A process exited while it should be running.
    #[error("{name} exited ({status}); the end of its log {}:\n{tail}", log.display())]
    ExitedEarly {
        name: &'static str,
        status: ExitStatus,
        log: PathBuf,
        tail: String,
    },
    /// The API server did not answer /readyz in time.
    #[error("{what} within {}s; the end of the kube-apiserver log {}:\n{tail}", timeout.as_secs(), log.display())]
    NotReady {
        what: &'static str,
        timeout: Duration,
        log: PathBuf,
        tail: String,
    },
    /// A helper command failed.
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    /// The build of the binaries failed.
    #[error("building the control plane failed at step \"{step}\": {message}\nfull log: {}\nlast lines:\n{tail}", log.display())]
    BuildFailed {
        step: String,
        message: String,
        log: PathBuf,
        tail: String,
    },
    /// A cached build no longer passes the build's own check.
    #[error("the cached control plane in {} fails its check: {message}{}\nremove that directory and run `ork control-plane install` to build it again", dir.display(), if stderr.is_empty() { String::new() } else { format!(" ({stderr})") })]
    CachedBuildBroken {
        dir: PathBuf,
        message: String,
        stderr: String,
    },
    /// The generated kubeconfig could not be loaded.
    #[error("cannot load the kubeconfig {}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// A kube client could not be built.
    #[error("cannot build a Kubernetes client")]
    Client(#[source] kube::Error),
    /// Any other file system or process error.
    #[error("could not {action}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },
}
