//! What an instance is given before it starts, and what reaches it after: its folder and
//! free loopback ports, the audit policy, and clients for its kubeconfig.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::error::Error;

/// The audit log of a control plane started with [`Options::audit`].
pub fn audit_log(dir: &Path) -> PathBuf {
    dir.join("logs/audit.log")
}

/// The kube-apiserver flags that write [`audit_log`]: every request once, when its response
/// is complete, at the Metadata level (no bodies, so the log costs little).
pub(crate) fn audit_flags(dir: &Path, on: bool) -> Result<Vec<String>, Error> {
    if !on {
        return Ok(Vec::new());
    }
    let policy = dir.join("audit-policy.yaml");
    let text = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted]\nrules:\n  - level: Metadata\n";
    std::fs::write(&policy, text).map_err(|source| Error::Io {
        action: format!("write {}", policy.display()),
        source,
    })?;
    Ok(vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", audit_log(dir).display()),
        "--audit-log-format=json".into(),
        "--audit-log-mode=batch".into(),
        "--audit-log-batch-max-wait=1s".into(),
        "--audit-log-maxsize=0".into(),
    ])
}

/// A kube client from a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> Result<kube::Client, Error> {
    kube::Client::try_from(config_for(kubeconfig).await?).map_err(Error::Client)
}

/// The client configuration of a kubeconfig file.
pub async fn config_for(kubeconfig: &Path) -> Result<kube::Config, Error> {
    kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).map_err(|source| Error::Kubeconfig {
            path: kubeconfig.to_path_buf(),
            source,
        })?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .map_err(|source| Error::Kubeconfig {
        path: kubeconfig.to_path_buf(),
        source,
    })
}

pub(crate) fn http_get(path: &'static str) -> http::Request<Vec<u8>> {
    let mut request = http::Request::new(Vec::new());
    *request.uri_mut() = http::Uri::from_maybe_shared(path).unwrap_or_default();
    request
}

pub(crate) fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_string()).collect()
}

pub(crate) fn create_dir(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::DirNotWritable {
        dir: dir.to_path_buf(),
        source,
    })
}

/// Creates the directory, proves it writable and returns its absolute path.
pub(crate) fn prepare_dir(dir: &Path) -> Result<PathBuf, Error> {
    create_dir(dir)?;
    let probe = dir.join(".ork-write-test");
    std::fs::write(&probe, b"ok").map_err(|source| Error::DirNotWritable {
        dir: dir.to_path_buf(),
        source,
    })?;
    let _ = std::fs::remove_file(probe);
    std::path::absolute(dir).map_err(|source| Error::DirNotWritable {
        dir: dir.to_path_buf(),
        source,
    })
}

/// Takes an exclusive `flock` on `path`; `wait` blocks until it is free, otherwise a held
/// lock is [`Error::DirInUse`]. The lock lives as long as the returned file.
pub(crate) fn lock_file(path: &Path, wait: bool) -> Result<File, Error> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|source| Error::DirNotWritable {
            dir: path.parent().unwrap_or(path).to_path_buf(),
            source,
        })?;
    let mode = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    // SAFETY: flock on a descriptor we own; the lock is released when the file is closed.
    if unsafe { libc::flock(file.as_raw_fd(), mode) } != 0 {
        return Err(Error::DirInUse {
            dir: path.parent().unwrap_or(path).to_path_buf(),
        });
    }
    Ok(file)
}

pub(crate) fn free_port() -> Result<u16, Error> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|source| Error::Io {
        action: "find a free loopback port".into(),
        source,
    })?;
    listener.local_addr().map(|a| a.port()).map_err(|source| Error::Io {
        action: "find a free loopback port".into(),
        source,
    })
}

pub(crate) fn reserve_port(port: u16) -> Result<u16, Error> {
    std::net::TcpListener::bind(("127.0.0.1", port)).map_err(|_| Error::PortInUse { port })?;
    Ok(port)
}
