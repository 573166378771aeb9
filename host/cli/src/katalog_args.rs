//! The `-f KATALOG` option every command that reads Katalogs shares, and its default.

use std::path::PathBuf;

use clap::Args;

/// The `-f KATALOG` option shared by the commands that read Katalogs.
#[derive(Debug, Args)]
pub struct KatalogArgs {
    /// A Katalog (or Komposer) file; repeat to merge several. Default: katalog.yaml in the
    /// current directory, else komposer.yaml.
    #[arg(short = 'f', long = "file", value_name = "KATALOG")]
    files: Vec<PathBuf>,
}

impl KatalogArgs {
    /// The files given, or the default: katalog.yaml here, else komposer.yaml.
    pub fn files(&self) -> Vec<PathBuf> {
        if self.files.is_empty() {
            let komposer = PathBuf::from("komposer.yaml");
            match !std::path::Path::new("katalog.yaml").exists() && komposer.exists() {
                true => vec![komposer],
                false => vec![PathBuf::from("katalog.yaml")],
            }
        } else {
            self.files.clone()
        }
    }

    /// The files, loaded and compiled; the OCI motifs they import are read from the
    /// component cache only (nothing is reached).
    pub fn load(&self) -> anyhow::Result<orkestra_katalog::Compiled> {
        let cache_dir = super::component::cache_dir();
        Ok(orkestra::runtime::motifs::load_cached(&self.files(), cache_dir)?)
    }

    /// [`KatalogArgs::load`], pulling the OCI motifs the cache lacks with `pull`'s
    /// registries (`cluster` reads its pull Secrets).
    pub async fn load_pulling(
        &self,
        pull: &super::component::PullArgs,
        cluster: Option<kube::Client>,
    ) -> anyhow::Result<orkestra_katalog::Compiled> {
        let source = pull.motifs(cluster)?;
        Ok(orkestra::runtime::motifs::load(&self.files(), &source).await?)
    }
}
