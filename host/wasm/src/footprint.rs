//! What one instance of a component takes of the engine's instance pool: one component
//! instance (and its fiber stack), its core instances, memories and tables. Read from the
//! component at load, before anything of it runs, so the host can budget the pool per tenant
//! and per component instead of finding it exhausted at instantiation.
//!
//! Memories and tables are wasmtime's own count ([`Component::resources_required`]). Core
//! instances are counted here from the binary, as wasmtime counts them once it has inlined
//! nested components: one per core instantiation, nested components' times the number of
//! times they are instantiated. What cannot be counted statically (an imported module or
//! component) is taken at the pool's per-component maximum.

use serde::Serialize;
use wasmparser::{ComponentAlias, ComponentExternalKind, ComponentOuterAliasKind, ComponentTypeRef, Parser, Payload};

use wasmtime::component::Component;

/// Core instances, memories and tables one component instance may hold (the pool's
/// per-component maxima).
pub const MAX_CORE_INSTANCES: u32 = 32;
pub const MAX_MEMORIES: u32 = 8;
pub const MAX_TABLES: u32 = 32;

/// What some instances hold of the pool, or may hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Footprint {
    /// Component instances; each has a fiber stack too.
    pub instances: u32,
    pub core_instances: u32,
    pub memories: u32,
    pub tables: u32,
}

impl Footprint {
    /// The parts by name, in a fixed order, for messages and figures.
    pub fn parts(&self) -> [(&'static str, u32); 4] {
        [
            ("instances", self.instances),
            ("core instances", self.core_instances),
            ("memories", self.memories),
            ("tables", self.tables),
        ]
    }

    /// The first part of `self` past `limit`'s: its name, its count and the limit.
    pub fn over(&self, limit: &Footprint) -> Option<(&'static str, u32, u32)> {
        self.parts()
            .into_iter()
            .zip(limit.parts())
            .find(|((_, mine), (_, bound))| mine > bound)
            .map(|((name, mine), (_, bound))| (name, mine, bound))
    }

    pub fn plus(&self, other: &Footprint) -> Footprint {
        Footprint {
            instances: self.instances.saturating_add(other.instances),
            core_instances: self.core_instances.saturating_add(other.core_instances),
            memories: self.memories.saturating_add(other.memories),
            tables: self.tables.saturating_add(other.tables),
        }
    }

    pub fn minus(&self, other: &Footprint) -> Footprint {
        Footprint {
            instances: self.instances.saturating_sub(other.instances),
            core_instances: self.core_instances.saturating_sub(other.core_instances),
            memories: self.memories.saturating_sub(other.memories),
            tables: self.tables.saturating_sub(other.tables),
        }
    }

    /// Each part times `n`.
    pub fn times(&self, n: u32) -> Footprint {
        Footprint {
            instances: self.instances.saturating_mul(n),
            core_instances: self.core_instances.saturating_mul(n),
            memories: self.memories.saturating_mul(n),
            tables: self.tables.saturating_mul(n),
        }
    }

    /// Each part scaled by `part / whole` (rounded down, at least 1 where `self` has any).
    pub fn share(&self, part: usize, whole: usize) -> Footprint {
        let scale = |n: u32| {
            let scaled = (u64::from(n) * part as u64 / whole.max(1) as u64) as u32;
            if n > 0 { scaled.max(1) } else { 0 }
        };
        Footprint {
            instances: scale(self.instances),
            core_instances: scale(self.core_instances),
            memories: scale(self.memories),
            tables: scale(self.tables),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Footprint::default()
    }
}

impl std::fmt::Display for Footprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.parts().iter().map(|(name, n)| format!("{n} {name}")).collect();
        f.write_str(&parts.join(", "))
    }
}

/// The footprint of one instance of `component`, which [`core_instances`] counted in its
/// binary.
pub fn of(component: &Component, core_instances: Option<u32>) -> Footprint {
    let (memories, tables) = match component.resources_required() {
        Some(required) => (required.num_memories, required.num_tables),
        None => (MAX_MEMORIES, MAX_TABLES),
    };
    Footprint {
        instances: 1,
        core_instances: core_instances.unwrap_or(MAX_CORE_INSTANCES),
        memories,
        tables,
    }
}

/// One component's frame while its binary is read.
#[derive(Default)]
struct Frame {
    /// Core instances it makes, its nested instantiations included.
    core: u32,
    /// Core instances of each component in its component index space (`None`: unknown).
    components: Vec<Option<u32>>,
    /// Whether each of its component instances, and each of its component functions, comes
    /// from a nested component's instance: handed to another component's instantiation, its
    /// functions are called through a fused adapter, which wasmtime makes a core instance of.
    instances: Vec<bool>,
    funcs: Vec<bool>,
}

impl Frame {
    fn instance(&self, index: u32) -> Option<bool> {
        self.instances.get(index as usize).copied()
    }

    fn func(&self, index: u32) -> Option<bool> {
        self.funcs.get(index as usize).copied()
    }

    /// Whether the item `kind`/`index` comes from a nested component's instance (`None`: the
    /// index is out of its space).
    fn nested(&self, kind: ComponentExternalKind, index: u32) -> Option<bool> {
        match kind {
            ComponentExternalKind::Instance => self.instance(index),
            ComponentExternalKind::Func => self.func(index),
            _ => Some(false),
        }
    }

    /// An item of `kind` added to its index space, from a nested instance or not.
    fn add(&mut self, kind: ComponentExternalKind, nested: bool, component: Option<u32>) {
        match kind {
            ComponentExternalKind::Instance => self.instances.push(nested),
            ComponentExternalKind::Func => self.funcs.push(nested),
            ComponentExternalKind::Component => self.components.push(component),
            _ => {}
        }
    }
}

/// Core instances one instance of the component in `bytes` makes, fused adapters included;
/// `None` where that cannot be known without instantiating it (or the binary does not parse).
pub fn core_instances(bytes: &[u8]) -> Option<u32> {
    // Components being read, outermost first; a nested module's payloads are skipped.
    let mut stack: Vec<Frame> = Vec::new();
    let mut in_module = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.ok()?;
        if in_module > 0 {
            match payload {
                Payload::ModuleSection { .. } => in_module += 1,
                Payload::End(_) => in_module -= 1,
                _ => {}
            }
            continue;
        }
        match payload {
            Payload::Version { .. } if stack.is_empty() => stack.push(Frame::default()),
            Payload::ModuleSection { .. } => in_module = 1,
            Payload::ComponentSection { .. } => stack.push(Frame::default()),
            Payload::End(_) => {
                let done = stack.pop()?;
                match stack.last_mut() {
                    Some(parent) => parent.components.push(Some(done.core)),
                    None => return Some(done.core),
                }
            }
            Payload::InstanceSection(reader) => {
                let frame = stack.last_mut()?;
                for instance in reader {
                    if let wasmparser::Instance::Instantiate { .. } = instance.ok()? {
                        frame.core = frame.core.saturating_add(1);
                    }
                }
            }
            Payload::ComponentInstanceSection(reader) => {
                let frame = stack.last_mut()?;
                for instance in reader {
                    match instance.ok()? {
                        wasmparser::ComponentInstance::Instantiate { component_index, args } => {
                            let nested = (*frame.components.get(component_index as usize)?)?;
                            let mut adapters = 0u32;
                            for arg in args.iter() {
                                adapters += u32::from(frame.nested(arg.kind, arg.index)?);
                            }
                            frame.core = frame.core.saturating_add(nested).saturating_add(adapters);
                            frame.instances.push(true);
                        }
                        wasmparser::ComponentInstance::FromExports(exports) => {
                            let mut nested = false;
                            for export in exports.iter() {
                                nested |= frame.nested(export.kind, export.index)?;
                            }
                            frame.instances.push(nested);
                        }
                    }
                }
            }
            Payload::ComponentCanonicalSection(reader) => {
                let frame = stack.last_mut()?;
                for function in reader {
                    if let wasmparser::CanonicalFunction::Lift { .. } = function.ok()? {
                        frame.funcs.push(false);
                    }
                }
            }
            Payload::ComponentAliasSection(reader) => {
                for alias in reader {
                    let depth = stack.len();
                    let frame = stack.last_mut()?;
                    match alias.ok()? {
                        ComponentAlias::InstanceExport {
                            kind, instance_index, ..
                        } => {
                            let nested = frame.instance(instance_index)?;
                            // A component exported by an instance: not followed.
                            frame.add(kind, nested, None);
                        }
                        ComponentAlias::Outer {
                            kind: ComponentOuterAliasKind::Component,
                            count,
                            index,
                        } => {
                            let outer = depth.checked_sub(1 + count as usize)?;
                            let known = *stack[outer].components.get(index as usize)?;
                            stack.last_mut()?.components.push(known);
                        }
                        _ => {}
                    }
                }
            }
            Payload::ComponentImportSection(reader) => {
                let frame = stack.last_mut()?;
                for import in reader {
                    match import.ok()?.ty {
                        ComponentTypeRef::Component(_) => frame.components.push(None),
                        ComponentTypeRef::Instance(_) => frame.instances.push(false),
                        ComponentTypeRef::Func(_) => frame.funcs.push(false),
                        _ => {}
                    }
                }
            }
            Payload::ComponentExportSection(reader) => {
                let frame = stack.last_mut()?;
                for export in reader {
                    let export = export.ok()?;
                    let component = match export.kind {
                        ComponentExternalKind::Component => *frame.components.get(export.index as usize)?,
                        _ => None,
                    };
                    let nested = frame.nested(export.kind, export.index)?;
                    frame.add(export.kind, nested, component);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(text: &str) -> Option<u32> {
        let bytes = wat::parse_str(text).unwrap();
        let counted = core_instances(&bytes);
        if let Some(n) = counted {
            assert_eq!(n, pooled(&bytes), "wasmtime's own count of {text}");
        }
        counted
    }

    /// The fewest core instances per component a pooling engine takes `bytes` with.
    fn pooled(bytes: &[u8]) -> u32 {
        (0..64)
            .find(|&max| {
                let mut config = wasmtime::Config::new();
                config.wasm_component_model(true);
                let mut pool = wasmtime::PoolingAllocationConfig::default();
                pool.total_component_instances(1)
                    .total_core_instances(64)
                    .total_memories(4)
                    .total_stacks(1)
                    .max_core_instances_per_component(max);
                config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
                let engine = wasmtime::Engine::new(&config).unwrap();
                Component::new(&engine, bytes).is_ok()
            })
            .expect("fits 64")
    }

    #[test]
    fn core_instances_are_counted_through_nested_components_as_often_as_they_are_instantiated() {
        assert_eq!(counted("(component)"), Some(0));
        let flat = "(component (core module $m) (core instance (instantiate $m)) (core instance (instantiate $m))
                    (core instance (export \"x\" (func 0))))";
        // Two instantiations; an instance made of exports allocates nothing.
        assert_eq!(
            counted(&flat.replace("(core instance (export \"x\" (func 0)))", "")),
            Some(2)
        );
        let nested = "(component
            (component $inner (core module $m) (core instance (instantiate $m)) (core instance (instantiate $m)))
            (component $outer
              (core module $n) (core instance (instantiate $n))
              (instance (instantiate $inner)))
            (instance (instantiate $inner))
            (instance (instantiate $outer))
            (instance (instantiate $outer)))";
        // $inner: 2 each time; $outer: 1 + an $inner (2), twice.
        assert_eq!(counted(nested), Some(2 + 2 * 3));
        let exported = "(component (component $outer
              (component $c (core module $m) (core instance (instantiate $m)))
              (export \"again\" (component $c)) (instance (instantiate 1)))
            (instance (instantiate $outer)))";
        assert_eq!(
            counted(exported),
            Some(1),
            "an export is another index of the same component"
        );
        // An imported component cannot be counted.
        assert_eq!(
            counted("(component (import \"c\" (component $c)) (instance (instantiate $c)))"),
            None
        );
        // One component's instance handed to another's instantiation: its functions are
        // called through a fused adapter, one more core instance.
        let linked = "(component
            (component $lib
              (core module $m (func (export \"f\")))
              (core instance $i (instantiate $m))
              (func (export \"f\") (canon lift (core func $i \"f\"))))
            (component $app
              (import \"lib\" (instance $lib (export \"f\" (func))))
              (core func $f (canon lower (func $lib \"f\")))
              (core module $n (import \"\" \"f\" (func)))
              (core instance (instantiate $n (with \"\" (instance (export \"f\" (func $f)))))))
            (instance $l (instantiate $lib))
            (instance (instantiate $app (with \"lib\" (instance $l)))))";
        assert_eq!(counted(linked), Some(1 + 1 + 1));
    }

    #[test]
    fn a_footprint_names_the_first_part_past_a_limit() {
        let limit = Footprint {
            instances: 4,
            core_instances: 16,
            memories: 8,
            tables: 8,
        };
        let fat = Footprint {
            instances: 1,
            core_instances: 20,
            memories: 9,
            tables: 1,
        };
        assert_eq!(fat.over(&limit), Some(("core instances", 20, 16)));
        assert_eq!(fat.times(4).over(&limit.times(4)), Some(("core instances", 80, 64)));
        assert!(limit.plus(&fat).minus(&fat) == limit);
        assert_eq!(limit.share(1, 4).core_instances, 4);
        assert_eq!(Footprint::default().share(1, 4), Footprint::default());
        assert_eq!(fat.to_string(), "1 instances, 20 core instances, 9 memories, 1 tables");
    }
}
