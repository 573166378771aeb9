//! The memory cap of one call: every memory and table an instance creates or grows counts
//! against one budget, and the instance may create no more core instances, memories and
//! tables than its component's footprint, which is what the pool holds for it.

use super::footprint::Footprint;

/// Host bytes per table element (a pointer).
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

/// The resource limiter of one call: every memory and table the instance creates or grows
/// is counted against one budget (a component with several core instances cannot multiply
/// its limit), and their numbers are capped. A hit is remembered so the failure can be told
/// apart from other traps.
pub struct MemoryCap {
    pub max: usize,
    /// What the instance may create: its component's footprint.
    footprint: Footprint,
    /// Bytes held now by the instance's memories and tables.
    pub used: usize,
    /// The last growth allowed, taken back if it then failed.
    pending: usize,
    pub hit: bool,
}

impl MemoryCap {
    pub fn new(max: usize, footprint: Footprint) -> Self {
        Self {
            max,
            footprint,
            used: 0,
            pending: 0,
            hit: false,
        }
    }

    fn grow(&mut self, what: &str, bytes: usize) -> wasmtime::Result<bool> {
        if self.used.saturating_add(bytes) > self.max {
            self.hit = true;
            return Err(wasmtime::format_err!(
                "memory limit of {} bytes reached: the instance holds {} bytes and its {what} asked for {bytes} more",
                self.max,
                self.used
            ));
        }
        self.used += bytes;
        self.pending = bytes;
        Ok(true)
    }
}

impl wasmtime::ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.grow("memory", desired.saturating_sub(current))
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.used -= std::mem::take(&mut self.pending);
        Ok(())
    }

    fn table_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        // Table elements live in host memory.
        self.grow(
            "table",
            desired.saturating_sub(current).saturating_mul(TABLE_ELEMENT_BYTES),
        )
    }

    fn table_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.used -= std::mem::take(&mut self.pending);
        Ok(())
    }

    fn instances(&self) -> usize {
        self.footprint.core_instances as usize
    }

    fn memories(&self) -> usize {
        self.footprint.memories as usize
    }

    fn tables(&self) -> usize {
        self.footprint.tables as usize
    }
}
