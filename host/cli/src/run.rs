//! `ork run`: the runtime against an existing cluster.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::KatalogArgs;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    #[command(flatten)]
    admin: AdminArgs,
}

/// Where the admin endpoint (components, reloads) listens.
#[derive(Debug, Clone, Args)]
pub struct AdminArgs {
    /// Address of the admin endpoint: GET /components, POST /reload (`ork reload`).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_ADMIN_ADDR)]
    pub admin_addr: std::net::SocketAddr,
    /// Do not open the admin endpoint.
    #[arg(long)]
    pub no_admin: bool,
}

/// The admin endpoint's default address (loopback only).
pub const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:7070";

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let katalog = args.katalog.load()?;
    let client = kube::Client::try_default()
        .await
        .context("cannot build a Kubernetes client from KUBECONFIG or the in-cluster config")?;
    let version = client
        .apiserver_version()
        .await
        .context("cannot reach the API server")?;
    tracing::info!(crds = katalog.crds.len(), server = %version.git_version, "Katalog loaded, API server reachable");
    serve(client, &katalog, &args.katalog.files(), &args.admin).await?;
    Ok(ExitCode::SUCCESS)
}

/// Runs the Katalog's runtime until SIGINT/SIGTERM; a second signal exits at once. The
/// Katalog `files` are watched: a changed component declaration swaps that component, any
/// other change is logged as needing a restart.
pub async fn serve(
    client: kube::Client,
    katalog: &orkestra_katalog::Compiled,
    files: &[std::path::PathBuf],
    admin: &AdminArgs,
) -> anyhow::Result<()> {
    let runtime = orkestra::runtime::Runtime::new(client, katalog)?;
    let components = runtime.components();
    let peers = runtime.peers();
    let reloader = orkestra::reload::Reloader::new(files.to_vec(), components.clone(), runtime.running());
    // Components swap live; any other change is reported as needing a restart.
    let watcher = tokio::spawn(reloader.clone().watch(orkestra::runtime::COMPONENT_POLL));
    let endpoint = (!admin.no_admin).then(|| {
        let addr = admin.admin_addr;
        tokio::spawn(async move {
            // Another runtime on this machine may hold the port; reconciling matters more.
            if let Err(error) = orkestra::admin::serve(addr, components, reloader, peers).await {
                tracing::warn!(%addr, %error, "the admin endpoint is not available (use --admin-addr)");
            }
        })
    });
    let names: Vec<&str> = katalog.enabled().map(|c| &*c.name).collect();
    eprintln!("runtime: reconciling {} CRD(s): {}", names.len(), names.join(", "));
    runtime
        .run(async {
            let _ = super::shutdown_signal().await;
            eprintln!("runtime: stopping (in-flight reconciles finish; signal again to force)");
            tokio::spawn(async {
                let _ = super::shutdown_signal().await;
                eprintln!("runtime: forced exit");
                std::process::exit(130);
            });
        })
        .await;
    watcher.abort();
    if let Some(endpoint) = endpoint {
        endpoint.abort();
    }
    Ok(())
}
