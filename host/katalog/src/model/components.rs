//! The component declarations of a `reconcile` section: hooks, a constructor, their limits,
//! grants and deletion policy, and motif imports.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::calls::ExternalCall;

/// A kind a hook or constructor manages (RBAC and an implicit watch).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedResource {
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub plural: Option<String>,
}

/// `reconcile.hooks`: code called by the declarative reconciler.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HooksSpec {
    /// Upstream Go hooks (import path); a Katalog using them loads, but only Wasm
    /// components run here.
    #[serde(default)]
    pub location: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub fetch: Option<Value>,
    #[serde(default)]
    pub function: Option<String>,
    #[serde(default)]
    pub alias: Option<String>,
    /// A Wasm component (world `hook`): a path (relative to the Katalog file), an
    /// http(s) URL, which needs `sha256`, or `oci://HOST/REPO:TAG@sha256:...` (a registry
    /// artifact pinned by its manifest digest).
    #[serde(default)]
    pub component: Option<String>,
    /// The component's sha256 (hex); required for URLs, checked for paths when given.
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default)]
    pub limits: ComponentLimits,
    /// While on-delete keeps failing: how long the finalizer waits, and then what.
    #[serde(default)]
    pub deletion: ComponentDeletion,
    /// A fresh instance per call (the default), or warm ones kept per namespace.
    #[serde(default)]
    pub instances: ComponentInstances,
    /// Roll a new version out to a share of the CRs first (without it, a new version
    /// serves every CR at once).
    #[serde(default)]
    pub rollout: Option<ComponentRollout>,
    /// What the component may touch through the kube interface and its returned resources.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Directories shipped beside the Katalog that the component may read (never write).
    #[serde(default)]
    pub files: Vec<FileGrant>,
    /// The ServiceAccount the component acts as towards the API server (`name`: in the CR's
    /// namespace; `namespace/name`: that one): its kube calls and the children it returns
    /// are sent impersonating it, so the cluster's RBAC holds besides the capabilities.
    #[serde(default)]
    pub service_account: Option<String>,
    #[serde(default)]
    pub managed_resources: Vec<ManagedResource>,
    /// Hooks before the templates instead of after.
    #[serde(default)]
    pub run_hooks_first: bool,
    /// Values (templated per CR) handed to the hook.
    #[serde(default)]
    pub args: Option<Value>,
    #[serde(default)]
    pub external: Vec<ExternalCall>,
}

/// `reconcile.constructor`: code that owns reconcile (`default: false`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConstructorSpec {
    #[serde(default)]
    pub location: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub fetch: Option<Value>,
    #[serde(default)]
    pub function: Option<String>,
    #[serde(default)]
    pub alias: Option<String>,
    /// A Wasm component (world `constructor`): a path (relative to the Katalog file), an
    /// http(s) URL, which needs `sha256`, or `oci://HOST/REPO:TAG@sha256:...` (a registry
    /// artifact pinned by its manifest digest).
    #[serde(default)]
    pub component: Option<String>,
    /// The component's sha256 (hex); required for URLs, checked for paths when given.
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default)]
    pub limits: ComponentLimits,
    /// While on-delete keeps failing: how long the finalizer waits, and then what.
    #[serde(default)]
    pub deletion: ComponentDeletion,
    /// A fresh instance per call (the default), or warm ones kept per namespace.
    #[serde(default)]
    pub instances: ComponentInstances,
    /// Roll a new version out to a share of the CRs first (without it, a new version
    /// serves every CR at once).
    #[serde(default)]
    pub rollout: Option<ComponentRollout>,
    /// What the component may touch through the kube interface and its returned resources.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Directories shipped beside the Katalog that the component may read (never write).
    #[serde(default)]
    pub files: Vec<FileGrant>,
    /// The ServiceAccount the component acts as towards the API server (`name`: in the CR's
    /// namespace; `namespace/name`: that one): its kube calls and the children it returns
    /// are sent impersonating it, so the cluster's RBAC holds besides the capabilities.
    #[serde(default)]
    pub service_account: Option<String>,
    #[serde(default)]
    pub managed_resources: Vec<ManagedResource>,
    #[serde(default)]
    pub args: Option<Value>,
}

/// How a new version of a component rolls out: on a share of the CRs first, then on all of
/// them after a period, or back to the last good version when it fails too often.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComponentRollout {
    /// Percent of the CRs (picked by a stable hash of namespace/name) the new version serves
    /// first (default 10).
    #[serde(default)]
    pub share: Option<u32>,
    /// How long the new version serves its share before it serves every CR (default `10m`).
    #[serde(default)]
    pub promote_after: Option<String>,
    /// Percent of the new version's reconciles that may fail; past it, the last good version
    /// serves again (default 10).
    #[serde(default)]
    pub max_error_percent: Option<u32>,
    /// Reconciles of the new version before its failures count (default 5).
    #[serde(default)]
    pub min_reconciles: Option<u32>,
}

/// Per-call limits of a component; each has a safe default.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComponentLimits {
    /// Wall-clock time per call (default `2s`).
    #[serde(default)]
    pub timeout: Option<String>,
    /// Linear memory of one instance (default `64Mi`).
    #[serde(default)]
    pub memory: Option<String>,
    /// Size of what one call returns (default `1Mi`).
    #[serde(default)]
    pub result_size: Option<String>,
    /// Kube calls per call (default 50); each page of a list is one.
    #[serde(default)]
    pub kube_calls: Option<u32>,
    /// Bytes of objects the kube interface hands over per call (default `4Mi`).
    #[serde(default)]
    pub kube_bytes: Option<String>,
    /// Child resources one call may return (default 100).
    #[serde(default)]
    pub children: Option<u32>,
    /// Events one call may return (default 10).
    #[serde(default)]
    pub events: Option<u32>,
    /// Log bytes per call, each line counted with what it costs the host (default `64Ki`).
    #[serde(default)]
    pub log_bytes: Option<String>,
    /// Time the host may spend on what one call returned: events, children, pruning
    /// (default `30s`).
    #[serde(default)]
    pub apply_timeout: Option<String>,
    /// Fuel (wasmtime's count of executed instructions) per call: deterministic CPU
    /// accounting, the same on every machine. Unset: unmetered.
    #[serde(default)]
    pub fuel: Option<u64>,
}

/// What happens while a component's on-delete (or finalize) keeps failing: the finalizer
/// stays until `timeout` after the deletion began, then `onTimeout` decides.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComponentDeletion {
    /// Counted from the CR's deletionTimestamp (default `5m`).
    #[serde(default)]
    pub timeout: Option<String>,
    /// `block` (default): the finalizer stays, Ready says DeletionBlocked with the guest's
    /// reason, and retries go on with backoff. `release`: the finalizer goes, with a Warning.
    #[serde(default)]
    pub on_timeout: Option<String>,
}

/// How calls get their instance. `reuse: fresh` (the default): a new instance per call,
/// which sees nothing of any earlier call. `reuse: warm`: an instance is kept after a call
/// that ended well and serves later calls of the same namespace's CRs, until `maxCalls` or
/// until it holds more than `memoryHighWater` after a call.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComponentInstances {
    /// `fresh` (default) or `warm`.
    #[serde(default)]
    pub reuse: Option<String>,
    /// Calls one warm instance serves before a fresh one replaces it (default 1000).
    #[serde(default)]
    pub max_calls: Option<u32>,
    /// Memory a warm instance may hold after a call and still be kept (default: half of
    /// `limits.memory`).
    #[serde(default)]
    pub memory_high_water: Option<String>,
}

/// `files[]`: a directory the component sees read-only at `mountPath`.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileGrant {
    /// A directory, relative to the Katalog file.
    pub path: String,
    /// Where the component finds it (default `/files`).
    #[serde(default)]
    pub mount_path: Option<String>,
}

/// One grant: verbs on kinds in namespaces. Nothing is granted by default.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Capability {
    /// `v1`, `apps/v1`, ...; `*` for any.
    #[serde(default)]
    pub api_version: Option<String>,
    /// Kinds (`ConfigMap`); `*` for any.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// `get`, `list`, `apply`, `delete`, `patch-status`, or `*`.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Namespaces; `self` is the custom resource's own (the default), `*` any.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Whether `apply`, `delete` and `patch-status` may touch an object another custom
    /// resource controls (its controller reference, or the host's owner label). Off by
    /// default: a granted namespace holds other tenants' children too.
    #[serde(default)]
    pub controlled_by_others: bool,
    /// Whether a recording of the component's calls may keep the values of the Secrets this
    /// grant covers. Off by default: a recording replaces each value with a placeholder.
    #[serde(default)]
    pub record_secrets: bool,
}

/// `reconcile.imports[]`: a motif whose resource templates join onReconcile.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Import {
    #[serde(default)]
    pub motif: Option<String>,
    #[serde(default)]
    pub oci: Option<String>,
    /// Values for the motif's inputs.
    #[serde(default, rename = "with")]
    pub with_: BTreeMap<String, Value>,
}
