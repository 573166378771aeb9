//! `onCreate` / `onReconcile` / `onDelete`: block settings and resource templates per kind.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::calls::ExternalCall;
use orkestra_expr::condition::{ConditionSpec, ConditionsSpec};

/// Declares [`HookTemplates`]: its block settings, then one `Vec<ResourceEntry>` per child
/// kind of [`crate::kinds::RESOURCE_KINDS`] under its Katalog key (fields of the struct itself, not
/// a flattened map, so an unknown key is still reported where it is written), and its access
/// by key; all from one list of `field => "key"` pairs.
macro_rules! resource_lists {
    ($($field:ident => $key:literal,)*) => {
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
            $(
                #[serde(default, rename = $key)]
                pub $field: Vec<ResourceEntry>,
            )*
        }

        impl HookTemplates {
            /// Every resource list with its Katalog key, in declaration order.
            pub fn resources(&self) -> Vec<(&'static str, &Vec<ResourceEntry>)> {
                vec![$(($key, &self.$field)),*]
            }

            /// Mutable access to the list under a Katalog key (for motif merging).
            pub fn resources_mut(&mut self, key: &str) -> Option<&mut Vec<ResourceEntry>> {
                match key {
                    $($key => Some(&mut self.$field),)*
                    _ => None,
                }
            }
        }
    };
}

resource_lists! {
    deployments => "deployments",
    stateful_sets => "statefulSets",
    replica_sets => "replicaSets",
    services => "services",
    pods => "pods",
    jobs => "jobs",
    cron_jobs => "cronJobs",
    secrets => "secrets",
    config_maps => "configMaps",
    service_accounts => "serviceAccounts",
    ingresses => "ingresses",
    persistent_volumes => "persistentVolumes",
    persistent_volume_claims => "persistentVolumeClaims",
    hpa => "hpa",
    pdb => "pdb",
    namespaces => "namespaces",
    roles => "roles",
    role_bindings => "roleBindings",
    cluster_roles => "clusterRoles",
    cluster_role_bindings => "clusterRoleBindings",
    limit_ranges => "limitRanges",
    resource_quotas => "resourceQuotas",
    network_policies => "networkPolicies",
    custom => "custom",
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
/// kept as written (checked against [`crate::kinds::RESOURCE_KINDS`]) and rendered by the kind's row.
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
