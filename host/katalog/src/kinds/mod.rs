//! The child kinds a template block may hold, one row each ([`RESOURCE_KINDS`]): its Katalog
//! key, Kubernetes kind and scope, API resource (RBAC), default name, the fields it takes
//! (validation, profiles), and its renderer (its shorthand expanded to the Kubernetes shape).
//! Each family of kinds is one file: its rows, their renderers and their tests. A new kind
//! is its row and renderer there, plus a line in [`RESOURCE_KINDS`] and in `HookTemplates`
//! (`resource_lists!`); the tests fail until both lines exist.
//!
//! Readiness is not a row's: it judges any child the runtime observes (a DaemonSet a
//! component made, a custom resource's `Ready` condition), so it is keyed by group and kind
//! in the runtime's `outcome::readiness`.

mod access;
mod batch;
mod config;
mod custom;
mod network;
mod scaling;
mod shorthand;
mod storage;
mod tenancy;
mod workloads;

use crate::error::Error;
use serde_json::Value;

pub use shorthand::{Certify, Shorthand};

/// Expands an entry's rendered shorthand into the kind-specific part of its object, or says
/// which field is missing or wrong.
pub type RenderFn = fn(&Shorthand<'_>) -> Result<Value, Error>;

/// Fields of every workload that runs a pod.
const POD: &[&str] = &[
    "image",
    "imagePullSecrets",
    "imagePullPolicy",
    "command",
    "args",
    "env",
    "envFrom",
    "resources",
    "volumes",
    "volumeMounts",
    "nodeSelector",
    "tolerations",
    "affinity",
    "serviceAccountName",
    "workingDirectory",
    "securityContext",
    "podSecurity",
    "containerName",
];

/// A resource kind's row: its Katalog key, apiVersion, Kind, scope, API resource, default
/// name, kind-specific fields and renderer.
#[derive(Debug, Clone, Copy)]
pub struct KindSpec {
    pub key: &'static str,
    pub api_version: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// The API resource (plural, lowercase) RBAC rules name; empty for `custom`, whose kind
    /// each entry names.
    pub resource: &'static str,
    /// Upstream's default child name is `<cr>-<suffix>`; without one, the CR's own name.
    pub suffix: Option<&'static str>,
    /// Whether the pod fields above apply.
    pub pod: bool,
    pub fields: &'static [&'static str],
    pub render: RenderFn,
}

/// A row is its key: two rows with one key would be the same kind.
impl PartialEq for KindSpec {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

/// Every resource key of a template block, in the order a block lists them.
pub const RESOURCE_KINDS: &[KindSpec] = &[
    workloads::DEPLOYMENTS,
    workloads::STATEFUL_SETS,
    workloads::REPLICA_SETS,
    network::SERVICES,
    workloads::PODS,
    batch::JOBS,
    batch::CRON_JOBS,
    config::SECRETS,
    config::CONFIG_MAPS,
    config::SERVICE_ACCOUNTS,
    network::INGRESSES,
    storage::PERSISTENT_VOLUMES,
    storage::PERSISTENT_VOLUME_CLAIMS,
    scaling::HPA,
    scaling::PDB,
    tenancy::NAMESPACES,
    access::ROLES,
    access::ROLE_BINDINGS,
    access::CLUSTER_ROLES,
    access::CLUSTER_ROLE_BINDINGS,
    tenancy::LIMIT_RANGES,
    tenancy::RESOURCE_QUOTAS,
    network::NETWORK_POLICIES,
    custom::CUSTOM,
];

/// Built-in kinds a Katalog may name but not template (watches, cross reads, grants, the
/// Events the runtime writes): apiVersion, kind, resource, whether namespaced.
const OTHER_KINDS: &[(&str, &str, &str, bool)] = &[
    ("v1", "Node", "nodes", false),
    ("v1", "Endpoints", "endpoints", true),
    ("v1", "Event", "events", true),
    ("apps/v1", "DaemonSet", "daemonsets", true),
    ("networking.k8s.io/v1", "IngressClass", "ingressclasses", false),
    ("storage.k8s.io/v1", "StorageClass", "storageclasses", false),
    ("discovery.k8s.io/v1", "EndpointSlice", "endpointslices", true),
    ("events.k8s.io/v1", "Event", "events", true),
    ("coordination.k8s.io/v1", "Lease", "leases", true),
    ("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", false),
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
];

/// Every built-in kind the host knows the resource of, as (apiVersion, kind, resource,
/// namespaced): the rows of [`RESOURCE_KINDS`] (but `custom`), then the kinds a block cannot
/// template. The one table RBAC and the offline stand-in API server read.
pub fn built_in() -> impl Iterator<Item = (&'static str, &'static str, &'static str, bool)> {
    let templated = RESOURCE_KINDS
        .iter()
        .filter(|row| !row.resource.is_empty())
        .map(|row| (row.api_version, row.kind, row.resource, row.namespaced));
    templated.chain(OTHER_KINDS.iter().copied())
}

impl KindSpec {
    /// The kind-specific keys this kind accepts.
    pub fn accepts(&self, key: &str) -> bool {
        self.fields.contains(&key) || (self.pod && POD.contains(&key))
    }

    /// Upstream's default name of a child of this kind: `<cr>-<suffix>`, or the CR's name.
    pub fn default_name(&self, cr: &str) -> String {
        match self.suffix {
            Some(suffix) => format!("{cr}-{suffix}"),
            None => cr.to_string(),
        }
    }

    /// Every kind-specific key this kind accepts.
    pub fn keys(&self) -> Vec<&'static str> {
        let mut keys = self.fields.to_vec();
        if self.pod {
            keys.extend_from_slice(POD);
        }
        keys
    }
}

/// The default name of a child of kind `key` (a key of no kind: the CR's name).
pub fn default_name(key: &str, cr: &str) -> String {
    kind_spec(key).map_or_else(|| cr.to_string(), |kind| kind.default_name(cr))
}

/// The kind of a template block key.
pub fn kind_spec(key: &str) -> Option<&'static KindSpec> {
    RESOURCE_KINDS.iter().find(|k| k.key == key)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::model::HookTemplates;

    #[test]
    fn every_row_has_its_list_in_a_template_block_and_every_list_a_row() {
        let lists: Vec<&str> = HookTemplates::default()
            .resources()
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        let rows: Vec<&str> = RESOURCE_KINDS.iter().map(|row| row.key).collect();
        assert_eq!(lists, rows, "HookTemplates' lists and RESOURCE_KINDS differ");
        let mut block = HookTemplates::default();
        for row in RESOURCE_KINDS {
            assert!(
                block.resources_mut(row.key).is_some(),
                "{} cannot be merged into",
                row.key
            );
        }
    }

    #[test]
    fn every_row_names_one_kind_its_resource_and_its_default_name() {
        let mut kinds = BTreeSet::new();
        for row in RESOURCE_KINDS.iter().filter(|row| row.key != "custom") {
            assert!(
                kinds.insert((row.api_version, row.kind)),
                "{}: {} {} is another row's",
                row.key,
                row.api_version,
                row.kind
            );
            assert!(!row.resource.is_empty(), "{}: no API resource for RBAC", row.key);
            assert_eq!(
                row.resource,
                row.resource.to_lowercase(),
                "{}: resources are lowercase",
                row.key
            );
            let name = row.default_name("shop");
            assert!(
                name == "shop" || name.starts_with("shop-"),
                "{}: default name {name}",
                row.key
            );
        }
        let custom = kind_spec("custom").expect("the custom row");
        assert_eq!(
            default_name("nothing", "shop"),
            "shop",
            "a key of no kind names the child after its CR"
        );
        assert_eq!(custom.default_name("shop"), "shop");
        assert!(custom.resource.is_empty(), "custom names its kind per entry");
    }

    #[test]
    fn every_row_renders_its_fields_or_names_the_one_it_misses() {
        let no_certificate =
            |_: &serde_json::Value, _: Option<std::time::Duration>| Err("no certificate here".to_string());
        for row in RESOURCE_KINDS {
            let shorthand = Shorthand {
                kind: row,
                fields: &serde_json::Map::new(),
                cr: "shop",
                cr_namespace: "ns",
                certify: &no_certificate,
            };
            match (row.render)(&shorthand) {
                Ok(body) => assert!(body.is_object(), "{}: {body}", row.key),
                Err(message) => assert!(message.to_string().contains("required"), "{}: {message}", row.key),
            }
        }
    }
}
