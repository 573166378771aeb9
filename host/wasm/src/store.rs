//! What one call's store holds: the WASI context with its resource table, the memory cap,
//! who is calling, and each capability's own state (`capability::kube`, `capability::log`),
//! on which its host functions work through a view.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::types as wit_types;
use super::caller::{Caller, Cluster};
use super::capability::kube::exchange::KubeTap;
use super::capability::kube::{KubeState, KubeView};
use super::capability::log::{LogState, LogTap, LogView};
use super::limiter::MemoryCap;
use super::record::Tape;
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
    pub tape: Option<Tape>,
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
            tape: self.tape.as_ref().map(|tape| tape as &dyn KubeTap),
        }
    }

    /// The log capability's view of the store.
    pub fn log(&mut self) -> LogView<'_> {
        LogView {
            state: &mut self.log,
            caller: &self.caller,
            tape: self.tape.as_ref().map(|tape| tape as &dyn LogTap),
        }
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
