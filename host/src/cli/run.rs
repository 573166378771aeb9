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
    anyhow::bail!("`ork run` is not implemented yet: the reconcile pipeline arrives with issue 4")
}
