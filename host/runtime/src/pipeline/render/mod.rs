//! Compiled resource templates in, Kubernetes objects out: each entry is rendered per CR into
//! the object of its kind, with the kind's default name and the CR's namespace (the applier
//! marks it as the CR's). Each kind's own shape is its row's renderer
//! (`orkestra_katalog::kinds`); a Secret's certificate is made here.

use std::time::Duration;

use serde_json::{Map, Value, json};

use orkestra_effects::tls;
use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::Entry;
use orkestra_katalog::kinds::Shorthand;

/// Annotation on a `once` Secret: when it was generated, RFC 3339.
pub const GENERATED_AT: &str = "orkestra.orkspace.io/generated-at";

/// Rendering a compiled resource template (compiling it is the Katalog's).
pub trait Render {
    /// The name: rendered, or the kind's default (`<cr>-deployment`, `<cr>-svc`, ...).
    fn render_name(&self, resolver: &Resolver<'_, '_>, cr_name: &str) -> Result<String, String>;
    /// Renders the object. `cr` is the owning CR (for its name and namespace).
    fn render(&self, resolver: &Resolver<'_, '_>, cr: &Value) -> Result<Value, String>;
}

impl Render for Entry {
    fn render_name(&self, resolver: &Resolver<'_, '_>, cr_name: &str) -> Result<String, String> {
        match &self.name {
            Some(template) => resolver.render(template).map_err(|e| e.message),
            None if self.kind.key == "secrets" && self.fields.contains_key("tls") => Ok(format!("{cr_name}-tls")),
            None => Ok(self.kind.default_name(cr_name)),
        }
    }

    fn render(&self, resolver: &Resolver<'_, '_>, cr: &Value) -> Result<Value, String> {
        let cr_name = cr["metadata"]["name"].as_str().unwrap_or_default();
        let cr_namespace = cr["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = self.render_name(resolver, cr_name)?;
        let mut fields = Map::new();
        for (key, tree) in &self.fields {
            fields.insert(key.clone(), tree.render(resolver).map_err(|e| e.message)?);
        }
        self.choose_profiles(&mut fields, resolver)?;
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
        let shorthand = Shorthand {
            kind: self.kind,
            fields: &fields,
            cr: cr_name,
            cr_namespace,
            certify: &certify,
        };
        let body = (self.kind.render)(&shorthand)?;
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

/// A Secret's generated certificate, valid for `validity` or the default.
fn certify(spec: &Value, validity: Option<Duration>) -> Result<Map<String, Value>, String> {
    tls::generate(spec, validity.unwrap_or(tls::DEFAULT_VALIDITY)).map_err(|e| e.to_string())
}

/// Merges `extra` into `target`, objects key by key, anything else replaced.
pub fn merge(target: &mut Value, extra: Value) {
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
    use crate::testing::compile_for_test;

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
    fn upstream_env_maps_and_bare_env_from_names_become_kubernetes_lists() {
        let objects = rendered(
            "            deployments:
              - image: nginx
                env:
                  TIER: {value: '{{ .spec.tier }}'}
                  DB_USER: {secretKeyRef: {name: db, key: user}}
                  PLAIN: 3
                envFrom:
                  - configMapRef: '{{ .metadata.name }}-config'
                  - secretRef: {name: keys}
",
            cr(),
        );
        let container = &objects[0]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["env"],
            json!([
                {"name": "DB_USER", "valueFrom": {"secretKeyRef": {"name": "db", "key": "user"}}},
                {"name": "PLAIN", "value": "3"},
                {"name": "TIER", "value": "gold"},
            ])
        );
        assert_eq!(
            container["envFrom"],
            json!([{"configMapRef": {"name": "shop-config"}}, {"secretRef": {"name": "keys"}}])
        );
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
    fn a_missing_required_field_or_an_unknown_chosen_profile_is_a_named_error() {
        let crd = compile_for_test(
            "        reconcile:\n          onReconcile:\n            persistentVolumeClaims:\n              - {accessModes: [ReadWriteOnce]}\n            resourceQuotas:\n              - {profile: '{{ .spec.tier }}'}\n",
        );
        let block = crd.crd_box().on_reconcile.clone().unwrap();
        let object = cr();
        let resolver = Resolver::new(&object, &[]);
        assert_eq!(
            block.entries[0].render(&resolver, &object).unwrap_err(),
            "storage is required"
        );
        let unknown = block.entries[1].render(&resolver, &object).unwrap_err();
        assert!(
            unknown.starts_with("profile: unknown resourceQuotas profile \"gold\"")
                && unknown.contains("known: large, medium, small, xlarge"),
            "{unknown}"
        );
    }

    #[test]
    fn probes_rollouts_claim_templates_and_profiles_render_to_the_kubernetes_shape() {
        let objects = rendered(
            "            deployments:
              - image: nginx
                port: 8080
                resources: {profile: small}
                probes:
                  readiness: {path: /ready, profile: fast}
                  liveness: {type: tcp, periodSeconds: '7'}
                rollingUpdate: {profile: safe}
                securityContext: {profile: '{{ .spec.security }}'}
            statefulSets:
              - image: postgres
                volumeClaimTemplates: [{name: data, storage: 1Gi}]
                rollingUpdate: {maxUnavailable: 2}
            networkPolicies:
              - {podSelector: {}, profile: allow-same-namespace}
              - podSelector: {role: db}
                policyTypes: [Ingress]
                ingress: [{from: [{namespaceSelector: {team: platform}}]}]
            pdb:
              - {selector: {app: shop}, behavior: {profile: rolling}}
            hpa:
              - {maxReplicas: 4, behavior: {profile: batch}}
",
            json!({"metadata": {"name": "shop", "namespace": "web", "uid": "u1"}, "spec": {"security": "Restricted"}}),
        );
        let of = |kind: &'static str| objects.iter().filter(move |o| o["kind"] == kind);
        let deployment = of("Deployment").next().unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["resources"]["limits"]["memory"], "512Mi");
        assert_eq!(
            container["readinessProbe"],
            json!({"httpGet": {"path": "/ready", "port": 8080}, "initialDelaySeconds": 5, "periodSeconds": 10, "failureThreshold": 2, "timeoutSeconds": 5})
        );
        assert_eq!(
            container["livenessProbe"],
            json!({"tcpSocket": {"port": 8080}, "periodSeconds": 7})
        );
        assert_eq!(
            deployment["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
        );
        assert_eq!(
            container["securityContext"]["capabilities"]["drop"],
            json!(["ALL"]),
            "chosen per CR"
        );
        let set = of("StatefulSet").next().unwrap();
        assert_eq!(
            set["spec"]["volumeClaimTemplates"][0],
            json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
        );
        assert_eq!(set["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], 2);
        let policies: Vec<&Value> = of("NetworkPolicy").collect();
        assert_eq!(policies[0]["spec"]["ingress"][0]["from"][0]["podSelector"], json!({}));
        assert_eq!(
            policies[1]["spec"]["podSelector"],
            json!({"matchLabels": {"role": "db"}})
        );
        assert_eq!(
            policies[1]["spec"]["ingress"][0]["from"][0]["namespaceSelector"],
            json!({"matchLabels": {"team": "platform"}})
        );
        let pdb = of("PodDisruptionBudget").next().unwrap();
        assert_eq!(pdb["spec"]["maxUnavailable"], 1);
        assert_eq!(pdb["spec"]["selector"], json!({"matchLabels": {"app": "shop"}}));
        let hpa = of("HorizontalPodAutoscaler").next().unwrap();
        assert_eq!(hpa["spec"]["behavior"]["scaleUp"]["stabilizationWindowSeconds"], 30);
        assert_eq!(
            hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
    }
}
