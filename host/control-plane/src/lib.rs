//! A real local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler) run as plain processes on loopback, for `ork dev`, `ork control-plane up`
//! and the tests, with nodes that kwok simulates: Pods are scheduled, become Ready, and the
//! Pods of Jobs complete, without a container runtime.
//!
//! Each instance owns a directory (`DIR/kubeconfig`, `DIR/pki`, `DIR/etcd`, `DIR/logs`) and
//! free loopback ports, so several run side by side. The v1.20.2 fallback (machines without
//! Go) has no scheduler and no nodes: its Pods stay Pending.

mod binaries;
mod error;
mod install;
mod instance;
mod nodes;
mod pki;
mod process;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use binaries::{
    Binaries, DEBIAN_KUBERNETES_VERSION, DEBIAN_SOURCE_VERSION, ENV_APISERVER, ENV_CACHE_DIR, ENV_CONTROLLER_MANAGER,
    ENV_ETCD, ENV_VERSION, KUBERNETES_VERSION, KWOK_VERSION, Recipe, Release, cache_root,
};
pub use error::{Error, INSTALL_COMMAND};
pub use install::{InstallEvent, install};
use instance::{audit_flags, create_dir, free_port, http_get, lock_file, prepare_dir, reserve_port, strings};
pub use instance::{audit_log, client_for, config_for};
use pki::{prepare_pki, write_kubeconfig};
use process::{Process, log_tail};

/// How to start a control plane.
#[derive(Debug, Clone)]
pub struct Options {
    /// The instance directory; created if missing. Data in it survives a restart.
    pub dir: PathBuf,
    /// The kube-apiserver secure port; a free one when `None`.
    pub port: Option<u16>,
    /// Whether to run kube-controller-manager (garbage collection, namespaces, workloads).
    pub controller_manager: bool,
    /// The binaries to run.
    pub binaries: Binaries,
    /// Simulated nodes (with a scheduler) when the binaries have them; 0 for none.
    pub nodes: u32,
    /// How long to wait for /readyz.
    pub ready_timeout: Duration,
    /// Record every request's metadata (who, verb, resource, code; no bodies) to
    /// `DIR/logs/audit.log`, one JSON event per line: what a benchmark counts per client.
    pub audit: bool,
}

impl Options {
    /// Defaults: free port, controller manager on, the binaries of the release
    /// [`Release::pick`] chooses, one simulated node, 90 s to become ready.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            port: None,
            controller_manager: true,
            binaries: Binaries::resolve(&Release::pick(None)),
            nodes: 1,
            ready_timeout: Duration::from_secs(90),
            audit: false,
        }
    }
}

/// A running control plane. Dropping it stops every process.
#[derive(Debug)]
pub struct ControlPlane {
    dir: PathBuf,
    port: u16,
    etcd_port: u16,
    /// In start order: etcd, kube-apiserver, kube-controller-manager. Stopped in reverse.
    processes: Vec<Process>,
    /// A release before 1.24, whose insecure ports must be closed by flag.
    legacy: bool,
    /// The service-account signing key, which the controller manager needs too.
    sa_private: PathBuf,
    _lock: File,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and (unless disabled) kube-controller-manager, writes
    /// `DIR/kubeconfig` and waits until the API server is ready and, with the controller
    /// manager, until it has created the `default` ServiceAccount.
    ///
    /// Call it from a thread that outlives the control plane (see [`Process::spawn`]).
    pub async fn start(options: Options) -> Result<Self, Error> {
        let mut plane = Self::start_api_server(&options).await?;
        plane.start_controllers(&options).await?;
        Ok(plane)
    }

    /// The first half of [`ControlPlane::start`]: etcd and kube-apiserver, ready. What is
    /// installed before [`ControlPlane::start_controllers`] is known to the controllers
    /// (the garbage collector's kinds) from their first moment.
    pub async fn start_api_server(options: &Options) -> Result<Self, Error> {
        options.binaries.check(options.controller_manager)?;
        // Before 1.24 the insecure ports were open unless closed; later releases refuse the flags.
        let legacy = options.binaries.minor_version()? < 24;
        let dir = prepare_dir(&options.dir)?;
        let lock = lock_file(&dir.join("ork.lock"), false)?;
        let port = match options.port {
            Some(port) => reserve_port(port)?,
            None => free_port()?,
        };
        let etcd_port = free_port()?;
        let etcd_peer_port = free_port()?;
        let pki = prepare_pki(&dir)?;
        for sub in ["logs", "etcd"] {
            create_dir(&dir.join(sub))?;
        }

        let mut plane = Self {
            dir: dir.clone(),
            port,
            etcd_port,
            processes: Vec::new(),
            legacy,
            sa_private: pki.sa_private.clone(),
            _lock: lock,
        };
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
        plane.processes.push(Process::spawn(
            "etcd",
            &options.binaries.etcd,
            &strings(&[
                "--name=ork",
                &format!("--data-dir={}", dir.join("etcd").display()),
                &format!("--listen-client-urls={etcd_url}"),
                &format!("--advertise-client-urls={etcd_url}"),
                &format!("--listen-peer-urls={peer_url}"),
                &format!("--initial-advertise-peer-urls={peer_url}"),
                &format!("--initial-cluster=ork={peer_url}"),
                "--logger=zap",
                "--log-level=warn",
            ]),
            &dir.join("logs/etcd.log"),
        )?);

        let cert_dir = pki.dir.join("apiserver");
        plane.processes.push(Process::spawn(
            "kube-apiserver",
            &options.binaries.kube_apiserver,
            &strings(&[
                &format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                &format!("--secure-port={port}"),
                &format!("--cert-dir={}", cert_dir.display()),
                &format!("--token-auth-file={}", pki.tokens.display()),
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc",
                &format!("--service-account-key-file={}", pki.sa_public.display()),
                &format!("--service-account-signing-key-file={}", pki.sa_private.display()),
                "--service-cluster-ip-range=10.96.0.0/24",
                // The `kubernetes` Service cannot point at 127.0.0.1; skip its endpoints.
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                "--v=0",
            ])
            .into_iter()
            .chain(legacy.then(|| "--insecure-port=0".to_string()))
            .chain(audit_flags(&dir, options.audit)?)
            .collect::<Vec<_>>(),
            &dir.join("logs/kube-apiserver.log"),
        )?);

        let kubeconfig = dir.join("kubeconfig");
        let ca = plane
            .wait_serving_cert(&cert_dir.join("apiserver.crt"), options.ready_timeout)
            .await?;
        write_kubeconfig(&kubeconfig, port, &ca, &pki.token)?;
        plane.wait_ready(options.ready_timeout).await?;
        Ok(plane)
    }

    /// The second half of [`ControlPlane::start`]: kube-controller-manager (unless
    /// disabled), then the scheduler and kwok's nodes where the binaries have them.
    pub async fn start_controllers(&mut self, options: &Options) -> Result<(), Error> {
        let plane = self;
        let dir = plane.dir.clone();
        let kubeconfig = plane.kubeconfig();
        let legacy = plane.legacy;
        let cert_dir = dir.join("pki").join("apiserver");
        if options.controller_manager {
            plane.processes.push(Process::spawn(
                "kube-controller-manager",
                &options.binaries.kube_controller_manager,
                &strings(&[
                    &format!("--kubeconfig={}", kubeconfig.display()),
                    "--leader-elect=false",
                    "--use-service-account-credentials=false",
                    &format!("--service-account-private-key-file={}", plane.sa_private.display()),
                    &format!("--root-ca-file={}", cert_dir.join("apiserver.crt").display()),
                    "--bind-address=127.0.0.1",
                    // No serving ports of its own, so instances never collide.
                    "--secure-port=0",
                    "--v=0",
                ])
                .into_iter()
                .chain(legacy.then(|| "--port=0".to_string()))
                .collect::<Vec<_>>(),
                &dir.join("logs/kube-controller-manager.log"),
            )?);
            plane.wait_controller_manager(options.ready_timeout).await?;
        }
        if let (Some(scheduler), Some(kwok)) = (&options.binaries.kube_scheduler, &options.binaries.kwok)
            && options.nodes > 0
        {
            plane.processes.push(Process::spawn(
                "kube-scheduler",
                scheduler,
                &strings(&[
                    &format!("--kubeconfig={}", kubeconfig.display()),
                    "--leader-elect=false",
                    "--secure-port=0",
                    "--v=0",
                ]),
                &dir.join("logs/kube-scheduler.log"),
            )?);
            plane.processes.push(Process::spawn(
                "kwok",
                kwok,
                &nodes::kwok_args(&kubeconfig, kwok),
                &dir.join("logs/kwok.log"),
            )?);
            let client = plane.client().await?;
            nodes::create(&client, options.nodes).await?;
            plane
                .wait_nodes_ready(&client, options.nodes, options.ready_timeout)
                .await?;
        }
        Ok(())
    }

    /// The instance directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `DIR/kubeconfig`, accepted by kubectl and kube-rs.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The API server URL.
    pub fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The etcd client port.
    pub fn etcd_port(&self) -> u16 {
        self.etcd_port
    }

    /// Process ids of the running components, in start order.
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().map(Process::pid).collect()
    }

    /// A kube client authenticated as the static admin (group `system:masters`).
    pub async fn client(&self) -> Result<kube::Client, Error> {
        client_for(&self.kubeconfig()).await
    }

    /// Kills `component` (`etcd`, `kube-apiserver`, ...) with SIGKILL, as a crash would.
    pub fn kill(&mut self, component: &str) {
        if let Some(process) = self.processes.iter_mut().find(|p| p.name() == component) {
            process.kill();
        }
    }

    /// Starts a killed `component` again with its flags and data as before.
    pub fn restart(&mut self, component: &str) -> Result<(), Error> {
        match self.processes.iter_mut().find(|p| p.name() == component) {
            Some(process) => process.restart(),
            None => Ok(()),
        }
    }

    /// Fails when any component has exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        self.processes.iter_mut().try_for_each(Process::check_running)
    }

    /// Stops the components in reverse start order (etcd last, so the API server can close
    /// its watches cleanly).
    pub fn stop(&mut self) {
        while let Some(mut process) = self.processes.pop() {
            tracing::debug!(component = process.name(), pid = process.pid(), "stopping");
            process.stop(Duration::from_secs(10));
        }
    }

    /// The API server writes its self-signed serving certificate (followed by the CA that
    /// signed it) at start-up and reuses it on restart; the kubeconfig trusts that CA.
    async fn wait_serving_cert(&mut self, path: &Path, timeout: Duration) -> Result<Vec<u8>, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_running()?;
            if let Ok(pem) = std::fs::read(path)
                && pem.windows(5).filter(|w| w == b"BEGIN").count() >= 2
            {
                return Ok(pem);
            }
            if Instant::now() > deadline {
                return Err(self.not_ready("kube-apiserver did not write its serving certificate", timeout));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        let client = self.client().await?;
        loop {
            self.check_running()?;
            let request = http_get("/readyz");
            if let Ok(body) = client.request_text(request).await
                && body.trim() == "ok"
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.not_ready("kube-apiserver did not answer /readyz", timeout));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The controller manager has no serving port here; it is working once its
    /// service-account controller has created `default/default`.
    async fn wait_controller_manager(&mut self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        let client = self.client().await?;
        let accounts =
            orkestra_kube::objects::namespaced::<k8s_openapi::api::core::v1::ServiceAccount>(client, "default")
                .map_err(Error::Client)?;
        loop {
            self.check_running()?;
            if matches!(accounts.get_opt("default").await, Ok(Some(_))) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.not_ready(
                    "kube-controller-manager did not create the default ServiceAccount",
                    timeout,
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// kwok marks a node Ready once it manages it.
    async fn wait_nodes_ready(&mut self, client: &kube::Client, count: u32, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_running()?;
            if nodes::ready(client).await >= count {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.not_ready("kwok did not make the simulated nodes Ready", timeout));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn not_ready(&self, what: &'static str, timeout: Duration) -> Error {
        let log = self.dir.join("logs/kube-apiserver.log");
        Error::NotReady {
            what,
            timeout,
            tail: log_tail(&log, 15),
            log,
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}
