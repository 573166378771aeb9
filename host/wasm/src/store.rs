//! What one call's store holds: the WASI context with its resource table, the memory cap,
//! who is calling, and each capability's own state (`capability::kube`, `capability::log`),
//! on which its host functions work through a view.

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings;
use super::bindings::types as wit_types;
use super::caller::{Caller, Cluster};
use super::capability::Tap;
use super::capability::files::{self, OpenFiles};
use super::capability::kube::{self, KubeState, KubeView};
use super::capability::log::{self, LogState, LogView};
use super::limiter::MemoryCap;
use orkestra_katalog::component::Limits;
use orkestra_katalog::component::grants::Grants;

/// Resources (streams, pollables, descriptors) one instance may hold at once. Each is an
/// allocation of the host's, outside the instance's memory limit, and wasmtime's default
/// allows a million; guests hold a handful.
pub const MAX_RESOURCES: usize = 4096;

/// The data of one call's store: WASI's, the memory cap, who is calling, each capability's
/// own part, the tape, and the CPU clock.
pub struct CallState {
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub memory: MemoryCap,
    pub caller: Caller,
    pub kube: KubeState,
    pub log: LogState,
    /// Where the call's imports are taken down (a recorded call) or served from (a replay).
    pub tape: Option<Arc<dyn Tap>>,
    /// When its guest last went back to its own code (for its tenant's CPU).
    pub cpu: Arc<super::cpu::CpuClock>,
}

impl CallState {
    /// A new store's data, ready for its first call.
    pub fn new(wasi: WasiCtx, memory: MemoryCap, call: Call) -> Self {
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        Self {
            wasi,
            table,
            memory,
            kube: KubeState::new(call.cluster, call.grants, &call.limits),
            log: LogState::new(call.limits.log_bytes),
            caller: call.caller,
            tape: call.tape,
            cpu: Arc::default(),
        }
    }

    /// Readies the store for a call: the caller, its grants and identity, and full budgets.
    /// A warm instance's store goes through this before each call it serves.
    pub fn begin(&mut self, call: Call) {
        self.kube = KubeState::new(call.cluster, call.grants, &call.limits);
        self.log = LogState::new(call.limits.log_bytes);
        self.caller = call.caller;
        self.memory.hit = false;
        self.tape = call.tape;
        self.cpu = Arc::default();
    }

    /// After a call whose instance is kept: nothing of the caller's identity stays with it.
    pub fn end(&mut self) {
        self.kube.cluster = None;
        self.caller.client = None;
        self.caller.writes = Default::default();
        self.tape = None;
    }

    /// The kube capability's view of the store.
    pub fn kube(&mut self) -> KubeView<'_> {
        KubeView {
            state: &mut self.kube,
            caller: &self.caller,
            tape: self.tape.as_deref().map(|tape| tape as _),
        }
    }

    /// The log capability's view of the store.
    pub fn log(&mut self) -> LogView<'_> {
        LogView {
            state: &mut self.log,
            caller: &self.caller,
            tape: self.tape.as_deref().map(|tape| tape as _),
        }
    }
}

/// Who a call is for and what it may do.
pub struct Call {
    pub caller: Caller,
    pub cluster: Option<Cluster>,
    pub grants: Arc<Grants>,
    pub limits: Limits,
    pub tape: Option<Arc<dyn Tap>>,
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

impl OpenFiles for CallState {
    fn caller(&self) -> &Caller {
        &self.caller
    }
}

/// Links WASI 0.2 (its `open-at` held to the instance's open files) and
/// `orkestra:operator/{kube, log, types}`, each capability on its view of the store.
pub fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    files::cap_open_files(linker)?;
    bindings::types::add_to_linker::<_, HasSelf<CallState>>(linker, |state| state)?;
    bindings::kube::add_to_linker::<_, kube::Kube>(linker, CallState::kube)?;
    bindings::log::add_to_linker::<_, log::Log>(linker, CallState::log)
}
