//! `ork motif push` and `ork motif pull`: motifs distributed as OCI artifacts, through the
//! registries, credentials and cache components use. A Katalog imports one by its pinned
//! reference (`imports: [{motif: oci://HOST/REPO:TAG@sha256:...}]`).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use orkestra_katalog::component::OciReference;

use super::component::{PullArgs, PushArgs, created, to_push};

#[derive(Debug, Subcommand)]
pub enum MotifCommand {
    /// Push a motif file to an OCI registry and print the digest-pinned reference to put in
    /// a Katalog's `imports:`.
    Push(PushArgs),
    /// Pull a motif into the local cache, where `ork validate`, `ork plan` and the other
    /// commands that reach no registry read it.
    Pull(PullMotifArgs),
}

#[derive(Debug, Args)]
pub struct PullMotifArgs {
    /// The motif, pinned: `oci://HOST[:PORT]/REPOSITORY[:TAG]@sha256:HEX`.
    #[arg(value_name = "REFERENCE")]
    reference: String,
    #[command(flatten)]
    registry: PullArgs,
}

pub async fn motif(command: MotifCommand) -> anyhow::Result<ExitCode> {
    match command {
        MotifCommand::Push(args) => push(args).await,
        MotifCommand::Pull(args) => pull(args).await,
    }
}

async fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let (reference, motif, title) = to_push(&args.reference, &args.file)?;
    // A file that is no motif would fail only where a Katalog imports it: say so here.
    let text = std::str::from_utf8(&motif).map_err(|_| anyhow::anyhow!("{}: not UTF-8 text", args.file.display()))?;
    let node = orkestra_katalog::yaml::parse_file(text, 0)
        .map_err(|e| anyhow::anyhow!("{}: YAML error: {}", args.file.display(), e.message))?;
    let kind = node.get("kind").and_then(orkestra_katalog::yaml::Node::as_str);
    if kind != Some("Motif") {
        anyhow::bail!(
            "{}: a motif has kind: Motif, found {}",
            args.file.display(),
            kind.unwrap_or("none")
        );
    }
    let pinned = args
        .registry
        .registries()
        .push_motif(&reference, &motif, &title, &created()?)
        .await
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    println!("{pinned}");
    Ok(ExitCode::SUCCESS)
}

async fn pull(args: PullMotifArgs) -> anyhow::Result<ExitCode> {
    let reference = OciReference::parse(&args.reference, true).map_err(anyhow::Error::msg)?;
    let cache = super::component::cache_dir().join("blobs");
    let store = orkestra_wasm::registry::BlobStore::open(cache).map_err(anyhow::Error::msg)?;
    let text = args
        .registry
        .registries()?
        .pull_motif(&reference, &store, None)
        .await
        .map_err(|e| anyhow::anyhow!("{reference}: {e}"))?;
    println!(
        "pulled {reference} ({} bytes) into {}",
        text.len(),
        store.dir().display()
    );
    Ok(ExitCode::SUCCESS)
}
