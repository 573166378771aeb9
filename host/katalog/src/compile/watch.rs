//! `observe.watch` and `observe.events` entries, compiled: their enqueue gates and the
//! `keyFrom.name` template that routes a watched object to its primary.

use super::gate::Gate;
use super::{Error, template};
use crate::template::{Functions, Template};
use crate::{EventWatch, Watch};

/// One `observe.watch` entry with its gate and key template compiled.
#[derive(Debug)]
pub struct CompiledWatch {
    pub entry: Watch,
    pub gate: Option<Gate>,
    /// `keyFrom.name`: the primary's name, rendered over the watched object.
    pub key_name: Option<Template>,
}

impl CompiledWatch {
    pub fn compile(entry: &Watch, functions: &Functions) -> Result<Self, Error> {
        let gate = Gate::compile_watch(entry.enqueue_gate.as_ref(), functions)?;
        let key_name = entry
            .key_from
            .as_ref()
            .and_then(|k| k.name.as_ref())
            .map(|n| template(n, functions).map_err(|e| e.within("name").within("keyFrom")))
            .transpose()?;
        Ok(Self {
            entry: entry.clone(),
            gate,
            key_name,
        })
    }
}

/// One `observe.events` entry with its gate compiled.
#[derive(Debug)]
pub struct CompiledEvents {
    pub name: String,
    pub entry: EventWatch,
    pub gate: Option<Gate>,
}

impl CompiledEvents {
    pub fn compile(name: &str, entry: &EventWatch, functions: &Functions) -> Result<Self, Error> {
        Ok(Self {
            name: name.to_string(),
            entry: entry.clone(),
            gate: Gate::compile_watch(entry.enqueue_gate.as_ref(), functions)?,
        })
    }
}
