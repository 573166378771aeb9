//! `onCreate` / `onReconcile` / `onDelete`: block settings and resource templates per kind.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::calls::ExternalCall;
use orkestra_expr::condition::{ConditionSpec, ConditionsSpec};

/// One template block.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookTemplates {
    /// A label for logs and events.
    #[serde(default)]
    pub name: Option<String>,
    /// Calls made before the resources (results in `.external.<name>`).
    #[serde(default)]
    pub external: Vec<ExternalCall>,
    /// Gate the whole block.
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
    /// onDelete: delete `groups` one after the other.
    #[serde(default)]
    pub ordered: bool,
    #[serde(default)]
    pub groups: Vec<HookTemplates>,
    /// onDelete ordered deletion: one timeout for the whole sequence (default 5m).
    #[serde(default)]
    pub timeout: Option<String>,
    #[serde(default)]
    pub deployments: Vec<ResourceEntry>,
    #[serde(default)]
    pub stateful_sets: Vec<ResourceEntry>,
    #[serde(default)]
    pub replica_sets: Vec<ResourceEntry>,
    #[serde(default)]
    pub services: Vec<ResourceEntry>,
    #[serde(default)]
    pub pods: Vec<ResourceEntry>,
    #[serde(default)]
    pub jobs: Vec<ResourceEntry>,
    #[serde(default)]
    pub cron_jobs: Vec<ResourceEntry>,
    #[serde(default)]
    pub secrets: Vec<ResourceEntry>,
    #[serde(default)]
    pub config_maps: Vec<ResourceEntry>,
    #[serde(default)]
    pub service_accounts: Vec<ResourceEntry>,
    #[serde(default)]
    pub ingresses: Vec<ResourceEntry>,
    #[serde(default)]
    pub persistent_volumes: Vec<ResourceEntry>,
    #[serde(default)]
    pub persistent_volume_claims: Vec<ResourceEntry>,
    #[serde(default)]
    pub hpa: Vec<ResourceEntry>,
    #[serde(default)]
    pub pdb: Vec<ResourceEntry>,
    #[serde(default)]
    pub namespaces: Vec<ResourceEntry>,
    #[serde(default)]
    pub roles: Vec<ResourceEntry>,
    #[serde(default)]
    pub role_bindings: Vec<ResourceEntry>,
    #[serde(default)]
    pub cluster_roles: Vec<ResourceEntry>,
    #[serde(default)]
    pub cluster_role_bindings: Vec<ResourceEntry>,
    #[serde(default)]
    pub limit_ranges: Vec<ResourceEntry>,
    #[serde(default)]
    pub resource_quotas: Vec<ResourceEntry>,
    #[serde(default)]
    pub network_policies: Vec<ResourceEntry>,
    #[serde(default)]
    pub custom: Vec<ResourceEntry>,
}

impl HookTemplates {
    /// Every resource list with its Katalog key, in declaration order.
    pub fn resources(&self) -> [(&'static str, &Vec<ResourceEntry>); 24] {
        [
            ("deployments", &self.deployments),
            ("statefulSets", &self.stateful_sets),
            ("replicaSets", &self.replica_sets),
            ("services", &self.services),
            ("pods", &self.pods),
            ("jobs", &self.jobs),
            ("cronJobs", &self.cron_jobs),
            ("secrets", &self.secrets),
            ("configMaps", &self.config_maps),
            ("serviceAccounts", &self.service_accounts),
            ("ingresses", &self.ingresses),
            ("persistentVolumes", &self.persistent_volumes),
            ("persistentVolumeClaims", &self.persistent_volume_claims),
            ("hpa", &self.hpa),
            ("pdb", &self.pdb),
            ("namespaces", &self.namespaces),
            ("roles", &self.roles),
            ("roleBindings", &self.role_bindings),
            ("clusterRoles", &self.cluster_roles),
            ("clusterRoleBindings", &self.cluster_role_bindings),
            ("limitRanges", &self.limit_ranges),
            ("resourceQuotas", &self.resource_quotas),
            ("networkPolicies", &self.network_policies),
            ("custom", &self.custom),
        ]
    }

    /// Mutable access to the list under a Katalog key (for motif merging).
    pub fn resources_mut(&mut self, key: &str) -> Option<&mut Vec<ResourceEntry>> {
        Some(match key {
            "deployments" => &mut self.deployments,
            "statefulSets" => &mut self.stateful_sets,
            "replicaSets" => &mut self.replica_sets,
            "services" => &mut self.services,
            "pods" => &mut self.pods,
            "jobs" => &mut self.jobs,
            "cronJobs" => &mut self.cron_jobs,
            "secrets" => &mut self.secrets,
            "configMaps" => &mut self.config_maps,
            "serviceAccounts" => &mut self.service_accounts,
            "ingresses" => &mut self.ingresses,
            "persistentVolumes" => &mut self.persistent_volumes,
            "persistentVolumeClaims" => &mut self.persistent_volume_claims,
            "hpa" => &mut self.hpa,
            "pdb" => &mut self.pdb,
            "namespaces" => &mut self.namespaces,
            "roles" => &mut self.roles,
            "roleBindings" => &mut self.role_bindings,
            "clusterRoles" => &mut self.cluster_roles,
            "clusterRoleBindings" => &mut self.cluster_role_bindings,
            "limitRanges" => &mut self.limit_ranges,
            "resourceQuotas" => &mut self.resource_quotas,
            "networkPolicies" => &mut self.network_policies,
            "custom" => &mut self.custom,
            _ => return None,
        })
    }
}

/// `forEach`: one declaration per element of a list field.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForEach {
    /// A dot path to a list (`spec.regions`).
    pub field: String,
    /// The name the element is visible under, besides `.item`.
    #[serde(default, rename = "as")]
    pub as_: Option<String>,
}

/// One resource template. The fields every kind has are typed; kind-specific fields are
/// kept as written (checked against [`RESOURCE_KINDS`]) and rendered per kind.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceEntry {
    /// Templated; each kind has a default (`<cr>-deployment`, `<cr>-svc`, ...).
    #[serde(default)]
    pub name: Option<String>,
    /// Default: the CR's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default, deserialize_with = "string_map")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "string_map")]
    pub annotations: BTreeMap<String, String>,
    /// onCreate entries: also drift-correct every reconcile.
    #[serde(default)]
    pub reconcile: Option<bool>,
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
    #[serde(default)]
    pub for_each: Option<ForEach>,
    /// Artificial delay (testing).
    #[serde(default)]
    pub sleep: Option<String>,
    /// Per-resource override of the CRD's forceConflict.
    #[serde(default)]
    pub force_conflict: Option<bool>,
    /// Deployments and StatefulSets: replicas stepped up or down by conditions at each
    /// reconcile.
    #[serde(default)]
    pub autoscale: Option<WorkloadAutoscale>,
    /// The kind-specific fields, as written.
    #[serde(flatten)]
    pub fields: BTreeMap<String, Value>,
    /// For entries merged from a motif: its input values, visible to templates as `.inputs`.
    #[serde(skip)]
    pub inputs: Option<Value>,
    /// Profiles whose name is a template, chosen per CR (set at load).
    #[serde(skip)]
    pub profiles: Vec<ProfileChoice>,
}

/// A workload's `autoscale`: between `min` and `max` replicas, one step at a time, no
/// sooner than `cooldown` after the last.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadAutoscale {
    #[serde(default)]
    pub min: Option<i64>,
    #[serde(default)]
    pub max: Option<i64>,
    #[serde(default)]
    pub cooldown: Option<String>,
    #[serde(default)]
    pub scale_up: Option<ScaleStep>,
    #[serde(default)]
    pub scale_down: Option<ScaleStep>,
}

/// When to step, and by how much (`increment` up, `decrement` down; default 1).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleStep {
    #[serde(default)]
    pub conditions: ConditionsSpec,
    #[serde(default)]
    pub increment: Option<i64>,
    #[serde(default)]
    pub decrement: Option<i64>,
}

/// A `profile:` whose name is a template, with the presets it may choose from.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileChoice {
    /// Where the profile is written under the entry's fields (empty: the entry itself).
    pub path: Vec<String>,
    /// Its class (`resources`, `probes`, ...).
    pub class: &'static str,
    /// Every preset of the class, by lowercase name.
    pub options: BTreeMap<String, Value>,
}

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

/// A resource kind: its Katalog key, apiVersion, Kind, scope and kind-specific fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KindSpec {
    pub key: &'static str,
    pub api_version: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Whether the pod fields above apply.
    pub pod: bool,
    pub fields: &'static [&'static str],
}

/// Every resource key of a template block.
pub const RESOURCE_KINDS: &[KindSpec] = &[
    KindSpec {
        key: "deployments",
        api_version: "apps/v1",
        kind: "Deployment",
        namespaced: true,
        pod: true,
        fields: &["replicas", "port", "protocol", "probes", "rollingUpdate"],
    },
    KindSpec {
        key: "statefulSets",
        api_version: "apps/v1",
        kind: "StatefulSet",
        namespaced: true,
        pod: true,
        fields: &[
            "replicas",
            "port",
            "protocol",
            "probes",
            "serviceName",
            "volumeClaimTemplates",
            "rollingUpdate",
        ],
    },
    KindSpec {
        key: "replicaSets",
        api_version: "apps/v1",
        kind: "ReplicaSet",
        namespaced: true,
        pod: true,
        fields: &["replicas", "port", "protocol", "probes"],
    },
    KindSpec {
        key: "services",
        api_version: "v1",
        kind: "Service",
        namespaced: true,
        pod: false,
        fields: &[
            "type",
            "headless",
            "protocol",
            "port",
            "targetPort",
            "nodePort",
            "selector",
            "ports",
        ],
    },
    KindSpec {
        key: "pods",
        api_version: "v1",
        kind: "Pod",
        namespaced: true,
        pod: true,
        fields: &["port", "protocol", "probes", "restartPolicy"],
    },
    KindSpec {
        key: "jobs",
        api_version: "batch/v1",
        kind: "Job",
        namespaced: true,
        pod: true,
        fields: &[
            "restartPolicy",
            "backoffLimit",
            "ttlSecondsAfterFinished",
            "activeDeadlineSeconds",
            "completions",
            "parallelism",
        ],
    },
    KindSpec {
        key: "cronJobs",
        api_version: "batch/v1",
        kind: "CronJob",
        namespaced: true,
        pod: true,
        fields: &[
            "schedule",
            "suspend",
            "concurrencyPolicy",
            "successfulJobsHistoryLimit",
            "failedJobsHistoryLimit",
            "startingDeadlineSeconds",
            "restartPolicy",
            "backoffLimit",
        ],
    },
    KindSpec {
        key: "secrets",
        api_version: "v1",
        kind: "Secret",
        namespaced: true,
        pod: false,
        fields: &[
            "type",
            "data",
            "stringData",
            "once",
            "rotateAfter",
            "tls",
            "fromSecret",
            "fromNamespace",
            "toNamespaces",
        ],
    },
    KindSpec {
        key: "configMaps",
        api_version: "v1",
        kind: "ConfigMap",
        namespaced: true,
        pod: false,
        fields: &[
            "data",
            "binaryData",
            "immutable",
            "fromConfigMap",
            "fromNamespace",
            "toNamespaces",
        ],
    },
    KindSpec {
        key: "serviceAccounts",
        api_version: "v1",
        kind: "ServiceAccount",
        namespaced: true,
        pod: false,
        fields: &["imagePullSecrets", "automountServiceAccountToken"],
    },
    KindSpec {
        key: "ingresses",
        api_version: "networking.k8s.io/v1",
        kind: "Ingress",
        namespaced: true,
        pod: false,
        fields: &[
            "ingressClassName",
            "host",
            "path",
            "pathType",
            "serviceName",
            "servicePort",
            "port",
            "tls",
            "rules",
        ],
    },
    KindSpec {
        key: "persistentVolumes",
        api_version: "v1",
        kind: "PersistentVolume",
        namespaced: false,
        pod: false,
        fields: &[
            "storage",
            "capacity",
            "accessModes",
            "storageClassName",
            "reclaimPolicy",
            "volumeMode",
            "hostPath",
            "nfs",
            "csi",
        ],
    },
    KindSpec {
        key: "persistentVolumeClaims",
        api_version: "v1",
        kind: "PersistentVolumeClaim",
        namespaced: true,
        pod: false,
        fields: &["storage", "accessModes", "storageClassName", "volumeMode", "volumeName"],
    },
    KindSpec {
        key: "hpa",
        api_version: "autoscaling/v2",
        kind: "HorizontalPodAutoscaler",
        namespaced: true,
        pod: false,
        fields: &[
            "scaleTargetRef",
            "target",
            "minReplicas",
            "maxReplicas",
            "metrics",
            "targetCPUUtilization",
            "targetMemoryUtilization",
            "targetCPUUtilizationPercentage",
            "targetMemoryUtilizationPercentage",
            "behavior",
        ],
    },
    KindSpec {
        key: "pdb",
        api_version: "policy/v1",
        kind: "PodDisruptionBudget",
        namespaced: true,
        pod: false,
        fields: &["minAvailable", "maxUnavailable", "selector", "behavior", "profile"],
    },
    KindSpec {
        key: "namespaces",
        api_version: "v1",
        kind: "Namespace",
        namespaced: false,
        pod: false,
        fields: &[],
    },
    KindSpec {
        key: "roles",
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        namespaced: true,
        pod: false,
        fields: &["rules"],
    },
    KindSpec {
        key: "roleBindings",
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        namespaced: true,
        pod: false,
        fields: &["roleRef", "subjects", "role", "clusterRole", "serviceAccount"],
    },
    KindSpec {
        key: "clusterRoles",
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        namespaced: false,
        pod: false,
        fields: &["rules", "aggregationRule"],
    },
    KindSpec {
        key: "clusterRoleBindings",
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        namespaced: false,
        pod: false,
        fields: &["roleRef", "subjects", "clusterRole", "serviceAccount"],
    },
    KindSpec {
        key: "limitRanges",
        api_version: "v1",
        kind: "LimitRange",
        namespaced: true,
        pod: false,
        fields: &["limits", "profile"],
    },
    KindSpec {
        key: "resourceQuotas",
        api_version: "v1",
        kind: "ResourceQuota",
        namespaced: true,
        pod: false,
        fields: &["hard", "scopes", "scopeSelector", "profile"],
    },
    KindSpec {
        key: "networkPolicies",
        api_version: "networking.k8s.io/v1",
        kind: "NetworkPolicy",
        namespaced: true,
        pod: false,
        fields: &["podSelector", "policyTypes", "ingress", "egress", "profile"],
    },
    KindSpec {
        key: "custom",
        api_version: "",
        kind: "",
        namespaced: true,
        pod: false,
        fields: &["apiVersion", "kind", "metadata", "spec", "status", "hasStatus", "data"],
    },
];

impl KindSpec {
    /// The kind-specific keys this kind accepts.
    pub fn accepts(&self, key: &str) -> bool {
        self.fields.contains(&key) || (self.pod && POD.contains(&key))
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

/// The kind of a template block key.
pub fn kind_spec(key: &str) -> Option<&'static KindSpec> {
    RESOURCE_KINDS.iter().find(|k| k.key == key)
}

/// `labels` / `annotations`: a map, or upstream's list of `{key, value}` pairs.
fn string_map<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, String>, D::Error> {
    #[derive(Deserialize, serde::Serialize)]
    #[serde(deny_unknown_fields)]
    struct Pair {
        key: String,
        #[serde(default)]
        value: String,
    }
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map of strings, or a list of {key, value}")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((key, value)) = map.next_entry::<String, String>()? {
                out.insert(key, value);
            }
            Ok(out)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(Pair { key, value }) = seq.next_element()? {
                out.insert(key, value);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_any(Visitor)
}
