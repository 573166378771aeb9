//! `ork control-plane install|up`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use orkestra::control_plane::{self, ControlPlane, InstallEvent, Options};

use super::progress::Progress;

#[derive(Debug, Subcommand)]
pub enum ControlPlaneCommand {
    /// Make sure kube-apiserver, kube-controller-manager and etcd exist (building them once
    /// per machine into a versioned cache) and print their paths.
    ///
    /// ORK_KUBE_APISERVER_BIN, ORK_KUBE_CONTROLLER_MANAGER_BIN and ORK_ETCD_BIN point at
    /// existing binaries instead; ORK_CACHE_DIR moves the cache.
    Install,
    /// Start etcd, kube-apiserver and kube-controller-manager on loopback and write
    /// DIR/kubeconfig; stop them all on SIGINT or SIGTERM.
    Up(UpArgs),
}

#[derive(Debug, Args)]
pub struct UpArgs {
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
}

pub async fn control_plane(command: ControlPlaneCommand) -> anyhow::Result<ExitCode> {
    match command {
        ControlPlaneCommand::Install => {
            let binaries = install().await?;
            println!("etcd                     {}", binaries.etcd.display());
            println!("kube-apiserver           {}", binaries.kube_apiserver.display());
            println!(
                "kube-controller-manager  {}",
                binaries.kube_controller_manager.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        ControlPlaneCommand::Up(args) => up(args).await,
    }
}

/// Runs the installer on a blocking thread, showing its steps.
pub async fn install() -> anyhow::Result<control_plane::Binaries> {
    tokio::task::spawn_blocking(|| {
        let progress = Progress::start("checking the control plane binaries");
        let mut headline = String::new();
        let (binaries, built) = control_plane::install(|event| match event {
            InstallEvent::Step { index, total, title } => {
                headline = format!("[{index}/{total}] {title}");
                progress.set(headline.clone());
            }
            InstallEvent::Output(line) => progress.detail(&headline, &line),
        })?;
        progress.finish();
        if built {
            eprintln!("built the control plane into {}", control_plane::cache_dir().display());
        }
        Ok(binaries)
    })
    .await
    .context("the installer thread failed")?
}

/// Starts a control plane with a progress spinner; the temporary directory (if any) must be
/// kept alive by the caller.
pub async fn start(dir: PathBuf, port: Option<u16>, controller_manager: bool) -> anyhow::Result<ControlPlane> {
    let progress = Progress::start(if controller_manager {
        "starting etcd, kube-apiserver and kube-controller-manager"
    } else {
        "starting etcd and kube-apiserver"
    });
    let mut options = Options::new(dir);
    options.port = port;
    options.controller_manager = controller_manager;
    let plane = ControlPlane::start(options).await?;
    progress.finish();
    Ok(plane)
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
        result = super::shutdown_signal() => result,
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
    let (dir, _temp) = instance_dir(args.dir, "ork-control-plane-")?;
    let mut plane = start(dir, args.port, !args.no_controller_manager).await?;
    println!(
        "control plane ready: server {} kubeconfig {} (Ctrl-C to stop)",
        plane.server(),
        plane.kubeconfig().display()
    );
    let result = supervise(&mut plane).await;
    plane.stop();
    result.map(|()| ExitCode::SUCCESS)
}
