//! What one call's store holds: the WASI context with its resource table, the memory cap,
//! who is calling, and what is left of the call's budgets. The host functions that read and
//! spend them are the capabilities (`capability::kube`, `capability::log`).

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::types as wit_types;
use super::limiter::MemoryCap;
use super::record::Tape;
use orkestra_katalog::component::Limits;
use orkestra_katalog::component::grants::Grants;
use orkestra_kube::discovery::KindCache;

/// Resources (streams, pollables, descriptors) one instance may hold at once. Each is an
/// allocation of the host's, outside the instance's memory limit, and wasmtime's default
/// allows a million; guests hold a handful.
pub const MAX_RESOURCES: usize = 4096;

/// The cluster, as a component may reach it.
#[derive(Clone)]
pub struct Cluster {
    pub client: kube::Client,
    pub kinds: KindCache,
}

/// Who is calling, for log records, grant checks and writes.
#[derive(Clone)]
pub struct Caller {
    /// The component's slot (`crd` or `crd/target`).
    pub component: Arc<str>,
    /// The custom resource's key.
    pub key: String,
    /// The custom resource's namespace (`self` in grants).
    pub namespace: Option<String>,
    /// The field manager of what it applies through `kube.apply`: its own, never shared
    /// with another tenant.
    pub manager: Arc<str>,
    /// A client acting as the component's own ServiceAccount, for its kube calls (`None`:
    /// the host's).
    pub client: Option<kube::Client>,
    /// The UID of the custom resource: objects another one controls are not the
    /// component's to write unless a grant says so.
    pub owner_uid: Option<String>,
    /// Writes its kube calls made (apply, delete, patch-status), for the CR's write budget.
    pub writes: Arc<std::sync::atomic::AtomicU32>,
}

impl Caller {
    /// The tenant the call is counted, budgeted and kept warm under: the custom resource's
    /// namespace (read from its key when the CR is gone), or, for a cluster-scoped one, that
    /// CR alone (`cluster/NAME`, never a namespace's name). Never one shared by calls of
    /// different tenants.
    pub fn tenant(&self) -> Arc<str> {
        orkestra_kube::tenant::of(&self.key, self.namespace.as_deref())
    }
}

/// The data of one call's store.
pub struct CallState {
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub memory: MemoryCap,
    pub cluster: Option<Cluster>,
    pub grants: Arc<Grants>,
    pub caller: Caller,
    pub kube_calls_left: u32,
    /// Bytes of objects the kube interface may still hand over.
    pub kube_bytes_left: usize,
    /// The budget the limits gave, for messages.
    pub kube_bytes: usize,
    /// Bytes the guest may still log (each line at its cost to the host).
    pub log_bytes_left: usize,
    /// Lines dropped once the log budget was spent.
    pub logs_dropped: u64,
    /// The first denial, kept so a guest that swallows it still fails its reconcile.
    pub denied: Option<String>,
    /// The last error-level line the guest logged (a panic message), to explain a trap.
    pub last_error: Option<String>,
    /// Where the call's imports are taken down (a recorded call) or served from (a replay).
    pub tape: Option<Tape>,
    /// When its guest last went back to its own code (for its tenant's CPU).
    pub cpu: Arc<super::cpu::CpuClock>,
}

impl CallState {
    /// A new store's data, ready for its first call.
    pub fn new(wasi: WasiCtx, memory: MemoryCap, call: Call) -> Self {
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        let mut state = Self {
            wasi,
            table,
            memory,
            cluster: None,
            grants: call.grants.clone(),
            caller: call.caller.clone(),
            kube_calls_left: 0,
            kube_bytes_left: 0,
            kube_bytes: 0,
            log_bytes_left: 0,
            logs_dropped: 0,
            denied: None,
            last_error: None,
            tape: None,
            cpu: Arc::default(),
        };
        state.begin(call);
        state
    }

    /// Readies the store for a call: the caller, its grants and identity, and full budgets.
    /// A warm instance's store goes through this before each call it serves.
    pub fn begin(&mut self, call: Call) {
        let limits = call.limits;
        self.caller = call.caller;
        self.cluster = call.cluster;
        self.grants = call.grants;
        self.kube_calls_left = limits.kube_calls;
        self.kube_bytes_left = limits.kube_bytes;
        self.kube_bytes = limits.kube_bytes;
        self.log_bytes_left = limits.log_bytes;
        self.logs_dropped = 0;
        self.denied = None;
        self.last_error = None;
        self.memory.hit = false;
        self.tape = call.tape;
        self.cpu = Arc::default();
    }

    /// After a call whose instance is kept: nothing of the caller's identity stays with it.
    pub fn end(&mut self) {
        self.cluster = None;
        self.caller.client = None;
        self.caller.writes = Default::default();
        self.tape = None;
    }
}

/// Who a call is for and what it may do.
pub struct Call {
    pub caller: Caller,
    pub cluster: Option<Cluster>,
    pub grants: Arc<Grants>,
    pub limits: Limits,
    pub tape: Option<Tape>,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wit_types::Host for CallState {}
