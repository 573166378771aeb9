//! `ork control-plane install|up`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use orkestra_control_plane::{self as control_plane, ControlPlane, InstallEvent, Options, Recipe, Release};

use super::progress::Progress;

#[derive(Debug, Subcommand)]
pub enum ControlPlaneCommand {
    /// Make sure the control plane exists (building it once per machine into a versioned
    /// cache) and print the paths of its programs.
    ///
    /// With Go on PATH: kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
    /// of one current release, its etcd, and kwok, from the Go module proxy. Without Go:
    /// etcd, kube-apiserver and kube-controller-manager v1.20.2 from Debian's source.
    /// ORK_KUBE_APISERVER_BIN, ORK_KUBE_CONTROLLER_MANAGER_BIN and ORK_ETCD_BIN point at
    /// existing binaries instead; ORK_CACHE_DIR moves the cache.
    #[command(disable_version_flag = true)]
    Install(VersionArgs),
    /// Start the control plane on loopback, with simulated nodes, and write DIR/kubeconfig;
    /// stop it all on SIGINT or SIGTERM.
    #[command(disable_version_flag = true)]
    Up(UpArgs),
}

/// Which Kubernetes release.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// The Kubernetes release (vMAJOR.MINOR.PATCH) to build from the Go module proxy.
    /// Default: ORK_KUBERNETES_VERSION, else the pinned release.
    #[arg(long, value_name = "VERSION")]
    pub version: Option<String>,
}

impl VersionArgs {
    /// The release, said aloud when the fallback replaces what was asked.
    pub fn release(&self) -> Release {
        let release = Release::pick(self.version.as_deref());
        if release.recipe == Recipe::Debian {
            eprintln!(
                "Go was not found on PATH: using the {} fallback built from Debian's source package (no scheduler, no simulated nodes)",
                release.version
            );
        }
        release
    }
}

/// How the local control plane runs.
#[derive(Debug, Args)]
pub struct PlaneArgs {
    #[command(flatten)]
    pub version: VersionArgs,
    /// Simulated nodes (kwok) that Pods are scheduled on; 0 for none.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub nodes: u32,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    #[command(flatten)]
    pub plane: PlaneArgs,
    /// Instance directory (kubeconfig, pki, etcd data, logs); kept after exit. Default: a
    /// temporary directory removed at exit.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// kube-apiserver port on 127.0.0.1. Default: a free port.
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Do not run kube-controller-manager (no garbage collection, no workload controllers).
    #[arg(long)]
    pub no_controller_manager: bool,
    /// Log every request's metadata (user, user agent, verb, resource, code; no bodies) to
    /// DIR/logs/audit.log, one JSON event per line: to count what a controller sends.
    #[arg(long)]
    pub audit: bool,
}

pub async fn control_plane(command: ControlPlaneCommand) -> anyhow::Result<ExitCode> {
    match command {
        ControlPlaneCommand::Install(version) => {
            let binaries = install(&version.release()).await?;
            let optional = [
                ("kube-scheduler", &binaries.kube_scheduler),
                ("kubectl", &binaries.kubectl),
                ("kwok", &binaries.kwok),
            ];
            let listed = [
                ("etcd", &binaries.etcd),
                ("kube-apiserver", &binaries.kube_apiserver),
                ("kube-controller-manager", &binaries.kube_controller_manager),
            ]
            .into_iter()
            .chain(
                optional
                    .into_iter()
                    .filter_map(|(name, path)| Some((name, path.as_ref()?))),
            );
            for (name, path) in listed {
                println!("{name:<25}{}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        ControlPlaneCommand::Up(args) => up(args).await,
    }
}

/// Runs the installer on a blocking thread, showing its steps.
pub async fn install(release: &Release) -> anyhow::Result<control_plane::Binaries> {
    let release = release.clone();
    tokio::task::spawn_blocking(move || {
        let progress = Progress::start("checking the control plane binaries");
        let mut headline = String::new();
        let (binaries, built) = control_plane::install(&release, |event| match event {
            InstallEvent::Step { index, total, title } => {
                headline = format!("[{index}/{total}] {title}");
                progress.set(headline.clone());
            }
            InstallEvent::Output(line) => progress.detail(&headline, &line),
        })?;
        progress.finish();
        if built {
            eprintln!("built the control plane into {}", release.cache_dir().display());
        }
        Ok(binaries)
    })
    .await
    .context("the installer thread failed")?
}

/// Starts a control plane with a progress spinner; the temporary directory (if any) must be
/// kept alive by the caller.
pub async fn start(options: Options) -> anyhow::Result<ControlPlane> {
    let progress = Progress::start(
        match (
            options.controller_manager,
            options.binaries.simulates_nodes() && options.nodes > 0,
        ) {
            (true, true) => "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok",
            (true, false) => "starting etcd, kube-apiserver and kube-controller-manager",
            (false, _) => "starting etcd and kube-apiserver",
        },
    );
    let plane = ControlPlane::start(options).await?;
    progress.finish();
    Ok(plane)
}

/// The control plane's options from the CLI's flags.
pub fn options(
    dir: PathBuf,
    port: Option<u16>,
    controller_manager: bool,
    binaries: control_plane::Binaries,
    nodes: u32,
) -> Options {
    let mut options = Options::new(dir);
    options.port = port;
    options.controller_manager = controller_manager;
    options.binaries = binaries;
    options.nodes = nodes;
    options
}

/// Resolves `--dir`, or makes a temporary one that lives as long as the returned guard.
pub fn instance_dir(dir: Option<PathBuf>, prefix: &str) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    match dir {
        Some(dir) => Ok((dir, None)),
        None => {
            let temp = tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .context("cannot create a temporary directory")?;
            Ok((temp.path().to_path_buf(), Some(temp)))
        }
    }
}

/// Runs until SIGINT/SIGTERM (exit 0) or until a component dies (error).
pub async fn supervise(plane: &mut ControlPlane) -> anyhow::Result<()> {
    tokio::select! {
        result = crate::signal::shutdown_signal() => result,
        result = watch(plane) => result,
    }
}

/// Resolves with an error when a component of the control plane exits.
pub async fn watch(plane: &mut ControlPlane) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        plane
            .check_running()
            .context("the control plane stopped unexpectedly")?;
    }
}

async fn up(args: UpArgs) -> anyhow::Result<ExitCode> {
    let binaries = install(&args.plane.version.release()).await?;
    let (dir, _temp) = instance_dir(args.dir, "ork-control-plane-")?;
    let mut options = options(dir, args.port, !args.no_controller_manager, binaries, args.plane.nodes);
    options.audit = args.audit;
    let mut plane = start(options).await?;
    println!(
        "control plane ready: server {} kubeconfig {} (Ctrl-C to stop)",
        plane.server(),
        plane.kubeconfig().display()
    );
    if args.audit {
        println!("audit log: {}", control_plane::audit_log(plane.dir()).display());
    }
    let result = supervise(&mut plane).await;
    plane.stop();
    result.map(|()| ExitCode::SUCCESS)
}
