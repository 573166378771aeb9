//! One wasmtime engine per process: its settings (component model, epoch interruption, the
//! pooling allocator with an on-demand fallback), the epoch ticker, the linker every component
//! is checked against, and loading (bytes, pin, compile or cached artifact, pre-instantiation).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::Semaphore;
use wasmtime::component::{Component, ComponentExportIndex, InstancePre, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::cache::{self, ArtifactCache};
use super::registry::{BlobStore, Registries};
use super::state::{CallState, Cluster};
use orkestra_katalog::component::{MAX_MEMORY, Source, Spec, World};

/// How often the epoch advances; a call's deadline is its timeout in ticks, plus one.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Calls running at once across all components (pool slots; more wait for a permit).
pub const MAX_CONCURRENT_CALLS: usize = 64;

/// Bytes of each pooled memory kept mapped between calls (reset, not unmapped).
const KEEP_RESIDENT: usize = 4 << 20;

/// Largest component the host fetches or reads.
const MAX_COMPONENT_BYTES: u64 = 128 << 20;

/// Why a component did not load.
#[derive(Debug, Clone, thiserror::Error)]
#[error("component {source_ref}: {message}")]
pub struct LoadError {
    pub source_ref: String,
    pub message: String,
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

/// The process's Wasm host.
pub struct WasmHost {
    pub(super) engine: Engine,
    linker: Linker<CallState>,
    cache: ArtifactCache,
    /// Components pulled from registries, and where credentials for them come from.
    blobs: BlobStore,
    registries: Registries,
    /// Compiled components by digest, while some loaded version uses them: a component
    /// used by several targets compiles once, and a swapped-out one is freed.
    compiled: Mutex<HashMap<String, Weak<Component>>>,
    pub(super) permits: Semaphore,
    pub(super) cluster: Option<Cluster>,
    http: reqwest::Client,
    /// Whether instances come from the pooling allocator (false: on-demand fallback).
    pub pooling: bool,
    /// Whether a returned memory is reset in place, page by page after a `PAGEMAP_SCAN`
    /// (false: by `madvise`, as with swap on).
    pub resident: bool,
    /// Whether the engine meters fuel (every store then needs some).
    pub(super) fuel: bool,
}

/// How a [`WasmHost`] is set up beyond its defaults.
#[derive(Debug, Clone, Default)]
pub struct HostOptions {
    /// Compiled artifacts and pulled components.
    pub cache_dir: std::path::PathBuf,
    /// Meter fuel (for `limits.fuel`; every call then reports the fuel it burnt).
    pub fuel: bool,
    /// Credentials and plain-HTTP registries for `oci://` components.
    pub registries: Registries,
}

/// How instances are allocated, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Allocation {
    /// Pooled, with memory kept resident and reset page by page (Linux 6.7+).
    PoolingResident,
    Pooling,
    OnDemand,
}

/// Whether `/proc/swaps` (its text) lists an active swap area. wasmtime 48's `PAGEMAP_SCAN`
/// reset looks only for dirty pages that are present: one the kernel swapped out is neither
/// reset nor unmapped, so the next instance in the slot would read the last call's data
/// (`tests/swap.rs` shows it; wasmtime 50 resets swapped-out pages too, after
/// bytecodealliance/wasmtime#14357, but needs rustc 1.97). With swap on, the resident reset
/// is not used. Swap turned on after the runtime starts is not noticed.
fn swap_active(proc_swaps: &str) -> bool {
    // A header line, then one line per area.
    proc_swaps.lines().skip(1).any(|line| !line.trim().is_empty())
}

fn config(allocation: Allocation, fuel: bool) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    // Metering costs every guest some speed: only when a component asks for it.
    config.consume_fuel(fuel);
    // A pure WASI 0.2 host: component-model async bookkeeping only costs here.
    config.concurrency_support(false);
    if allocation != Allocation::OnDemand {
        let mut pool = PoolingAllocationConfig::default();
        let calls = MAX_CONCURRENT_CALLS as u32;
        // Interpreted guests (Python, JavaScript) bring several core modules, memories and
        // large instance metadata; size the pool for them.
        pool.total_component_instances(calls)
            .total_core_instances(calls * 8)
            .total_memories(calls * 4)
            .total_tables(calls * 8)
            .total_stacks(calls)
            .max_core_instances_per_component(32)
            .max_memories_per_component(8)
            .max_tables_per_component(32)
            .max_component_instance_size(16 << 20)
            .max_core_instance_size(16 << 20)
            .max_memory_size(MAX_MEMORY);
        if allocation == Allocation::PoolingResident {
            // A fresh instance per call would page-fault on every page it touches after an
            // madvise reset. Keep the low memory (a Rust guest's stack and heap start), tables
            // and fiber stacks resident instead, resetting only the pages a call dirtied: the
            // largest single saving per call. Without PAGEMAP_SCAN this would memset the whole
            // region every call, so it is required here.
            pool.linear_memory_keep_resident(KEEP_RESIDENT)
                .table_keep_resident(64 << 10)
                .async_stack_keep_resident(128 << 10)
                .pagemap_scan(wasmtime::Enabled::Yes);
        }
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

impl WasmHost {
    /// The engine, its ticker and linker; compiled artifacts go to `cache_dir`; components
    /// named by URL are fetched with `http` (the runtime's one client).
    pub fn new(
        cluster: Option<kube::Client>,
        http: reqwest::Client,
        cache_dir: std::path::PathBuf,
    ) -> Result<Arc<Self>, String> {
        Self::with_options(
            cluster,
            http,
            HostOptions {
                cache_dir,
                ..HostOptions::default()
            },
        )
    }

    /// [`WasmHost::new`] with fuel metering and registry access as `options` say.
    pub fn with_options(
        cluster: Option<kube::Client>,
        http: reqwest::Client,
        options: HostOptions,
    ) -> Result<Arc<Self>, String> {
        let HostOptions {
            cache_dir,
            fuel,
            registries,
        } = options;
        // Unreadable: assume the kernel may swap.
        let swap = std::fs::read_to_string("/proc/swaps").map_or(true, |swaps| swap_active(&swaps));
        let allocations: &[Allocation] = if swap {
            tracing::info!(
                "swap is on: pooled memories are reset by madvise, not PAGEMAP_SCAN, which would leave a swapped-out page with the previous call's data"
            );
            &[Allocation::Pooling, Allocation::OnDemand]
        } else {
            &[Allocation::PoolingResident, Allocation::Pooling, Allocation::OnDemand]
        };
        let mut engine = None;
        for &allocation in allocations {
            match Engine::new(&config(allocation, fuel)) {
                Ok(built) => {
                    engine = Some((built, allocation));
                    break;
                }
                // Old kernels lack PAGEMAP_SCAN; small VMs and some containers cannot reserve
                // the pool's address space.
                Err(error) => tracing::info!(?allocation, %error, "instance allocation unavailable; trying the next"),
            }
        }
        let Some((engine, allocation)) = engine else {
            return Err("cannot create the Wasm engine with any instance allocator".into());
        };
        if allocation == Allocation::OnDemand {
            tracing::warn!("the pooling allocator is unavailable; instances are allocated on demand (slower)");
        }
        let pooling = allocation != Allocation::OnDemand;
        let resident = allocation == Allocation::PoolingResident;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| e.to_string())?;
        super::bindings::hook::Hook::add_to_linker::<_, wasmtime::component::HasSelf<CallState>>(&mut linker, |s| s)
            .map_err(|e| e.to_string())?;
        let cache = ArtifactCache::open(cache_dir, &engine)?;
        let blobs = BlobStore::open(cache.dir().join("blobs"))?;
        spawn_ticker(&engine).map_err(|e| format!("cannot start the epoch ticker: {e}"))?;
        Ok(Arc::new(Self {
            engine,
            linker,
            cache,
            blobs,
            registries,
            compiled: Mutex::new(HashMap::new()),
            permits: Semaphore::new(MAX_CONCURRENT_CALLS),
            cluster: cluster.map(|client| Cluster {
                client,
                kinds: orkestra_kube::discovery::KindCache::default(),
            }),
            http,
            pooling,
            resident,
            fuel,
        }))
    }

    /// Fetches, verifies, compiles (or loads the cached artifact) and pre-instantiates.
    pub async fn load(&self, spec: &Spec) -> Result<Loaded, LoadError> {
        let fail = |message: String| LoadError {
            source_ref: spec.source.to_string(),
            message,
        };
        let started = Instant::now();
        if spec.limits.fuel.is_some() && !self.fuel {
            return Err(fail(
                "limits.fuel: this runtime started without fuel metering (no component declared limits.fuel then); restart it to meter fuel".into(),
            ));
        }
        // A granted directory that is not there fails the load, not every call; nor may a
        // symlink put there since the Katalog loaded lead it elsewhere.
        for (i, mount) in spec.files.iter().enumerate() {
            let inside = mount.host.strip_prefix(&mount.folder).unwrap_or(&mount.host);
            if let Some(why) = orkestra_katalog::component::outside(&mount.folder, inside) {
                return Err(fail(format!("files[{i}].path {why}")));
            }
            if !mount.host.is_dir() {
                return Err(fail(format!(
                    "files[{i}].path: {} is not a directory",
                    mount.host.display()
                )));
            }
        }
        let bytes = self.fetch(&spec.source).await.map_err(fail)?;
        let digest = cache::digest(&bytes);
        if let Some(pin) = &spec.sha256
            && *pin != digest
        {
            return Err(fail(format!("sha256 is {digest}, but the Katalog pins {pin}")));
        }
        let known = self
            .compiled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&digest)
            .and_then(Weak::upgrade);
        let (component, cached) = match known {
            Some(component) => (component, true),
            None => {
                let (component, cached) = self.compile(&digest, bytes).await.map_err(fail)?;
                let component = Arc::new(component);
                let mut compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
                compiled.retain(|_, used| used.strong_count() > 0);
                compiled.insert(digest.clone(), Arc::downgrade(&component));
                (component, cached)
            }
        };
        let pre = self.linker.instantiate_pre(&component).map_err(|e| {
            fail(format!(
                "it needs an import this host does not provide ({}); a component may import only \
                 WASI 0.2 and orkestra:operator/{{kube, log}}",
                error_chain(&e)
            ))
        })?;
        let pre = Pre::new(pre, spec.world).map_err(|e| {
            fail(format!(
                "it does not implement the {} world of orkestra:operator@0.1.0 ({e})",
                spec.world.name(),
            ))
        })?;
        Ok(Loaded {
            digest,
            world: spec.world,
            pre,
            loaded_at: SystemTime::now(),
            load_time: started.elapsed(),
            cached,
            _component: component,
        })
    }

    async fn fetch(&self, source: &Source) -> Result<Vec<u8>, String> {
        match source {
            Source::Path(path) => {
                let len = tokio::fs::metadata(path)
                    .await
                    .map_err(|e| format!("cannot read it: {e}"))?
                    .len();
                if len > MAX_COMPONENT_BYTES {
                    return Err(format!("it is {len} bytes; the limit is {MAX_COMPONENT_BYTES}"));
                }
                tokio::fs::read(path).await.map_err(|e| format!("cannot read it: {e}"))
            }
            Source::Url(url) => {
                let response = self
                    .http
                    .get(url)
                    .timeout(Duration::from_secs(60))
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
                    .map_err(|e| format!("cannot fetch it: {e}"))?;
                let mut bytes = Vec::new();
                let mut response = response;
                while let Some(chunk) = response.chunk().await.map_err(|e| format!("cannot fetch it: {e}"))? {
                    if bytes.len() + chunk.len() > MAX_COMPONENT_BYTES as usize {
                        return Err(format!("it is over the limit of {MAX_COMPONENT_BYTES} bytes"));
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
            }
        }
    }

    /// A cached artifact when there is one, else a compile on the blocking pool.
    async fn compile(&self, digest: &str, bytes: Vec<u8>) -> Result<(Component, bool), String> {
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
            .map_err(|e| format!("the compiler stopped: {e}"))?
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
fn invalid(error: &wasmtime::Error) -> String {
    let chain = error_chain(error);
    // Toolchains that default to the component model's async ABI (componentize-qjs
    // without --sync) build components this WASI 0.2 host refuses to run.
    let hint = if chain.contains("component model async") {
        "; this host runs components without the component model's async ABI: build it \
         synchronously (componentize-qjs: --sync)"
    } else {
        ""
    };
    format!("it is not a valid component: {chain}{hint}")
}

/// The messages of an error and its causes, on one line.
fn error_chain(error: &wasmtime::Error) -> String {
    error.chain().map(|e| e.to_string()).collect::<Vec<_>>().join(": ")
}

/// A dedicated OS thread advances the epoch, so a busy async runtime cannot starve it; it
/// ends with the engine. Without it a looping guest could not be stopped, so it is required.
fn spawn_ticker(engine: &Engine) -> std::io::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new().name("wasm-epoch".into()).spawn(move || {
        while let Some(engine) = weak.upgrade() {
            engine.increment_epoch();
            drop(engine);
            std::thread::sleep(EPOCH_TICK);
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_is_active_when_proc_swaps_lists_an_area() {
        let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
        assert!(!swap_active(header), "the header alone: no swap");
        assert!(!swap_active(""), "an empty file: no swap");
        let file = format!("{header}/swapfile                               file\t\t4194300\t\t0\t\t-2\n");
        assert!(swap_active(&file));
    }

    #[tokio::test]
    async fn a_component_built_for_the_async_abi_is_refused_saying_how_to_build_it() {
        let cache = tempfile::tempdir().unwrap();
        let host = WasmHost::new(None, reqwest::Client::new(), cache.path().to_path_buf()).unwrap();
        let component = wat::parse_str("(component (core func (canon task.cancel)))").unwrap();
        let Err(refused) = host.compile("digest", component).await else {
            panic!("an async-ABI component compiled");
        };
        assert!(
            refused.contains("requires the component model async feature"),
            "{refused}"
        );
        assert!(refused.contains("componentize-qjs: --sync"), "{refused}");
        let plain = wat::parse_str("(component (core module))").unwrap();
        assert!(host.compile("plain", plain).await.is_ok(), "a plain component compiles");
    }
}
