//! The RBAC a Katalog's runtime needs, and nothing more: for each CRD its CRs (and their
//! status and finalizers), the kinds it applies, the kinds it watches, the Events it writes
//! and reads, what `enrich` looks up, and what its components' grants allow. A rule holds in
//! the CRD's namespace when the Katalog confines the CRD to one, cluster-wide otherwise.
//!
//! Worked out from the Katalog alone (no cluster): a kind's resource name comes from the
//! Katalog's own CRDs, a table of built-in kinds, or the API server's own plural rule.

use std::collections::{BTreeMap, BTreeSet};

use crate::compile::enrich::Target;
use crate::compile::{Compiled, CompiledCrd, applied_kinds};
use crate::component::grants::Verb;

mod need;
pub use need::Need;

/// Where rules hold.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Cluster,
    Namespace(String),
}

/// One RBAC rule: verbs on resources of one API group (only the named objects, when
/// `resource_names` lists any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub api_group: String,
    pub resources: Vec<String>,
    pub verbs: Vec<&'static str>,
    pub resource_names: Vec<String>,
}

/// Verbs by scope, API group and resource; and verbs on named objects only.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Needs {
    any: BTreeMap<Scope, ByResource>,
    named: BTreeMap<Scope, ByName>,
}

/// Verbs by (API group, resource).
type ByResource = BTreeMap<(String, String), BTreeSet<&'static str>>;
/// Object names by (API group, resource, verb).
type ByName = BTreeMap<(String, String, &'static str), BTreeSet<String>>;

const READ: &[&str] = &["get", "list", "watch"];
/// Children are applied (server-side), adopted, pruned and watched.
const CHILD: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];

/// The group of an apiVersion (`v1` is the core group, "").
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// The API server's own guess of a resource from a kind (apimachinery's
/// `UnsafeGuessKindToResource`).
fn guess_plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('s') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

impl Needs {
    /// Everything the runtime of `compiled` does to the API server.
    pub fn of(compiled: &Compiled) -> Self {
        let mut needs = Needs::default();
        for crd in compiled.enabled() {
            needs.crd(compiled, crd);
        }
        needs
    }

    /// What one CRD's runtime does.
    pub fn of_crd(compiled: &Compiled, crd: &CompiledCrd) -> Self {
        let mut needs = Needs::default();
        needs.crd(compiled, crd);
        needs
    }

    /// Whether the runtime creates objects of `resource` (of `group`) anywhere.
    pub fn creates(&self, group: &str, resource: &str) -> bool {
        let key = (group.to_string(), resource.to_string());
        self.any
            .values()
            .any(|by| by.get(&key).is_some_and(|verbs| verbs.contains("create")))
    }

    /// Verbs on `resource` of `group` where `scope` says.
    pub fn add(&mut self, scope: Scope, group: &str, resource: &str, verbs: &[&'static str]) {
        self.any
            .entry(scope)
            .or_default()
            .entry((group.to_string(), resource.to_string()))
            .or_default()
            .extend(verbs.iter().copied());
    }

    fn crd(&mut self, compiled: &Compiled, crd: &CompiledCrd) {
        // Where the CRD's namespaced objects live.
        let home = match &crd.namespace {
            Some(ns) if crd.namespaced => Scope::Namespace(ns.clone()),
            _ => Scope::Cluster,
        };
        let within = |namespaced: bool| if namespaced { home.clone() } else { Scope::Cluster };
        let own = within(crd.namespaced);
        self.add(
            own.clone(),
            &crd.group,
            &crd.plural,
            &["get", "list", "watch", "update", "patch"],
        );
        self.add(
            own.clone(),
            &crd.group,
            &format!("{}/status", crd.plural),
            &["get", "update", "patch"],
        );
        // Owner references that block deletion need update on the owner's finalizers.
        self.add(own, &crd.group, &format!("{}/finalizers", crd.plural), &["update"]);
        let mut applied = applied_kinds(crd.boxes.crd());
        for target in crd.boxes.targets() {
            let object = serde_json::json!({"metadata": {"annotations": {orkestra_expr::labels::SERVE_ALIAS: target}}});
            applied.extend(applied_kinds(crd.boxes.for_object(&object).operator_box));
        }
        for (api_version, kind, namespaced) in applied {
            let (group, resource, _) = resource(compiled, &api_version, &kind);
            self.add(within(namespaced), &group, &resource, CHILD);
        }
        for watch in &crd.watches {
            let entry = &watch.entry;
            let (group, resource, namespaced) = resource(compiled, &entry.api_version, &entry.kind);
            let scope = match (&entry.namespace, namespaced) {
                (Some(ns), true) => Scope::Namespace(ns.clone()),
                (None, true) => home.clone(),
                (_, false) => Scope::Cluster,
            };
            self.add(scope, &group, &resource, READ);
        }
        // Events about the CRs are written (events.k8s.io) and read back for the Live API.
        self.add(home.clone(), "events.k8s.io", "events", &["create", "patch"]);
        self.add(home.clone(), "", "events", &["list", "watch"]);
        if !crd.events.is_empty() {
            self.add(home.clone(), "events.k8s.io", "events", &["list", "watch"]);
        }
        for enrichment in crd.enrich.iter() {
            for (group, resource, verbs, namespaced) in enrich_reads(enrichment.target) {
                self.add(within(*namespaced), group, resource, verbs);
            }
        }
        let boxes = std::iter::once(crd.crd_box()).chain(crd.targets.values());
        for component in boxes.filter_map(|b| b.component.as_ref()) {
            // Acting as its ServiceAccount: the host impersonates it, and nothing else. What
            // the component may do is that account's RBAC, never the host's.
            if let Some(account) = &component.service_account {
                let scope = match &account.namespace {
                    Some(ns) => Scope::Namespace(ns.clone()),
                    None => home.clone(),
                };
                self.add_named(scope, "", "serviceaccounts", "impersonate", &account.name);
                continue;
            }
            for grant in component.grants.each() {
                let (api_version, kinds, verbs, namespaces) =
                    (grant.api_version, grant.kinds, grant.verbs, grant.namespaces);
                let scopes: Vec<Scope> = match namespaces {
                    None => vec![Scope::Cluster],
                    Some((names, own_ns)) => names
                        .iter()
                        .map(|n| Scope::Namespace(n.clone()))
                        .chain(own_ns.then(|| home.clone()))
                        .collect(),
                };
                let resources: Vec<(String, String, bool)> = match (api_version, kinds) {
                    (Some(api_version), Some(kinds)) => {
                        kinds.iter().map(|k| resource(compiled, api_version, k)).collect()
                    }
                    (None, Some(kinds)) => kinds
                        .iter()
                        .map(|k| {
                            let (_, resource, namespaced) = resource(compiled, "", k);
                            ("*".to_string(), resource, namespaced)
                        })
                        .collect(),
                    (Some(api_version), None) => vec![(group_of(api_version).to_string(), "*".into(), true)],
                    (None, None) => vec![("*".into(), "*".into(), true)],
                };
                for verb in verbs {
                    let (rbac_verbs, status): (&[&'static str], bool) = match verb {
                        Verb::Get => (&["get"], false),
                        Verb::List => (&["list"], false),
                        // Server-side apply creates or patches.
                        Verb::Apply => (&["get", "create", "patch"], false),
                        Verb::Delete => (&["delete"], false),
                        Verb::PatchStatus => (&["patch"], true),
                    };
                    for (group, resource, namespaced) in &resources {
                        let resource = match status {
                            true => format!("{resource}/status"),
                            false => resource.clone(),
                        };
                        for scope in &scopes {
                            let scope = if *namespaced { scope.clone() } else { Scope::Cluster };
                            self.add(scope, group, &resource, rbac_verbs);
                        }
                    }
                }
            }
        }
    }

    /// `verb` on the object `name` of `resource` only.
    pub fn add_named(&mut self, scope: Scope, group: &str, resource: &str, verb: &'static str, name: &str) {
        self.named
            .entry(scope)
            .or_default()
            .entry((group.to_string(), resource.to_string(), verb))
            .or_default()
            .insert(name.to_string());
    }

    /// The `verbs` on `key` (group, resource) needed in `scope` that a cluster-wide need
    /// does not already cover: a cluster-wide grant holds in every namespace.
    fn beyond_cluster<'a>(
        &'a self,
        scope: &Scope,
        key: &(String, String),
        verbs: &'a BTreeSet<&'static str>,
    ) -> impl Iterator<Item = &'static str> + 'a {
        let covered = match scope {
            Scope::Cluster => None,
            Scope::Namespace(_) => self.any.get(&Scope::Cluster).and_then(|c| c.get(key)),
        };
        verbs
            .iter()
            .copied()
            .filter(move |v| !covered.is_some_and(|c| c.contains(v)))
    }

    /// The rules per scope, a rule per API group and set of verbs.
    pub fn rules(&self) -> BTreeMap<Scope, Vec<Rule>> {
        let mut out: BTreeMap<Scope, Vec<Rule>> = BTreeMap::new();
        for (scope, resources) in &self.any {
            let mut grouped: BTreeMap<(String, Vec<&'static str>), Vec<String>> = BTreeMap::new();
            for (key, verbs) in resources {
                let (group, resource) = key;
                let verbs: Vec<&'static str> = self.beyond_cluster(scope, key, verbs).collect();
                if !verbs.is_empty() {
                    grouped
                        .entry((group.clone(), verbs))
                        .or_default()
                        .push(resource.clone());
                }
            }
            let rules: Vec<Rule> = grouped
                .into_iter()
                .map(|((api_group, verbs), resources)| Rule {
                    api_group,
                    resources,
                    verbs,
                    resource_names: Vec::new(),
                })
                .collect();
            if !rules.is_empty() {
                out.insert(scope.clone(), rules);
            }
        }
        for (scope, named) in &self.named {
            for ((api_group, resource, verb), names) in named {
                out.entry(scope.clone()).or_default().push(Rule {
                    api_group: api_group.clone(),
                    resources: vec![resource.clone()],
                    verbs: vec![verb],
                    resource_names: names.iter().cloned().collect(),
                });
            }
        }
        out
    }
}

/// The group, resource and scope of `kind` (of `api_version`, or any group when empty).
fn resource(compiled: &Compiled, api_version: &str, kind: &str) -> (String, String, bool) {
    let group = group_of(api_version);
    if let Some(crd) = compiled
        .crds
        .values()
        .find(|c| c.kind == kind && (api_version.is_empty() || c.group == group))
    {
        return (crd.group.clone(), crd.plural.clone(), crd.namespaced);
    }
    if let Some((group, _, resource, namespaced)) = crate::kinds::built_in()
        .map(|(v, k, r, n)| (group_of(v), k, r, n))
        .find(|(g, k, _, _)| *k == kind && (api_version.is_empty() || *g == group))
    {
        return (group.to_string(), resource.to_string(), namespaced);
    }
    (group.to_string(), guess_plural(kind), true)
}

/// What an `enrich` target reads: group, resource, verbs, whether in the CR's namespace.
fn enrich_reads(target: Target) -> &'static [(&'static str, &'static str, &'static [&'static str], bool)] {
    match target {
        Target::Pods | Target::BackingPods => &[("", "pods", &["list"], true)],
        Target::Warnings => &[("", "events", &["list"], true)],
        Target::Owner => &[("apps", "deployments", &["get"], true)],
        Target::ReplicaSets => &[("apps", "replicasets", &["list"], true)],
        Target::Pvcs => &[("", "persistentvolumeclaims", &["get", "list"], true)],
        Target::BoundVolume => &[("", "persistentvolumes", &["get"], false)],
        Target::BoundClaim => &[("", "persistentvolumeclaims", &["get"], false)],
        Target::StorageClass => &[("storage.k8s.io", "storageclasses", &["get"], false)],
        Target::Endpoints => &[("discovery.k8s.io", "endpointslices", &["list"], true)],
        Target::Node => &[("", "nodes", &["get"], false)],
        Target::Hpa => &[],
        Target::CronJob => &[("batch", "jobs", &["list"], true)],
        Target::Ingress => &[("", "secrets", &["get"], true)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::RESOURCE_KINDS;

    #[test]
    fn each_need_is_listed_once_and_one_a_cluster_grant_covers_is_left_out() {
        let mut needs = Needs::default();
        let shop = Scope::Namespace("shop".into());
        needs.add(Scope::Cluster, "", "configmaps", &["get"]);
        needs.add(shop.clone(), "", "configmaps", &["get", "create"]);
        needs.add_named(shop.clone(), "coordination.k8s.io", "leases", "patch", "lease-a");
        let each: Vec<String> = needs.each().iter().map(ToString::to_string).collect();
        assert_eq!(
            each,
            [
                "get configmaps in every namespace",
                "create configmaps in namespace shop",
                "patch leases.coordination.k8s.io lease-a in namespace shop",
            ]
        );
        let named = needs.each().into_iter().find(|n| n.name.is_some()).unwrap();
        assert_eq!(
            named.rbac_line(),
            r#"Role in namespace shop: {apiGroups: ["coordination.k8s.io"], resources: [leases], verbs: [patch], resourceNames: ["lease-a"]}"#
        );
    }

    #[test]
    fn every_template_kind_is_granted_under_the_resource_the_api_server_serves() {
        let katalog = compiled("    site:\n      apiTypes: {group: demo.io, version: v1, kind: Site}\n");
        for row in RESOURCE_KINDS.iter().filter(|row| !row.resource.is_empty()) {
            assert_eq!(
                row.resource,
                guess_plural(row.kind),
                "{}: resource of {}",
                row.key,
                row.kind
            );
            let (group, resource, namespaced) = resource(&katalog, row.api_version, row.kind);
            assert_eq!(
                (group.as_str(), resource.as_str()),
                (group_of(row.api_version), row.resource)
            );
            assert_eq!(namespaced, row.namespaced, "{}: scope", row.key);
        }
    }

    fn compiled(crds: &str) -> Compiled {
        let text = format!(
            "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {{name: k}}\nspec:\n  crds:\n{crds}"
        );
        crate::load::load_sources(&[("katalog.yaml".into(), text)]).unwrap()
    }

    fn rule<'a>(rules: &'a [Rule], group: &str, resource: &str) -> Option<&'a Rule> {
        rules
            .iter()
            .find(|r| r.api_group == group && r.resources.iter().any(|x| x == resource))
    }

    #[test]
    fn a_confined_crd_needs_a_role_in_its_namespace_only() {
        let katalog = compiled(
            "    site:
      apiTypes: {group: demo.io, version: v1, kind: Site}
      namespace: shop
      operatorBox:
        reconcile:
          onReconcile:
            deployments: [{name: web, image: nginx}]
            configMaps: [{name: cfg, data: {a: b}}]
        observe:
          watch:
            - {apiVersion: v1, kind: Secret}
",
        );
        let rules = Needs::of(&katalog).rules();
        assert!(!rules.contains_key(&Scope::Cluster), "{rules:?}");
        let shop = &rules[&Scope::Namespace("shop".into())];
        assert_eq!(
            rule(shop, "demo.io", "sites").unwrap().verbs,
            ["get", "list", "patch", "update", "watch"]
        );
        assert_eq!(
            rule(shop, "demo.io", "sites/status").unwrap().verbs,
            ["get", "patch", "update"]
        );
        assert!(rule(shop, "apps", "deployments").unwrap().verbs.contains(&"delete"));
        assert!(rule(shop, "", "configmaps").is_some());
        assert_eq!(
            rule(shop, "", "secrets").unwrap().verbs,
            ["get", "list", "watch"],
            "watched, never written"
        );
        assert_eq!(
            rule(shop, "events.k8s.io", "events").unwrap().verbs,
            ["create", "patch"]
        );
        assert!(
            rule(shop, "rbac.authorization.k8s.io", "roles").is_none(),
            "nothing it does not use"
        );
    }

    #[test]
    fn an_unconfined_crd_and_cluster_scoped_children_need_cluster_rules() {
        let katalog = compiled(
            "    tenant:
      apiTypes: {group: demo.io, version: v1, kind: Tenant}
      namespaced: false
      operatorBox:
        reconcile:
          onReconcile:
            namespaces: [{name: '{{ .metadata.name }}'}]
",
        );
        let rules = Needs::of(&katalog).rules();
        assert_eq!(rules.keys().collect::<Vec<_>>(), [&Scope::Cluster]);
        let cluster = &rules[&Scope::Cluster];
        assert!(rule(cluster, "", "namespaces").is_some());
        assert!(rule(cluster, "demo.io", "tenants/finalizers").is_some());
    }

    const GRANTS: &str = "            capabilities:
              - {apiVersion: v1, kinds: [ConfigMap], verbs: [get, apply]}
              - {apiVersion: apps/v1, kinds: [Deployment], verbs: [list], namespaces: [ops]}
";

    fn hooked(service_account: &str) -> Compiled {
        compiled(&format!(
            "    site:
      apiTypes: {{group: demo.io, version: v1, kind: Site}}
      namespace: shop
      operatorBox:
        reconcile:
          hooks:
            component: hook.wasm
{service_account}{GRANTS}"
        ))
    }

    #[test]
    fn a_components_grants_become_the_hosts_rules() {
        let rules = Needs::of(&hooked("")).rules();
        let shop = &rules[&Scope::Namespace("shop".into())];
        assert_eq!(rule(shop, "", "configmaps").unwrap().verbs, ["create", "get", "patch"]);
        let ops = &rules[&Scope::Namespace("ops".into())];
        assert_eq!(rule(ops, "apps", "deployments").unwrap().verbs, ["list"]);
    }

    #[test]
    fn a_component_acting_as_its_service_account_gives_the_host_only_impersonation() {
        let rules = Needs::of(&hooked("            serviceAccount: runner\n")).rules();
        let shop = &rules[&Scope::Namespace("shop".into())];
        let impersonate = rule(shop, "", "serviceaccounts").unwrap();
        assert_eq!(
            (impersonate.verbs.clone(), impersonate.resource_names.clone()),
            (vec!["impersonate"], vec!["runner".to_string()])
        );
        assert!(
            rule(shop, "", "configmaps").is_none(),
            "its grants are the account's RBAC"
        );
        assert!(!rules.contains_key(&Scope::Namespace("ops".into())));
    }

    #[test]
    fn plurals_follow_the_api_server() {
        assert_eq!(guess_plural("Policy"), "policies");
        assert_eq!(guess_plural("Gateway"), "gateways");
        assert_eq!(guess_plural("Ingress"), "ingresses");
        assert_eq!(guess_plural("Widget"), "widgets");
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("v1"), "");
    }
}
