//! The webhook configurations the gateway registers with the API server: one
//! ValidatingWebhookConfiguration and one MutatingWebhookConfiguration per Katalog, with a
//! webhook per CRD and feature (its rules, deletion protection, namespace protection),
//! pointed at the gateway (a URL, or a Service in the cluster) and trusting its CA. Written
//! with server-side apply; a configuration with no webhook left is deleted, and at shutdown
//! each feature's webhooks go unless that feature asks to stay.

use base64::Engine;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_kube::objects::Objects;
use serde_json::{Value, json};

use orkestra_expr::labels::DELETION_PROTECTION;
use orkestra_katalog::Compiled;
use orkestra_katalog::model::FailurePolicy;

use crate::protection;
use crate::scope::Scope;

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
}

/// The configurations' name for a Katalog.
pub fn name_for(katalog: &str) -> String {
    format!("orkestra-gateway-{katalog}")
}

/// Which feature a webhook belongs to: each has its own failure policy and its own say on
/// whether it stays registered when the gateway stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    Rules,
    Provenance,
    Deletion,
    Namespaces,
}

/// One webhook entry of a configuration.
struct Hook<'c> {
    kind: Kind,
    feature: Feature,
    /// `validate.sites.demo.io.orkestra.io`.
    name: String,
    path: &'static str,
    group: &'c str,
    version: &'c str,
    plural: &'c str,
    namespaced: bool,
    operations: Vec<String>,
    failure_policy: FailurePolicy,
    /// Only objects with the deletion-protection label reach the webhook.
    labelled_only: bool,
    /// What the entry selects (`None`: the Katalog's CRDs themselves).
    scope: Option<Scope>,
}

fn both() -> Vec<String> {
    vec!["CREATE".to_string(), "UPDATE".to_string()]
}

/// Every webhook the Katalog needs, of both kinds.
fn hooks<'c>(compiled: &'c Compiled, registration: &Registration) -> Vec<Hook<'c>> {
    let mut hooks = Vec::new();
    let rules_on = crate::serving::rules(compiled);
    let deletion = protection::deletion(compiled);
    let namespaces = protection::namespaces(compiled);
    for crd in compiled.enabled() {
        let switches = compiled.katalog.crds[&*crd.name]
            .entry
            .admission
            .webhooks
            .clone()
            .unwrap_or_default();
        let operations = match switches.operations.is_empty() {
            true => both(),
            false => switches.operations.clone(),
        };
        let rules_policy = switches.failure_policy.unwrap_or(registration.failure_policy);
        let scope = Scope::of(compiled, crd);
        let hook = |kind, feature, verb: &str, path, operations, failure_policy, labelled_only| Hook {
            kind,
            feature,
            name: format!("{verb}.{}.{}.orkestra.io", crd.plural, crd.group),
            path,
            group: &crd.group,
            version: &crd.version,
            plural: &crd.plural,
            namespaced: crd.namespaced,
            operations,
            failure_policy,
            labelled_only,
            scope: Some(scope.clone()),
        };
        if rules_on && switches.validation.unwrap_or(true) && crd.admission_rules.validates() {
            let h = hook(
                Kind::Validating,
                Feature::Rules,
                "validate",
                "/validate",
                operations.clone(),
                rules_policy,
                false,
            );
            hooks.push(h);
        }
        if rules_on && switches.mutation.unwrap_or(true) && crd.admission_rules.mutates() {
            hooks.push(hook(
                Kind::Mutating,
                Feature::Rules,
                "mutate",
                "/mutate",
                operations,
                rules_policy,
                false,
            ));
        }
        if crate::provenance::guarded(compiled).any(|served| served.name == crd.name) {
            // Security, not policy: always `Fail`, so nothing forged slips in unchecked.
            hooks.push(hook(
                Kind::Validating,
                Feature::Provenance,
                "provenance",
                "/provenance",
                both(),
                FailurePolicy::Fail,
                false,
            ));
        }
        if let Some(policy) = namespaces
            && crd.namespaced
        {
            let failure = policy.failure_policy.unwrap_or_default();
            let ops = vec!["CREATE".to_string()];
            hooks.push(hook(
                Kind::Validating,
                Feature::Namespaces,
                "namespaces",
                "/namespaces",
                ops,
                failure,
                false,
            ));
        }
        if let Some(policy) = deletion
            && protection::protects_crs(compiled, crd)
        {
            let failure = policy.failure_policy.unwrap_or_default();
            let mut ops = vec!["DELETE".to_string()];
            if policy.strict_mode {
                ops.push("UPDATE".to_string());
            }
            hooks.push(hook(
                Kind::Validating,
                Feature::Deletion,
                "deletion",
                "/deletion",
                ops,
                failure,
                true,
            ));
            let create = vec!["CREATE".to_string()];
            hooks.push(hook(
                Kind::Mutating,
                Feature::Deletion,
                "protect",
                "/protect",
                create,
                failure,
                false,
            ));
        }
    }
    if let Some(policy) = deletion
        && compiled.enabled().any(|crd| protection::protects_crd(compiled, crd))
    {
        let mut operations = vec!["DELETE".to_string()];
        if policy.strict_mode {
            operations.push("UPDATE".to_string());
        }
        hooks.push(Hook {
            kind: Kind::Validating,
            feature: Feature::Deletion,
            name: format!("deletion.crds.{}.orkestra.io", compiled.katalog.name),
            path: "/deletion",
            group: "apiextensions.k8s.io",
            version: "v1",
            plural: "customresourcedefinitions",
            namespaced: false,
            operations,
            failure_policy: policy.failure_policy.unwrap_or_default(),
            labelled_only: true,
            scope: None,
        });
    }
    hooks
}

/// Whether a feature's webhooks are removed when the gateway stops (default yes).
fn cleaned_up(compiled: &Compiled, feature: Feature) -> bool {
    let security = compiled.katalog.security.as_ref();
    let setting = match feature {
        Feature::Rules | Feature::Provenance => security
            .and_then(|s| s.webhooks.as_ref())
            .and_then(|w| w.cleanup_on_shutdown),
        Feature::Deletion => security
            .and_then(|s| s.deletion_protection.as_ref())
            .and_then(|d| d.cleanup_on_shutdown),
        Feature::Namespaces => security
            .and_then(|s| s.namespace_protection.as_ref())
            .and_then(|n| n.cleanup_on_shutdown),
    };
    setting.unwrap_or(true)
}

/// The configuration of `kind` for the Katalog, with the webhooks of the features `keep`
/// admits: `None` when there are none.
fn configuration_of(
    compiled: &Compiled,
    kind: Kind,
    registration: &Registration,
    keep: impl Fn(Feature) -> bool,
) -> Option<Value> {
    let ca = base64::engine::general_purpose::STANDARD.encode(&registration.ca_bundle);
    let client = |path: &str| match &registration.endpoint {
        Endpoint::Url(base) => json!({"url": format!("{}{path}", base.trim_end_matches('/')), "caBundle": ca}),
        Endpoint::Service { namespace, name } => json!({
            "service": {"namespace": namespace, "name": name, "path": path, "port": 443}, "caBundle": ca,
        }),
    };
    let webhooks: Vec<Value> = hooks(compiled, registration)
        .into_iter()
        .filter(|hook| hook.kind == kind && keep(hook.feature))
        .map(|hook| {
            let mut webhook = json!({
                "name": hook.name,
                "clientConfig": client(hook.path),
                "rules": [{
                    "apiGroups": [hook.group], "apiVersions": [hook.version], "resources": [hook.plural],
                    "operations": hook.operations, "scope": if hook.namespaced { "Namespaced" } else { "Cluster" },
                }],
                "failurePolicy": hook.failure_policy.as_str(),
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": registration.timeout_seconds.clamp(1, 30),
            });
            let protected: &[(&str, &str)] = match hook.labelled_only {
                true => &[(DELETION_PROTECTION, "true")],
                false => &[],
            };
            let scope = hook.scope.clone().unwrap_or_default();
            if let Some(selector) = scope.object_selector(protected) {
                webhook["objectSelector"] = selector;
            }
            // Namespace protection is about the namespaces outside the entry's: it must see them.
            if let Some(selector) = scope
                .namespace_selector()
                .filter(|_| hook.feature != Feature::Namespaces)
            {
                webhook["namespaceSelector"] = selector;
            }
            webhook
        })
        .collect();
    if webhooks.is_empty() {
        return None;
    }
    let resource = kind.resource();
    Some(json!({
        "apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": {"name": name_for(&compiled.katalog.name),
                     "labels": {orkestra_expr::labels::MANAGED_LABEL: "true"}},
        "webhooks": webhooks,
    }))
}

/// The configuration of `kind` for the Katalog: `None` when no CRD needs one.
pub fn configuration(compiled: &Compiled, kind: Kind, registration: &Registration) -> Option<Value> {
    configuration_of(compiled, kind, registration, |_| true)
}

/// Writes both configurations (or deletes the one with nothing to register).
pub async fn register(
    client: &kube::Client,
    compiled: &Compiled,
    registration: &Registration,
) -> Result<(), kube::Error> {
    write(client, compiled, registration, |_| true).await
}

async fn write(
    client: &kube::Client,
    compiled: &Compiled,
    registration: &Registration,
    keep: impl Fn(Feature) -> bool + Copy,
) -> Result<(), kube::Error> {
    for kind in [Kind::Validating, Kind::Mutating] {
        let api = Objects::<DynamicObject>::all_with(client.clone(), &kind.resource());
        let name = name_for(&compiled.katalog.name);
        match configuration_of(compiled, kind, registration, keep) {
            Some(config) => {
                api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&config))
                    .await?;
            }
            None => remove(&api, &name).await?,
        }
    }
    Ok(())
}

/// At shutdown: removes the webhooks of every feature that does not ask to stay (and the
/// configurations left empty). A CRD pointed at the conversion webhook stays pointed: with
/// the gateway gone its other versions fail to read, which beats answering them unconverted.
pub async fn unregister(
    client: &kube::Client,
    compiled: &Compiled,
    registration: &Registration,
) -> Result<(), kube::Error> {
    write(client, compiled, registration, |feature| !cleaned_up(compiled, feature)).await
}

/// Removes both configurations of the Katalog, whatever they hold (a start that failed).
pub async fn remove_all(client: &kube::Client, compiled: &Compiled) -> Result<(), kube::Error> {
    for kind in [Kind::Validating, Kind::Mutating] {
        let api = Objects::<DynamicObject>::all_with(client.clone(), &kind.resource());
        remove(&api, &name_for(&compiled.katalog.name)).await?;
    }
    Ok(())
}

async fn remove(api: &Objects<DynamicObject>, name: &str) -> Result<(), kube::Error> {
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
security:
  webhooks: {admission: {enabled: true}}
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
        let names: Vec<&str> = webhooks.iter().map(|w| w["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "provenance.plains.demo.orkestra.io.orkestra.io",
                "validate.sites.demo.orkestra.io.orkestra.io",
                "provenance.sites.demo.orkestra.io.orkestra.io"
            ],
            "rules for the CRD with validation rules; provenance guarded on every CRD, served or not"
        );
        let hook = &webhooks[1];
        assert_eq!(hook["name"], "validate.sites.demo.orkestra.io.orkestra.io");
        assert_eq!(hook["clientConfig"]["url"], "https://127.0.0.1:8443/validate");
        assert_eq!(hook["rules"][0]["operations"], json!(["CREATE"]));
        assert_eq!(hook["failurePolicy"], "Ignore");
        assert!(
            configuration(&compiled, Kind::Mutating, &registration).is_none(),
            "no mutation rules"
        );
    }

    #[test]
    fn protection_adds_its_own_webhooks_each_with_its_policy() {
        let katalog = "
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: guarded}
security:
  deletionProtection: {enabled: true, failurePolicy: Ignore, cleanupOnShutdown: false}
  namespaceProtection: {enabled: true, restrictedNamespaces: [kube-system]}
spec:
  crds:
    site:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Site, plural: sites}
      admission:
        validation: {rules: [{field: spec.image, exists: true, message: m}]}
";
        let compiled = orkestra_katalog::load_sources(&[(PathBuf::from("k.yaml"), katalog.to_string())]).unwrap();
        let registration = Registration {
            endpoint: Endpoint::Url("https://127.0.0.1:8443".into()),
            ca_bundle: "CA".into(),
            failure_policy: FailurePolicy::Fail,
            timeout_seconds: 5,
        };
        let validating = configuration(&compiled, Kind::Validating, &registration).unwrap();
        let names: Vec<&str> = validating["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "provenance.sites.demo.orkestra.io.orkestra.io",
                "namespaces.sites.demo.orkestra.io.orkestra.io",
                "deletion.sites.demo.orkestra.io.orkestra.io",
                "deletion.crds.guarded.orkestra.io"
            ],
            "the rules' webhook needs security.webhooks.admission.enabled"
        );
        let deletion = &validating["webhooks"][2];
        assert_eq!(deletion["rules"][0]["operations"], json!(["DELETE"]));
        assert_eq!(deletion["failurePolicy"], "Ignore");
        assert_eq!(deletion["objectSelector"]["matchLabels"][DELETION_PROTECTION], "true");
        let crds = &validating["webhooks"][3];
        assert_eq!(crds["rules"][0]["resources"], json!(["customresourcedefinitions"]));
        let mutating = configuration(&compiled, Kind::Mutating, &registration).unwrap();
        assert_eq!(
            mutating["webhooks"][0]["clientConfig"]["url"],
            "https://127.0.0.1:8443/protect"
        );
        // At shutdown only deletion protection (cleanupOnShutdown: false) stays.
        let staying = configuration_of(&compiled, Kind::Validating, &registration, |f| {
            !cleaned_up(&compiled, f)
        })
        .unwrap();
        let staying: Vec<&str> = staying["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["name"].as_str().unwrap())
            .collect();
        assert!(staying.contains(&"deletion.crds.guarded.orkestra.io"), "{staying:?}");
        assert!(
            !staying.contains(&"namespaces.sites.demo.orkestra.io.orkestra.io"),
            "{staying:?}"
        );
    }
}
