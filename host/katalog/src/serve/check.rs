//! `serve` checks: the target map (one primary, DNS names unique across the Katalog), the
//! fields (one of `value`/`values`, distinct orders, typed labels), the namespace rule (a
//! namespaced CRD says where its CRs go, a cluster-scoped one says nothing), and that its
//! tokens are the gateway's.

use std::collections::BTreeMap;

use crate::check::{Checker, Scope};
use crate::loaded::Katalog;
use crate::model::{CrdEntry, FieldType, LOCAL_CLUSTER, Serve, ServeField, ServeTarget, TokenAccess, Verb};
use crate::yaml::Node;
use orkestra_expr::names::is_dns1123_label;
use orkestra_expr::text::closest;

/// A fieldSelector routes by at most this many fields.
const MAX_SELECTOR: usize = 3;

/// Every surface name of the Katalog's serve-enabled CRDs, with its CRD.
fn surfaces(katalog: &Katalog) -> Vec<(String, String)> {
    let mut names = Vec::new();
    for (crd, loaded) in &katalog.crds {
        let Some(serve) = loaded.entry.serve.as_ref().filter(|s| s.enabled) else {
            continue;
        };
        match &serve.target {
            None => names.push((loaded.entry.api_types.kind.to_lowercase(), crd.clone())),
            Some(ServeTarget::Single(name)) => names.push((name.clone(), crd.clone())),
            Some(ServeTarget::Entries(entries)) => names.extend(entries.keys().map(|n| (n.clone(), crd.clone()))),
        }
    }
    names
}

impl Checker<'_> {
    pub(crate) fn serve(
        &mut self,
        crd: &str,
        entry: &CrdEntry,
        serve: &Serve,
        node: Option<&Node>,
        path: &str,
        katalog: &Katalog,
    ) {
        let Some(node) = node else { return };
        self.templates(node, path, Scope::NoEvent(crate::check::no_event::SERVE));
        let at = |key: &str| node.get(key).map_or(node.pos, |n| n.pos);
        self.serve_fields(serve, node, path);
        if serve.enabled {
            let templated = serve.namespace.as_deref().is_some_and(|n| n.contains("{{"));
            let allowed = entry
                .operator_box
                .runtime
                .as_ref()
                .map_or(0, |r| r.allowed_namespaces.len());
            let pinned = !entry.namespace.is_empty() || allowed == 1;
            match (entry.namespaced, &serve.namespace) {
                (true, None) => self.error(
                    format!("{path}.namespace"),
                    node.pos,
                    "is required for a namespaced CRD: where a CR made through the gateway goes (a template over the intent, or a name)",
                ),
                (false, Some(_)) => self.error(
                    format!("{path}.namespace"),
                    at("namespace"),
                    "a cluster-scoped CRD's CRs have no namespace",
                ),
                (true, Some(_)) if templated && pinned => self.error(
                    format!("{path}.namespace"),
                    at("namespace"),
                    "the CRD watches one namespace only; a templated namespace could place CRs it never sees",
                ),
                _ => {}
            }
            let all = surfaces(katalog);
            let mine: Vec<&String> = all.iter().filter(|(_, c)| c == crd).map(|(n, _)| n).collect();
            for (name, other) in &all {
                if other != crd && mine.contains(&name) {
                    self.error(
                        format!("{path}.target"),
                        at("target"),
                        format!(
                            "target \"{name}\" is also a target of CRD \"{other}\"; targets are unique in the Katalog"
                        ),
                    );
                }
            }
        }
        let clusters = gateway_clusters(katalog);
        self.cluster_names(
            &serve.cluster,
            &serve.clusters,
            node,
            &format!("{path}.clusters"),
            &clusters,
        );
        let tokens = gateway_tokens(katalog);
        self.token_access(
            serve.tokens.as_ref(),
            node.get("tokens"),
            &format!("{path}.tokens"),
            &tokens,
        );
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
            let target_path = format!("{path}.target.{name}");
            if !is_dns1123_label(name) {
                self.error(&target_path, target_node.pos, "a target name must be a DNS-1123 label");
            }
            if target.field_selector.len() > MAX_SELECTOR {
                self.error(
                    format!("{target_path}.fieldSelector"),
                    target_node.pos,
                    format!("routes by at most {MAX_SELECTOR} fields"),
                );
            }
            self.token_access(
                target.tokens.as_ref(),
                target_node.get("tokens"),
                &format!("{target_path}.tokens"),
                &tokens,
            );
            self.cluster_names(
                &target.cluster,
                &target.clusters,
                target_node,
                &format!("{target_path}.clusters"),
                &clusters,
            );
        }
    }

    /// A cluster written as a name (not a template) is `local` or one of `gateway.clusters`.
    fn cluster_names(&mut self, one: &Option<String>, many: &[String], node: &Node, path: &str, known: &[String]) {
        for name in one.iter().chain(many).filter(|n| !n.contains("{{")) {
            if name != LOCAL_CLUSTER && !known.contains(name) {
                let pos = node
                    .get("clusters")
                    .or_else(|| node.get("cluster"))
                    .map_or(node.pos, |n| n.pos);
                let names: Vec<&str> = known.iter().map(String::as_str).collect();
                let hint = closest(name, &names)
                    .map(|c| format!(" (did you mean \"{c}\"?)"))
                    .unwrap_or_default();
                self.error(
                    path,
                    pos,
                    format!("cluster \"{name}\" is not in gateway.clusters (nor \"local\", the gateway's own){hint}"),
                );
            }
        }
    }

    fn serve_fields(&mut self, serve: &Serve, node: &Node, path: &str) {
        let mut orders: BTreeMap<i64, String> = BTreeMap::new();
        for (bucket, fields) in [
            ("fields", &serve.fields),
            ("labels", &serve.labels),
            ("annotations", &serve.annotations),
        ] {
            for (name, field) in fields {
                let field_path = format!("{path}.{bucket}.{name}");
                let pos = node.get(bucket).and_then(|f| f.get(name)).map_or(node.pos, |n| n.pos);
                if field.value.is_some() && !field.values.is_empty() {
                    self.error(
                        &field_path,
                        pos,
                        "set `value` (one transform) or `values` (a fan-out), not both",
                    );
                }
                if let Some(bad) = field.values.keys().find(|k| !k.starts_with("spec.")) {
                    self.error(
                        format!("{field_path}.values"),
                        pos,
                        format!("\"{bad}\" is not a spec path (write spec.<path>)"),
                    );
                }
                if field.order != 0
                    && let Some(first) = orders.insert(field.order, field_path.clone())
                {
                    self.error(
                        format!("{field_path}.order"),
                        pos,
                        format!("order {} is also {first}'s; orders say which failing field is reported first, so they differ", field.order),
                    );
                }
                if bucket != "fields" {
                    self.metadata_field(name, field, &field_path, pos);
                }
                if field.type_ == Some(FieldType::Enum) && field.enum_.is_empty() {
                    self.error(
                        format!("{field_path}.enum"),
                        pos,
                        "a `type: enum` field lists its values",
                    );
                }
            }
        }
    }

    fn metadata_field(&mut self, key: &str, field: &ServeField, path: &str, pos: crate::yaml::Pos) {
        if !orkestra_expr::names::is_label_key(key) {
            self.error(path, pos, format!("\"{key}\" is not a valid label or annotation key"));
        }
        if field.type_.is_none() {
            self.error(
                format!("{path}.type"),
                pos,
                "labels and annotations have no schema: give `type` (string, integer, number, boolean or enum)",
            );
        }
        if field.path.is_some() || !field.values.is_empty() {
            self.error(
                path,
                pos,
                "a label or annotation field is written under its own key: no `path` or `values`",
            );
        }
    }

    fn token_access(
        &mut self,
        list: Option<&BTreeMap<String, TokenAccess>>,
        node: Option<&Node>,
        path: &str,
        known: &Identities,
    ) {
        let (Some(list), Some(node)) = (list, node) else { return };
        for (token, access) in list {
            let pos = node.get(token).map_or(node.pos, |n| n.pos);
            if !known.names.is_empty() && !known.names.contains(token) && token != super::access::EVERY_TOKEN {
                let names: Vec<&str> = known.names.iter().map(String::as_str).collect();
                let hint = closest(token, &names)
                    .map(|c| format!(" (did you mean \"{c}\"?)"))
                    .unwrap_or_default();
                self.error(format!("{path}.{token}"), pos, format!("is not {}{hint}", known.what));
            }
            if let Some(bad) = access
                .permissions
                .schema
                .iter()
                .find(|v| !matches!(v, Verb::Get | Verb::List))
            {
                self.error(
                    format!("{path}.{token}.permissions.schema"),
                    pos,
                    format!(
                        "the schema endpoints take get and list only, not {}",
                        format!("{bad:?}").to_lowercase()
                    ),
                );
            }
        }
    }
}

/// What `serve.tokens` may name: the gateway's tokens and webhook entries, and the same in
/// words for a message.
struct Identities {
    names: Vec<String>,
    what: &'static str,
}

fn gateway_tokens(katalog: &Katalog) -> Identities {
    let tokens = katalog
        .gateway
        .iter()
        .flat_map(|g| g.tokens().iter().map(|t| t.name.clone()));
    let intake = katalog.gateway.as_ref().and_then(|g| g.intake());
    let webhooks = intake.into_iter().flat_map(|w| w.entries().map(|e| e.name.to_string()));
    Identities {
        names: tokens.chain(webhooks).collect(),
        what: match intake {
            Some(_) => "a token of gateway.api.auth.tokens or a webhook of gateway.webhooks",
            None => "a token of gateway.api.auth.tokens",
        },
    }
}

/// The names of `gateway.clusters`.
fn gateway_clusters(katalog: &Katalog) -> Vec<String> {
    katalog
        .gateway
        .as_ref()
        .map(|g| g.clusters.keys().cloned().collect())
        .unwrap_or_default()
}
