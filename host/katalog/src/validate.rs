//! Katalog checks beyond the shape: every template compiles (errors give the column inside
//! the template), every condition compiles, sentinels are declared before use and used only
//! in gates, dependsOn has no cycle, values are in range, resource templates use only their
//! kind's keys. All problems are collected.

use std::collections::{BTreeMap, BTreeSet};

use super::loaded::{Katalog, Parsed, crd_node};
use super::model::{CrdEntry, Gate, HookTemplates, KeyFrom, OperatorBox, ServeTarget, kind_spec};
use super::yaml::{Node, NodeValue, Pos};
use crate::condition::{Check, ConditionSpec};
use crate::de::Problem;
use crate::resolver::CONTEXT_KEYS;
use crate::sentinel;
use crate::template::{Func, Functions, Template};
use crate::text::closest;

/// Metric names an autoscale condition may read.
const AUTOSCALE_METRICS: &[&str] = &[
    "workersBusyPercent",
    "workersIdlePercent",
    "queueDepth",
    "reconcileDurationP95Ms",
    "errorRatePercent",
];

struct Checker<'a> {
    problems: &'a mut Vec<Problem>,
    warnings: &'a mut Vec<Problem>,
    functions: &'a Functions,
}

/// Runs every check over the parsed files. `functions` is the Katalog's table, the one the
/// compile pass then uses (a template is parsed once, here, with its position).
pub(super) fn check(
    parsed: &[Parsed],
    katalog: &Katalog,
    functions: &Functions,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) {
    let mut checker = Checker {
        problems,
        warnings,
        functions,
    };
    for Parsed { node, file } in parsed {
        checker.notes(node, katalog);
        for (name, entry) in &file.spec.crds {
            let Some(crd) = crd_node(node, name) else { continue };
            let key_pos = node
                .get("spec")
                .and_then(|s| s.get("crds"))
                .and_then(Node::entries)
                .and_then(|e| e.iter().find(|(k, _)| k.key_text() == *name))
                .map_or(crd.pos, |(k, _)| k.pos);
            checker.crd(name, entry, crd, key_pos, katalog);
        }
    }
    checker.dependency_cycles(katalog, parsed);
}

impl Checker<'_> {
    fn error(&mut self, path: impl Into<String>, pos: Pos, message: impl Into<String>) {
        self.problems.push(Problem {
            path: path.into(),
            pos,
            message: message.into(),
        });
    }

    fn warn(&mut self, path: impl Into<String>, pos: Pos, message: impl Into<String>) {
        self.warnings.push(Problem {
            path: path.into(),
            pos,
            message: message.into(),
        });
    }

    fn notes(&mut self, root: &Node, katalog: &Katalog) {
        let Some(notes) = root.get("notes") else { return };
        let list = notes.get("functions").unwrap_or(notes);
        let NodeValue::Seq(items) = &list.value else { return };
        let mut seen = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("notes[{i}]");
            let name = item.get("name").and_then(Node::as_str).unwrap_or_default();
            if !seen.insert(name.to_string()) || katalog.notes.iter().filter(|n| n.name == name).count() > 1 {
                self.error(
                    format!("{path}.name"),
                    item.pos,
                    format!("note \"{name}\" is defined more than once"),
                );
            }
            let shadow = item.get("shadow").is_some_and(|s| s.value == NodeValue::Bool(true));
            if Functions::is_builtin(name) && !shadow {
                self.warn(
                    format!("{path}.name"),
                    item.pos,
                    format!("note \"{name}\" replaces the built-in function of that name; set shadow: true if that is intended"),
                );
            }
            if let Some(expression) = item.get("expression") {
                self.templates(expression, &format!("{path}.expression"), Scope::Outside);
            }
        }
    }

    fn crd(&mut self, name: &str, entry: &CrdEntry, node: &Node, key_pos: Pos, katalog: &Katalog) {
        let base = format!("spec.crds.{name}");
        let at = |key: &str| node.get(key).map_or(node.pos, |n| n.pos);
        if !is_dns1123_label(name) {
            self.error(
                &base,
                key_pos,
                "a CRD name must be a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters",
            );
        }
        let types = &entry.api_types;
        let types_pos = node.get("apiTypes").map_or(node.pos, |n| n.pos);
        if types.kind.is_empty() {
            self.error(format!("{base}.apiTypes.kind"), types_pos, "is required");
        }
        let builtin = is_builtin_group(&types.group);
        if !builtin && types.version.is_empty() {
            self.error(
                format!("{base}.apiTypes.version"),
                types_pos,
                "is required for a custom resource",
            );
        }
        if builtin && entry.crd_file.is_none() && entry.label_selector.is_empty() && entry.enabled {
            self.error(
                format!("{base}.labelSelector"),
                types_pos,
                format!(
                    "a built-in kind ({}) can be a primary resource only with a labelSelector",
                    types.kind
                ),
            );
        }
        for (dependency, _) in &entry.depends_on.0 {
            if !katalog.crds.contains_key(dependency) {
                let names: Vec<&str> = katalog.crds.keys().map(String::as_str).collect();
                let hint = closest(dependency, &names)
                    .map(|c| format!(" (did you mean \"{c}\"?)"))
                    .unwrap_or_default();
                self.error(
                    format!("{base}.dependsOn"),
                    at("dependsOn"),
                    format!("unknown CRD \"{dependency}\"{hint}"),
                );
            }
        }
        for key in ["labels", "annotations"] {
            if let Some(map) = node.get(key) {
                self.templates(map, &format!("{base}.{key}"), Scope::Outside);
            }
        }
        if let Some(admission) = node.get("admission") {
            self.templates(admission, &format!("{base}.admission"), Scope::Outside);
            self.admission_conditions(entry, &format!("{base}.admission"), admission);
        }
        let box_path = format!("{base}.operatorBox");
        if let Some(box_node) = node.get("operatorBox") {
            self.operator_box(&entry.operator_box, box_node, &box_path);
        }
        if let Some(serve) = &entry.serve {
            self.serve(serve, node.get("serve"), &format!("{base}.serve"));
        }
    }

    fn admission_conditions(&mut self, entry: &CrdEntry, path: &str, node: &Node) {
        if let Some(validation) = &entry.admission.validation {
            for (i, rule) in validation.rules.iter().enumerate() {
                let rule_path = format!("{path}.validation.rules[{i}]");
                let rule_node = item(node.get("validation").and_then(|v| v.get("rules")), i).unwrap_or(node);
                self.condition(&rule.condition(), &rule_path, rule_node);
                self.conditions(&rule.when, &rule.or, &rule_path, rule_node);
                if rule.message.is_empty() {
                    self.error(
                        format!("{rule_path}.message"),
                        rule_node.pos,
                        "a validation rule needs a message",
                    );
                }
            }
        }
        if let Some(mutation) = &entry.admission.mutation {
            for (i, rule) in mutation.rules.iter().enumerate() {
                let rule_path = format!("{path}.mutation.rules[{i}]");
                let rule_node = item(node.get("mutation").and_then(|v| v.get("rules")), i).unwrap_or(node);
                self.conditions(&rule.when, &rule.or, &rule_path, rule_node);
                if rule.default.is_some() == rule.override_.is_some() {
                    self.error(
                        &rule_path,
                        rule_node.pos,
                        "a mutation rule sets exactly one of `default` and `override`",
                    );
                }
            }
        }
    }

    fn operator_box(&mut self, ob: &OperatorBox, node: &Node, path: &str) {
        // Every template outside preReconcile: sentinels are not available there.
        for (key, child) in node.entries().unwrap_or_default() {
            let scope = if key.key_text() == "preReconcile" {
                Scope::Gate
            } else {
                Scope::Outside
            };
            self.templates(child, &format!("{path}.{}", key.key_text()), scope);
        }
        let declared: BTreeSet<String> = ob
            .pre_reconcile
            .as_ref()
            .map(|p| p.sentinels.iter().cloned().collect())
            .unwrap_or_default();
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
                if let Err(message) = requeue.floor() {
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
            if let Err(message) = crate::component::declared_in(reconcile, std::path::Path::new(".")) {
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
        for list in ["when", "or"] {
            let Some(NodeValue::Seq(items)) = node.get(list).map(|n| &n.value) else {
                continue;
            };
            for (i, condition) in items.iter().enumerate() {
                self.sentinel_uses(condition, &format!("{path}.{list}[{i}]"), declared);
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

    /// Sentinel functions called in a gate's templates must be declared.
    fn sentinel_uses(&mut self, node: &Node, path: &str, declared: &BTreeSet<String>) {
        match &node.value {
            NodeValue::String(text) if text.contains("{{") => {
                let Ok(template) = Template::compile(text, self.functions) else {
                    return;
                };
                for (name, func) in template.functions_called() {
                    if matches!(func, Func::Sentinel(_)) && !declared.contains(&name) {
                        self.error(
                            path,
                            node.pos,
                            format!("sentinel \"{name}\" is used but not declared in preReconcile.sentinels"),
                        );
                    }
                }
            }
            NodeValue::Map(entries) => {
                for (key, value) in entries {
                    self.sentinel_uses(value, &format!("{path}.{}", key.key_text()), declared);
                }
            }
            _ => {}
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
                        let best = closest(extra, &candidates).unwrap_or_default();
                        let pos = entry_node
                            .entries()
                            .and_then(|e| e.iter().find(|(k, _)| k.key_text() == *extra))
                            .map_or(entry_node.pos, |(k, _)| k.pos);
                        self.error(
                            format!("{entry_path}.{extra}"),
                            pos,
                            format!("unknown field `{extra}` for {key}; the closest valid key is `{best}`"),
                        );
                    }
                }
                if let Some(for_each) = &entry.for_each
                    && let Some(alias) = &for_each.as_
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

    fn serve(&mut self, serve: &super::model::Serve, node: Option<&Node>, path: &str) {
        let Some(node) = node else { return };
        self.templates(node, path, Scope::Outside);
        for (name, field) in &serve.fields {
            if field.get("value").is_some() && field.get("values").is_some() {
                let pos = node.get("fields").and_then(|f| f.get(name)).map_or(node.pos, |n| n.pos);
                self.error(
                    format!("{path}.fields.{name}"),
                    pos,
                    "set `value` (one transform) or `values` (a fan-out), not both",
                );
            }
        }
        let Some(ServeTarget::Entries(targets)) = &serve.target else {
            return;
        };
        let primaries = targets.values().filter(|t| t.primary).count();
        if primaries != 1 {
            self.error(
                format!("{path}.target"),
                node.pos,
                format!("a target map needs exactly one `primary: true` entry, found {primaries}"),
            );
        }
        for (name, target) in targets {
            let target_node = node.get("target").and_then(|t| t.get(name)).unwrap_or(node);
            if !is_dns1123_label(name) {
                self.error(
                    format!("{path}.target.{name}"),
                    target_node.pos,
                    "a target name must be a DNS-1123 label",
                );
            }
            if let (Some(ob), Some(box_node)) = (&target.operator_box, target_node.get("operatorBox")) {
                self.operator_box(ob, box_node, &format!("{path}.target.{name}.operatorBox"));
            }
        }
    }

    /// Compiles every condition of both lists, reporting each one that fails.
    fn conditions(&mut self, when: &[ConditionSpec], or: &[ConditionSpec], path: &str, node: &Node) {
        for (list, specs) in [("when", when), ("or", or)] {
            for (i, spec) in specs.iter().enumerate() {
                let condition_node = item(node.get(list), i).unwrap_or(node);
                self.condition(spec, &format!("{path}.{list}[{i}]"), condition_node);
            }
        }
    }

    fn condition(&mut self, spec: &ConditionSpec, path: &str, node: &Node) {
        // Template syntax errors are reported by the template walk, with their column.
        if let Err(error) = Check::compile(spec, self.functions)
            && error.offset.is_none()
        {
            let pos = node.get(error.key).map_or(node.pos, |k| k.pos);
            self.error(format!("{path}.{}", error.key), pos, error.message);
        }
    }

    fn duration(&mut self, value: Option<&str>, path: &str, node: &Node) {
        let Some(text) = value else { return };
        if text.contains("{{") {
            return;
        }
        if let Err(message) = crate::duration::parse(text) {
            let key = path.rsplit('.').next().unwrap_or_default();
            let pos = node.get(key).map_or(node.pos, |n| n.pos);
            self.error(path, pos, message);
        }
    }

    /// Compiles every string holding `{{` under `node`; inside gates sentinel functions are
    /// allowed (declaration is checked per gate), elsewhere they are an error.
    fn templates(&mut self, node: &Node, path: &str, scope: Scope) {
        match &node.value {
            NodeValue::String(text) if text.contains("{{") => match Template::compile(text, self.functions) {
                Ok(template) => {
                    if scope == Scope::Outside {
                        for (name, func) in template.functions_called() {
                            if matches!(func, Func::Sentinel(_)) {
                                self.error(
                                    path,
                                    node.pos,
                                    format!("sentinel \"{name}\" is only available in preReconcile gates"),
                                );
                            }
                        }
                    }
                }
                Err(e) => {
                    let column = crate::template::column(text, e.offset);
                    self.error(
                        path,
                        node.pos,
                        format!(
                            "template syntax error at column {column} of the template: {}",
                            e.message
                        ),
                    );
                }
            },
            NodeValue::Map(entries) => {
                for (key, value) in entries {
                    self.templates(value, &format!("{path}.{}", key.key_text()), scope);
                }
            }
            NodeValue::Seq(items) => {
                for (i, value) in items.iter().enumerate() {
                    self.templates(value, &format!("{path}[{i}]"), scope);
                }
            }
            _ => {}
        }
    }

    fn dependency_cycles(&mut self, katalog: &Katalog, parsed: &[Parsed]) {
        let graph: BTreeMap<&str, Vec<&str>> = katalog
            .crds
            .iter()
            .map(|(name, crd)| {
                (
                    name.as_str(),
                    crd.entry.depends_on.0.iter().map(|(d, _)| d.as_str()).collect(),
                )
            })
            .collect();
        let mut reported = BTreeSet::new();
        for start in graph.keys() {
            if let Some(cycle) = find_cycle(&graph, start)
                && reported.insert(canonical(&cycle))
            {
                let pos = parsed
                    .iter()
                    .find_map(|p| crd_node(&p.node, start).and_then(|n| n.get("dependsOn")).map(|n| n.pos))
                    .unwrap_or_default();
                self.error(
                    format!("spec.crds.{start}.dependsOn"),
                    pos,
                    format!("dependency cycle detected: {}", cycle.join(" → ")),
                );
            }
        }
    }
}

/// True for a group served by Kubernetes itself (core, `apps`, `*.k8s.io`, ...): such kinds
/// have no CRD to install.
pub fn is_builtin_group(group: &str) -> bool {
    group.is_empty() || !group.contains('.') || group.ends_with(".k8s.io") || group == "k8s.io"
}

/// True for a DNS-1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn is_dns1123_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Inside preReconcile: sentinel functions allowed (when declared).
    Gate,
    Outside,
}

/// The `i`-th element of a list node.
fn item(list: Option<&Node>, i: usize) -> Option<&Node> {
    match &list?.value {
        NodeValue::Seq(items) => items.get(i),
        _ => None,
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

/// A cycle reachable from `start` that returns to `start`, as a path of names.
fn find_cycle<'a>(graph: &BTreeMap<&'a str, Vec<&'a str>>, start: &'a str) -> Option<Vec<String>> {
    fn visit<'a>(
        graph: &BTreeMap<&'a str, Vec<&'a str>>,
        start: &'a str,
        node: &'a str,
        path: &mut Vec<&'a str>,
    ) -> bool {
        for next in graph.get(node).map(Vec::as_slice).unwrap_or_default() {
            if *next == start {
                path.push(next);
                return true;
            }
            if path.contains(next) {
                continue;
            }
            path.push(next);
            if visit(graph, start, next, path) {
                return true;
            }
            path.pop();
        }
        false
    }
    let mut path = vec![start];
    visit(graph, start, start, &mut path).then(|| path.into_iter().map(String::from).collect())
}

/// The same cycle found from different starts reports once.
fn canonical(cycle: &[String]) -> Vec<String> {
    let mut members: Vec<String> = cycle[..cycle.len().saturating_sub(1)].to_vec();
    members.sort();
    members
}
