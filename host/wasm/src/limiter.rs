//! The memory cap of one call: every memory and table an instance creates or grows counts
//! against one budget.

/// Core instances, memories and tables one instance may create (the pool's per-component
/// limits; interpreted guests need several).
const MAX_INSTANCES: usize = 32;
const MAX_MEMORIES: usize = 8;
const MAX_TABLES: usize = 32;
/// Host bytes per table element (a pointer).
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

/// The resource limiter of one call: every memory and table the instance creates or grows
/// is counted against one budget (a component with several core instances cannot multiply
/// its limit), and their numbers are capped. A hit is remembered so the failure can be told
/// apart from other traps.
pub struct MemoryCap {
    pub max: usize,
    /// Bytes held now by the instance's memories and tables.
    pub used: usize,
    /// The last growth allowed, taken back if it then failed.
    pending: usize,
    pub hit: bool,
}

impl MemoryCap {
    pub fn new(max: usize) -> Self {
        Self {
            max,
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
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}
