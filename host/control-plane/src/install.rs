//! `ork control-plane install`: makes sure the control plane binaries exist, building them
//! once per machine into the versioned cache (see [`super::binaries`]): a current release
//! from the Go module proxy, or, on a machine without Go, v1.20.2 from Debian's source.
//!
//! The build runs in a temporary directory next to the cache entry and is renamed into place
//! only when every step succeeded, so a failed or interrupted build never leaves a
//! half-written entry. Concurrent installs serialise on a lock file.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::binaries::{self, Binaries, DEBIAN_SOURCE_VERSION, KUBERNETES_VERSION, KWOK_VERSION, Recipe, Release};
use super::error::Error;
use super::instance::lock_file;
use super::process::log_tail;

const DEBIAN_SCRIPT: &str = include_str!("build.sh");
const MODULES_SCRIPT: &str = include_str!("build-modules.sh");
/// The check both build scripts end with, run again on a cached build.
const CHECK_SCRIPT: &str = include_str!("check.sh");
/// The pinned modules of [`KUBERNETES_VERSION`] and kwok, written out for the build.
const PINNED: &[(&str, &str)] = &[
    ("kubernetes/go.mod", include_str!("modules/kubernetes/go.mod")),
    ("kubernetes/go.sum", include_str!("modules/kubernetes/go.sum")),
    ("kubernetes/tools.go", include_str!("modules/kubernetes/tools.go")),
    (
        "kubernetes/etcd/main.go",
        include_str!("modules/kubernetes/etcd/main.go"),
    ),
    ("kwok/go.mod", include_str!("modules/kwok/go.mod")),
    ("kwok/go.sum", include_str!("modules/kwok/go.sum")),
    ("kwok/tools.go", include_str!("modules/kwok/tools.go")),
];

/// What the installer reports while it works.
#[derive(Debug, Clone)]
pub enum InstallEvent {
    /// A build step started.
    Step { index: u32, total: u32, title: String },
    /// A line of build output (also written to the build log).
    Output(String),
}

/// Ensures the binaries of `release` exist and returns their paths and whether a build ran.
/// A cached build is checked again (each binary reports the expected version), so a
/// machine where the check fails says so on every run, not only on the run that built.
///
/// Environment overrides (`ORK_ETCD_BIN`, `ORK_KUBE_APISERVER_BIN`,
/// `ORK_KUBE_CONTROLLER_MANAGER_BIN`) are used as they are and never built.
///
/// # Errors
/// [`Error::MissingBinary`] when an override points at nothing, [`Error::BuildFailed`]
/// naming the failed step and the build log.
pub fn install(release: &Release, mut on_event: impl FnMut(InstallEvent)) -> Result<(Binaries, bool), Error> {
    let resolved = Binaries::resolve(release);
    let overridden = [
        binaries::ENV_ETCD,
        binaries::ENV_APISERVER,
        binaries::ENV_CONTROLLER_MANAGER,
    ]
    .iter()
    .any(|var| std::env::var_os(var).is_some());
    if resolved.complete() {
        if !overridden {
            on_event(InstallEvent::Step {
                index: 1,
                total: 1,
                title: "checking the cached binaries".into(),
            });
            check(release)?;
        }
        return Ok((resolved, false));
    }
    if overridden {
        // The user chose their own binaries: report which one is missing instead of building.
        resolved.check(true)?;
    }

    let final_dir = release.cache_dir();
    let parent = final_dir.parent().unwrap_or(Path::new("/")).to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|source| Error::Io {
        action: format!("create the cache directory {}", parent.display()),
        source,
    })?;
    let _lock = lock_file(&parent.join(".install.lock"), true)?;
    // Another install may have finished while we waited for the lock.
    if Binaries::in_cache(release).complete() {
        return Ok((Binaries::resolve(release), false));
    }
    remove_stale_builds(&parent);

    let work = parent.join(format!(".build-{}", std::process::id()));
    let log_path = parent.join("build.log");
    let result = run_build(release, &work, &log_path, &mut on_event).and_then(|()| {
        // A previous incomplete entry (files deleted by hand) is replaced whole.
        if final_dir.exists() {
            std::fs::remove_dir_all(&final_dir).map_err(|source| Error::Io {
                action: format!("remove the incomplete cache entry {}", final_dir.display()),
                source,
            })?;
        }
        std::fs::rename(work.join("out"), &final_dir).map_err(|source| Error::Io {
            action: format!("move the build into {}", final_dir.display()),
            source,
        })
    });
    let _ = std::fs::remove_dir_all(&work);
    result?;
    Ok((Binaries::resolve(release), true))
}

/// Runs the build scripts' check on the cached build of `release`.
fn check(release: &Release) -> Result<(), Error> {
    let dir = release.cache_dir();
    let (etcd, kwok) = match release.recipe {
        Recipe::Debian => ("3.4", ""),
        Recipe::Modules => ("3.", KWOK_VERSION),
    };
    let output = Command::new("bash")
        .arg("-c")
        .arg(CHECK_SCRIPT)
        .arg("check.sh")
        .arg(&dir)
        .arg(&release.version)
        .args([etcd, kwok])
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Io {
            action: "run the check of the cached binaries".into(),
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stdout);
    let message = said
        .lines()
        .find_map(|line| line.strip_prefix("::error "))
        .map_or_else(|| format!("the check exited with {}", output.status), str::to_string);
    Err(Error::CachedBuildBroken {
        dir,
        message,
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
    })
}

fn run_build(
    release: &Release,
    work: &Path,
    log_path: &Path,
    on_event: &mut impl FnMut(InstallEvent),
) -> Result<(), Error> {
    let io = |action: &str| {
        let action = action.to_string();
        move |source| Error::Io { action, source }
    };
    std::fs::create_dir_all(work).map_err(io("create the build directory"))?;
    let script = work.join("build.sh");
    let out = work.join("out").display().to_string();
    std::fs::write(work.join("check.sh"), CHECK_SCRIPT).map_err(io("write the check script"))?;
    let args: Vec<String> = match release.recipe {
        Recipe::Debian => {
            std::fs::write(&script, DEBIAN_SCRIPT).map_err(io("write the build script"))?;
            let version = &release.version;
            vec![
                out,
                work.display().to_string(),
                DEBIAN_SOURCE_VERSION.into(),
                version.clone(),
            ]
        }
        Recipe::Modules => {
            std::fs::write(&script, MODULES_SCRIPT).map_err(io("write the build script"))?;
            let pinned = work.join("pinned");
            for (path, text) in PINNED {
                let path = pinned.join(path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(io("create the pinned module directory"))?;
                }
                std::fs::write(&path, text).map_err(io("write the pinned modules"))?;
            }
            let go_cache = binaries::cache_root().join("go");
            vec![
                out,
                work.display().to_string(),
                release.version.clone(),
                KUBERNETES_VERSION.into(),
                pinned.display().to_string(),
                go_cache.display().to_string(),
                KWOK_VERSION.into(),
            ]
        }
    };
    let mut log = File::create(log_path).map_err(io("create the build log"))?;

    // stderr is folded into stdout so the log keeps the order in which things happened.
    let mut child = Command::new("bash")
        .arg("-c")
        .arg("exec bash \"$0\" \"$@\" 2>&1")
        .arg(&script)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(io("start bash for the build script"))?;

    let mut current_step = String::from("starting the build");
    let mut error_line = None;
    let mut done = false;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(log, "{line}");
            if let Some(rest) = line.strip_prefix("::step ") {
                let mut parts = rest.splitn(3, ' ');
                let index = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                let total = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                current_step = parts.next().unwrap_or_default().to_string();
                on_event(InstallEvent::Step {
                    index,
                    total,
                    title: current_step.clone(),
                });
            } else if let Some(message) = line.strip_prefix("::error ") {
                error_line = Some(message.to_string());
            } else if line == "::done" {
                done = true;
            } else {
                on_event(InstallEvent::Output(line));
            }
        }
    }
    let status = child.wait().map_err(io("wait for the build script"))?;
    if status.success() && done {
        return Ok(());
    }
    Err(Error::BuildFailed {
        step: current_step,
        message: error_line.unwrap_or_else(|| format!("the build script exited with {status}")),
        log: log_path.to_path_buf(),
        tail: log_tail(log_path, 20),
    })
}

/// Removes `.build-<pid>` directories left by builds whose process is gone.
fn remove_stale_builds(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(".build-")) else {
            continue;
        };
        let alive = pid
            .parse::<u32>()
            .is_ok_and(|pid| PathBuf::from(format!("/proc/{pid}")).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
