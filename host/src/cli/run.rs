//! `ork run`: the runtime against an existing cluster.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::KatalogArgs;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
}

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
    serve(client, &katalog).await?;
    Ok(ExitCode::SUCCESS)
}

/// Runs the Katalog's runtime until SIGINT/SIGTERM; a second signal exits at once.
pub async fn serve(client: kube::Client, katalog: &orkestra::katalog::Katalog) -> anyhow::Result<()> {
    let runtime = orkestra::runtime::Runtime::new(client, katalog)?;
    let names: Vec<String> = katalog
        .crds
        .values()
        .filter(|c| c.entry.enabled)
        .map(|c| c.name.clone())
        .collect();
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
    Ok(())
}
