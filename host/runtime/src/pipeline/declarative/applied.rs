//! What one stage of a reconcile applied (the templates, or a component's call), for the
//! rest of it: `.children`, whether it wrote, and which children are not ready yet.

use serde_json::{Map, Value};

use crate::outcome::readiness::Holdouts;
use crate::pipeline::mux::Action;

#[derive(Default)]
pub struct Applied {
    /// Children applied, by lowercase kind (first of each kind), as `.children` shows them.
    pub children: Map<String, Value>,
    pub wrote: bool,
    /// A component's status fields, merged into `.status` after the Katalog's own.
    pub status: Option<Map<String, Value>>,
    /// What a component asked for next.
    pub action: Option<Action>,
    /// Children not ready yet.
    pub holdouts: Holdouts,
}

impl Applied {
    /// Takes in one child as the API server returned it.
    pub fn add(&mut self, live: Value) {
        self.holdouts.see(&live);
        let kind = live["kind"].as_str().unwrap_or_default().to_lowercase();
        self.children.entry(kind).or_insert(live);
    }
}
