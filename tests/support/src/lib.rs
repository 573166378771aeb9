//! Support for integration tests against a real control plane: one etcd + kube-apiserver +
//! kube-controller-manager per test binary, shared by its tests, a fresh namespace per test,
//! torn down when the test binary exits.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! let ns = orkestra_test_support::namespace("crd-watch").await?;
//! let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(ns.client.clone(), &ns.name);
//! # Ok(()) }
//! ```

pub mod bench;
pub mod guests;
pub mod idle;
pub mod logs;
pub mod oidc;
pub mod proxy;
pub mod registry;
pub mod requests;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, anyhow};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use orkestra_control_plane::{ControlPlane, Options};

/// What tests need to know about the shared control plane.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// `DIR/kubeconfig`, for kube-rs and for kubectl.
    pub kubeconfig: PathBuf,
    /// The API server URL.
    pub server: String,
}

/// The running control plane, owned by a keeper thread and stopped at process exit.
static PLANE: Mutex<Option<ControlPlane>> = Mutex::new(None);
static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// The shared control plane, started on first use.
///
/// # Errors
/// When it cannot start, every test gets the same message, which names the missing binary
/// and `ork control-plane install`.
pub fn cluster() -> anyhow::Result<&'static Cluster> {
    CLUSTER
        .get_or_init(start)
        .as_ref()
        .map_err(|e| anyhow!("the test control plane did not start: {e}"))
}

/// A kube client for the shared control plane (one per test: clients are bound to the
/// tokio runtime they were made on).
pub async fn client() -> anyhow::Result<kube::Client> {
    let cluster = cluster()?;
    Ok(orkestra_control_plane::client_for(&cluster.kubeconfig).await?)
}

/// A fresh namespace with a client.
#[derive(Clone)]
pub struct TestNamespace {
    pub name: String,
    pub client: kube::Client,
}

/// Creates a namespace named `<prefix>-<random>` on the shared control plane.
pub async fn namespace(prefix: &str) -> anyhow::Result<TestNamespace> {
    use rand::Rng;
    let client = client().await?;
    let suffix: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(6)
        .map(|c| char::from(c).to_ascii_lowercase())
        .collect();
    let name = format!("{prefix}-{suffix}");
    let namespace: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(TestNamespace { name, client })
}

/// A Katalog named `name` whose CRs of `kind` (CRD `crd` of `group`, confined to
/// `namespace`) each get ConfigMap `<cr>-c` holding their `spec.value`: the workload of the
/// replica, fault and scale tests.
pub fn configmap_katalog(name: &str, crd: &str, group: &str, kind: &str, namespace: &str, workers: usize) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {name}}}
spec:
  crds:
    {crd}:
      apiTypes: {{group: {group}, version: v1, kind: {kind}}}
      namespace: {namespace}
      operatorBox:
        reconcile:
          workers: {workers}
          onReconcile:
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}-c', data: {{value: '{{{{ .spec.value }}}}'}}}}
"
    )
}

/// Runs kubectl against the shared control plane and returns its stdout.
pub fn kubectl(args: &[&str]) -> anyhow::Result<String> {
    let cluster = cluster()?;
    kubectl_with(&cluster.kubeconfig, args)
}

/// Runs kubectl with a given kubeconfig and returns its stdout; fails with its stderr. The
/// kubectl built with the control plane (the same release) when there is one.
pub fn kubectl_with(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = kubectl_output(kubeconfig, args)?;
    if !output.status.success() {
        anyhow::bail!(
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs kubectl and returns all it did: status, stdout and stderr (where warnings go).
pub fn kubectl_output(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<std::process::Output> {
    let release = orkestra_control_plane::Release::pick(None);
    let program = orkestra_control_plane::Binaries::in_cache(&release)
        .kubectl
        .filter(|path| path.exists())
        .unwrap_or_else(|| PathBuf::from("kubectl"));
    std::process::Command::new(program)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .context("kubectl is needed by this test: install it (Debian: apt-get install kubernetes-client)")
}

/// Polls `check` every 100 ms until it returns `Some`, failing after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: std::time::Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("timed out after {}s waiting for {what}", timeout.as_secs());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

fn start() -> Result<Cluster, String> {
    // Keep etcd's fsyncs in memory when we can: tests write a lot and never need durability.
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("ork-test-{}", std::process::id()));
    let (sender, receiver) = std::sync::mpsc::channel();
    // The processes are spawned from a thread that lives until the process exits: the
    // kernel's parent-death signal follows the spawning thread, not the process.
    let keeper = std::thread::Builder::new()
        .name("ork-test-control-plane".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = sender.send(Err(e.to_string()));
                    return;
                }
            };
            match runtime.block_on(ControlPlane::start(Options::new(&dir))) {
                Ok(plane) => {
                    let cluster = Cluster {
                        kubeconfig: plane.kubeconfig(),
                        server: plane.server(),
                    };
                    if let Ok(mut slot) = PLANE.lock() {
                        *slot = Some(plane);
                    }
                    // SAFETY: registers a plain extern "C" function without captured state.
                    unsafe {
                        libc::atexit(teardown);
                    }
                    let _ = sender.send(Ok(cluster));
                    loop {
                        std::thread::park();
                    }
                }
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    let _ = sender.send(Err(format!("{e}")));
                }
            }
        });
    if let Err(e) = keeper {
        return Err(format!("cannot start the keeper thread: {e}"));
    }
    receiver.recv().map_err(|e| e.to_string())?
}

extern "C" fn teardown() {
    let plane = PLANE.lock().ok().and_then(|mut slot| slot.take());
    if let Some(mut plane) = plane {
        let dir = plane.dir().to_path_buf();
        plane.stop();
        drop(plane);
        let _ = std::fs::remove_dir_all(dir);
    }
}

static HELM: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// Helm, built once per machine by `scripts/helm.sh` (found in the cache after that).
///
/// # Errors
/// When it cannot be built: the script's message (Go missing, the module proxy out of reach).
pub fn helm() -> anyhow::Result<&'static Path> {
    HELM.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/helm.sh");
        let output = std::process::Command::new(&script)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        let said = String::from_utf8_lossy(&output.stdout).trim().to_string();
        match output.status.success() {
            true => Ok(PathBuf::from(said)),
            false => Err(format!(
                "{}: {}",
                script.display(),
                String::from_utf8_lossy(&output.stderr)
            )),
        }
    })
    .as_deref()
    .map_err(|e| anyhow!("helm is not available: {e}"))
}
