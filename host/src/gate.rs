//! Compiled admission gates: the enqueue gate (should this event become work?) and the
//! reconcile gate (should this work run now?), one pair per effective operator box.
//!
//! A gate passes when its `sentinels:` shorthand (any listed sentinel true; absent = no
//! constraint) and its `when`/`or` conditions both pass. External calls inside gates are
//! not run by this runtime yet: a gate that declares them treats them as failed, so its
//! `failPolicy` decides (open: ignore them, closed: block).
//!
//! Pure: no kube or wasmtime imports.

use crate::condition::Conditions;
use crate::katalog::{self, FailPolicy, OperatorBox};
use crate::resolver::Resolver;
use crate::sentinel;
use crate::template::Functions;

/// One compiled gate.
#[derive(Debug, Clone)]
pub struct Gate {
    sentinels: u16,
    conditions: Conditions,
    /// Closed gates with external calls block: their calls cannot succeed here.
    blocked_by_externals: bool,
}

impl Gate {
    /// Compiles a gate of the Katalog (validated already: errors here are defects).
    pub fn compile(spec: &katalog::Gate, functions: &Functions) -> Result<Self, String> {
        let conditions = Conditions::compile(&spec.when, &spec.or, functions)
            .map_err(|(at, e)| format!("{at}.{}: {}", e.key, e.message))?;
        Ok(Self {
            sentinels: sentinel::mask(spec.sentinels.iter().map(String::as_str)),
            conditions,
            blocked_by_externals: !spec.external.is_empty() && spec.fail_policy == Some(FailPolicy::Closed),
        })
    }

    /// Whether the gate lets this event or item through.
    pub fn passes(&self, resolver: &Resolver<'_, '_>) -> bool {
        if self.blocked_by_externals {
            return false;
        }
        let shorthand = self.sentinels == 0 || resolver.sentinels().0 & self.sentinels != 0;
        shorthand && self.conditions.passes(resolver, None)
    }
}

/// The gates of one effective box and what the queue needs to know about it.
#[derive(Debug, Clone, Default)]
pub struct BoxGates {
    pub enqueue: Option<Gate>,
    pub reconcile: Option<Gate>,
    /// The sentinels to compute for update events.
    pub declared_sentinels: u16,
    /// Every admitted event becomes its own queue item.
    pub event_aware: bool,
}

impl BoxGates {
    pub fn compile(operator_box: &OperatorBox, functions: &Functions) -> Result<Self, String> {
        let Some(pre) = &operator_box.pre_reconcile else {
            return Ok(Self::default());
        };
        let compile = |gate: &Option<katalog::Gate>| gate.as_ref().map(|g| Gate::compile(g, functions)).transpose();
        Ok(Self {
            enqueue: compile(&pre.enqueue_gate)?,
            reconcile: compile(&pre.reconcile_gate)?,
            declared_sentinels: sentinel::mask(pre.sentinels.iter().map(String::as_str)),
            event_aware: pre.reconcile_gate.as_ref().is_some_and(|g| g.event_aware),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::template::SentinelBits;

    fn gates(text: &str) -> BoxGates {
        let node = crate::katalog::yaml::parse(text).unwrap();
        let (ob, problems) = crate::katalog::read::<OperatorBox>(&node, "").unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        BoxGates::compile(&ob, Functions::builtin()).unwrap()
    }

    #[test]
    fn the_sentinel_shorthand_passes_when_any_listed_sentinel_fired() {
        let g = gates(
            "preReconcile: {sentinels: [generationChanged, labelsChanged], enqueueGate: {sentinels: [generationChanged]}}",
        );
        let gate = g.enqueue.unwrap();
        let object = json!({"spec": {}});
        let generation = SentinelBits(1 << sentinel::index("generationChanged").unwrap());
        let labels = SentinelBits(1 << sentinel::index("labelsChanged").unwrap());
        assert!(gate.passes(&Resolver::new(&object, &[]).with_sentinels(generation)));
        assert!(!gate.passes(&Resolver::new(&object, &[]).with_sentinels(labels)));
        assert_eq!(g.declared_sentinels.count_ones(), 2);
    }

    #[test]
    fn shorthand_and_conditions_must_both_hold() {
        let g = gates(
            "preReconcile: {sentinels: [generationChanged], reconcileGate: {eventAware: true, sentinels: [generationChanged], when: [{field: spec.on, equals: 'true'}]}}",
        );
        assert!(g.event_aware);
        let gate = g.reconcile.unwrap();
        let fired = SentinelBits(1);
        let on = json!({"spec": {"on": true}});
        let off = json!({"spec": {"on": false}});
        assert!(gate.passes(&Resolver::new(&on, &[]).with_sentinels(fired)));
        assert!(!gate.passes(&Resolver::new(&off, &[]).with_sentinels(fired)));
        assert!(!gate.passes(&Resolver::new(&on, &[])));
    }

    #[test]
    fn a_closed_gate_with_external_calls_blocks_and_an_open_one_ignores_them() {
        let call = "external: [{name: flag, url: 'http://flags'}]";
        let closed = gates(&format!(
            "preReconcile: {{reconcileGate: {{{call}, failPolicy: closed}}}}"
        ));
        let open = gates(&format!(
            "preReconcile: {{reconcileGate: {{{call}, failPolicy: open}}}}"
        ));
        let object = json!({});
        assert!(!closed.reconcile.unwrap().passes(&Resolver::new(&object, &[])));
        assert!(open.reconcile.unwrap().passes(&Resolver::new(&object, &[])));
    }
}
