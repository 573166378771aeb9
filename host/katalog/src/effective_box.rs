//! The effective operator box: a CR's CRD box overlaid by the box of the serve target (or
//! alias) named in its annotations. Built once per CRD at load; every target-aware stage
//! (observe, gates, eventAware, the reconciler) resolves through [`EffectiveBoxes::for_object`].
//!
//! Overlay rules: `observe`, `preReconcile`, `emit` and `runtime` come from the target when
//! it declares them, else from the CRD; `reconcile` is merged field by field (hook and
//! constructor `args` key by key, target wins); workers, resync, queue and autoscale always
//! come from the CRD.
//!
//! Pure: no kube or wasmtime imports.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::model::{CrdEntry, OperatorBox, Reconcile};
use orkestra_expr::labels;

/// The CRD box and one merged box per target that declares its own.
#[derive(Debug, Clone)]
pub struct EffectiveBoxes {
    crd: Arc<OperatorBox>,
    targets: BTreeMap<String, Arc<OperatorBox>>,
}

/// The box a CR runs with and the target it came from (when that target has a box).
#[derive(Debug, Clone)]
pub struct Effective<'a> {
    pub operator_box: &'a Arc<OperatorBox>,
    pub target: Option<&'a str>,
}

impl EffectiveBoxes {
    /// Merges every target's box over the CRD's.
    pub fn build(entry: &CrdEntry) -> Self {
        let crd = Arc::new(entry.operator_box.clone());
        let mut targets = BTreeMap::new();
        for (target, target_box) in entry.boxes() {
            if let Some(name) = target {
                targets.insert(name.to_string(), Arc::new(overlay(&entry.operator_box, target_box)));
            }
        }
        Self { crd, targets }
    }

    /// The box for a CR (a Kubernetes object as JSON): its alias annotation first, then its
    /// target annotation, else the CRD's box.
    pub fn for_object(&self, object: &Value) -> Effective<'_> {
        let annotation = |key: &str| {
            object["metadata"]["annotations"][key]
                .as_str()
                .filter(|s| !s.is_empty())
        };
        for name in [annotation(labels::SERVE_ALIAS), annotation(labels::SERVE_TARGET)]
            .into_iter()
            .flatten()
        {
            if let Some((target, operator_box)) = self.targets.get_key_value(name) {
                return Effective {
                    operator_box,
                    target: Some(target),
                };
            }
        }
        Effective {
            operator_box: &self.crd,
            target: None,
        }
    }

    /// The CRD-level box.
    pub fn crd(&self) -> &Arc<OperatorBox> {
        &self.crd
    }

    /// Names of the targets that have their own box.
    pub fn targets(&self) -> impl Iterator<Item = &str> {
        self.targets.keys().map(String::as_str)
    }
}

/// The target box over the CRD box.
pub fn overlay(crd: &OperatorBox, target: &OperatorBox) -> OperatorBox {
    let mut runtime = target.runtime.clone().or_else(|| crd.runtime.clone());
    // Autoscaling tunes the CRD's worker pool: never per target.
    if let Some(runtime) = &mut runtime {
        runtime.autoscale = crd.runtime.as_ref().and_then(|r| r.autoscale.clone());
    }
    OperatorBox {
        observe: target.observe.clone().or_else(|| crd.observe.clone()),
        pre_reconcile: target.pre_reconcile.clone().or_else(|| crd.pre_reconcile.clone()),
        runtime,
        reconcile: match (&crd.reconcile, &target.reconcile) {
            (base, None) => base.clone(),
            (None, Some(t)) => Some(Reconcile {
                workers: None,
                resync: None,
                queue: Default::default(),
                ..t.clone()
            }),
            (Some(base), Some(t)) => Some(merge_reconcile(base, t)),
        },
        emit: target.emit.clone().or_else(|| crd.emit.clone()),
    }
}

/// Hooks and constructors merge alike: the target's declaration, with identity fields it
/// leaves out taken from the CRD's, and args merged key by key.
macro_rules! merge_code {
    ($base:expr, $target:expr) => {
        match ($base, $target) {
            (Some(b), Some(t)) => {
                let mut merged = t.clone();
                merged.location = t.location.clone().or_else(|| b.location.clone());
                merged.function = t.function.clone().or_else(|| b.function.clone());
                merged.alias = t.alias.clone().or_else(|| b.alias.clone());
                merged.version = t.version.clone().or_else(|| b.version.clone());
                if t.managed_resources.is_empty() {
                    merged.managed_resources = b.managed_resources.clone();
                }
                merged.args = merge_args(&b.args, &t.args);
                // A component comes whole (with its pin, limits, instances and grants): the target's own,
                // or the CRD's.
                if t.component.is_none() {
                    merged.component = b.component.clone();
                    merged.sha256 = b.sha256.clone();
                    merged.limits = b.limits.clone();
                    merged.instances = b.instances.clone();
                    merged.capabilities = b.capabilities.clone();
                }
                Some(merged)
            }
            (b, t) => t.clone().or_else(|| b.clone()),
        }
    };
}

fn merge_reconcile(base: &Reconcile, target: &Reconcile) -> Reconcile {
    let hooks = merge_code!(&base.hooks, &target.hooks);
    let constructor = merge_code!(&base.constructor, &target.constructor);
    Reconcile {
        default: target.default.or(base.default),
        hooks,
        constructor,
        remote: target.remote.clone().or_else(|| base.remote.clone()),
        profile: target.profile.clone().or_else(|| base.profile.clone()),
        // Worker pool and queue belong to the CRD.
        workers: base.workers,
        resync: base.resync.clone(),
        queue: base.queue.clone(),
        requeue: target.requeue.clone().or_else(|| base.requeue.clone()),
        normalize: target.normalize.clone().or_else(|| base.normalize.clone()),
        imports: if target.imports.is_empty() {
            base.imports.clone()
        } else {
            target.imports.clone()
        },
        force_conflict: target.force_conflict.or(base.force_conflict),
        providers: target.providers.clone().or_else(|| base.providers.clone()),
        on_create: target.on_create.clone().or_else(|| base.on_create.clone()),
        on_reconcile: target.on_reconcile.clone().or_else(|| base.on_reconcile.clone()),
        on_delete: target.on_delete.clone().or_else(|| base.on_delete.clone()),
    }
}

/// Args merged key by key, the target's winning.
fn merge_args(base: &Option<Value>, target: &Option<Value>) -> Option<Value> {
    match (base, target) {
        (Some(Value::Object(b)), Some(Value::Object(t))) => {
            let mut merged = b.clone();
            merged.extend(t.iter().map(|(k, v)| (k.clone(), v.clone())));
            Some(Value::Object(merged))
        }
        (b, t) => t.clone().or_else(|| b.clone()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(text: &str) -> CrdEntry {
        let node = crate::yaml::parse(text).unwrap();
        let (entry, problems) = crate::de::read::<CrdEntry>(&node, "").unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        entry
    }

    const CRD: &str = "
apiTypes: {group: demo.io, version: v1, kind: App}
operatorBox:
  preReconcile:
    reconcileGate:
      when: [{field: spec.enabled, equals: 'true'}]
  reconcile:
    workers: 4
    hooks:
      args: {region: eu, tier: basic}
    onReconcile:
      deployments: [{image: nginx}]
  emit:
    status:
      fields: [{path: phase, value: Ready}]
serve:
  target:
    app: {primary: true}
    app-v2:
      operatorBox:
        preReconcile:
          reconcileGate:
            when: [{field: spec.v2, equals: 'true'}]
        reconcile:
          workers: 40
          hooks:
            args: {tier: premium}
";

    fn annotated(target: &str, alias: &str) -> serde_json::Value {
        json!({"metadata": {"annotations": {labels::SERVE_TARGET: target, labels::SERVE_ALIAS: alias}}})
    }

    #[test]
    fn a_cr_without_target_gets_the_crd_box() {
        let boxes = EffectiveBoxes::build(&entry(CRD));
        let effective = boxes.for_object(&json!({"metadata": {}}));
        assert!(effective.target.is_none());
        assert!(Arc::ptr_eq(effective.operator_box, boxes.crd()));
        // A target without its own box also runs the CRD box.
        assert!(boxes.for_object(&annotated("app", "")).target.is_none());
    }

    #[test]
    fn a_target_box_overlays_the_crd_box() {
        let boxes = EffectiveBoxes::build(&entry(CRD));
        let effective = boxes.for_object(&annotated("app", "app-v2"));
        assert_eq!(effective.target, Some("app-v2"));
        let ob = effective.operator_box;
        let gate = ob.pre_reconcile.as_ref().unwrap().reconcile_gate.as_ref().unwrap();
        assert_eq!(
            gate.when[0].field.as_deref(),
            Some("spec.v2"),
            "the target's gate replaces the CRD's"
        );
        let reconcile = ob.reconcile.as_ref().unwrap();
        assert_eq!(reconcile.workers, Some(4), "workers always come from the CRD");
        assert_eq!(
            reconcile.hooks.as_ref().unwrap().args,
            Some(json!({"region": "eu", "tier": "premium"}))
        );
        assert_eq!(
            reconcile.on_reconcile.as_ref().unwrap().deployments.len(),
            1,
            "templates fall back to the CRD"
        );
        assert_eq!(
            ob.emit.as_ref().unwrap().status.as_ref().unwrap().fields[0].value,
            "Ready",
            "emit falls back"
        );
    }

    #[test]
    fn the_alias_annotation_wins_over_the_target_annotation() {
        let boxes = EffectiveBoxes::build(&entry(CRD));
        assert_eq!(boxes.for_object(&annotated("app-v2", "unknown")).target, Some("app-v2"));
        assert_eq!(boxes.targets().collect::<Vec<_>>(), ["app-v2"]);
    }
}
