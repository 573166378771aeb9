//! One CRD compiled: its watch, queue and workers, its boxes, rules, stamps and finalizers,
//! and what it was compiled from (so a reload can tell what changed).

mod settings;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{
    CLEANUP_FINALIZER, CompiledBox, CompiledEvents, CompiledWatch, DEFAULT_FAILURE_THRESHOLD, DEFAULT_RESYNC,
    DEFAULT_WORKERS, Error, Gather, Notes, conditions, template,
};
pub use settings::{AGING, Autoscale, Behaviour, Endpoints, FlowBy, FlowRules, RetryPolicy};

use crate::effective_box::EffectiveBoxes;
use crate::kinds::RESOURCE_KINDS;
use crate::loaded::{Katalog, LoadedCrd};
use crate::model::{DependencyCondition, NoteSpec, box_path};
use crate::serve::intent::Served;

use orkestra_expr::template::Template;

/// What a CRD is compiled from, less its component declarations. Compiling is
/// deterministic, so equal origins give equal compiled forms: that is how a reload tells a
/// component swap (applied live) from a change to the pipeline (which needs a restart).
#[derive(Debug, PartialEq)]
struct Origin {
    entry: crate::model::CrdEntry,
    notes: Vec<NoteSpec>,
    katalog: String,
    finalizers: Vec<String>,
}

impl Origin {
    fn of(katalog: &Katalog, crd: &LoadedCrd) -> Self {
        let mut entry = crd.entry.clone();
        for (_, ob) in entry.boxes_mut() {
            if let Some(reconcile) = &mut ob.reconcile {
                reconcile.hooks = None;
                reconcile.constructor = None;
            }
        }
        Self {
            entry,
            notes: katalog.notes.clone(),
            katalog: katalog.name.clone(),
            finalizers: katalog.finalizers.clone(),
        }
    }
}

/// How one of the runtime's stamps (`.health`, `.metrics`) is kept on the CRs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamping {
    Off,
    /// Shown, not read: brought up to date only when the runtime writes the CR anyway (its
    /// status, its bookkeeping), so a settled CR costs no write when the CRD's health moves.
    WithWrites,
    /// The Katalog reads it: brought up to date after every run, as the next gate sees it.
    EveryRun,
}

impl Stamping {
    fn of(read: bool, shown: bool) -> Self {
        match (read, shown) {
            (true, _) => Stamping::EveryRun,
            (false, true) => Stamping::WithWrites,
            (false, false) => Stamping::Off,
        }
    }

    pub fn is_read(self) -> bool {
        self == Stamping::EveryRun
    }
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
    /// Healthy only once every CR's children are ready (`healthyWhen: childrenReady`).
    pub health_waits_for_children: bool,
    pub workers: usize,
    pub resync: Duration,
    pub autoscale: Option<Autoscale>,
    pub failure_threshold: crate::model::FailureThreshold,
    pub retry: Option<RetryPolicy>,
    pub behaviour: Behaviour,
    /// How its queue groups CRs into flows and orders them.
    pub flows: FlowRules,
    pub watches: Vec<Arc<CompiledWatch>>,
    pub events: Arc<Vec<CompiledEvents>>,
    /// Serve targets that declare their own `observe` (see [`CompiledCrd::observes`]).
    pub observing_targets: std::collections::HashSet<String>,
    /// What is read about the children after they are applied (`enrich`).
    pub enrich: Arc<Vec<super::enrich::Enrichment>>,
    /// `(apiVersion, kind)` of every kind the templates manage: owned children re-enqueue
    /// their parent.
    pub owned_kinds: Vec<(String, String)>,
    /// The owned kinds whose `.children.<kind>` the Katalog reads: a run that applies none
    /// of one shows the CR's newest observed child of it instead (a Job made by an earlier
    /// step, whose status moves the state machine on).
    pub observed_children: Vec<(String, String)>,
    pub notes: Arc<Vec<Template>>,
    /// The Katalog's name, written on each CR as `managed-by`.
    pub katalog: String,
    /// Finalizers this runtime puts on a CR that needs them (the cleanup finalizer first;
    /// see [`CompiledCrd::holds_deletion`]).
    pub finalizers: Vec<String>,
    /// The Katalog names finalizers (the CRD's or its own, even the cleanup one): every CR
    /// gets [`CompiledCrd::finalizers`].
    pub finalizers_declared: bool,
    /// `runtime.removeFinalizers`: strip them instead (testing).
    pub remove_finalizers: bool,
    /// `runtime.ignoreStatusPatch`: the runtime writes no status on its CRs.
    pub ignore_status_patch: bool,
    /// CRD-level labels written onto each CR (values templated).
    pub labels: Vec<(String, Template)>,
    /// How `.health` is stamped on the CRs: after every run where the Katalog reads it,
    /// else with the runtime's own writes of a CR unless `runtime.stamps: false` or
    /// `endpoints.health: false` (as upstream, which stamps it only while that endpoint is on).
    pub stamp_health: Stamping,
    /// How `.metrics` is stamped: after every run where the Katalog reads it, else with the
    /// runtime's own writes unless `runtime.stamps: false` or `crossAccess: false` (as
    /// upstream, whose cross-metrics stamp is what other CRDs read).
    pub stamp_metrics: Stamping,
    /// The fields of the CR's own `.status` the Katalog reads: a reconcile whose status
    /// write changed one of them runs again (a state machine's next step), as its own
    /// write's echo no longer triggers one.
    pub own_status_reads: std::collections::BTreeSet<String>,
    /// `crossAccess` (default on): other CRDs' cross reads may see this one's CRs.
    pub cross_access: bool,
    /// Which parts of the Live API answer for this CRD.
    pub endpoints: Endpoints,
    /// `admission` validation and mutation rules, run at every reconcile.
    pub rules: crate::rules::Rules,
    /// The same with the admission-only ones, run by the gateway's webhooks.
    pub admission_rules: crate::rules::Rules,
    /// What the gateway's Serve API offers of this CRD (`serve.enabled`).
    pub serve: Option<Arc<super::CompiledServe>>,
    /// The CRD is served while the Katalog opens the Serve API: its CRs' `serve-intent`
    /// annotation is provenance the gateway's webhook guards, shown as `.request`.
    pub request_from_intent: bool,
    /// How the gateway's conversion webhook turns one version into another.
    pub conversion: Option<Arc<super::CompiledConversion>>,
    /// The rules' external calls (validation's, then mutation's), made before them.
    pub rule_calls: Vec<super::Call>,
    pub boxes: EffectiveBoxes,
    /// What it was compiled from, for [`CompiledCrd::runs_like`].
    origin: Arc<Origin>,
    compiled: Arc<CompiledBox>,
    /// The compiled box of each serve target.
    pub targets: HashMap<String, Arc<CompiledBox>>,
}

/// The kinds a box's `onCreate` and `onReconcile` apply: apiVersion, kind, and whether the
/// kind is namespaced (a `custom` entry is taken as namespaced), each once.
pub fn applied_kinds(operator_box: &crate::model::OperatorBox) -> Vec<(String, String, bool)> {
    let mut kinds: Vec<(String, String, bool)> = Vec::new();
    let reconcile = operator_box.reconcile.clone().unwrap_or_default();
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
                if !api_version.is_empty() && !kinds.iter().any(|(a, k, _)| *a == api_version && *k == kind_name) {
                    kinds.push((api_version, kind_name, kind.namespaced));
                }
            }
        }
    }
    kinds
}

fn selector(map: &BTreeMap<String, String>) -> Option<String> {
    (!map.is_empty()).then(|| {
        map.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

impl CompiledCrd {
    /// The most workers it may ever run: its own, or the autoscaler's when more.
    pub fn most_workers(&self) -> usize {
        self.autoscale
            .as_ref()
            .and_then(|a| a.workers)
            .map_or(self.workers, |w| w.max(self.workers))
    }

    /// `group/version` (or `version` for the core group), as a CR of this CRD writes it.
    pub fn api_version(&self) -> String {
        match self.group.is_empty() {
            true => self.version.clone(),
            false => format!("{}/{}", self.group, self.version),
        }
    }

    /// What the Serve API needs to make a CR of this CRD, if it is served.
    pub fn served(&self) -> Option<Served<'_>> {
        Some(Served {
            kind: &self.kind,
            api_version: self.api_version(),
            namespaced: self.namespaced,
            notes: &self.notes,
            serve: self.serve.as_deref()?,
        })
    }

    /// Whether a CR run by `compiled` carries [`CompiledCrd::finalizers`], so that its
    /// deletion waits for this runtime: the Katalog declares finalizers of its own, or the
    /// deletion has work owner references cannot do (the box cleans up, or the CR is
    /// cluster-scoped and no namespaced child can name it as its controller). Otherwise the
    /// garbage collector takes its children, and a CR without our finalizer costs no write
    /// to mark and none to release.
    pub fn holds_deletion(&self, compiled: &CompiledBox) -> bool {
        self.finalizers_declared || !self.namespaced || compiled.cleans_up_on_deletion()
    }

    /// The CRD's name in the cluster, `plural.group`.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// Compiles a CRD of `katalog`; error paths are relative to the CRD's entry.
    pub(super) fn compile(katalog: &Katalog, crd: &LoadedCrd, notes: &Notes) -> Result<Self, Vec<Error>> {
        let mut gather = Gather::default();
        let entry = &crd.entry;
        let types = &entry.api_types;
        let boxes = EffectiveBoxes::build(entry);
        // Component paths are relative to the Katalog file that declares the CRD.
        let base = crd.source.parent().unwrap_or(std::path::Path::new("."));
        let compiled = gather.all(
            "operatorBox",
            CompiledBox::compile(boxes.crd(), &notes.functions, base, "operatorBox"),
        );
        let mut targets = HashMap::new();
        for target in boxes.targets() {
            let effective = boxes.for_object(
                &serde_json::json!({"metadata": {"annotations": {orkestra_expr::labels::SERVE_ALIAS: target}}}),
            );
            let at = box_path(Some(target));
            let compiled_target = CompiledBox::compile(effective.operator_box, &notes.functions, base, &at);
            // The merged box: what the CRD-level part got wrong is reported above already.
            let own = compiled_target.map_err(|errors| {
                let known = |e: &Error| gather.0.iter().any(|k| k.path == format!("operatorBox.{}", e.path));
                errors.into_iter().filter(|e| !known(e)).collect::<Vec<_>>()
            });
            let own = own.map_err(|errors| errors.into_iter().map(|e| e.within("operatorBox")).collect());
            if let Some(compiled_target) = gather.all(&format!("serve.target.{target}"), own) {
                targets.insert(target.to_string(), Arc::new(compiled_target));
            }
        }
        let reconcile = entry.operator_box.reconcile.clone().unwrap_or_default();
        let queue = &reconcile.queue;
        let mut behaviour_conditions = |key: &str, when, or| {
            let compiled = conditions(when, or, &notes.functions);
            gather.ok(compiled.map_err(|e| e.within(&format!("operatorBox.reconcile.queue.behaviour.{key}"))))
        };
        let behaviour = Behaviour {
            max_depth: queue.max_depth as usize,
            on_limit: match queue.behaviour.as_ref().and_then(|b| b.on_limit.as_ref()) {
                Some(l) => behaviour_conditions("onLimit", &l.when, &l.or).map(|c| (l.drop, c)),
                None => None,
            },
            on_threshold: match queue.behaviour.as_ref().and_then(|b| b.on_threshold.as_ref()) {
                Some(t) => behaviour_conditions("onThreshold", &t.when, &t.or).map(|c| (t.value, c)),
                None => None,
            },
        };
        // The CRD's own observation, then each serve target's that declares its own (for the
        // CRs of that target, whose effective box has it instead of the CRD's).
        let scopes: Vec<_> = entry
            .boxes()
            .into_iter()
            .filter_map(|(target, ob)| match (target, &ob.observe) {
                (None, observe) => Some((None, observe.clone().unwrap_or_default())),
                (Some(_), observe) => Some((target, observe.clone()?)),
            })
            .collect();
        // The kinds every box applies, the CRD's own and each serve target's. Cluster-scoped
        // children cannot carry an owner reference to a namespaced CR.
        let mut owned_kinds: Vec<(String, String)> = Vec::new();
        for (_, ob) in entry.boxes() {
            for (api_version, kind, namespaced) in applied_kinds(ob) {
                if namespaced && !owned_kinds.iter().any(|(a, k)| *a == api_version && *k == kind) {
                    owned_kinds.push((api_version, kind));
                }
            }
        }
        let at = |target: Option<&str>| format!("{}.observe", box_path(target));
        let watches = gather.each(scopes.iter().flat_map(|(target, observe)| {
            observe.watch.iter().enumerate().map(move |(i, watch)| {
                CompiledWatch::compile(watch, *target, &notes.functions)
                    .map(Arc::new)
                    .map_err(|e| e.within(&format!("{}.watch[{i}]", at(*target))))
            })
        }));
        let events = gather.each(scopes.iter().flat_map(|(target, observe)| {
            observe.events.iter().map(move |(name, entry)| {
                CompiledEvents::compile(name, entry, *target, &notes.functions)
                    .map_err(|e| e.within(&format!("{}.events.{name}", at(*target))))
            })
        }));
        let observing_targets = scopes
            .iter()
            .filter_map(|(target, _)| target.map(str::to_string))
            .collect();
        let enrich = gather.ok(super::enrich::compile(
            entry.enrich.as_deref(),
            entry.enrich_all,
            &notes.functions,
        ));
        let runtime = entry.operator_box.runtime.clone().unwrap_or_default();
        // The cleanup finalizer first, then the CRD's own, then the Katalog-wide ones.
        let mut finalizers = vec![CLEANUP_FINALIZER.to_string()];
        for finalizer in runtime.finalizers.iter().chain(&katalog.finalizers) {
            if !finalizers.contains(finalizer) {
                finalizers.push(finalizer.clone());
            }
        }
        let labels = gather.each(entry.labels.iter().map(|(k, v)| {
            template(v, &notes.functions)
                .map(|t| (k.clone(), t))
                .map_err(|e| e.within(k).within("labels"))
        }));
        let resync = match reconcile.resync.as_deref() {
            Some(text) => gather
                .ok(orkestra_expr::duration::parse(text).map_err(|e| Error::at("operatorBox.reconcile.resync", e))),
            None => Some(DEFAULT_RESYNC),
        };
        let autoscale = runtime.autoscale.as_ref().map(|spec| {
            Autoscale::compile(spec, &notes.functions).map_err(|e| e.within("operatorBox.runtime.autoscale"))
        });
        let autoscale = autoscale.and_then(|compiled| gather.ok(compiled));
        let retry = queue.retry_backoff.as_ref().map(RetryPolicy::from_spec).transpose();
        let retry = gather.ok(retry.map_err(|e| e.within("operatorBox.reconcile.queue.retryBackoff")));
        let flows = FlowRules::compile(queue.fairness.as_ref(), queue.priority.as_ref());
        let flows = gather.ok(flows.map_err(|e| e.within("operatorBox.reconcile.queue")));
        // At admission the rules `serve` implies join them (kubectl writers meet what an
        // intent would).
        let with_serve = crate::serve::rules::with_serve_rules(&entry.admission, entry.serve.as_ref());
        let rules_at = |stage| {
            let admission = match stage {
                crate::rules::Stage::Admission => &with_serve,
                crate::rules::Stage::Reconcile => &entry.admission,
            };
            crate::rules::Rules::compile(admission, &notes.functions, stage).map_err(|error| {
                // The message names its rule first: `admission.validation.rules[0].message: ...`.
                let message = error.to_string();
                match message.split_once(": ") {
                    Some((path, message)) => Error::at(path, message),
                    None => Error::at("admission", message),
                }
            })
        };
        let rules = gather.ok(rules_at(crate::rules::Stage::Reconcile));
        // The same rules compile at admission or are reported above; no second report.
        let admission_rules = rules_at(crate::rules::Stage::Admission).unwrap_or_default();
        let serve = match entry.serve.as_ref().filter(|s| s.enabled) {
            Some(spec) => gather
                .ok(super::CompiledServe::compile(spec, &types.kind, &notes.functions).map_err(|e| e.within("serve")))
                .map(Arc::new),
            None => None,
        };
        let conversion = match &entry.admission.conversion {
            Some(spec) => gather
                .all(
                    "admission.conversion",
                    super::CompiledConversion::compile(spec, &types.version, &notes.functions),
                )
                .map(Arc::new),
            None => None,
        };
        // Calls made before the rules, whose results they read as `.external.<name>`.
        let admission = &entry.admission;
        let rule_calls = admission
            .validation
            .iter()
            .flat_map(|v| {
                v.external
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (format!("admission.validation.external[{i}]"), c))
            })
            .chain(admission.mutation.iter().flat_map(|m| {
                m.external
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (format!("admission.mutation.external[{i}]"), c))
            }));
        let rule_calls = gather
            .each(rule_calls.map(|(at, call)| super::Call::compile(call, &notes.functions).map_err(|e| e.within(&at))));
        let (Some(compiled), Some(resync), Some(retry), Some(rules), Some(enrich), Some(flows)) =
            (compiled, resync, retry, rules, enrich, flows)
        else {
            return Err(gather.0);
        };
        // A cluster-scoped CR has no namespace to find a bare ServiceAccount name in.
        let declared = std::iter::once(&compiled).chain(targets.values().map(|t| t.as_ref()));
        if !entry.namespaced
            && declared
                .filter_map(|b| b.component.as_ref())
                .any(|c| c.service_account.as_ref().is_some_and(|sa| sa.namespace.is_none()))
        {
            let world = match entry.operator_box.reconcile.as_ref().and_then(|r| r.default) {
                Some(false) => "constructor",
                _ => "hooks",
            };
            gather.0.push(Error::at(
                format!("operatorBox.reconcile.{world}.serviceAccount"),
                "the CRD is cluster-scoped, so its CRs have no namespace to find the account in: write NAMESPACE/NAME",
            ));
        }
        gather.finish()?;
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
            health_waits_for_children: entry.healthy_when == crate::model::HealthyWhen::ChildrenReady,
            workers: reconcile.workers.map_or(DEFAULT_WORKERS, |w| w.clamp(1, 50) as usize),
            resync,
            autoscale,
            failure_threshold: queue
                .failure_threshold
                .unwrap_or(crate::model::FailureThreshold::InARow(DEFAULT_FAILURE_THRESHOLD)),
            retry,
            behaviour,
            flows,
            watches,
            events: Arc::new(events),
            observing_targets,
            enrich: Arc::new(enrich),
            rule_calls,
            observed_children: owned_kinds
                .iter()
                .filter(|(_, kind)| {
                    let read = &crd.reads.children;
                    read.contains(crate::reads::WHOLE) || read.contains(&kind.to_lowercase())
                })
                .cloned()
                .collect(),
            owned_kinds,
            notes: notes.templates.clone(),
            katalog: katalog.name.clone(),
            finalizers_declared: !runtime.finalizers.is_empty() || !katalog.finalizers.is_empty(),
            finalizers,
            remove_finalizers: runtime.remove_finalizers,
            ignore_status_patch: runtime.ignore_status_patch,
            labels,
            stamp_health: {
                let endpoint = Endpoints::of(entry.endpoints.as_ref()).health;
                Stamping::of(crd.reads.health && endpoint, runtime.stamps != Some(false) && endpoint)
            },
            stamp_metrics: Stamping::of(crd.reads.metrics, runtime.stamps != Some(false) && entry.cross_access),
            own_status_reads: crd.reads.status.clone(),
            cross_access: entry.cross_access,
            endpoints: Endpoints::of(entry.endpoints.as_ref()),
            rules,
            admission_rules,
            request_from_intent: serve.is_some()
                && katalog
                    .gateway
                    .as_ref()
                    .is_some_and(crate::model::Gateway::serve_api_open),
            serve,
            conversion,
            boxes,
            origin: Arc::new(Origin::of(katalog, crd)),
            compiled: Arc::new(compiled),
            targets,
        })
    }

    /// Whether `other`, a later compile of this CRD, runs the same pipeline: everything but
    /// its components (which reload on their own) is as it was.
    pub fn runs_like(&self, other: &CompiledCrd) -> bool {
        self.origin == other.origin
    }

    /// The compiled box for a CR and the target it came through.
    pub fn for_object<'a>(&'a self, object: &Value) -> (&'a Arc<CompiledBox>, Option<&'a str>) {
        let effective = self.boxes.for_object(object);
        match effective.target.and_then(|t| self.targets.get_key_value(t)) {
            Some((target, compiled)) => (compiled, Some(target.as_str())),
            None => (&self.compiled, None),
        }
    }

    /// What every resolver of one run over `object` starts from: the stamps, parsed once
    /// and only when the Katalog reads them, and `.request` on a CR the gateway made.
    pub fn context_of(&self, object: &Value) -> serde_json::Map<String, Value> {
        let mut context = match self.stamp_health.is_read() || self.stamp_metrics.is_read() {
            true => orkestra_expr::resolver::stamps(object),
            false => serde_json::Map::new(),
        };
        if self.request_from_intent
            && let Some(text) = object["metadata"]["annotations"][orkestra_expr::labels::SERVE_INTENT].as_str()
            && let Ok(intent @ Value::Object(_)) = serde_json::from_str::<Value>(text)
        {
            context.insert("request".into(), intent);
        }
        context
    }

    /// Whether an observation declared by `target` (`None`: the CRD's own) triggers `cr`: a
    /// CR of a target with its own `observe` hears only that target's, the others only the
    /// CRD's.
    pub fn observes(&self, target: Option<&str>, cr: &Value) -> bool {
        let own = self
            .boxes
            .for_object(cr)
            .target
            .filter(|t| self.observing_targets.contains(*t));
        own == target
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

#[cfg(test)]
mod tests;
