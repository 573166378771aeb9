//! Resource templates in, Kubernetes objects out: each template entry is compiled once (every
//! string holding `{{` becomes a template) and rendered per CR into the object of its kind,
//! with the kind's default name and the CR's namespace (the applier marks it as the CR's).

mod kinds;
mod tls;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use orkestra_katalog::condition::Conditions;
use orkestra_katalog::resolver::Resolver;
use orkestra_katalog::template::{Functions, Template};
use orkestra_katalog::tree::Tree;
use orkestra_katalog::{HookTemplates, KindSpec, ResourceEntry, kind_spec};

/// One resource template, compiled.
#[derive(Debug, Clone)]
pub struct Entry {
    pub kind: &'static KindSpec,
    pub name: Option<Template>,
    pub namespace: Option<Template>,
    pub labels: Vec<(String, Template)>,
    pub annotations: Vec<(String, Template)>,
    pub fields: BTreeMap<String, Tree>,
    pub conditions: Conditions,
    /// `(list path, as)`.
    pub for_each: Option<(String, Option<String>)>,
    /// Drift-correct every reconcile (onReconcile, or onCreate with `reconcile: true`).
    pub reconcile: bool,
    pub force: Option<bool>,
    /// Motif inputs, visible as `.inputs`.
    pub inputs: Option<Value>,
    /// When an existing object is deleted and created anew instead of patched.
    pub replace: Replace,
    /// A Secret's `once`: created if absent, never overwritten.
    pub once: bool,
}

/// When an existing child is replaced rather than patched or left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Replace {
    #[default]
    Never,
    /// On drift (Pods: most of a Pod's spec cannot change in place).
    OnDrift,
    /// Once it is older than this (a `once` Secret with `rotateAfter`), by its generated-at
    /// annotation.
    After(std::time::Duration),
}

/// How an entry's existing object is replaced. `rotateAfter` only means something on a `once`
/// Secret (anything else is already rewritten on every drift).
fn replace(kind: &KindSpec, entry: &ResourceEntry) -> Result<Replace, String> {
    if kind.key == "pods" {
        return Ok(Replace::OnDrift);
    }
    match entry.fields.get("rotateAfter") {
        Some(Value::String(text)) if kind.key == "secrets" => {
            if entry.fields.get("once") != Some(&Value::Bool(true)) && !entry.fields.contains_key("tls") {
                return Err("rotateAfter needs once: true (or tls)".into());
            }
            Ok(Replace::After(
                orkestra_katalog::duration::parse(text).map_err(|e| format!("rotateAfter: {e}"))?,
            ))
        }
        Some(other) if kind.key == "secrets" => Err(format!("rotateAfter: {other} is not a duration")),
        _ => Ok(Replace::Never),
    }
}

/// Annotation on a `once` Secret: when it was generated, RFC 3339.
pub const GENERATED_AT: &str = "orkestra.orkspace.io/generated-at";

/// A block (`onCreate`, `onReconcile`, `onDelete`), compiled.
#[derive(Debug, Clone, Default)]
pub struct Block {
    pub conditions: Conditions,
    pub entries: Vec<Entry>,
    /// onDelete `ordered: true`: groups deleted one after the other, each gone before the next.
    pub groups: Vec<Block>,
    /// One deadline for the whole ordered sequence, from the CR's deletionTimestamp.
    pub timeout: std::time::Duration,
    /// HTTP calls made before the entries (results in `.external.<name>`).
    pub external: Vec<crate::external::Call>,
}

/// Default deadline of an ordered deletion.
const ORDERED_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

impl Block {
    /// Compiles a block; `drift` is true for onReconcile (every entry drift-corrects).
    pub fn compile(templates: &HookTemplates, drift: bool, functions: &Functions) -> Result<Self, String> {
        let conditions = Conditions::compile(&templates.when, &templates.or, functions)
            .map_err(|(at, e)| format!("{at}: {}", e.message))?;
        let mut entries = Vec::new();
        for (key, list) in templates.resources() {
            let Some(kind) = kind_spec(key) else { continue };
            for (i, entry) in list.iter().enumerate() {
                entries.push(Entry::compile(kind, entry, drift, functions).map_err(|e| format!("{key}[{i}]: {e}"))?);
            }
        }
        let groups = match templates.ordered {
            true => templates
                .groups
                .iter()
                .enumerate()
                .map(|(i, g)| Block::compile(g, drift, functions).map_err(|e| format!("groups[{i}].{e}")))
                .collect::<Result<_, _>>()?,
            false if !templates.groups.is_empty() => return Err("groups: they need ordered: true".into()),
            false => Vec::new(),
        };
        let timeout = match &templates.timeout {
            Some(text) => orkestra_katalog::duration::parse(text).map_err(|e| format!("timeout: {e}"))?,
            None => ORDERED_TIMEOUT,
        };
        let external = templates
            .external
            .iter()
            .map(|call| crate::external::Call::compile(call, functions))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            conditions,
            entries,
            groups,
            timeout,
            external,
        })
    }
}

impl Entry {
    fn compile(
        kind: &'static KindSpec,
        entry: &ResourceEntry,
        drift: bool,
        functions: &Functions,
    ) -> Result<Self, String> {
        let template = |text: &str| Template::compile(text, functions).map_err(|e| e.message);
        let pairs = |map: &BTreeMap<String, String>| {
            map.iter()
                .map(|(k, v)| Ok((k.clone(), template(v)?)))
                .collect::<Result<Vec<_>, String>>()
        };
        Ok(Self {
            kind,
            name: entry.name.as_deref().map(template).transpose()?,
            namespace: entry.namespace.as_deref().map(template).transpose()?,
            labels: pairs(&entry.labels)?,
            annotations: pairs(&entry.annotations)?,
            fields: entry
                .fields
                .iter()
                .map(|(k, v)| Ok((k.clone(), Tree::compile(v, functions)?)))
                .collect::<Result<_, String>>()?,
            conditions: Conditions::compile(&entry.when, &entry.or, functions)
                .map_err(|(at, e)| format!("{at}: {}", e.message))?,
            for_each: entry.for_each.as_ref().map(|f| (f.field.clone(), f.as_.clone())),
            reconcile: drift || entry.reconcile == Some(true),
            force: entry.force_conflict,
            inputs: entry.inputs.clone(),
            replace: replace(kind, entry)?,
            // A generated certificate is a credential too: made once, then left alone.
            once: kind.key == "secrets"
                && (entry.fields.get("once") == Some(&Value::Bool(true)) || entry.fields.contains_key("tls")),
        })
    }

    /// Create once, never overwrite: Jobs always, Secrets marked `once` (generated
    /// credentials), and anything outside drift correction.
    pub fn create_only(&self) -> bool {
        !self.reconcile || self.kind.key == "jobs" || self.once
    }

    /// The name: rendered, or the kind's default (`<cr>-deployment`, `<cr>-svc`, ...).
    pub fn render_name(&self, resolver: &Resolver<'_, '_>, cr_name: &str) -> Result<String, String> {
        match &self.name {
            Some(template) => resolver.render(template).map_err(|e| e.message),
            None if self.kind.key == "secrets" && self.fields.contains_key("tls") => Ok(format!("{cr_name}-tls")),
            None => Ok(default_name(self.kind.key, cr_name)),
        }
    }

    /// Renders the object. `cr` is the owning CR (for its name and namespace).
    pub fn render(&self, resolver: &Resolver<'_, '_>, cr: &Value) -> Result<Value, String> {
        let cr_name = cr["metadata"]["name"].as_str().unwrap_or_default();
        let cr_namespace = cr["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = self.render_name(resolver, cr_name)?;
        let mut fields = Map::new();
        for (key, tree) in &self.fields {
            fields.insert(key.clone(), tree.render(resolver)?);
        }
        let mut labels = Map::new();
        for (key, template) in &self.labels {
            labels.insert(
                key.clone(),
                Value::String(resolver.render(template).map_err(|e| e.message)?),
            );
        }
        let mut annotations = Map::new();
        for (key, template) in &self.annotations {
            annotations.insert(
                key.clone(),
                Value::String(resolver.render(template).map_err(|e| e.message)?),
            );
        }
        let mut metadata = json!({"name": name, "labels": labels});
        if !annotations.is_empty() {
            metadata["annotations"] = Value::Object(annotations);
        }
        if self.kind.namespaced || self.kind.key == "custom" {
            let namespace = match &self.namespace {
                Some(template) => resolver.render(template).map_err(|e| e.message)?,
                None => cr_namespace.to_string(),
            };
            if !namespace.is_empty() {
                metadata["namespace"] = json!(namespace);
            }
        }
        let body = kinds::body(self.kind, &fields, cr_name, cr_namespace)?;
        let mut object = json!({"apiVersion": self.kind.api_version, "kind": self.kind.kind, "metadata": metadata});
        if let Value::Object(body) = body {
            for (key, value) in body {
                if key == "metadata" {
                    merge(&mut object["metadata"], value);
                } else {
                    object[key] = value;
                }
            }
        }
        Ok(object)
    }
}

/// Upstream's default child names.
pub fn default_name(key: &str, cr: &str) -> String {
    let suffix = match key {
        "deployments" => "deployment",
        "statefulSets" => "statefulset",
        "replicaSets" => "replicaset",
        "services" => "svc",
        "configMaps" => "config",
        "secrets" => "secret",
        "jobs" => "job",
        "cronJobs" => "cronjob",
        "pods" => "pod",
        "serviceAccounts" => "sa",
        "ingresses" => "ingress",
        "persistentVolumeClaims" => "pvc",
        "persistentVolumes" => "pv",
        "hpa" => "hpa",
        "pdb" => "pdb",
        "roles" | "clusterRoles" => "role",
        "roleBindings" | "clusterRoleBindings" => "binding",
        "networkPolicies" => "netpol",
        "limitRanges" => "limits",
        "resourceQuotas" => "quota",
        _ => return cr.to_string(),
    };
    format!("{cr}-{suffix}")
}

/// Merges `extra` into `target`, objects key by key, anything else replaced.
pub(super) fn merge(target: &mut Value, extra: Value) {
    match (target, extra) {
        (Value::Object(target), Value::Object(extra)) => {
            for (key, value) in extra {
                merge(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (target, extra) => *target = extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiled::compile_for_test;

    fn rendered(block: &str, cr: Value) -> Vec<Value> {
        let crd = compile_for_test(&format!("        reconcile:\n          onReconcile:\n{block}"));
        let block = crd.crd_box().on_reconcile.clone().expect("onReconcile");
        let resolver = Resolver::new(&cr, &[]);
        block
            .entries
            .iter()
            .map(|e| e.render(&resolver, &cr).unwrap())
            .collect()
    }

    fn cr() -> Value {
        json!({"metadata": {"name": "shop", "namespace": "web", "uid": "u1"}, "spec": {"image": "nginx:1.27", "replicas": 3, "tier": "gold"}})
    }

    #[test]
    fn a_deployment_renders_with_typed_replicas_and_ports() {
        let objects = rendered(
            "            deployments:\n              - image: '{{ .spec.image }}'\n                replicas: '{{ .spec.replicas }}'\n                port: 8080\n                env: [{name: TIER, value: '{{ .spec.tier }}'}]\n                envFrom: {configMapRef: [{name: shared}]}\n",
            cr(),
        );
        let d = &objects[0];
        assert_eq!(d["apiVersion"], "apps/v1");
        assert_eq!(d["metadata"]["name"], "shop-deployment", "the kind's default name");
        assert_eq!(d["metadata"]["namespace"], "web");
        assert_eq!(d["spec"]["replicas"], 3, "a rendered number becomes an integer");
        let container = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "nginx:1.27");
        assert_eq!(container["ports"][0]["containerPort"], 8080);
        assert_eq!(container["env"][0]["value"], "gold");
        assert_eq!(container["envFrom"][0]["configMapRef"]["name"], "shared");
        assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "shop");
    }

    #[test]
    fn services_configmaps_secrets_jobs_and_custom_resources_render() {
        let objects = rendered(
            "            services:\n              - {name: '{{ .metadata.name }}', port: 80, targetPort: 8080}\n            configMaps:\n              - data: {tier: '{{ .spec.tier }}', count: 3}\n            secrets:\n              - data: {password: hunter2}\n            jobs:\n              - {image: busybox, command: [sh, -c, 'echo {{ .metadata.name }}'], backoffLimit: 2}\n            custom:\n              - {apiVersion: x.io/v1, kind: Gadget, spec: {size: '{{ .spec.replicas }}'}}\n",
            cr(),
        );
        let by_kind = |kind: &str| objects.iter().find(|o| o["kind"] == kind).unwrap();
        let svc = by_kind("Service");
        assert_eq!(
            (svc["metadata"]["name"].as_str(), &svc["spec"]["ports"][0]["targetPort"]),
            (Some("shop"), &json!(8080))
        );
        assert_eq!(
            svc["spec"]["selector"]["app"], "shop",
            "selects the CR's pods by default"
        );
        assert_eq!(by_kind("ConfigMap")["data"], json!({"tier": "gold", "count": "3"}));
        assert_eq!(by_kind("ConfigMap")["metadata"]["name"], "shop-config");
        assert_eq!(by_kind("Secret")["stringData"]["password"], "hunter2");
        let job = by_kind("Job");
        assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
        assert_eq!(
            job["spec"]["template"]["spec"]["containers"][0]["command"][2],
            "echo shop"
        );
        let gadget = by_kind("Gadget");
        assert_eq!(
            (gadget["apiVersion"].as_str(), &gadget["spec"]["size"]),
            (Some("x.io/v1"), &json!("3"))
        );
    }

    #[test]
    fn shorthand_fields_expand_to_the_kubernetes_shape() {
        let objects = rendered(
            "            roleBindings:\n              - {role: reader, serviceAccount: bot}\n            pdb:\n              - {minAvailable: '50%'}\n            hpa:\n              - {maxReplicas: '{{ .spec.replicas }}', targetMemoryUtilization: 80}\n            namespaces:\n              - {name: team}\n",
            cr(),
        );
        let of = |kind: &str| objects.iter().find(|o| o["kind"] == kind).unwrap();
        let binding = of("RoleBinding");
        assert_eq!(
            binding["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"})
        );
        assert_eq!(
            binding["subjects"][0],
            json!({"kind": "ServiceAccount", "name": "bot", "namespace": "web"})
        );
        assert_eq!(
            of("PodDisruptionBudget")["spec"]["minAvailable"],
            "50%",
            "a percentage stays a string"
        );
        let hpa = of("HorizontalPodAutoscaler");
        assert_eq!(hpa["spec"]["maxReplicas"], 3);
        assert_eq!(hpa["spec"]["metrics"][0]["resource"]["name"], "memory");
        assert!(
            of("Namespace")["metadata"].get("namespace").is_none(),
            "a namespace has none"
        );
    }

    #[test]
    fn a_missing_required_field_or_a_preset_is_a_named_error() {
        let crd = compile_for_test(
            "        reconcile:\n          onReconcile:\n            persistentVolumeClaims:\n              - {accessModes: [ReadWriteOnce]}\n            networkPolicies:\n              - {profile: deny-all}\n",
        );
        let block = crd.crd_box().on_reconcile.clone().unwrap();
        let object = cr();
        let resolver = Resolver::new(&object, &[]);
        assert_eq!(
            block.entries[0].render(&resolver, &object).unwrap_err(),
            "storage is required"
        );
        assert!(
            block.entries[1]
                .render(&resolver, &object)
                .unwrap_err()
                .contains("profile presets are not supported")
        );
    }

    /// A block from its YAML alone (an onReconcile block when `drift`).
    fn block_of(yaml: &str, drift: bool) -> Result<Block, String> {
        let spec: orkestra_katalog::HookTemplates = serde_yaml_ng::from_str(yaml).unwrap();
        Block::compile(&spec, drift, orkestra_katalog::template::Functions::builtin())
    }

    #[test]
    fn rotation_is_for_once_secrets_and_pods_are_replaced_on_drift() {
        let block = |yaml: &str| block_of(yaml, true);
        let secret = block("secrets: [{once: true, rotateAfter: 90d}]").unwrap();
        assert_eq!(
            secret.entries[0].replace,
            Replace::After(std::time::Duration::from_secs(90 * 86400))
        );
        assert!(secret.entries[0].create_only(), "a once secret is never patched");
        let error = block("secrets: [{rotateAfter: 90d}]").unwrap_err();
        assert!(error.contains("rotateAfter needs once: true"), "{error}");
        let pod = block("pods: [{image: busybox}]").unwrap();
        assert_eq!(pod.entries[0].replace, Replace::OnDrift);
        assert!(!pod.entries[0].create_only());
    }

    #[test]
    fn ordered_groups_compile_with_their_deadline() {
        let compile = |yaml: &str| block_of(yaml, false);
        let block = compile("{ordered: true, timeout: 90s, groups: [{configMaps: [{}]}, {services: [{}]}]}").unwrap();
        assert_eq!(block.groups.len(), 2);
        assert_eq!(block.timeout, std::time::Duration::from_secs(90));
        assert_eq!(compile("{ordered: true, groups: []}").unwrap().timeout, ORDERED_TIMEOUT);
        let error = compile("{groups: [{configMaps: [{}]}]}").unwrap_err();
        assert!(error.contains("ordered: true"), "{error}");
    }
}
