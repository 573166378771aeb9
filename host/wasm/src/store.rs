//! What one call's store holds: the WASI context with its resource table, the memory cap,
//! who is calling, and what is left of the call's budgets. The host functions that read and
//! spend them are the capabilities (`capability::kube`, `capability::log`).

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::types as wit_types;
use super::limiter::MemoryCap;
use orkestra_katalog::component::grants::Grants;
use orkestra_kube::discovery::KindCache;

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
