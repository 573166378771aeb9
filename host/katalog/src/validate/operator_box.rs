//! Checks of an operator box: sentinels, gates, watches, events, runtime, reconcile, its
//! template blocks and emit.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::check::{Checker, Scope, item, no_event};
use crate::kinds::kind_spec;
use crate::model::{Gate, HookTemplates, KeyFrom, OperatorBox};
use crate::yaml::{Node, Pos};
use orkestra_expr::resolver::CONTEXT_KEYS;
use orkestra_expr::sentinel;
use orkestra_expr::text::{closest, misspelt};

/// Metric names an autoscale condition may read.
const AUTOSCALE_METRICS: &[&str] = &[
    "workersBusyPercent",
    "workersIdlePercent",
    "queueDepth",
    "reconcileDurationP95Ms",
    "errorRatePercent",
];

/// Keys every resource template accepts.
const COMMON_RESOURCE_KEYS: &[&str] = &[
    "name",
    "namespace",
    "labels",
    "annotations",
    "reconcile",
    "when",
    "or",
    "forEach",
    "sleep",
    "forceConflict",
];

impl Checker<'_> {
    pub(super) fn operator_box(&mut self, ob: &OperatorBox, node: &Node, path: &str) {
        let declared: BTreeSet<String> = ob
            .pre_reconcile
            .as_ref()
            .map(|p| p.sentinels.iter().cloned().collect())
            .unwrap_or_default();
        // The stages that run on the CR's own events see its declared sentinels; the
        // others refuse them, saying why.
        for (key, child) in node.entries().unwrap_or_default() {
            let scope = match key.key_text().as_str() {
                "preReconcile" | "reconcile" | "emit" => Scope::Event(&declared),
                "observe" => Scope::NoEvent(no_event::OBSERVE),
                "runtime" => Scope::NoEvent(no_event::AUTOSCALE),
                _ => Scope::NoEvent(no_event::OTHER),
            };
            self.templates(child, &format!("{path}.{}", key.key_text()), scope);
        }
        if let Some(pre) = &ob.pre_reconcile {
            let pre_node = node.get("preReconcile").unwrap_or(node);
            let pre_path = format!("{path}.preReconcile");
            for (i, name) in pre.sentinels.iter().enumerate() {
                if sentinel::index(name).is_none() {
                    let best = closest(name, &sentinel::NAMES).unwrap_or_default();
                    let pos = item(pre_node.get("sentinels"), i).map_or(pre_node.pos, |n| n.pos);
                    self.error(
                        format!("{pre_path}.sentinels[{i}]"),
                        pos,
                        format!("unknown sentinel \"{name}\"; the closest is \"{best}\""),
                    );
                }
            }
            for (gate_name, gate) in [
                ("enqueueGate", &pre.enqueue_gate),
                ("reconcileGate", &pre.reconcile_gate),
            ] {
                let Some(gate) = gate else { continue };
                let gate_node = pre_node.get(gate_name).unwrap_or(pre_node);
                self.gate(gate, gate_node, &format!("{pre_path}.{gate_name}"), &declared);
            }
        }
        if let Some(observe) = &ob.observe {
            let observe_node = node.get("observe").unwrap_or(node);
            for (i, watch) in observe.watch.iter().enumerate() {
                let watch_node = item(observe_node.get("watch"), i).unwrap_or(observe_node);
                let watch_path = format!("{path}.observe.watch[{i}]");
                if let Some(key_from) = &watch.key_from {
                    self.key_from(key_from, &watch_path, watch_node);
                }
                if let Some(gate) = &watch.enqueue_gate {
                    self.gate(
                        gate,
                        watch_node.get("enqueueGate").unwrap_or(watch_node),
                        &format!("{watch_path}.enqueueGate"),
                        &declared,
                    );
                }
            }
            for (name, events) in &observe.events {
                let event_node = observe_node
                    .get("events")
                    .and_then(|e| e.get(name))
                    .unwrap_or(observe_node);
                let event_path = format!("{path}.observe.events.{name}");
                let matches_something = events.reason.is_some()
                    || events.action.is_some()
                    || events.type_.is_some()
                    || events.reporting_controller.is_some()
                    || events.reporting_instance.is_some()
                    || events.regarding.is_some()
                    || events.related.is_some()
                    || events.name.is_some()
                    || events.key_from.is_some();
                if !matches_something {
                    self.error(&event_path, event_node.pos, "an events entry needs at least one match or routing field (reason, type, regarding, keyFrom, ...)");
                }
                if let Some(key_from) = &events.key_from {
                    self.key_from(key_from, &event_path, event_node);
                }
                if let Some(gate) = &events.enqueue_gate {
                    self.gate(
                        gate,
                        event_node.get("enqueueGate").unwrap_or(event_node),
                        &format!("{event_path}.enqueueGate"),
                        &declared,
                    );
                }
            }
        }
        if let Some(runtime) = &ob.runtime {
            let runtime_node = node.get("runtime").unwrap_or(node);
            if !runtime.restricted_namespaces.is_empty() && !runtime.allowed_namespaces.is_empty() {
                self.error(
                    format!("{path}.runtime"),
                    runtime_node.pos,
                    "set restrictedNamespaces or allowedNamespaces, not both",
                );
            }
            if let Some(autoscale) = &runtime.autoscale {
                let auto_node = runtime_node.get("autoscale").unwrap_or(runtime_node);
                let auto_path = format!("{path}.runtime.autoscale");
                self.conditions(
                    &autoscale.conditions.when,
                    &autoscale.conditions.or,
                    &format!("{auto_path}.conditions"),
                    auto_node,
                );
                for condition in autoscale.conditions.when.iter().chain(&autoscale.conditions.or) {
                    if let Some(field) = &condition.field
                        && let Some(metric) = autoscale_metric(field)
                        && !AUTOSCALE_METRICS.contains(&metric)
                    {
                        let best = closest(metric, AUTOSCALE_METRICS).unwrap_or_default();
                        self.error(
                            format!("{auto_path}.conditions"),
                            auto_node.pos,
                            format!("unknown autoscale metric \"{metric}\"; the closest is \"{best}\""),
                        );
                    }
                }
                for (key, value) in [
                    ("interval", &autoscale.interval),
                    ("cooldown", &autoscale.cooldown),
                    ("do.resync", &autoscale.do_.resync),
                ] {
                    self.duration(value.as_deref(), &format!("{auto_path}.{key}"), auto_node);
                }
            }
        }
        if let Some(reconcile) = &ob.reconcile {
            let rec_node = node.get("reconcile").unwrap_or(node);
            let rec_path = format!("{path}.reconcile");
            if let Some(workers) = reconcile.workers
                && !(1..=50).contains(&workers)
            {
                let pos = rec_node.get("workers").map_or(rec_node.pos, |n| n.pos);
                self.error(
                    format!("{rec_path}.workers"),
                    pos,
                    format!("workers must be between 1 and 50, got {workers}"),
                );
            }
            self.duration(reconcile.resync.as_deref(), &format!("{rec_path}.resync"), rec_node);
            let queue_node = rec_node.get("queue").unwrap_or(rec_node);
            if let Some(behaviour) = &reconcile.queue.behaviour {
                if reconcile.queue.max_depth == 0 {
                    self.error(
                        format!("{rec_path}.queue.behaviour"),
                        queue_node.pos,
                        "behaviour needs maxDepth: with maxDepth 0 (unlimited) there is no limit to act on",
                    );
                }
                if let Some(limit) = &behaviour.on_limit {
                    self.conditions(
                        &limit.when,
                        &limit.or,
                        &format!("{rec_path}.queue.behaviour.onLimit"),
                        queue_node,
                    );
                }
                if let Some(threshold) = &behaviour.on_threshold {
                    if !(1..=100).contains(&threshold.value) {
                        self.error(
                            format!("{rec_path}.queue.behaviour.onThreshold.value"),
                            queue_node.pos,
                            format!("a percentage of maxDepth between 1 and 100, got {}", threshold.value),
                        );
                    }
                    self.conditions(
                        &threshold.when,
                        &threshold.or,
                        &format!("{rec_path}.queue.behaviour.onThreshold"),
                        queue_node,
                    );
                }
            }
            if let Some(requeue) = &reconcile.requeue {
                let node = rec_node.get("requeue").unwrap_or(rec_node);
                self.conditions(&requeue.when, &requeue.or, &format!("{rec_path}.requeue"), node);
                if let Err(error) = requeue.floor() {
                    let message = error.to_string();
                    let pos = node.get("minInterval").map_or(node.pos, |n| n.pos);
                    let message = message.split_once(": ").map_or(message.as_str(), |(_, m)| m);
                    self.error(format!("{rec_path}.requeue.minInterval"), pos, message);
                }
            }
            if reconcile.default == Some(false) && reconcile.constructor.is_none() && reconcile.remote.is_none() {
                self.error(
                    format!("{rec_path}.default"),
                    rec_node.pos,
                    "default: false needs a constructor (or a remote reconciler) to own reconcile",
                );
            }
            if let Err(error) = crate::component::declared_in(reconcile, std::path::Path::new(".")) {
                let message = error.to_string();
                // The message starts with `reconcile.`; the path already ends there.
                let field = message
                    .split(':')
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches("reconcile.");
                let node = field.split('.').try_fold(rec_node, |n, k| n.get(k)).unwrap_or(rec_node);
                let message = message.split_once(": ").map_or(message.as_str(), |(_, m)| m);
                self.error(format!("{rec_path}.{field}"), node.pos, message);
            }
            for (block, templates) in [
                ("onCreate", &reconcile.on_create),
                ("onReconcile", &reconcile.on_reconcile),
                ("onDelete", &reconcile.on_delete),
            ] {
                let Some(templates) = templates else { continue };
                let block_node = rec_node.get(block).unwrap_or(rec_node);
                self.hook_templates(templates, block_node, &format!("{rec_path}.{block}"));
            }
        }
        if let Some(emit) = &ob.emit {
            let emit_node = node.get("emit").unwrap_or(node);
            if let Some(status) = &emit.status {
                let status_node = emit_node.get("status").unwrap_or(emit_node);
                for (i, field) in status.fields.iter().enumerate() {
                    let field_node = item(status_node.get("fields"), i).unwrap_or(status_node);
                    self.conditions(
                        &field.when,
                        &field.or,
                        &format!("{path}.emit.status.fields[{i}]"),
                        field_node,
                    );
                }
            }
            for (name, event) in &emit.events {
                let event_node = emit_node.get("events").and_then(|e| e.get(name)).unwrap_or(emit_node);
                let event_path = format!("{path}.emit.events.{name}");
                self.conditions(&event.when, &event.or, &event_path, event_node);
                if let Some(kind) = &event.type_
                    && kind != "Normal"
                    && kind != "Warning"
                {
                    self.error(
                        format!("{event_path}.type"),
                        event_node.pos,
                        format!("an event type is Normal or Warning, got \"{kind}\""),
                    );
                }
                for on in &event.on {
                    if !["always", "success", "failure"].contains(&on.as_str()) {
                        self.error(
                            format!("{event_path}.on"),
                            event_node.pos,
                            format!("on is always, success or failure, got \"{on}\""),
                        );
                    }
                }
            }
        }
    }

    fn gate(&mut self, gate: &Gate, node: &Node, path: &str, declared: &BTreeSet<String>) {
        for (i, name) in gate.sentinels.iter().enumerate() {
            if !declared.contains(name) {
                let pos = item(node.get("sentinels"), i).map_or(node.pos, |n| n.pos);
                self.error(
                    format!("{path}.sentinels[{i}]"),
                    pos,
                    format!("sentinel \"{name}\" is used but not declared in preReconcile.sentinels"),
                );
            }
        }
        self.conditions(&gate.when, &gate.or, path, node);
        if !gate.external.is_empty() && gate.fail_policy.is_none() {
            self.warn(
                path,
                node.pos,
                "this gate makes external calls without an explicit failPolicy (open is assumed)",
            );
        }
    }

    fn key_from(&mut self, key_from: &KeyFrom, path: &str, node: &Node) {
        let pos = node.get("keyFrom").map_or(node.pos, |n| n.pos);
        if key_from.label.is_some() == key_from.name.is_some() {
            self.error(
                format!("{path}.keyFrom"),
                pos,
                "keyFrom needs exactly one of `label` and `name`",
            );
        }
        if key_from.namespace.is_some() && key_from.name.is_none() {
            self.error(
                format!("{path}.keyFrom.namespace"),
                pos,
                "keyFrom.namespace goes with keyFrom.name",
            );
        }
    }

    fn hook_templates(&mut self, templates: &HookTemplates, node: &Node, path: &str) {
        self.conditions(&templates.when, &templates.or, path, node);
        self.duration(templates.timeout.as_deref(), &format!("{path}.timeout"), node);
        for (i, group) in templates.groups.iter().enumerate() {
            let group_node = item(node.get("groups"), i).unwrap_or(node);
            self.hook_templates(group, group_node, &format!("{path}.groups[{i}]"));
        }
        for (key, entries) in templates.resources() {
            let Some(kind) = kind_spec(key) else { continue };
            for (i, entry) in entries.iter().enumerate() {
                let entry_node = item(node.get(key), i).unwrap_or(node);
                let entry_path = format!("{path}.{key}[{i}]");
                self.conditions(&entry.when, &entry.or, &entry_path, entry_node);
                for extra in entry.fields.keys() {
                    if !kind.accepts(extra) {
                        let keys = kind.keys();
                        let mut candidates: Vec<&str> = COMMON_RESOURCE_KEYS.to_vec();
                        candidates.extend(keys.iter().copied());
                        let message = match (extra.as_str(), misspelt(extra, &candidates)) {
                            ("anyOf", _) => {
                                "`anyOf` was renamed to `or` in v0.7.16; use `or` (`ork migrate` rewrites it)"
                                    .to_string()
                            }
                            (_, Some(best)) => {
                                format!("unknown field `{extra}` for {key}; the closest valid key is `{best}`")
                            }
                            (_, None) => format!(
                                "unknown field `{extra}` for {key}; its keys are {}",
                                candidates.join(", ")
                            ),
                        };
                        self.error(format!("{entry_path}.{extra}"), key_pos(entry_node, extra), message);
                    }
                }
                if let Some(targets) = entry.fields.get("toNamespaces") {
                    self.check_to_namespaces(targets, &format!("{entry_path}.toNamespaces"), entry_node);
                }
                // `as: item` names what `.item` is anyway: upstream's most common spelling.
                if let Some(for_each) = &entry.for_each
                    && let Some(alias) = for_each.as_.as_ref().filter(|a| *a != "item")
                    && (CONTEXT_KEYS.contains(&alias.as_str())
                        || ["spec", "status", "metadata", "kind", "apiVersion"].contains(&alias.as_str()))
                {
                    self.error(
                        format!("{entry_path}.forEach.as"),
                        entry_node.pos,
                        format!("\"{alias}\" is a reserved name in templates; choose another"),
                    );
                }
                if key == "custom" && (!entry.fields.contains_key("apiVersion") || !entry.fields.contains_key("kind")) {
                    self.error(
                        &entry_path,
                        entry_node.pos,
                        "a custom resource needs apiVersion and kind",
                    );
                }
                self.duration(entry.sleep.as_deref(), &format!("{entry_path}.sleep"), entry_node);
            }
        }
    }
}

impl Checker<'_> {
    /// `toNamespaces`: names or templates; one written out must be a namespace name (a
    /// rendered one is checked, and held to allowedNamespaces, when it renders).
    fn check_to_namespaces(&mut self, targets: &Value, path: &str, entry_node: &Node) {
        let pos = key_pos(entry_node, "toNamespaces");
        let items = match targets {
            Value::Array(items) => items.as_slice(),
            single => std::slice::from_ref(single),
        };
        for (i, target) in items.iter().enumerate() {
            match target.as_str() {
                Some(name) if name.contains("{{") || orkestra_expr::names::is_dns1123_label(name) => {}
                Some(name) => self.error(
                    format!("{path}[{i}]"),
                    pos,
                    format!("\"{name}\" is not a namespace name"),
                ),
                None => self.error(format!("{path}[{i}]"), pos, "must be a namespace name or a template"),
            }
        }
    }
}

/// The metric name in `metrics.X` or `cross.<as>.metrics.X`.
fn autoscale_metric(field: &str) -> Option<&str> {
    let field = field.trim_start_matches('.');
    if let Some(metric) = field.strip_prefix("metrics.") {
        return Some(metric);
    }
    let rest = field.strip_prefix("cross.")?;
    let (_, metric) = rest.split_once(".metrics.")?;
    Some(metric)
}

/// Where `key` is written in a map (the map itself when it is not there).
fn key_pos(map: &Node, key: &str) -> Pos {
    map.entries()
        .and_then(|e| e.iter().find(|(k, _)| k.key_text() == key))
        .map_or(map.pos, |(k, _)| k.pos)
}
