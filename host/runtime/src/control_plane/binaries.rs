//! Where the control plane binaries are: environment overrides first, then the versioned
//! build cache that `ork control-plane install` fills.

use std::path::{Path, PathBuf};

use super::Error;

/// The Kubernetes release the cache holds, built from Debian bookworm's source package.
pub const KUBERNETES_VERSION: &str = "v1.20.2";
/// The Debian source package version the build uses (pinned).
pub const DEBIAN_SOURCE_VERSION: &str = "1.20.5+really1.20.2-1.1+deb12u1";
/// Bumped whenever the build recipe changes, so an old cache entry is not reused.
const RECIPE_REVISION: u32 = 1;

/// Environment variable naming an existing kube-apiserver binary.
pub const ENV_APISERVER: &str = "ORK_KUBE_APISERVER_BIN";
/// Environment variable naming an existing kube-controller-manager binary.
pub const ENV_CONTROLLER_MANAGER: &str = "ORK_KUBE_CONTROLLER_MANAGER_BIN";
/// Environment variable naming an existing etcd binary.
pub const ENV_ETCD: &str = "ORK_ETCD_BIN";
/// Environment variable overriding the cache root (default `$XDG_CACHE_HOME/orkestra` or
/// `~/.cache/orkestra`).
pub const ENV_CACHE_DIR: &str = "ORK_CACHE_DIR";

/// Paths of the three control plane programs.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
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

/// The versioned directory holding `etcd`, `kube-apiserver` and `kube-controller-manager`.
pub fn cache_dir() -> PathBuf {
    cache_root()
        .join("control-plane")
        .join(format!("kubernetes-{KUBERNETES_VERSION}-r{RECIPE_REVISION}"))
}

impl Binaries {
    /// The binaries in a cache directory (whether or not they exist).
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            etcd: dir.join("etcd"),
            kube_apiserver: dir.join("kube-apiserver"),
            kube_controller_manager: dir.join("kube-controller-manager"),
        }
    }

    /// Resolves each binary from its environment variable, else from the build cache.
    /// Does not check that the files exist; see [`Binaries::check`].
    pub fn resolve() -> Self {
        let cached = Self::in_dir(&cache_dir());
        let pick = |var: &str, default: PathBuf| std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
        Self {
            etcd: pick(ENV_ETCD, cached.etcd),
            kube_apiserver: pick(ENV_APISERVER, cached.kube_apiserver),
            kube_controller_manager: pick(ENV_CONTROLLER_MANAGER, cached.kube_controller_manager),
        }
    }

    /// Fails with an error naming the first missing binary, the variable that overrides it
    /// and the command that installs it.
    pub fn check(&self, with_controller_manager: bool) -> Result<(), Error> {
        let mut wanted = vec![
            ("etcd", ENV_ETCD, &self.etcd),
            ("kube-apiserver", ENV_APISERVER, &self.kube_apiserver),
        ];
        if with_controller_manager {
            wanted.push((
                "kube-controller-manager",
                ENV_CONTROLLER_MANAGER,
                &self.kube_controller_manager,
            ));
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
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
