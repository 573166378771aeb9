//! Where the control plane binaries are: environment overrides first, then the versioned
//! build cache that `ork control-plane install` fills, by one of two recipes.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::Error;

/// The Kubernetes release built by default, from the Go module proxy (pinned go.sum).
pub const KUBERNETES_VERSION: &str = "v1.37.2";
/// The kwok release that simulates nodes (pinned go.sum).
pub const KWOK_VERSION: &str = "v0.8.0";
/// The release of the fallback for machines without Go, from Debian bookworm's source.
pub const DEBIAN_KUBERNETES_VERSION: &str = "v1.20.2";
/// The Debian source package version the fallback builds (pinned).
pub const DEBIAN_SOURCE_VERSION: &str = "1.20.5+really1.20.2-1.1+deb12u1";
/// Bumped whenever a build recipe changes, so an old cache entry is not reused.
const RECIPE_REVISION: u32 = 2;

/// Environment variable naming an existing kube-apiserver binary.
pub const ENV_APISERVER: &str = "ORK_KUBE_APISERVER_BIN";
/// Environment variable naming an existing kube-controller-manager binary.
pub const ENV_CONTROLLER_MANAGER: &str = "ORK_KUBE_CONTROLLER_MANAGER_BIN";
/// Environment variable naming an existing etcd binary.
pub const ENV_ETCD: &str = "ORK_ETCD_BIN";
/// Environment variable overriding the cache root (default `$XDG_CACHE_HOME/orkestra` or
/// `~/.cache/orkestra`).
pub const ENV_CACHE_DIR: &str = "ORK_CACHE_DIR";
/// Environment variable choosing the Kubernetes release (what `--version` sets).
pub const ENV_VERSION: &str = "ORK_KUBERNETES_VERSION";

/// How a release is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipe {
    /// From the Go module proxy: every component, kubectl and kwok.
    Modules,
    /// From Debian's source package: etcd, kube-apiserver and kube-controller-manager of
    /// v1.20.2 only (no scheduler, no simulated nodes).
    Debian,
}

/// A release and the recipe that builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub version: String,
    pub recipe: Recipe,
}

impl Release {
    /// `version` (else `ORK_KUBERNETES_VERSION`, else [`KUBERNETES_VERSION`]) from Go
    /// modules when Go is on PATH; without Go, the Debian fallback, whatever was asked.
    pub fn pick(version: Option<&str>) -> Self {
        if !go_available() {
            return Self::debian();
        }
        let version = version
            .map(String::from)
            .or_else(|| std::env::var(ENV_VERSION).ok().filter(|v| !v.is_empty()))
            .unwrap_or_else(|| KUBERNETES_VERSION.to_string());
        Self {
            version,
            recipe: Recipe::Modules,
        }
    }

    /// The v1.20.2 fallback.
    pub fn debian() -> Self {
        Self {
            version: DEBIAN_KUBERNETES_VERSION.to_string(),
            recipe: Recipe::Debian,
        }
    }

    /// The versioned cache directory of this release.
    pub fn cache_dir(&self) -> PathBuf {
        let recipe = match self.recipe {
            Recipe::Modules => "go",
            Recipe::Debian => "debian",
        };
        cache_root()
            .join("control-plane")
            .join(format!("kubernetes-{}-{recipe}-r{RECIPE_REVISION}", self.version))
    }
}

/// Whether a Go toolchain answers on PATH.
fn go_available() -> bool {
    Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Paths of the control plane programs. The scheduler, kwok and kubectl come with the Go
/// modules recipe only.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kube_scheduler: Option<PathBuf>,
    pub kwok: Option<PathBuf>,
    pub kubectl: Option<PathBuf>,
}

/// The cache root shared by every Orkestra-rs build product on this machine.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os(ENV_CACHE_DIR) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("orkestra");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("orkestra")
}

impl Binaries {
    /// The binaries of `release` in its cache directory (whether or not they exist).
    pub fn in_cache(release: &Release) -> Self {
        let dir = release.cache_dir();
        let extra = |name: &str| (release.recipe == Recipe::Modules).then(|| dir.join(name));
        Self {
            etcd: dir.join("etcd"),
            kube_apiserver: dir.join("kube-apiserver"),
            kube_controller_manager: dir.join("kube-controller-manager"),
            kube_scheduler: extra("kube-scheduler"),
            kwok: extra("kwok"),
            kubectl: extra("kubectl"),
        }
    }

    /// Resolves each binary from its environment variable, else from the cache of
    /// `release`. Does not check that the files exist; see [`Binaries::check`].
    pub fn resolve(release: &Release) -> Self {
        let cached = Self::in_cache(release);
        let pick = |var: &str, default: PathBuf| std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
        Self {
            etcd: pick(ENV_ETCD, cached.etcd),
            kube_apiserver: pick(ENV_APISERVER, cached.kube_apiserver),
            kube_controller_manager: pick(ENV_CONTROLLER_MANAGER, cached.kube_controller_manager),
            ..cached
        }
    }

    /// Fails with an error naming the first missing binary, the variable that overrides it
    /// and the command that installs it.
    pub fn check(&self, with_controller_manager: bool) -> Result<(), Error> {
        let mut wanted = vec![
            ("etcd", Some(ENV_ETCD), &self.etcd),
            ("kube-apiserver", Some(ENV_APISERVER), &self.kube_apiserver),
        ];
        if with_controller_manager {
            wanted.push((
                "kube-controller-manager",
                Some(ENV_CONTROLLER_MANAGER),
                &self.kube_controller_manager,
            ));
        }
        for (name, path) in [
            ("kube-scheduler", &self.kube_scheduler),
            ("kwok", &self.kwok),
            ("kubectl", &self.kubectl),
        ] {
            if let Some(path) = path {
                wanted.push((name, None, path));
            }
        }
        for (name, var, path) in wanted {
            if !is_executable(path) {
                return Err(Error::MissingBinary {
                    name,
                    path: path.clone(),
                    var,
                });
            }
        }
        Ok(())
    }

    /// True when every binary is present and executable.
    pub fn complete(&self) -> bool {
        self.check(true).is_ok()
    }

    /// Whether Pods can run: a scheduler places them on nodes kwok simulates.
    pub fn simulates_nodes(&self) -> bool {
        self.kube_scheduler.is_some() && self.kwok.is_some()
    }

    /// The minor version kube-apiserver reports (`Kubernetes v1.37.2` is 37).
    pub fn minor_version(&self) -> Result<u32, Error> {
        let output = Command::new(&self.kube_apiserver)
            .arg("--version")
            .output()
            .map_err(|source| Error::Io {
                action: format!("run {} --version", self.kube_apiserver.display()),
                source,
            })?;
        let text = String::from_utf8_lossy(&output.stdout);
        text.split_whitespace()
            .find_map(|word| word.strip_prefix("v1."))
            .and_then(|rest| rest.split('.').next())
            .and_then(|minor| minor.parse().ok())
            .ok_or_else(|| Error::Command {
                command: format!("{} --version", self.kube_apiserver.display()),
                stderr: format!("no Kubernetes version in {:?}", text.trim()),
            })
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
