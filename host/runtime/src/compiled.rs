//! A CRD of the Katalog compiled for the runtime: templates parsed, conditions built,
//! defaults applied, one compiled box per effective operator box. Built once at start;
//! every stage reads it, none re-parses.
//!
//! Pure: no kube or wasmtime imports.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::gate::BoxGates;
use crate::health::DEFAULT_FAILURE_THRESHOLD;
use crate::observe::{CompiledEvents, CompiledWatch};
use orkestra_katalog::condition::{Conditions, ValueType};
use orkestra_katalog::effective_box::EffectiveBoxes;
use orkestra_katalog::template::{Functions, Template};
use orkestra_katalog::{DependencyCondition, Katalog, LoadedCrd, OperatorBox, RESOURCE_KINDS};

/// Concurrent reconciles per CRD when the Katalog does not say (controller-runtime's
/// default, and what upstream's generic reconciler falls back to).
pub const DEFAULT_WORKERS: usize = 1;
/// Full resync period when the Katalog does not say.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(30);

/// A compile failure; the Katalog was validated, so this names a defect precisely.
#[derive(Debug, thiserror::Error)]
#[error("CRD \"{crd}\": {message}")]
pub struct Error {
    pub crd: String,
    pub message: String,
}

/// The Katalog's notes, compiled once for every template of every CRD.
#[derive(Debug, Clone)]
pub struct Notes {
    pub functions: Functions,
    pub templates: Arc<Vec<Template>>,
}

impl Notes {
    pub fn compile(katalog: &Katalog) -> Result<Self, Error> {
        let functions = Functions::with_notes(katalog.notes.iter().map(|n| n.name.as_str()));
        let templates = katalog
            .notes
            .iter()
            .map(|n| {
                Template::compile(&n.expression, &functions).map_err(|e| Error {
                    crd: String::new(),
                    message: format!("note {}: {}", n.name, e.message),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            functions,
            templates: Arc::new(templates),
        })
    }
}

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
    fn compile(name: &str, spec: &orkestra_katalog::EmitEvent, functions: &Functions) -> Result<Self, String> {
        let at = |e: String| format!("emit.events.{name}.{e}");
        let warning = match spec.type_.as_deref() {
            None | Some("Normal") => false,
            Some("Warning") => true,
            Some(other) => return Err(at(format!("type: {other:?} is neither Normal nor Warning"))),
        };
        let on = spec
            .on
            .iter()
            .map(|on| match on.as_str() {
                "always" => Ok(EmitOn::Always),
                "success" => Ok(EmitOn::Success),
                "failure" => Ok(EmitOn::Failure),
                other => Err(at(format!("on: {other:?} is not always, success or failure"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            name: name.to_string(),
            warning,
            reason: Template::compile(&spec.reason, functions).map_err(|e| at(format!("reason: {}", e.message)))?,
            message: Template::compile(&spec.message, functions).map_err(|e| at(format!("message: {}", e.message)))?,
            on,
            conditions: Conditions::compile(&spec.when, &spec.or, functions)
                .map_err(|(path, e)| at(format!("{path}: {}", e.message)))?,
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
    pub on_create: Option<crate::render::Block>,
    /// Applied with drift correction every reconcile.
    pub on_reconcile: Option<crate::render::Block>,
    /// Run when the CR is being deleted: Jobs created and awaited, other entries deleted.
    pub on_delete: Option<crate::render::Block>,
    /// Server-side apply with force, unless a resource says otherwise (default true).
    pub force_conflict: bool,
    /// `emit.events`, in name order.
    pub events: Vec<EmitEvent>,
    /// `observe.cross`: reads of other CRDs' CRs, made before the templates.
    pub cross: Vec<crate::cross::CrossRead>,
    /// The Wasm component: hooks around the templates, or a constructor owning reconcile.
    pub component: Option<Arc<orkestra_katalog::component::Spec>>,
}

impl CompiledBox {
    fn compile(ob: &OperatorBox, functions: &Functions, base: &std::path::Path) -> Result<Self, String> {
        let runtime = ob.runtime.clone().unwrap_or_default();
        let requeue = match ob.reconcile.as_ref().and_then(|r| r.requeue.as_ref()) {
            Some(r) if r.after.as_deref().is_some_and(|a| !a.trim().is_empty()) => Some(Requeue {
                after: Template::compile(r.after.as_deref().unwrap_or_default(), functions).map_err(|e| e.message)?,
                conditions: Conditions::compile(&r.when, &r.or, functions)
                    .map_err(|(at, e)| format!("requeue.{at}: {}", e.message))?,
            }),
            _ => None,
        };
        let requeue_floor = match ob.reconcile.as_ref().and_then(|r| r.requeue.as_ref()) {
            Some(requeue) => requeue.floor()?,
            None => orkestra_katalog::DEFAULT_REQUEUE_FLOOR,
        };
        let status = ob.emit.as_ref().and_then(|e| e.status.clone()).unwrap_or_default();
        let status_fields = status
            .fields
            .iter()
            .map(|f| {
                Ok(StatusField {
                    path: f.path.split('.').map(String::from).collect(),
                    value: Template::compile(&f.value, functions)
                        .map_err(|e| format!("status {}: {}", f.path, e.message))?,
                    value_type: f.type_.unwrap_or_default(),
                    conditions: Conditions::compile(&f.when, &f.or, functions)
                        .map_err(|(at, e)| format!("status {}.{at}: {}", f.path, e.message))?,
                    clear_on_false: f.clear_on_false,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let reconcile = ob.reconcile.clone().unwrap_or_default();
        let block = |templates: &Option<orkestra_katalog::HookTemplates>, drift: bool, name: &str| {
            templates
                .as_ref()
                .map(|t| crate::render::Block::compile(t, drift, functions).map_err(|e| format!("{name}.{e}")))
                .transpose()
        };
        let component = orkestra_katalog::component::declared_in(&reconcile, base)?;
        if let Some(spec) = &component
            && let Some(args) = &spec.args
        {
            // Compiled again once per declaration at run time (args follow reloads); here a
            // Katalog whose args do not compile does not load.
            orkestra_katalog::tree::Tree::compile(args, functions)
                .map_err(|e| format!("reconcile.{}.args: {e}", spec.world.field()))?;
        }
        Ok(Self {
            component: component.map(Arc::new),
            on_create: block(&reconcile.on_create, false, "onCreate")?,
            on_reconcile: block(&reconcile.on_reconcile, true, "onReconcile")?,
            on_delete: block(&reconcile.on_delete, false, "onDelete")?,
            force_conflict: reconcile.force_conflict.unwrap_or(true),
            cross: ob
                .observe
                .iter()
                .flat_map(|o| &o.cross)
                .map(|c| crate::cross::CrossRead::compile(c, functions).map_err(|e| format!("observe.cross: {e}")))
                .collect::<Result<_, _>>()?,
            events: ob
                .emit
                .iter()
                .flat_map(|e| &e.events)
                .map(|(name, spec)| EmitEvent::compile(name, spec, functions))
                .collect::<Result<_, _>>()?,
            gates: BoxGates::compile(ob, functions)?,
            restricted_namespaces: runtime.restricted_namespaces,
            allowed_namespaces: runtime.allowed_namespaces,
            requeue,
            requeue_floor,
            status_conditions: status.conditions.unwrap_or(true),
            status_fields,
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

/// `queue.retryBackoff`: retries of a failed reconcile inside the worker, before the error
/// goes back to the queue's own backoff.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    pub initial: Duration,
    pub max: Duration,
    pub multiplier: f64,
    /// Retries after the first failure.
    pub attempts: u32,
}

impl RetryPolicy {
    /// Upstream's defaults: 500ms, doubling, at most 30s, 3 retries.
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        initial: Duration::from_millis(500),
        max: Duration::from_secs(30),
        multiplier: 2.0,
        attempts: 3,
    };

    fn from_spec(spec: &orkestra_katalog::RetryBackoff) -> Self {
        let parse = |text: &Option<String>, default| {
            text.as_deref()
                .and_then(|t| orkestra_katalog::duration::parse(t).ok())
                .unwrap_or(default)
        };
        Self {
            initial: parse(&spec.initial, Self::DEFAULT.initial),
            max: parse(&spec.max, Self::DEFAULT.max),
            multiplier: spec
                .multiplier
                .filter(|m| *m >= 1.0)
                .unwrap_or(Self::DEFAULT.multiplier),
            attempts: spec.max_attempts.unwrap_or(Self::DEFAULT.attempts),
        }
    }

    /// The wait before retry `n` (1-based).
    pub fn delay(&self, n: u32) -> Duration {
        let factor = self
            .multiplier
            .powi(i32::try_from(n.saturating_sub(1)).unwrap_or(i32::MAX));
        self.initial.mul_f64(factor.min(1e9)).min(self.max)
    }
}

/// Queue behaviour at capacity (always from the CRD-level box).
#[derive(Debug, Clone, Default)]
pub struct Behaviour {
    /// Reference depth; 0 means unlimited.
    pub max_depth: usize,
    /// At depth >= maxDepth: drop (tier 1 when `conditions` is empty; tier 2 otherwise).
    pub on_limit: Option<(bool, Conditions)>,
    /// At `percent`% of maxDepth: drop when the conditions (if any) pass.
    pub on_threshold: Option<(u32, Conditions)>,
}

/// One CRD, ready to run.
#[derive(Debug, Clone)]
pub struct CompiledCrd {
    pub name: Arc<str>,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    /// `group/version/Kind`.
    pub gvk: Arc<str>,
    pub namespaced: bool,
    /// Watch only this namespace.
    pub namespace: Option<String>,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub depends_on: Vec<(String, DependencyCondition)>,
    pub workers: usize,
    pub resync: Duration,
    pub failure_threshold: u32,
    pub retry: Option<RetryPolicy>,
    pub behaviour: Behaviour,
    pub watches: Vec<Arc<CompiledWatch>>,
    pub events: Arc<Vec<CompiledEvents>>,
    /// `(apiVersion, kind)` of every kind the templates manage: owned children re-enqueue
    /// their parent.
    pub owned_kinds: Vec<(String, String)>,
    pub notes: Arc<Vec<Template>>,
    /// The Katalog's name, written on each CR as `managed-by`.
    pub katalog: String,
    /// Finalizers this runtime puts on each CR (the cleanup finalizer first).
    pub finalizers: Vec<String>,
    /// `runtime.removeFinalizers`: strip them instead (testing).
    pub remove_finalizers: bool,
    /// CRD-level labels written onto each CR (values templated).
    pub labels: Vec<(String, Template)>,
    /// Stamp `.health` on each CR after reconcile: the Katalog reads it and
    /// `endpoints.health` is on (the default).
    pub stamp_health: bool,
    /// Stamp `.metrics` on each CR after reconcile: the Katalog reads it.
    pub stamp_metrics: bool,
    /// `crossAccess` (default on): other CRDs' cross reads may see this one's CRs.
    pub cross_access: bool,
    /// `admission` validation and mutation rules, run at every reconcile.
    pub rules: orkestra_katalog::rules::Rules,
    pub boxes: EffectiveBoxes,
    compiled: Arc<CompiledBox>,
    /// The compiled box of each serve target.
    pub targets: HashMap<String, Arc<CompiledBox>>,
}

fn selector(map: &std::collections::BTreeMap<String, String>) -> Option<String> {
    (!map.is_empty()).then(|| {
        map.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// The finalizer this runtime always adds.
pub const CLEANUP_FINALIZER: &str = "orkestra.orkspace.io/cleanup";

impl CompiledCrd {
    /// The CRD's name in the cluster, `plural.group`.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// Compiles a CRD of `katalog`.
    pub fn compile_in(katalog: &Katalog, crd: &LoadedCrd, notes: &Notes) -> Result<Self, Error> {
        let mut compiled = Self::compile(crd, notes)?;
        compiled.katalog = katalog.name.clone();
        for finalizer in &katalog.finalizers {
            if !compiled.finalizers.contains(finalizer) {
                compiled.finalizers.push(finalizer.clone());
            }
        }
        Ok(compiled)
    }

    pub fn compile(crd: &LoadedCrd, notes: &Notes) -> Result<Self, Error> {
        let fail = |message: String| Error {
            crd: crd.name.clone(),
            message,
        };
        let entry = &crd.entry;
        let types = &entry.api_types;
        let boxes = EffectiveBoxes::build(entry);
        // Component paths are relative to the Katalog file that declares the CRD.
        let base = crd.source.parent().unwrap_or(std::path::Path::new("."));
        let compiled = Arc::new(CompiledBox::compile(boxes.crd(), &notes.functions, base).map_err(fail)?);
        let mut targets = HashMap::new();
        for target in boxes.targets() {
            let effective = boxes.for_object(
                &serde_json::json!({"metadata": {"annotations": {orkestra_katalog::labels::SERVE_ALIAS: target}}}),
            );
            let compiled_target = CompiledBox::compile(effective.operator_box, &notes.functions, base).map_err(fail)?;
            targets.insert(target.to_string(), Arc::new(compiled_target));
        }
        let reconcile = entry.operator_box.reconcile.clone().unwrap_or_default();
        let queue = &reconcile.queue;
        let conditions = |when, or| {
            Conditions::compile(when, or, &notes.functions).map_err(|(at, e)| fail(format!("{at}: {}", e.message)))
        };
        let behaviour = Behaviour {
            max_depth: queue.max_depth as usize,
            on_limit: match queue.behaviour.as_ref().and_then(|b| b.on_limit.as_ref()) {
                Some(l) => Some((l.drop, conditions(&l.when, &l.or)?)),
                None => None,
            },
            on_threshold: match queue.behaviour.as_ref().and_then(|b| b.on_threshold.as_ref()) {
                Some(t) => Some((t.value, conditions(&t.when, &t.or)?)),
                None => None,
            },
        };
        let observe = entry.operator_box.observe.clone().unwrap_or_default();
        let mut owned_kinds: Vec<(String, String)> = Vec::new();
        for block in [&reconcile.on_create, &reconcile.on_reconcile].into_iter().flatten() {
            for (key, entries) in block.resources() {
                let Some(kind) = RESOURCE_KINDS.iter().find(|k| k.key == key) else {
                    continue;
                };
                for entry in entries {
                    let (api_version, kind_name) = if key == "custom" {
                        let text = |k: &str| {
                            entry
                                .fields
                                .get(k)
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_string()
                        };
                        (text("apiVersion"), text("kind"))
                    } else {
                        (kind.api_version.to_string(), kind.kind.to_string())
                    };
                    // Cluster-scoped children cannot carry an owner reference to a namespaced CR.
                    if kind.namespaced
                        && !api_version.is_empty()
                        && !owned_kinds.contains(&(api_version.clone(), kind_name.clone()))
                    {
                        owned_kinds.push((api_version, kind_name));
                    }
                }
            }
        }
        let watches = observe
            .watch
            .iter()
            .enumerate()
            .map(|(i, watch)| {
                CompiledWatch::compile(watch, &notes.functions)
                    .map(Arc::new)
                    .map_err(|e| fail(format!("observe.watch[{i}].{e}")))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let events = observe
            .events
            .iter()
            .map(|(name, entry)| {
                CompiledEvents::compile(name, entry, &notes.functions)
                    .map_err(|e| fail(format!("observe.events.{name}.{e}")))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let runtime = entry.operator_box.runtime.clone().unwrap_or_default();
        let mut finalizers = vec![CLEANUP_FINALIZER.to_string()];
        finalizers.extend(
            runtime
                .finalizers
                .iter()
                .filter(|f| f.as_str() != CLEANUP_FINALIZER)
                .cloned(),
        );
        let labels = entry
            .labels
            .iter()
            .map(|(k, v)| {
                Template::compile(v, &notes.functions)
                    .map(|t| (k.clone(), t))
                    .map_err(|e| fail(format!("labels.{k}: {}", e.message)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let group_prefix = if types.group.is_empty() {
            String::new()
        } else {
            format!("{}/", types.group)
        };
        Ok(Self {
            name: crd.name.as_str().into(),
            group: types.group.clone(),
            version: if types.version.is_empty() {
                "v1".into()
            } else {
                types.version.clone()
            },
            kind: types.kind.clone(),
            plural: crd.plural(),
            gvk: format!("{group_prefix}{}/{}", types.version, types.kind).into(),
            namespaced: entry.namespaced,
            namespace: (!entry.namespace.is_empty()).then(|| entry.namespace.clone()),
            label_selector: selector(&entry.label_selector),
            field_selector: selector(&entry.field_selector),
            depends_on: entry.depends_on.0.clone(),
            workers: reconcile.workers.map_or(DEFAULT_WORKERS, |w| w.clamp(1, 50) as usize),
            resync: reconcile
                .resync
                .as_deref()
                .and_then(|r| orkestra_katalog::duration::parse(r).ok())
                .unwrap_or(DEFAULT_RESYNC),
            failure_threshold: queue.failure_threshold.unwrap_or(DEFAULT_FAILURE_THRESHOLD),
            retry: queue.retry_backoff.as_ref().map(RetryPolicy::from_spec),
            behaviour,
            watches,
            events: Arc::new(events),
            owned_kinds,
            notes: notes.templates.clone(),
            katalog: String::new(),
            finalizers,
            remove_finalizers: runtime.remove_finalizers,
            labels,
            stamp_health: crd.reads.health
                && entry
                    .endpoints
                    .as_ref()
                    .and_then(|e| e["health"].as_bool())
                    .unwrap_or(true),
            stamp_metrics: crd.reads.metrics,
            cross_access: entry.cross_access,
            rules: orkestra_katalog::rules::Rules::compile(&entry.admission, &notes.functions).map_err(fail)?,
            boxes,
            compiled,
            targets,
        })
    }

    /// The compiled box for a CR and the target it came through.
    pub fn for_object<'a>(&'a self, object: &Value) -> (&'a Arc<CompiledBox>, Option<&'a str>) {
        let effective = self.boxes.for_object(object);
        match effective.target.and_then(|t| self.targets.get_key_value(t)) {
            Some((target, compiled)) => (compiled, Some(target.as_str())),
            None => (&self.compiled, None),
        }
    }

    /// The CRD-level compiled box.
    pub fn crd_box(&self) -> &Arc<CompiledBox> {
        &self.compiled
    }

    /// The union of the sentinels declared by any box (what the informer computes).
    pub fn declared_sentinels(&self) -> u16 {
        self.targets
            .values()
            .fold(self.compiled.gates.declared_sentinels, |m, b| {
                m | b.gates.declared_sentinels
            })
    }
}

/// Compiles a one-CRD Katalog (CRD `web`, kind `Web`) whose operatorBox is `operator_box`
/// (YAML indented by 8 spaces); for tests of the stages that read compiled CRDs.
#[cfg(test)]
pub(crate) fn compile_for_test(operator_box: &str) -> Arc<CompiledCrd> {
    let text = format!(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    web:\n      apiTypes: {{group: a.io, version: v1, kind: Web}}\n      operatorBox:\n{operator_box}"
    );
    let katalog = orkestra_katalog::load_sources(&[("k.yaml".into(), text)]).expect("a valid test Katalog");
    let notes = Notes::compile(&katalog).expect("notes");
    Arc::new(CompiledCrd::compile(&katalog.crds["web"], &notes).expect("compiles"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_grow_by_the_multiplier_up_to_the_max() {
        let policy = RetryPolicy::DEFAULT;
        let delays: Vec<Duration> = (1..=8).map(|n| policy.delay(n)).collect();
        assert_eq!(delays[..4], [500, 1000, 2000, 4000].map(Duration::from_millis));
        assert_eq!(delays[7], Duration::from_secs(30));
        let shorthand = RetryPolicy::from_spec(&orkestra_katalog::RetryBackoff {
            initial: Some("5s".into()),
            ..Default::default()
        });
        assert_eq!((shorthand.initial, shorthand.attempts), (Duration::from_secs(5), 3));
    }

    /// What loading and compiling say about `operator_box`: the first error, located.
    fn first_error(operator_box: &str) -> String {
        let text = format!(
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    web:\n      apiTypes: {{group: a.io, version: v1, kind: Web}}\n      operatorBox:\n{operator_box}"
        );
        let katalog = match orkestra_katalog::load_sources(&[("k.yaml".into(), text)]) {
            Ok(katalog) => katalog,
            Err(error) => return error.to_string(),
        };
        let notes = Notes::compile(&katalog).expect("notes");
        CompiledCrd::compile(&katalog.crds["web"], &notes).map_or_else(|e| e.to_string(), |_| "compiles".into())
    }

    #[test]
    fn watch_gates_and_keys_compile_with_the_katalog() {
        let watch = "        observe:\n          watch:\n            - apiVersion: v1\n              kind: ConfigMap\n";
        let bad_key = first_error(&format!(
            "{watch}              keyFrom: {{name: '{{{{ .metadata.name | nosuch }}}}'}}\n"
        ));
        assert!(
            bad_key.contains("keyFrom.name") && bad_key.contains("nosuch"),
            "{bad_key}"
        );
        let bad_gate = first_error(&format!(
            "{watch}              enqueueGate: {{when: [{{field: '{{{{ nosuch }}}}', equals: x}}]}}\n"
        ));
        assert!(
            bad_gate.contains("enqueueGate") && bad_gate.contains("nosuch"),
            "{bad_gate}"
        );
        let good = first_error(&format!(
            "{watch}              keyFrom: {{name: '{{{{ .metadata.name }}}}'}}\n"
        ));
        assert_eq!(good, "compiles");
    }
}
