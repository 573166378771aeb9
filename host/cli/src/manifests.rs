//! `ork manifests -f KATALOG`: the RBAC a Katalog's runtime needs, and nothing more, as YAML
//! for `kubectl apply` or a kustomize overlay over `deploy/base`.

use std::collections::BTreeSet;
use std::process::ExitCode;

use clap::Args;
use orkestra_katalog::rbac::{Needs, Rule, Scope};
use serde_json::{Value, json};

use crate::katalog_args::KatalogArgs;
use crate::katalog_configmap::KatalogConfigMap;

#[derive(Debug, Args)]
pub struct ManifestsArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    #[command(flatten)]
    rbac: RbacArgs,
    /// The ConfigMap (`NAMESPACE/NAME`) the runtime follows with `ork run
    /// --katalog-configmap`: the rules then allow reading that one ConfigMap too.
    #[arg(long, value_name = "CONFIGMAP")]
    katalog_configmap: Option<String>,
}

/// Whom the RBAC is for, and what besides the Katalog it must allow.
#[derive(Debug, Clone, Args)]
pub struct RbacArgs {
    /// The namespace the runtime runs in (its ServiceAccount's).
    #[arg(long, short = 'n', value_name = "NAMESPACE", default_value = "orkestra")]
    pub namespace: String,
    /// The runtime's ServiceAccount (deploy/base names it `orkestra`).
    #[arg(long, value_name = "NAME", default_value = "orkestra")]
    pub service_account: String,
    /// Leave out the Lease rules: one replica, run without `--ha` (deploy/base runs
    /// `--ha leader`).
    #[arg(long)]
    no_leases: bool,
    /// Where the Leases live, when not the runtime's namespace.
    #[arg(long, value_name = "NAMESPACE")]
    lease_namespace: Option<String>,
    /// A `NAMESPACE/NAME` Secret the runtime reads for registry credentials (as given to
    /// `ork run --pull-secret`); repeat for several.
    #[arg(long, value_name = "SECRET")]
    pull_secret: Vec<String>,
    /// Let components act as ServiceAccounts of the cluster's own namespaces (kube-system,
    /// kube-public, kube-node-lease): without it such a Katalog is refused, as the runtime
    /// would be allowed to impersonate the cluster's controllers.
    #[arg(long)]
    allow_system_impersonation: bool,
}

/// The ConfigMap that keeps the components' rollouts, in the runtime's namespace, when the
/// Katalog declares a component: read at start, watched by standbys, written as rollouts move.
fn rollout_state(compiled: &orkestra_katalog::Compiled, namespace: &str, needs: &mut Needs) {
    let declares = compiled
        .enabled()
        .any(|crd| !orkestra::runtime::slots::component_specs(crd).is_empty());
    if !declares {
        return;
    }
    let name = orkestra::runtime::rollout_state::configmap_name(&compiled.katalog.name);
    let scope = Scope::Namespace(namespace.to_string());
    // A create cannot name its object ahead; the rest can.
    needs.add(scope.clone(), "", "configmaps", &["create"]);
    for verb in ["get", "list", "watch", "patch"] {
        needs.add_named(scope.clone(), "", "configmaps", verb, &name);
    }
}

/// Namespaces whose ServiceAccounts run the cluster itself.
const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

pub fn manifests(args: ManifestsArgs) -> anyhow::Result<ExitCode> {
    let compiled = args.katalog.load()?;
    let follows = KatalogConfigMap::of_files(args.katalog_configmap.as_deref(), &args.katalog.files())?;
    let documents = rbac_documents(&compiled, &args.rbac, follows.as_ref())?;
    let mut text = format!(
        "# RBAC for the runtime of Katalog {:?} (ork manifests)\n",
        compiled.katalog.name
    );
    for document in documents {
        text.push_str(&format!("---\n{}\n", serde_yaml_ng::to_string(&document)?.trim_end()));
    }
    crate::stdout::write(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The Roles, ClusterRoles and bindings the runtime of `compiled` needs, as `args` say whom
/// for, and the read of the Katalog's ConfigMap it `follows`; a component acting as a system
/// ServiceAccount is refused unless allowed.
pub fn rbac_documents(
    compiled: &orkestra_katalog::Compiled,
    args: &RbacArgs,
    follows: Option<&KatalogConfigMap>,
) -> anyhow::Result<Vec<Value>> {
    if !args.allow_system_impersonation {
        for (crd, account) in impersonated(compiled) {
            if SYSTEM_NAMESPACES.contains(&account.as_str().split('/').next().unwrap_or_default()) {
                anyhow::bail!(
                    "CRD {crd}: a component acts as ServiceAccount {account}, of the cluster's own namespace: the runtime would be granted to impersonate it; pass --allow-system-impersonation if that is meant"
                );
            }
        }
    }
    let name = format!("orkestra:{}", compiled.katalog.name);
    let mut needs = Needs::of(compiled);
    let lease_namespace = (!args.no_leases).then(|| {
        args.lease_namespace
            .clone()
            .or_else(|| compiled.katalog.ha.as_ref().and_then(|h| h.lease_namespace.clone()))
            .unwrap_or_else(|| args.namespace.clone())
    });
    let own = Own {
        namespace: &args.namespace,
        leases: lease_namespace,
        gateway: true,
        pull_secrets: &args.pull_secret,
    };
    let (own, secrets) = own_needs(compiled, &own)?;
    needs.extend(&own);
    if let Some(configmap) = follows {
        configmap.needs(&mut needs);
    }
    if !secrets.is_empty() {
        eprintln!(
            "ork manifests: the gateway reads Secrets {}; the rule grants their namespaces' Secrets (narrow it with resourceNames if they all exist beforehand)",
            secrets.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    let subject = json!([{"kind": "ServiceAccount", "name": args.service_account, "namespace": args.namespace}]);
    let mut documents = Vec::new();
    for (scope, rules) in needs.rules() {
        let rules: Vec<Value> = rules.iter().map(rule).collect();
        documents.extend(match scope {
            Scope::Cluster => [
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": name, "labels": labels(&compiled.katalog.name)}, "rules": rules}),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": name, "labels": labels(&compiled.katalog.name)},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                    "subjects": subject}),
            ],
            Scope::Namespace(ns) => [
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                    "metadata": {"name": name, "namespace": ns, "labels": labels(&compiled.katalog.name)}, "rules": rules}),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": ns, "labels": labels(&compiled.katalog.name)},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                    "subjects": subject}),
            ],
        });
    }
    Ok(documents)
}

/// What the runtime itself does besides its CRDs' work.
pub struct Own<'a> {
    /// The runtime's namespace (its rollout state, the gateway's Secrets by default).
    pub namespace: &'a str,
    /// Where it takes Leases, when it runs with `--ha`.
    pub leases: Option<String>,
    /// Whether it serves the Katalog's webhooks and Serve API.
    pub gateway: bool,
    /// `NAMESPACE/NAME` Secrets it reads registry credentials from.
    pub pull_secrets: &'a [String],
}

/// The runtime's own needs: its Leases, the gateway's, its rollout state and its pull
/// Secrets. What `ork manifests` grants beside the CRDs' needs, and what `ork run` checks;
/// with the Secrets the gateway reads (`namespace/name`).
pub fn own_needs(compiled: &orkestra_katalog::Compiled, own: &Own) -> anyhow::Result<(Needs, BTreeSet<String>)> {
    let mut needs = Needs::default();
    if let Some(namespace) = &own.leases {
        let verbs = &["get", "list", "watch", "create", "update", "patch", "delete"];
        needs.add(
            Scope::Namespace(namespace.clone()),
            "coordination.k8s.io",
            "leases",
            verbs,
        );
    }
    let secrets = match own.gateway {
        true => gateway(compiled, own.namespace, &mut needs),
        false => BTreeSet::new(),
    };
    rollout_state(compiled, own.namespace, &mut needs);
    for secret in own.pull_secrets {
        let (namespace, secret_name) = super::component::pull_secret(secret)?;
        needs.add_named(Scope::Namespace(namespace), "", "secrets", "get", &secret_name);
    }
    Ok((needs, secrets))
}

/// Each ServiceAccount a component acts as (`namespace/name`; the namespace is the CRD's own
/// when the Katalog names none), with its CRD.
fn impersonated(compiled: &orkestra_katalog::Compiled) -> Vec<(String, String)> {
    let mut accounts = Vec::new();
    for crd in compiled.enabled() {
        let boxes = std::iter::once(crd.crd_box()).chain(crd.targets.values());
        for account in boxes.filter_map(|b| b.component.as_ref()?.service_account.as_ref()) {
            let namespace = account
                .namespace
                .clone()
                .or_else(|| crd.namespace.clone())
                .unwrap_or_default();
            accounts.push((crd.name.to_string(), format!("{namespace}/{}", account.name)));
        }
    }
    accounts
}

fn labels(katalog: &str) -> Value {
    json!({"app.kubernetes.io/name": "orkestra", "orkestra.io/katalog": katalog})
}

fn rule(rule: &Rule) -> Value {
    let mut out = json!({"apiGroups": [rule.api_group], "resources": rule.resources, "verbs": rule.verbs});
    if !rule.resource_names.is_empty() {
        out["resourceNames"] = json!(rule.resource_names);
    }
    out
}

/// What the webhooks and the Serve API read and write besides the runtime's own needs;
/// returns the Secrets (`namespace/name`) the gateway reads.
fn gateway(compiled: &orkestra_katalog::Compiled, namespace: &str, needs: &mut Needs) -> BTreeSet<String> {
    if orkestra_gateway::serving::any(compiled) {
        // Its own two configurations, by name; a create cannot be limited by name.
        let configuration = orkestra_gateway::registration::name_for(&compiled.katalog.name);
        for resource in ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"] {
            needs.add(Scope::Cluster, "admissionregistration.k8s.io", resource, &["create"]);
            for verb in ["get", "update", "patch", "delete"] {
                needs.add_named(
                    Scope::Cluster,
                    "admissionregistration.k8s.io",
                    resource,
                    verb,
                    &configuration,
                );
            }
        }
        // A certificate cert-manager issues: its Certificate, and the Secret it writes.
        let certs = compiled.katalog.security.as_ref().and_then(|s| s.cert_manager.as_ref());
        if let Some(certs) = certs.filter(|c| c.issuer_ref.is_some()) {
            let scope = Scope::Namespace(namespace.to_string());
            let secret = orkestra_gateway::cert_manager::secret_name(certs);
            needs.add(scope.clone(), "cert-manager.io", "certificates", &["create"]);
            for verb in ["get", "patch"] {
                needs.add_named(scope.clone(), "cert-manager.io", "certificates", verb, secret);
            }
            needs.add_named(scope, "", "secrets", "get", secret);
        }
        // Protection labels and conversion settings go on the Katalog's own CRDs, by name.
        for crd in compiled
            .enabled()
            .filter(|c| !orkestra_katalog::is_builtin_group(&c.group))
        {
            for verb in ["get", "patch"] {
                needs.add_named(
                    Scope::Cluster,
                    "apiextensions.k8s.io",
                    "customresourcedefinitions",
                    verb,
                    &crd.crd_name(),
                );
            }
        }
    }
    let Some(gateway) = &compiled.katalog.gateway else {
        return BTreeSet::new();
    };
    let intake = gateway.intake_enabled();
    if gateway.serve_api_open() || intake.is_some() {
        // The Serve API and webhook intake create (and the Serve API deletes) served CRs.
        for crd in compiled.served_crds() {
            let scope = match &crd.namespace {
                Some(ns) if crd.namespaced => Scope::Namespace(ns.clone()),
                _ => Scope::Cluster,
            };
            needs.add(scope, &crd.group, &crd.plural, &["create", "delete"]);
        }
    }
    let mut secrets: BTreeSet<String> = BTreeSet::new();
    for token in gateway.tokens() {
        if let Some(secret) = &token.secret_ref {
            let ns = secret.namespace.as_deref().unwrap_or(namespace);
            // Made when missing and rotated: create cannot be limited by name.
            needs.add(
                Scope::Namespace(ns.to_string()),
                "",
                "secrets",
                &["get", "create", "update"],
            );
            secrets.insert(format!("{ns}/{}", secret.name));
        }
    }
    for cluster in gateway.clusters.values() {
        for secret in [&cluster.secret_ref, &cluster.token_ref, &cluster.ca_ref]
            .into_iter()
            .flatten()
        {
            let ns = secret.namespace.as_deref().unwrap_or(namespace);
            needs.add(Scope::Namespace(ns.to_string()), "", "secrets", &["get"]);
            secrets.insert(format!("{ns}/{}", secret.name));
        }
    }
    // Webhook intake reads the secrets deliveries are checked with and the content tokens.
    if let Some(webhooks) = intake {
        let git = webhooks.github.iter().chain(&webhooks.gitlab).filter(|e| e.enabled);
        let refs = git
            .flat_map(|e| [&e.secret_ref, &e.content_token_ref])
            .chain(
                webhooks
                    .slack
                    .iter()
                    .filter(|e| e.enabled)
                    .map(|e| &e.signing_secret_ref),
            )
            .chain(webhooks.generic.iter().filter(|e| e.enabled).map(|e| &e.secret_ref));
        for secret in refs.flatten() {
            let ns = secret.namespace.as_deref().unwrap_or(namespace);
            needs.add(Scope::Namespace(ns.to_string()), "", "secrets", &["get"]);
            secrets.insert(format!("{ns}/{}", secret.name));
        }
    }
    secrets
}
