//! The webhook configurations the gateway registers with the API server: one
//! ValidatingWebhookConfiguration and one MutatingWebhookConfiguration per Katalog, with a
//! webhook per CRD that has rules of that kind, pointed at the gateway (a URL, or a Service
//! in the cluster) and trusting its CA. Written with server-side apply; a configuration with
//! no webhook left is deleted, and both are removed at shutdown unless told to stay.

use base64::Engine;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use orkestra_katalog::Compiled;
use orkestra_katalog::compile::CompiledCrd;
use orkestra_katalog::model::FailurePolicy;

/// The field manager of everything the gateway writes.
pub const MANAGER: &str = "orkestra-gateway";

/// Where the API server reaches the webhooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `https://host:port` (a local control plane, or any address the API server routes to).
    Url(String),
    /// A Service of the cluster, on port 443.
    Service { namespace: String, name: String },
}

/// What the registration needs to know besides the Katalog.
#[derive(Debug, Clone)]
pub struct Registration {
    pub endpoint: Endpoint,
    /// The CA the API server trusts the gateway's certificate by (PEM; several during a
    /// renewal).
    pub ca_bundle: String,
    pub failure_policy: FailurePolicy,
    pub timeout_seconds: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Validating,
    Mutating,
}

impl Kind {
    fn resource(self) -> ApiResource {
        let kind = match self {
            Kind::Validating => "ValidatingWebhookConfiguration",
            Kind::Mutating => "MutatingWebhookConfiguration",
        };
        let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
        ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()))
    }

    fn path(self) -> &'static str {
        match self {
            Kind::Validating => "/validate",
            Kind::Mutating => "/mutate",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Kind::Validating => "validate",
            Kind::Mutating => "mutate",
        }
    }
}

/// The configurations' name for a Katalog.
pub fn name_for(katalog: &str) -> String {
    format!("orkestra-gateway-{katalog}")
}

/// Whether the Katalog turns the admission webhooks on.
pub fn enabled(compiled: &Compiled) -> bool {
    compiled
        .katalog
        .security
        .as_ref()
        .and_then(|s| s.webhooks.as_ref())
        .and_then(|w| w.admission)
        .is_some_and(|a| a.enabled)
}

/// The CRDs whose rules of `kind` run at admission.
fn crds(compiled: &Compiled, kind: Kind) -> Vec<&CompiledCrd> {
    compiled
        .enabled()
        .filter(|crd| {
            let switches = compiled.katalog.crds[&*crd.name]
                .entry
                .admission
                .webhooks
                .clone()
                .unwrap_or_default();
            match kind {
                Kind::Validating => switches.validation.unwrap_or(true) && crd.admission_rules.validates(),
                Kind::Mutating => switches.mutation.unwrap_or(true) && crd.admission_rules.mutates(),
            }
        })
        .map(|crd| crd.as_ref())
        .collect()
}

/// The configuration of `kind` for the Katalog: `None` when no CRD needs one.
pub fn configuration(compiled: &Compiled, kind: Kind, registration: &Registration) -> Option<Value> {
    let crds = crds(compiled, kind);
    if crds.is_empty() {
        return None;
    }
    let ca = base64::engine::general_purpose::STANDARD.encode(&registration.ca_bundle);
    let client = match &registration.endpoint {
        Endpoint::Url(base) => json!({"url": format!("{}{}", base.trim_end_matches('/'), kind.path()), "caBundle": ca}),
        Endpoint::Service { namespace, name } => json!({
            "service": {"namespace": namespace, "name": name, "path": kind.path(), "port": 443}, "caBundle": ca,
        }),
    };
    let webhooks: Vec<Value> = crds
        .iter()
        .map(|crd| {
            let entry = &compiled.katalog.crds[&*crd.name].entry;
            let switches = entry.admission.webhooks.clone().unwrap_or_default();
            let operations = match switches.operations.is_empty() {
                true => vec!["CREATE".to_string(), "UPDATE".to_string()],
                false => switches.operations.clone(),
            };
            let policy = switches.failure_policy.unwrap_or(registration.failure_policy);
            json!({
                "name": format!("{}.{}.{}.orkestra.io", kind.verb(), crd.plural, crd.group),
                "clientConfig": client,
                "rules": [{
                    "apiGroups": [crd.group], "apiVersions": [crd.version], "resources": [crd.plural],
                    "operations": operations, "scope": if crd.namespaced { "Namespaced" } else { "Cluster" },
                }],
                "failurePolicy": policy.as_str(),
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": registration.timeout_seconds.clamp(1, 30),
            })
        })
        .collect();
    let resource = kind.resource();
    Some(json!({
        "apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": {"name": name_for(&compiled.katalog.name),
                     "labels": {orkestra_katalog::labels::MANAGED_LABEL: "true"}},
        "webhooks": webhooks,
    }))
}

/// Writes both configurations (or deletes the one with nothing to register).
pub async fn register(
    client: &kube::Client,
    compiled: &Compiled,
    registration: &Registration,
) -> Result<(), kube::Error> {
    for kind in [Kind::Validating, Kind::Mutating] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.resource());
        let name = name_for(&compiled.katalog.name);
        match configuration(compiled, kind, registration) {
            Some(config) => {
                api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&config))
                    .await?;
            }
            None => remove(&api, &name).await?,
        }
    }
    Ok(())
}

/// Removes both configurations.
pub async fn unregister(client: &kube::Client, katalog: &str) -> Result<(), kube::Error> {
    for kind in [Kind::Validating, Kind::Mutating] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.resource());
        remove(&api, &name_for(katalog)).await?;
    }
    Ok(())
}

async fn remove(api: &Api<DynamicObject>, name: &str) -> Result<(), kube::Error> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_webhook_per_crd_with_rules_of_its_kind() {
        let katalog = "
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: policy}
spec:
  crds:
    site:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Site, plural: sites}
      admission:
        validation: {rules: [{field: spec.image, exists: true, message: m}]}
        webhooks: {operations: [CREATE], failurePolicy: Ignore}
    plain:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Plain, plural: plains}
";
        let compiled = orkestra_katalog::load_sources(&[(PathBuf::from("k.yaml"), katalog.to_string())]).unwrap();
        let registration = Registration {
            endpoint: Endpoint::Url("https://127.0.0.1:8443".into()),
            ca_bundle: "CA".into(),
            failure_policy: FailurePolicy::Fail,
            timeout_seconds: 5,
        };
        let config = configuration(&compiled, Kind::Validating, &registration).unwrap();
        assert_eq!(config["metadata"]["name"], "orkestra-gateway-policy");
        let webhooks = config["webhooks"].as_array().unwrap();
        assert_eq!(webhooks.len(), 1, "only the CRD with validation rules");
        let hook = &webhooks[0];
        assert_eq!(hook["name"], "validate.sites.demo.orkestra.io.orkestra.io");
        assert_eq!(hook["clientConfig"]["url"], "https://127.0.0.1:8443/validate");
        assert_eq!(hook["rules"][0]["operations"], json!(["CREATE"]));
        assert_eq!(hook["failurePolicy"], "Ignore");
        assert!(
            configuration(&compiled, Kind::Mutating, &registration).is_none(),
            "no mutation rules"
        );
    }
}
