//! Katalog checks beyond the shape: every template compiles (errors give the column inside
//! the template), every condition compiles, sentinels are declared before use and used only
//! in gates, dependsOn has no cycle, values are in range, resource templates use only their
//! kind's keys. All problems are collected.

use std::collections::{BTreeMap, BTreeSet};

use super::loaded::{Katalog, Parsed, crd_node};
use super::model::CrdEntry;
use super::yaml::{Node, NodeValue, Pos};
use crate::check::{Checker, Scope, box_nodes, item, no_event};
use crate::de::Problem;
pub use orkestra_expr::names::is_dns1123_label;
use orkestra_expr::template::Functions;

mod operator_box;
mod unhosted;

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
        checker.unhosted(node);
        checker.lifecycle(node);
        if let (Some(gateway), Some(gateway_node)) = (&file.gateway, node.get("gateway")) {
            checker.gateway(gateway, gateway_node);
        }
        if let (Some(security), Some(security_node)) = (&file.security, node.get("security")) {
            checker.security(security, security_node);
        }
        if let (Some(ha), Some(ha_node)) = (&file.spec.ha, node.get("spec").and_then(|s| s.get("ha"))) {
            checker.ha(ha, ha_node);
        }
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
    /// `setup`: a list of files, or `{apply: [files], wait: [objects]}`.
    fn setup(&mut self, setup: &Node, path: &str) {
        let files = match &setup.value {
            NodeValue::Seq(_) => setup,
            NodeValue::Map(entries) => {
                for (key, _) in entries {
                    match key.key_text().as_str() {
                        "apply" => {}
                        "wait" => {}
                        other => self.error(format!("{path}.{other}"), key.pos, "is not a setup key (apply, wait)"),
                    }
                }
                if let Some(wait) = setup.get("wait") {
                    self.setup_wait(wait, &format!("{path}.wait"));
                }
                match setup.get("apply") {
                    Some(apply) => apply,
                    None => return,
                }
            }
            _ => {
                self.error(path, setup.pos, "is a list of manifest files, or {apply: [files]}");
                return;
            }
        };
        match &files.value {
            NodeValue::Seq(items) if items.iter().all(|i| i.as_str().is_some()) => {}
            _ => self.error(
                path,
                files.pos,
                "lists manifest files (paths relative to the Katalog file)",
            ),
        }
    }

    /// `setup.wait`: objects named by kind (and apiVersion, unless the Katalog knows the
    /// kind), name, and optionally namespace, condition and timeout.
    fn setup_wait(&mut self, wait: &Node, path: &str) {
        let NodeValue::Seq(entries) = &wait.value else {
            self.error(
                path,
                wait.pos,
                "lists the objects to wait for: {kind, name, namespace, condition, timeout}",
            );
            return;
        };
        for (i, entry) in entries.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let NodeValue::Map(fields) = &entry.value else {
                self.error(
                    &at,
                    entry.pos,
                    "is an object to wait for: {kind, name, namespace, condition, timeout}",
                );
                continue;
            };
            for (key, value) in fields {
                let field = key.key_text();
                if !["apiVersion", "kind", "name", "namespace", "condition", "timeout"].contains(&field.as_str()) {
                    self.error(
                        format!("{at}.{field}"),
                        key.pos,
                        "is not a wait key (apiVersion, kind, name, namespace, condition, timeout)",
                    );
                } else if value.as_str().is_none_or(str::is_empty) {
                    self.error(format!("{at}.{field}"), value.pos, "is a non-empty string");
                }
            }
            for needed in ["kind", "name"] {
                if entry.get(needed).is_none() {
                    self.error(format!("{at}.{needed}"), entry.pos, "is required");
                }
            }
            if let Some(kind) = entry.get("kind").and_then(Node::as_str)
                && entry.get("apiVersion").is_none()
                && crate::model::known_api_version(kind).is_none()
            {
                self.error(
                    format!("{at}.apiVersion"),
                    entry.pos,
                    format!("is required: {kind} is not a kind the Katalog knows the apiVersion of"),
                );
            }
            self.duration(
                entry.get("timeout").and_then(Node::as_str),
                &format!("{at}.timeout"),
                entry,
            );
        }
    }

    /// A Katalog its author marks deprecated (`lifecycle`, or `metadata.deprecation`) says so at
    /// every load, with where to go.
    fn lifecycle(&mut self, root: &Node) {
        let (key, section, deprecation) = match (root.get("lifecycle"), root.get("metadata")) {
            (Some(lifecycle), _) => ("lifecycle", lifecycle, lifecycle.get("deprecation")),
            (None, Some(metadata)) if metadata.get("deprecation").is_some() => {
                ("metadata.deprecation", metadata, metadata.get("deprecation"))
            }
            _ => return,
        };
        let maturity = section.get("maturity").and_then(Node::as_str);
        if deprecation.is_none() && maturity != Some("deprecated") {
            return;
        }
        let text = |key: &str| deprecation.and_then(|d| d.get(key)).and_then(Node::as_str);
        let mut message = String::from("this Katalog is deprecated");
        if let Some(why) = text("message") {
            message.push_str(&format!(": {why}"));
        }
        if let Some(to) = text("migratedTo") {
            message.push_str(&format!("; it moved to {to}"));
        }
        self.warn(key, section.pos, message);
    }

    /// Lease timings that parse, and a renewal well inside the duration.
    fn ha(&mut self, ha: &crate::model::HaSpec, node: &Node) {
        let mut parsed = |key: &str, text: &Option<String>, default: f64| -> f64 {
            let Some(text) = text else { return default };
            let pos = node.get(key).map_or(node.pos, |n| n.pos);
            match orkestra_expr::duration::parse_seconds(text) {
                Ok(seconds) if seconds >= 1.0 => seconds,
                Ok(_) => {
                    self.error(format!("spec.ha.{key}"), pos, "must be at least 1s");
                    default
                }
                Err(why) => {
                    self.error(format!("spec.ha.{key}"), pos, why);
                    default
                }
            }
        };
        let duration = parsed("leaseDuration", &ha.lease_duration, 10.0);
        let renew = parsed("renewPeriod", &ha.renew_period, 2.0);
        if renew >= duration * 2.0 / 3.0 {
            let pos = node.get("renewPeriod").map_or(node.pos, |n| n.pos);
            self.error(
                "spec.ha.renewPeriod",
                pos,
                format!("must be shorter than two thirds of leaseDuration ({duration}s): a holder stops reconciling that long after its last renewal"),
            );
        }
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
                self.templates(
                    expression,
                    &format!("{path}.expression"),
                    Scope::NoEvent(no_event::NOTES),
                );
            }
        }
    }

    fn crd(&mut self, name: &str, entry: &CrdEntry, node: &Node, key_pos: Pos, katalog: &Katalog) {
        let base = format!("spec.crds.{name}");
        let at = |key: &str| node.get(key).map_or(node.pos, |n| n.pos);
        if let Some(setup) = node.get("setup") {
            self.setup(setup, &format!("{base}.setup"));
        }
        if !is_crd_key(name) {
            self.error(
                &base,
                key_pos,
                "a CRD name is letters, digits and '-' (camelCase allowed), starting and ending with a letter or digit, at most 63 characters",
            );
        }
        let types = &entry.api_types;
        let types_pos = node.get("apiTypes").map_or(node.pos, |n| n.pos);
        if node.get("apiTypes").is_none() {
            if entry.crd_file.is_none() {
                self.error(
                    format!("{base}.apiTypes"),
                    key_pos,
                    "is required (group, version, kind), unless crdFile names a CRD manifest to read them from",
                );
            }
        } else if types.kind.is_empty() {
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
        if builtin
            && node.get("apiTypes").is_some()
            && entry.crd_file.is_none()
            && entry.label_selector.is_empty()
            && entry.enabled
        {
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
            if let Some(unknown) = katalog.unknown_crd(dependency) {
                self.error(format!("{base}.dependsOn"), at("dependsOn"), unknown);
            }
        }
        for key in ["labels", "annotations"] {
            if let Some(map) = node.get(key) {
                self.templates(map, &format!("{base}.{key}"), Scope::NoEvent(no_event::LABELS));
            }
        }
        if let Some(admission) = node.get("admission") {
            self.templates(
                admission,
                &format!("{base}.admission"),
                Scope::NoEvent(no_event::ADMISSION),
            );
            self.admission_conditions(entry, &format!("{base}.admission"), admission);
        }
        // The CRD's box, then each serve target's own.
        for (operator_box, box_node, box_path) in box_nodes(entry, node, &base) {
            self.operator_box(operator_box, box_node, &box_path);
        }
        if let Some(serve) = &entry.serve {
            self.serve(name, entry, serve, node.get("serve"), &format!("{base}.serve"), katalog);
        }
        self.cross_reads(entry, node, &base, katalog);
    }

    fn admission_conditions(&mut self, entry: &CrdEntry, path: &str, node: &Node) {
        if let Some(validation) = &entry.admission.validation {
            for (i, rule) in validation.rules.iter().enumerate() {
                let rule_path = format!("{path}.validation.rules[{i}]");
                let rule_node = item(node.get("validation").and_then(|v| v.get("rules")), i).unwrap_or(node);
                self.condition(&rule.condition(), &rule_path, rule_node);
                self.conditions(&rule.when, &rule.or, &rule_path, rule_node);
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

/// True for a CRD key of the Katalog: a DNS-1123 label in which capitals are allowed too
/// (upstream's packs name CRDs `declarativeApp`). It never names a Kubernetes object.
fn is_crd_key(s: &str) -> bool {
    is_dns1123_label(&s.to_ascii_lowercase())
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
