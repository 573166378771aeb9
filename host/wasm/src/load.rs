//! Loading a component: its bytes (a file, a URL or an OCI artifact, within a size limit),
//! the Katalog's pin, its file grants, the compiled code (shared by digest, else the cached
//! artifact, else a compile on the blocking pool), and pre-instantiation against the linker
//! and the world it declares. Each failure is a [`LoadCause`] that keeps its source.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use wasmtime::component::{Component, ComponentExportIndex, InstancePre};

use super::cache;
use super::capability::files::{self, FileGrantError};
use super::engine::WasmHost;
use super::footprint::{self, Footprint};
use super::store::CallState;
use super::warm::Lineage;
use orkestra_katalog::compile::DEFAULT_WASM_CALLS;
use orkestra_katalog::component::{Source, Spec, World};

/// Largest component the host fetches or reads.
const MAX_COMPONENT_BYTES: u64 = 128 << 20;

/// Why a component did not load: which one, and the cause.
#[derive(Debug, Clone, thiserror::Error)]
#[error("component {source_ref}: {cause}")]
pub struct LoadError {
    pub source_ref: String,
    #[source]
    pub cause: LoadCause,
}

/// What stopped a load. Sources (I/O, HTTP, wasmtime) are kept as the error's source.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadCause {
    /// `limits.fuel` asked of an engine made without fuel metering.
    #[error(
        "limits.fuel: this runtime started without fuel metering (no component declared limits.fuel then); restart it to meter fuel"
    )]
    FuelNotMetered,
    /// A file grant that cannot be served.
    #[error(transparent)]
    Files(#[from] FileGrantError),
    #[error("cannot read it: {0}")]
    Read(#[source] Arc<std::io::Error>),
    #[error("cannot fetch it: {0}")]
    Fetch(#[source] Arc<reqwest::Error>),
    /// An OCI pull that failed (the registry client says why).
    #[error("{0}")]
    Pull(crate::error::Error),
    #[error("it is {size} bytes; the limit is {MAX_COMPONENT_BYTES}")]
    TooLarge { size: u64 },
    #[error("sha256 is {actual}, but the Katalog pins {pinned}")]
    PinMismatch { actual: String, pinned: String },
    /// A kept version (a rollout's last good one) whose bytes this host no longer has.
    #[error("sha256 {digest} is not kept on this host (its component store is new, or was cleared)")]
    NotKept { digest: String },
    #[error("the compiler stopped: {0}")]
    CompilerStopped(String),
    /// Not a component wasmtime accepts; `hint` is the fix where it is a known one.
    #[error("it is not a valid component: {chain}{hint}")]
    Invalid { chain: String, hint: &'static str },
    #[error(
        "it needs an import this host does not provide ({0}); a component may import only WASI 0.2 and orkestra:operator/{{kube, log}}"
    )]
    Imports(String),
    #[error("it does not implement the {world} world of orkestra:operator@0.1.0 ({missing})")]
    World { world: &'static str, missing: String },
    /// One instance needs more of the engine's pool than a tenant's share allows per instance.
    #[error(
        "one instance needs {needs} {part}; the engine's pool allows {bound} per instance, so that a tenant's share ({share}) holds each of its calls at once"
    )]
    TooLargeForPool {
        part: &'static str,
        needs: u32,
        bound: u32,
        share: Footprint,
    },
}

/// A component ready to call: its pre-instantiated template.
pub struct Loaded {
    pub digest: String,
    pub world: World,
    pub(super) pre: Pre,
    pub loaded_at: SystemTime,
    /// Compile (or artifact load) and pre-instantiation time.
    pub load_time: Duration,
    /// Whether the compiled code was already here (in memory or in the disk cache).
    pub cached: bool,
    /// What its warm instances are kept under: they go with this version.
    pub(super) lineage: Arc<Lineage>,
    /// What one of its instances takes of the engine's pool.
    pub footprint: Footprint,
    /// Keeps the compiled code shared with other slots of the same digest while this
    /// version serves.
    _component: Arc<Component>,
}

/// The pre-instantiated component and where its world's exports are: a call looks up and
/// type-checks only the one export it runs.
pub(super) struct Pre {
    pub(super) instance: InstancePre<CallState>,
    /// `on-reconcile` or `reconcile`.
    pub(super) reconcile: ComponentExportIndex,
    /// `on-delete` or `finalize`.
    pub(super) delete: ComponentExportIndex,
    /// `on-not-found`; a constructor has none.
    pub(super) not_found: Option<ComponentExportIndex>,
}

impl Pre {
    /// Finds the exports of `world` in `instance`'s component, naming the first missing one.
    fn new(instance: InstancePre<CallState>, world: World) -> Result<Self, String> {
        let (interface, reconcile, delete, not_found) = match world {
            World::Hook => ("hooks", "on-reconcile", "on-delete", Some("on-not-found")),
            World::Constructor => ("reconciler", "reconcile", "finalize", None),
        };
        let interface = format!("orkestra:operator/{interface}@0.1.0");
        let component = instance.component();
        let exported = component
            .get_export_index(None, &interface)
            .ok_or_else(|| format!("it exports no `{interface}`"))?;
        let find = |name: &str| {
            component
                .get_export_index(Some(&exported), name)
                .ok_or_else(|| format!("its `{interface}` has no `{name}`"))
        };
        Ok(Self {
            reconcile: find(reconcile)?,
            delete: find(delete)?,
            not_found: not_found.map(find).transpose()?,
            instance,
        })
    }
}

impl WasmHost {
    /// Fetches, verifies, compiles (or loads the cached artifact) and pre-instantiates.
    ///
    /// Nothing of a failed load is kept: the slot keeps serving its last version.
    #[tracing::instrument(level = "debug", name = "component.load", skip_all, fields(source = %spec.source))]
    pub async fn load(&self, spec: &Spec) -> Result<Loaded, LoadError> {
        self.load_from(spec, Origin::Source).await
    }

    /// Loads the version `spec` pins from the components kept here, never fetching it:
    /// what a kept rollout state names comes from this host's own store or not at all.
    pub async fn load_kept(&self, spec: &Spec) -> Result<Loaded, LoadError> {
        self.load_from(spec, Origin::KeptOnly).await
    }

    async fn load_from(&self, spec: &Spec, origin: Origin) -> Result<Loaded, LoadError> {
        let started = Instant::now();
        let (digest, component, cached, footprint) = self.compiled(spec, origin).await.map_err(|cause| LoadError {
            source_ref: spec.source.to_string(),
            cause,
        })?;
        let pre = self.linker.instantiate_pre(&component).map_err(|e| LoadError {
            source_ref: spec.source.to_string(),
            cause: LoadCause::Imports(error_chain(&e)),
        })?;
        let pre = Pre::new(pre, spec.world).map_err(|missing| LoadError {
            source_ref: spec.source.to_string(),
            cause: LoadCause::World {
                world: spec.world.name(),
                missing,
            },
        })?;
        Ok(Loaded {
            digest,
            world: spec.world,
            pre,
            loaded_at: SystemTime::now(),
            load_time: started.elapsed(),
            cached,
            lineage: Arc::default(),
            footprint,
            _component: component,
        })
    }

    /// The checks before the bytes, the bytes, the pin, the compiled code and what an
    /// instance takes of the pool (digest, component, whether it was compiled already,
    /// footprint, which must fit the host's allowance for one instance).
    async fn compiled(
        &self,
        spec: &Spec,
        origin: Origin,
    ) -> Result<(String, Arc<Component>, bool, Footprint), LoadCause> {
        if spec.limits.fuel.is_some() && !self.fuel {
            return Err(LoadCause::FuelNotMetered);
        }
        files::check(&spec.files)?;
        // A pinned component kept here needs no fetch (and a file replaced since still has
        // its pinned bytes here).
        let pinned = spec.sha256.as_deref();
        let kept = pinned.and_then(|digest| self.blobs.get(digest));
        let from_store = kept.is_some();
        let bytes = match (kept, origin) {
            (Some(bytes), _) => bytes,
            (None, Origin::Source) => self.fetch(&spec.source).await?,
            (None, Origin::KeptOnly) => {
                return Err(LoadCause::NotKept {
                    digest: pinned.unwrap_or_default().to_string(),
                });
            }
        };
        let digest = cache::digest(&bytes);
        if let Some(pin) = &spec.sha256
            && *pin != digest
        {
            return Err(LoadCause::PinMismatch {
                actual: digest,
                pinned: pin.clone(),
            });
        }
        if !from_store && (self.recordings.enabled() || spec.rollout.is_some()) {
            // Kept by digest, so `ork replay` finds what a recording names without fetching
            // it, and a rollout's last good version can serve again after a restart.
            self.keep_blob(&digest, &bytes);
        }
        let core_instances = footprint::core_instances(&bytes);
        let known = self.compiled.lock().get(&digest).and_then(Weak::upgrade);
        let (component, cached) = match known {
            Some(component) => (component, true),
            None => {
                let (component, cached) = self.compile(&digest, bytes).await?;
                let component = Arc::new(component);
                let mut compiled = self.compiled.lock();
                compiled.retain(|_, used| used.strong_count() > 0);
                compiled.insert(digest.clone(), Arc::downgrade(&component));
                (component, cached)
            }
        };
        let footprint = footprint::of(&component, core_instances);
        let allowance = self.instance_allowance();
        if let Some((part, needs, bound)) = footprint.over(&allowance) {
            return Err(LoadCause::TooLargeForPool {
                part,
                needs,
                bound,
                share: self.share_of(DEFAULT_WASM_CALLS),
            });
        }
        Ok((digest, component, cached, footprint))
    }

    async fn fetch(&self, source: &Source) -> Result<Vec<u8>, LoadCause> {
        let read = |e: std::io::Error| LoadCause::Read(Arc::new(e));
        let fetch = |e: reqwest::Error| LoadCause::Fetch(Arc::new(e));
        match source {
            Source::Path(path) => {
                let size = tokio::fs::metadata(path).await.map_err(read)?.len();
                if size > MAX_COMPONENT_BYTES {
                    return Err(LoadCause::TooLarge { size });
                }
                tokio::fs::read(path).await.map_err(read)
            }
            Source::Url(url) => {
                let mut response = self
                    .http
                    .get(url)
                    .timeout(Duration::from_secs(60))
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
                    .map_err(fetch)?;
                let mut bytes = Vec::new();
                while let Some(chunk) = response.chunk().await.map_err(fetch)? {
                    if bytes.len() + chunk.len() > MAX_COMPONENT_BYTES as usize {
                        return Err(LoadCause::TooLarge {
                            size: (bytes.len() + chunk.len()) as u64,
                        });
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(bytes)
            }
            Source::Oci(reference) => {
                let cluster = self.cluster.as_ref().map(|c| &c.client);
                self.registries
                    .pull(reference, &self.blobs, cluster, MAX_COMPONENT_BYTES)
                    .await
                    .map_err(LoadCause::Pull)
            }
        }
    }

    /// A cached artifact when there is one, else a compile on the blocking pool.
    async fn compile(&self, digest: &str, bytes: Vec<u8>) -> Result<(Component, bool), LoadCause> {
        if let Some(artifact) = self.cache.get(digest) {
            // SAFETY: the artifact was written by this host into a private folder and its
            // checksum matched (see `cache`); wasmtime still refuses other versions' output.
            match unsafe { Component::deserialize(&self.engine, &artifact) } {
                Ok(component) => return Ok((component, true)),
                Err(error) => tracing::warn!(%error, digest, "a cached artifact did not load; compiling again"),
            }
        }
        let engine = self.engine.clone();
        let component = tokio::task::spawn_blocking(move || Component::new(&engine, &bytes))
            .await
            .map_err(|e| LoadCause::CompilerStopped(e.to_string()))?
            .map_err(|e| invalid(&e))?;
        match component.serialize() {
            Ok(artifact) => {
                if let Err(error) = self.cache.put(digest, &artifact) {
                    tracing::warn!(%error, dir = %self.cache.dir().display(), "cannot store the compiled artifact");
                }
            }
            Err(error) => tracing::warn!(%error, "cannot serialize the compiled component"),
        }
        Ok((component, false))
    }
}

/// Why a component did not compile, with the fix where it is a known one.
fn invalid(error: &wasmtime::Error) -> LoadCause {
    let chain = error_chain(error);
    // Toolchains that default to the component model's async ABI (componentize-qjs
    // without --sync) build components this WASI 0.2 host refuses to run.
    let hint = if chain.contains("component model async") {
        "; this host runs components without the component model's async ABI: build it \
         synchronously (componentize-qjs: --sync)"
    } else {
        ""
    };
    LoadCause::Invalid { chain, hint }
}

/// The messages of an error and its causes, on one line.
fn error_chain(error: &wasmtime::Error) -> String {
    error.chain().map(|e| e.to_string()).collect::<Vec<_>>().join(": ")
}

/// Where a load may take a component's bytes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Its source, unless its pinned bytes are kept here.
    Source,
    /// Only the components kept here (a rollout's last good version).
    KeptOnly,
}

/// What serves: a loaded component and the spec it was loaded for.
pub struct Active {
    pub loaded: Arc<Loaded>,
    pub spec: Arc<Spec>,
    pub revision: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_component_built_for_the_async_abi_is_refused_saying_how_to_build_it() {
        let cache = tempfile::tempdir().unwrap();
        let host = WasmHost::new(None, reqwest::Client::new(), cache.path().to_path_buf()).unwrap();
        let component = wat::parse_str("(component (core func (canon task.cancel)))").unwrap();
        let Err(refused) = host.compile("digest", component).await else {
            panic!("an async-ABI component compiled");
        };
        assert!(matches!(refused, LoadCause::Invalid { .. }), "{refused:?}");
        let refused = refused.to_string();
        assert!(
            refused.contains("requires the component model async feature"),
            "{refused}"
        );
        assert!(refused.contains("componentize-qjs: --sync"), "{refused}");
        let plain = wat::parse_str("(component (core module))").unwrap();
        assert!(host.compile("plain", plain).await.is_ok(), "a plain component compiles");
    }
}
