//! The child kinds a template block may hold, one row each ([`RESOURCE_KINDS`]): what the
//! model, validation, RBAC, profiles and the runtime's renderer read about a kind. A new
//! kind is a row here, its list in `HookTemplates` (one line of `resource_lists!`) and its
//! renderer arm; the tests of each fail until all three exist.

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
/// name and kind-specific fields. Its renderer is the runtime's (`pipeline::render`), its
/// readiness rule `outcome::readiness`; the tests of both walk [`RESOURCE_KINDS`].
#[derive(Debug, Clone, Copy, PartialEq)]
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
}

/// Every resource key of a template block.
pub const RESOURCE_KINDS: &[KindSpec] = &[
    KindSpec {
        key: "deployments",
        resource: "deployments",
        suffix: Some("deployment"),
        api_version: "apps/v1",
        kind: "Deployment",
        namespaced: true,
        pod: true,
        fields: &["replicas", "port", "protocol", "probes", "rollingUpdate"],
    },
    KindSpec {
        key: "statefulSets",
        resource: "statefulsets",
        suffix: Some("statefulset"),
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
        resource: "replicasets",
        suffix: Some("replicaset"),
        api_version: "apps/v1",
        kind: "ReplicaSet",
        namespaced: true,
        pod: true,
        fields: &["replicas", "port", "protocol", "probes"],
    },
    KindSpec {
        key: "services",
        resource: "services",
        suffix: Some("svc"),
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
        resource: "pods",
        suffix: Some("pod"),
        api_version: "v1",
        kind: "Pod",
        namespaced: true,
        pod: true,
        fields: &["port", "protocol", "probes", "restartPolicy"],
    },
    KindSpec {
        key: "jobs",
        resource: "jobs",
        suffix: Some("job"),
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
        resource: "cronjobs",
        suffix: Some("cronjob"),
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
        resource: "secrets",
        suffix: Some("secret"),
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
        resource: "configmaps",
        suffix: Some("config"),
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
        resource: "serviceaccounts",
        suffix: Some("sa"),
        api_version: "v1",
        kind: "ServiceAccount",
        namespaced: true,
        pod: false,
        fields: &["imagePullSecrets", "automountServiceAccountToken"],
    },
    KindSpec {
        key: "ingresses",
        resource: "ingresses",
        suffix: Some("ingress"),
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
        resource: "persistentvolumes",
        suffix: Some("pv"),
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
        resource: "persistentvolumeclaims",
        suffix: Some("pvc"),
        api_version: "v1",
        kind: "PersistentVolumeClaim",
        namespaced: true,
        pod: false,
        fields: &["storage", "accessModes", "storageClassName", "volumeMode", "volumeName"],
    },
    KindSpec {
        key: "hpa",
        resource: "horizontalpodautoscalers",
        suffix: Some("hpa"),
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
        resource: "poddisruptionbudgets",
        suffix: Some("pdb"),
        api_version: "policy/v1",
        kind: "PodDisruptionBudget",
        namespaced: true,
        pod: false,
        fields: &["minAvailable", "maxUnavailable", "selector", "behavior", "profile"],
    },
    KindSpec {
        key: "namespaces",
        resource: "namespaces",
        suffix: None,
        api_version: "v1",
        kind: "Namespace",
        namespaced: false,
        pod: false,
        fields: &[],
    },
    KindSpec {
        key: "roles",
        resource: "roles",
        suffix: Some("role"),
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        namespaced: true,
        pod: false,
        fields: &["rules"],
    },
    KindSpec {
        key: "roleBindings",
        resource: "rolebindings",
        suffix: Some("binding"),
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        namespaced: true,
        pod: false,
        fields: &["roleRef", "subjects", "role", "clusterRole", "serviceAccount"],
    },
    KindSpec {
        key: "clusterRoles",
        resource: "clusterroles",
        suffix: Some("role"),
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        namespaced: false,
        pod: false,
        fields: &["rules", "aggregationRule"],
    },
    KindSpec {
        key: "clusterRoleBindings",
        resource: "clusterrolebindings",
        suffix: Some("binding"),
        api_version: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        namespaced: false,
        pod: false,
        fields: &["roleRef", "subjects", "clusterRole", "serviceAccount"],
    },
    KindSpec {
        key: "limitRanges",
        resource: "limitranges",
        suffix: Some("limits"),
        api_version: "v1",
        kind: "LimitRange",
        namespaced: true,
        pod: false,
        fields: &["limits", "profile"],
    },
    KindSpec {
        key: "resourceQuotas",
        resource: "resourcequotas",
        suffix: Some("quota"),
        api_version: "v1",
        kind: "ResourceQuota",
        namespaced: true,
        pod: false,
        fields: &["hard", "scopes", "scopeSelector", "profile"],
    },
    KindSpec {
        key: "networkPolicies",
        resource: "networkpolicies",
        suffix: Some("netpol"),
        api_version: "networking.k8s.io/v1",
        kind: "NetworkPolicy",
        namespaced: true,
        pod: false,
        fields: &["podSelector", "policyTypes", "ingress", "egress", "profile"],
    },
    KindSpec {
        key: "custom",
        resource: "",
        suffix: None,
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

/// The kind of a template block key.
pub fn kind_spec(key: &str) -> Option<&'static KindSpec> {
    RESOURCE_KINDS.iter().find(|k| k.key == key)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::HookTemplates;

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
        assert_eq!(custom.default_name("shop"), "shop");
        assert!(custom.resource.is_empty(), "custom names its kind per entry");
    }
}
