//! Compiled admission gates: the enqueue gate (should this event become work?) and the
//! reconcile gate (should this work run now?), one pair per effective operator box.
//!
//! A gate passes when its `sentinels:` shorthand (any listed sentinel true; absent = no
//! constraint) and its `when`/`or` conditions both pass. A gate's external calls are made
//! before it is asked (the reconcile gate's by the Kordinator, the enqueue gate's by the
//! enqueue path, off the watch's task); a failing call lets `failPolicy` decide (open: pass,
//! closed: block). A watch entry's own enqueue gate sits on the watch path, where no call is
//! made: its calls count as failed.

use super::call::Call;
use super::{Error, conditions};
use crate::model::{ExternalCall, FailPolicy, OperatorBox};
use orkestra_expr::condition::Conditions;
use orkestra_expr::resolver::Resolver;
use orkestra_expr::sentinel;
use orkestra_expr::template::Functions;

/// One compiled gate.
#[derive(Debug, Clone)]
pub struct Gate {
    sentinels: u16,
    conditions: Conditions,
    /// External calls made before the conditions (reconcile gate: shared `preReconcile.external`
    /// first, then the gate's own); their results are at `.external.<name>`.
    pub external: Vec<Call>,
    /// `failPolicy` (default open): when a call fails, pass (open) or block (closed).
    pub fail_open: bool,
    /// Enqueue gates run on the watch path, where no call is made: a closed one with calls blocks.
    blocked_by_externals: bool,
}

impl Gate {
    /// The `enqueueGate` of a watch or events entry, if it has one: no external calls.
    pub fn compile_watch(spec: Option<&crate::model::Gate>, functions: &Functions) -> Result<Option<Self>, Error> {
        spec.map(|g| Self::compile(g, &[], false, functions))
            .transpose()
            .map_err(|e| e.within("enqueueGate"))
    }

    /// Compiles a gate of the Katalog. `shared` are `preReconcile.external`; `call` says
    /// whether this gate makes its calls (the box's gates) or cannot (a watch entry's).
    /// Errors in a shared call are the caller's to place (they start with `shared[i]`).
    pub fn compile(
        spec: &crate::model::Gate,
        shared: &[ExternalCall],
        call: bool,
        functions: &Functions,
    ) -> Result<Self, Error> {
        let conditions = conditions(&spec.when, &spec.or, functions)?;
        let fail_open = spec.fail_policy != Some(FailPolicy::Closed);
        let external = match call {
            true => {
                let shared = shared.iter().enumerate().map(|(i, c)| (format!("shared[{i}]"), c));
                let own = spec
                    .external
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (format!("external[{i}]"), c));
                shared
                    .chain(own)
                    .map(|(at, c)| Call::compile(c, functions).map_err(|e| e.within(&at)))
                    .collect::<Result<_, _>>()?
            }
            false => Vec::new(),
        };
        Ok(Self {
            sentinels: sentinel::mask(spec.sentinels.iter().map(String::as_str)),
            conditions,
            external,
            fail_open,
            blocked_by_externals: !call && !spec.external.is_empty() && !fail_open,
        })
    }

    /// Whether the gate lets this event or item through (its calls, if any, already made
    /// into `resolver`).
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
    /// Errors start with `preReconcile`.
    pub fn compile(operator_box: &OperatorBox, functions: &Functions) -> Result<Self, Error> {
        let Some(pre) = &operator_box.pre_reconcile else {
            return Ok(Self::default());
        };
        let compile = |gate: &Option<crate::model::Gate>, name: &str, call: bool| {
            let place = |e: Error| match e.path.strip_prefix("shared") {
                // A shared call sits beside the gates, as `preReconcile.external[i]`.
                Some(rest) => Error::at(format!("external{rest}"), e.message),
                None => e.within(name),
            };
            gate.as_ref()
                .map(|g| Gate::compile(g, &pre.external, call, functions).map_err(place))
                .transpose()
                .map_err(|e| e.within("preReconcile"))
        };
        Ok(Self {
            enqueue: compile(&pre.enqueue_gate, "enqueueGate", true)?,
            reconcile: compile(&pre.reconcile_gate, "reconcileGate", true)?,
            declared_sentinels: sentinel::mask(pre.sentinels.iter().map(String::as_str)),
            event_aware: pre.reconcile_gate.as_ref().is_some_and(|g| g.event_aware),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use orkestra_expr::sentinel::SentinelBits;

    fn gates(text: &str) -> BoxGates {
        let node = crate::yaml::parse(text).unwrap();
        let (ob, problems) = crate::de::read::<OperatorBox>(&node, "").unwrap();
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
    fn box_gates_carry_their_calls_shared_first_and_a_watch_gate_cannot_call() {
        let call = "external: [{name: flag, url: 'http://flags'}]";
        let closed = gates(&format!(
            "preReconcile: {{external: [{{name: shared, url: 'http://s'}}], enqueueGate: {{{call}, failPolicy: closed}}, reconcileGate: {{{call}, failPolicy: closed}}}}"
        ));
        let object = json!({});
        for gate in [closed.enqueue.unwrap(), closed.reconcile.unwrap()] {
            let names: Vec<&str> = gate.external.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(names, ["shared", "flag"], "shared calls first");
            assert!(!gate.fail_open);
            assert!(
                gate.passes(&Resolver::new(&object, &[])),
                "the calls are the caller's to make"
            );
        }
        let node = crate::yaml::parse(&format!("{{{call}, failPolicy: closed}}")).unwrap();
        let (spec, _) = crate::de::read::<crate::model::Gate>(&node, "").unwrap();
        let watch = Gate::compile_watch(Some(&spec), Functions::builtin()).unwrap().unwrap();
        assert!(watch.external.is_empty());
        assert!(
            !watch.passes(&Resolver::new(&object, &[])),
            "closed: a call it cannot make fails it"
        );
    }
}
