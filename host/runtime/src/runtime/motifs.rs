//! Katalogs that import motifs from OCI registries: loaded, and each motif they ask for
//! fetched by its pinned digest, then loaded again. `ork run`, `ork dev` and their reloads
//! pull through the registry client, credentials and blob store components use; commands
//! that must reach nothing (validate, plan, simulate, ...) read only what that store keeps.

use std::path::{Path, PathBuf};

use orkestra_katalog::component::OciReference;
use orkestra_katalog::{Compiled, PulledMotifs};
use orkestra_wasm::Registries;
use orkestra_wasm::registry::{BlobStore, cached_motif};

/// Rounds of pulling before giving up: a motif names no motif, so one is enough; the rest
/// only guard against a loop.
const ROUNDS: usize = 4;

/// Where motifs come from.
#[derive(Clone)]
pub enum Source {
    /// Pulled from their registries (when the store does not keep them), and kept.
    Registries {
        registries: Registries,
        /// The component cache folder; its `blobs` keep what is pulled.
        cache_dir: PathBuf,
        /// Reads the pull Secrets.
        cluster: Option<kube::Client>,
    },
    /// Only what the component cache folder keeps: nothing is reached.
    Cached { cache_dir: PathBuf },
}

/// Why a Katalog did not load.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Katalog(#[from] orkestra_katalog::Error),
    #[error("cannot pull the motif {reference}: {why}")]
    Pull {
        reference: String,
        why: orkestra_wasm::Error,
    },
    #[error(
        "the motif {reference} is not in the local cache ({}): `ork run` and `ork dev` pull it, as does `ork motif pull {reference}`",
        cache.display()
    )]
    NotCached { reference: String, cache: PathBuf },
}

impl Source {
    fn cache_dir(&self) -> &Path {
        match self {
            Source::Registries { cache_dir, .. } | Source::Cached { cache_dir } => cache_dir,
        }
    }

    /// The motif `reference` pins, as YAML.
    async fn fetch(&self, reference: &OciReference) -> Result<String, Error> {
        let failed = |why: orkestra_wasm::Error| Error::Pull {
            reference: reference.to_string(),
            why,
        };
        let store = BlobStore::open(self.cache_dir().join("blobs")).map_err(failed)?;
        match self {
            Source::Registries {
                registries, cluster, ..
            } => registries
                .pull_motif(reference, &store, cluster.as_ref())
                .await
                .map_err(failed),
            Source::Cached { .. } => match cached_motif(reference, &store) {
                Some(text) => text.map_err(failed),
                None => Err(Error::NotCached {
                    reference: reference.to_string(),
                    cache: store.dir().to_path_buf(),
                }),
            },
        }
    }
}

/// Loads `files`, fetching from `source` each OCI motif they import.
pub async fn load(files: &[PathBuf], source: &Source) -> Result<Compiled, Error> {
    load_sources(&orkestra_katalog::read_sources(files)?, source).await
}

/// [`load`] for texts already read.
pub async fn load_sources(files: &[(PathBuf, String)], source: &Source) -> Result<Compiled, Error> {
    let mut pulled = PulledMotifs::new();
    for _ in 0..ROUNDS {
        match orkestra_katalog::load_sources_with(files, &pulled) {
            Err(orkestra_katalog::Error::Unpulled { motifs }) => {
                for reference in motifs {
                    let text = source.fetch(&reference).await?;
                    pulled.insert(reference.digest.clone(), text);
                }
            }
            loaded => return Ok(loaded?),
        }
    }
    Ok(orkestra_katalog::load_sources_with(files, &pulled)?)
}

/// [`load`] from the cache alone, for a caller that is not async: nothing is reached, so
/// nothing waits.
pub fn load_cached(files: &[PathBuf], cache_dir: PathBuf) -> Result<Compiled, Error> {
    futures::executor::block_on(load(files, &Source::Cached { cache_dir }))
}
