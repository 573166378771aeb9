//! One effective operator box, compiled: its gates, namespaces, requeue, status fields,
//! template blocks, events, cross reads and component.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::block::Block;
use super::gate::BoxGates;
use super::{Error, Gather, conditions, template};
use crate::cross::CrossRead;
use crate::model::OperatorBox;
use orkestra_expr::condition::{Conditions, ValueType};
use orkestra_expr::template::{Functions, Template};

/// One status field, compiled.
#[derive(Debug, Clone)]
pub struct StatusField {
    /// `.status` path segments.
    pub path: Vec<String>,
    pub value: Template,
    pub value_type: ValueType,
    pub conditions: Conditions,
    pub clear_on_false: bool,
}

/// When an `emit.events` entry fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitOn {
    Always,
    Success,
    Failure,
}

/// One `emit.events` entry, compiled.
#[derive(Debug, Clone)]
pub struct EmitEvent {
    pub name: String,
    pub warning: bool,
    pub reason: Template,
    pub message: Template,
    pub on: Vec<EmitOn>,
    pub conditions: Conditions,
}

impl EmitEvent {
    fn compile(name: &str, spec: &crate::model::EmitEvent, functions: &Functions) -> Result<Self, Error> {
        let warning = match spec.type_.as_deref() {
            None | Some("Normal") => false,
            Some("Warning") => true,
            Some(other) => return Err(Error::at("type", format!("{other:?} is neither Normal nor Warning"))),
        };
        let on = spec
            .on
            .iter()
            .map(|on| match on.as_str() {
                "always" => Ok(EmitOn::Always),
                "success" => Ok(EmitOn::Success),
                "failure" => Ok(EmitOn::Failure),
                other => Err(Error::at("on", format!("{other:?} is not always, success or failure"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            name: name.to_string(),
            warning,
            reason: template(&spec.reason, functions).map_err(|e| e.within("reason"))?,
            message: template(&spec.message, functions).map_err(|e| e.within("message"))?,
            on,
            conditions: conditions(&spec.when, &spec.or, functions)?,
        })
    }

    /// Whether it fires after a reconcile that succeeded (or not).
    pub fn fires_on(&self, succeeded: bool) -> bool {
        self.on.is_empty()
            || self.on.iter().any(|on| match on {
                EmitOn::Always => true,
                EmitOn::Success => succeeded,
                EmitOn::Failure => !succeeded,
            })
    }
}

/// `reconcile.requeue`, compiled.
#[derive(Debug, Clone)]
pub struct Requeue {
    pub after: Template,
    pub conditions: Conditions,
}

/// What one effective box means for the runtime.
#[derive(Debug, Clone)]
pub struct CompiledBox {
    pub gates: BoxGates,
    pub restricted_namespaces: Vec<String>,
    pub allowed_namespaces: Vec<String>,
    pub requeue: Option<Requeue>,
    /// No requeue of this box comes sooner (`reconcile.requeue.minInterval`).
    pub requeue_floor: Duration,
    /// Write the Ready condition and observedGeneration.
    pub status_conditions: bool,
    pub status_fields: Vec<StatusField>,
    /// Created once, never updated (unless an entry says `reconcile: true`).
    pub on_create: Option<Block>,
    /// Applied with drift correction every reconcile.
    pub on_reconcile: Option<Block>,
    /// Run when the CR is being deleted: Jobs created and awaited, other entries deleted.
    pub on_delete: Option<Block>,
    /// Server-side apply with force, unless a resource says otherwise (default true).
    pub force_conflict: bool,
    /// `emit.events`, in name order.
    pub events: Vec<EmitEvent>,
    /// `observe.cross`: reads of other CRDs' CRs, made before the templates.
    pub cross: Vec<CrossRead>,
    /// The Wasm component: hooks around the templates, or a constructor owning reconcile.
    pub component: Option<Arc<crate::component::Spec>>,
    /// `reconcile.normalize`: spec values rewritten in memory first.
    pub normalize: crate::normalize::Normalizer,
}

impl CompiledBox {
    /// Whether deleting a CR of this box leaves work the garbage collector cannot do: an
    /// onDelete block, a component (its on-delete hook), or a child that may outlive its CR.
    pub fn cleans_up_on_deletion(&self) -> bool {
        self.on_delete.is_some()
            || self.component.is_some()
            || [&self.on_create, &self.on_reconcile]
                .into_iter()
                .flatten()
                .any(Block::may_outlive_its_owner)
    }

    /// Compiles `ob`, declared at `at` in its CRD's entry; component paths resolve against
    /// `base`. Error paths are relative to the box; every part's errors are reported.
    pub(super) fn compile(ob: &OperatorBox, functions: &Functions, base: &Path, at: &str) -> Result<Self, Vec<Error>> {
        let mut gather = Gather::default();
        let runtime = ob.runtime.clone().unwrap_or_default();
        let reconcile = ob.reconcile.clone().unwrap_or_default();
        let requeue = match &reconcile.requeue {
            Some(r) if r.after.as_deref().is_some_and(|a| !a.trim().is_empty()) => {
                let compiled = || {
                    Ok(Requeue {
                        after: template(r.after.as_deref().unwrap_or_default(), functions)
                            .map_err(|e| e.within("after"))?,
                        conditions: conditions(&r.when, &r.or, functions)?,
                    })
                };
                gather
                    .ok(compiled().map_err(|e: Error| e.within("reconcile.requeue")))
                    .map(Some)
            }
            _ => Some(None),
        };
        let requeue_floor = match &reconcile.requeue {
            Some(requeue) => gather.ok(requeue.floor().map_err(|e| {
                let e = e.to_string();
                let message = e.split_once(": ").map_or(e.as_str(), |(_, m)| m);
                Error::at("reconcile.requeue.minInterval", message)
            })),
            None => Some(crate::model::DEFAULT_REQUEUE_FLOOR),
        };
        let status = ob.emit.as_ref().and_then(|e| e.status.clone()).unwrap_or_default();
        let status_fields = gather.each(status.fields.iter().enumerate().map(|(i, f)| {
            let field = || {
                Ok(StatusField {
                    path: f.path.split('.').map(String::from).collect(),
                    value: template(&f.value, functions).map_err(|e| e.within("value"))?,
                    value_type: f.type_.unwrap_or_default(),
                    conditions: conditions(&f.when, &f.or, functions)?,
                    clear_on_false: f.clear_on_false,
                })
            };
            field().map_err(|e: Error| e.within(&format!("emit.status.fields[{i}]")))
        }));
        let mut block = |templates: &Option<crate::model::HookTemplates>, drift: bool, name: &str| match templates {
            Some(t) => gather
                .all(
                    &format!("reconcile.{name}"),
                    Block::compile(t, drift, functions, &format!("{at}.reconcile.{name}")),
                )
                .map(Some),
            None => Some(None),
        };
        let (on_create, on_reconcile, on_delete) = (
            block(&reconcile.on_create, false, "onCreate"),
            block(&reconcile.on_reconcile, true, "onReconcile"),
            block(&reconcile.on_delete, false, "onDelete"),
        );
        let component = crate::component::declared_in(&reconcile, base).map_err(|e| {
            // The message names its field first: `reconcile.constructor.limits: ...`.
            let e = e.to_string();
            match e.split_once(": ") {
                Some((field, message)) => Error::at(field, message),
                None => Error::at("reconcile", e),
            }
        });
        let component = gather.ok(component);
        if let Some(Some(spec)) = &component
            && let Some(args) = &spec.args
        {
            // Compiled again once per declaration at run time (args follow reloads); here a
            // Katalog whose args do not compile does not load.
            let args =
                super::tree(args, functions).map_err(|e| e.within(&format!("reconcile.{}.args", spec.world.field())));
            gather.ok(args);
        }
        let cross = gather.each(
            ob.observe
                .iter()
                .flat_map(|o| o.cross.iter().enumerate())
                .map(|(i, c)| CrossRead::compile(c, functions).map_err(|e| e.within(&format!("observe.cross[{i}]")))),
        );
        let events = gather.each(ob.emit.iter().flat_map(|e| &e.events).map(|(name, spec)| {
            EmitEvent::compile(name, spec, functions).map_err(|e| e.within(&format!("emit.events.{name}")))
        }));
        let gates = gather.ok(BoxGates::compile(ob, functions));
        let normalize = match &reconcile.normalize {
            Some(spec) => gather.ok(crate::normalize::Normalizer::compile(spec, functions).map_err(|e| {
                let e = e.to_string();
                match e.split_once(": ") {
                    Some((field, message)) => Error::at(format!("reconcile.normalize.{field}"), message),
                    None => Error::at("reconcile.normalize", e),
                }
            })),
            None => Some(Default::default()),
        };
        let parts = (
            requeue,
            requeue_floor,
            on_create,
            on_reconcile,
            on_delete,
            component,
            gates,
            normalize,
        );
        let (
            Some(requeue),
            Some(requeue_floor),
            Some(on_create),
            Some(on_reconcile),
            Some(on_delete),
            Some(component),
            Some(gates),
            Some(normalize),
        ) = parts
        else {
            return Err(gather.0);
        };
        gather.finish()?;
        Ok(Self {
            component: component.map(Arc::new),
            on_create,
            on_reconcile,
            on_delete,
            force_conflict: reconcile.force_conflict.unwrap_or(true),
            cross,
            events,
            gates,
            restricted_namespaces: runtime.restricted_namespaces,
            allowed_namespaces: runtime.allowed_namespaces,
            requeue,
            requeue_floor,
            status_conditions: status.conditions.unwrap_or(true),
            status_fields,
            normalize,
        })
    }

    /// The namespace guard: whether CRs in `namespace` may be processed.
    pub fn admits_namespace(&self, namespace: &str) -> bool {
        if !self.allowed_namespaces.is_empty() {
            return self.allowed_namespaces.iter().any(|n| n == namespace);
        }
        !self.restricted_namespaces.iter().any(|n| n == namespace)
    }
}
