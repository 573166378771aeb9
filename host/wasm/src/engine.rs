//! One wasmtime engine per process: its settings (component model, epoch interruption, the
//! pooling allocator with an on-demand fallback), the epoch ticker, and the linker every
//! component is checked against (loading is `load`).

use crate::error::Error;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Semaphore;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::budget::PoolBudget;
use super::cache::ArtifactCache;
use super::caller::Cluster;
use super::footprint::{self, Footprint};
use super::registry::{BlobStore, Registries};
use super::store::CallState;
use super::warm::WarmStores;
use orkestra_katalog::component::MAX_MEMORY;

/// How often the epoch advances; a call's deadline is its timeout in ticks, plus one.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Calls running at once across all components (pool slots; more wait for a permit).
pub const MAX_CONCURRENT_CALLS: usize = 64;

/// Calls one slot may run at once: half the host's, so a flood of one component's calls
/// (one CRD's, one serve target's) always leaves room for every other component's.
pub const SLOT_CALLS: usize = MAX_CONCURRENT_CALLS / 2;

/// Bytes of each pooled memory kept mapped between calls (reset, not unmapped).
const KEEP_RESIDENT: usize = 4 << 20;

/// The instance pool: a slot for each call at once and each warm instance kept, each with
/// room for an interpreted guest's several core modules, memories and tables on average.
pub const POOL: Footprint = Footprint {
    instances: POOL_SLOTS,
    core_instances: POOL_SLOTS * 16,
    memories: POOL_SLOTS * 8,
    tables: POOL_SLOTS * 16,
};

const POOL_SLOTS: u32 = (MAX_CONCURRENT_CALLS + super::warm::MAX_IDLE) as u32;

/// The process's Wasm host.
pub struct WasmHost {
    pub(super) engine: Engine,
    pub(super) linker: Linker<CallState>,
    pub(super) cache: ArtifactCache,
    /// Components pulled from registries, and where credentials for them come from.
    pub(super) blobs: BlobStore,
    pub(super) registries: Registries,
    /// Compiled components by digest, while some loaded version uses them: a component
    /// used by several targets compiles once, and a swapped-out one is freed.
    pub(super) compiled: Mutex<HashMap<String, Weak<Component>>>,
    pub(super) permits: Semaphore,
    pub(super) cluster: Option<Cluster>,
    pub(super) http: reqwest::Client,
    /// Whether instances come from the pooling allocator (false: on-demand fallback).
    pub pooling: bool,
    /// Whether a returned memory is reset in place, page by page after a `PAGEMAP_SCAN`
    /// (false: by `madvise`, as with swap on).
    pub resident: bool,
    /// Whether the engine meters fuel (every store then needs some).
    pub(super) fuel: bool,
    /// Warm instances between calls.
    pub(super) warm: WarmStores,
    /// Each namespace's calls at once, held to its share.
    pub(super) tenants: super::tenants::TenantCalls,
    /// Where recorded calls are written, and which exist.
    pub recordings: super::record::Recordings,
    /// What every instance holds of the pool, per tenant and per component.
    pub(super) budget: PoolBudget,
    /// Each tenant's guest CPU.
    pub(super) cpu: Arc<super::cpu::TenantCpu>,
}

/// The engine's pool as the Live API shows it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolView {
    pub total: Footprint,
    pub used: Footprint,
    /// What one instance of a component may take (more is refused at load).
    pub instance_allowance: Footprint,
    /// Each tenant holding part of it, most first.
    pub tenants: Vec<TenantPool>,
}

/// One tenant's part of the pool.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantPool {
    pub tenant: String,
    /// What its calls and kept instances hold.
    pub held: Footprint,
    pub share: Footprint,
    /// Warm instances kept for it.
    pub kept: usize,
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
    /// What each namespace may take: its calls at once.
    pub tenants: orkestra_katalog::compile::TenantRules,
    /// Where recordings of calls may be written, and how much in all (`None`: calls are
    /// never recorded).
    pub recordings: Option<super::record::Folder>,
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
        // Calls in flight, each on an instance, and the warm instances kept between calls;
        // the budget (`budget`) holds every instance to what it counted, so these are never
        // found exhausted. Interpreted guests (Python, JavaScript) bring several core
        // modules, memories and large instance metadata.
        pool.total_component_instances(POOL.instances)
            .total_core_instances(POOL.core_instances)
            .total_memories(POOL.memories)
            .total_tables(POOL.tables)
            .total_stacks(POOL.instances)
            .max_core_instances_per_component(footprint::MAX_CORE_INSTANCES)
            .max_memories_per_component(footprint::MAX_MEMORIES)
            .max_tables_per_component(footprint::MAX_TABLES)
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
    ) -> Result<Arc<Self>, Error> {
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
    ) -> Result<Arc<Self>, Error> {
        let HostOptions {
            cache_dir,
            fuel,
            registries,
            tenants: tenant_rules,
            recordings,
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
            return Err(Error::Engine(
                "cannot create the Wasm engine with any instance allocator".into(),
            ));
        };
        if allocation == Allocation::OnDemand {
            tracing::warn!("the pooling allocator is unavailable; instances are allocated on demand (slower)");
        }
        let pooling = allocation != Allocation::OnDemand;
        let resident = allocation == Allocation::PoolingResident;
        let mut linker = Linker::new(&engine);
        super::store::add_to_linker(&mut linker).map_err(|e| Error::Engine(e.to_string()))?;
        let cache = ArtifactCache::open(cache_dir, &engine)?;
        let blobs = BlobStore::open(cache.dir().join("blobs"))?;
        spawn_ticker(&engine).map_err(|e| Error::Engine(format!("cannot start the epoch ticker: {e}")))?;
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
            warm: WarmStores::default(),
            tenants: super::tenants::TenantCalls::new(tenant_rules),
            recordings: super::record::Recordings::new(recordings),
            budget: PoolBudget::new(POOL),
            cpu: Arc::default(),
        }))
    }
}

impl WasmHost {
    /// What each namespace may take of the host: its calls at once (`spec.tenants`); calls
    /// running finish as they are.
    pub fn set_tenant_rules(&self, rules: orkestra_katalog::compile::TenantRules) {
        self.tenants.set_rules(rules);
    }

    /// Calls running now, by namespace, most first.
    pub fn tenant_calls(&self) -> Vec<(String, usize)> {
        self.tenants.running()
    }

    /// The engine every component is compiled for and instantiated in (for a benchmark's
    /// floor: wasmtime alone on the same settings).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// What each tenant's guests used of the CPU and waited for it, in seconds, most first.
    pub fn tenant_cpu(&self) -> Vec<(String, super::cpu::CpuUse)> {
        self.cpu.usage()
    }

    /// Warm instances kept between calls now, all components together.
    pub fn warm_idle(&self) -> usize {
        self.warm.len()
    }

    /// The part of the pool that `calls` of the host's concurrent calls stand for: a tenant's
    /// share is its `wasmCalls`, a component's its slot's calls.
    pub(super) fn share_of(&self, calls: usize) -> Footprint {
        self.budget.total().share(calls, MAX_CONCURRENT_CALLS)
    }

    /// What one instance may take of the pool: a 64th of it (one call's place), so that a
    /// tenant's share (`wasmCalls` of the 64 calls) holds that many instances at once. A
    /// component one of whose instances needs more does not load.
    pub fn instance_allowance(&self) -> Footprint {
        let allowance = self.share_of(1);
        Footprint {
            instances: 1,
            core_instances: allowance.core_instances.min(footprint::MAX_CORE_INSTANCES),
            memories: allowance.memories.min(footprint::MAX_MEMORIES),
            tables: allowance.tables.min(footprint::MAX_TABLES),
        }
    }

    /// What the pool holds now, in all and for each tenant (most first): the pool's size and
    /// use, and each tenant's holding, share and warm instances kept.
    pub fn pool(&self) -> PoolView {
        let kept = self.warm.per_tenant();
        let tenants = self
            .budget
            .tenants()
            .into_iter()
            .map(|(tenant, held)| TenantPool {
                share: self.share_of(self.tenants.calls_of(&tenant)),
                kept: kept.get(&tenant).copied().unwrap_or(0),
                tenant,
                held,
            })
            .collect();
        PoolView {
            total: self.budget.total(),
            used: self.budget.used(),
            instance_allowance: self.instance_allowance(),
            tenants,
        }
    }

    /// Keeps a component's bytes by digest (for `ork replay`); a failure is only logged.
    pub(super) fn keep_blob(&self, digest: &str, bytes: &[u8]) {
        if self.blobs.get(digest).is_none()
            && let Err(error) = self.blobs.put(digest, bytes)
        {
            tracing::warn!(%error, digest, "cannot keep the component's bytes for replays");
        }
    }
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
}
