//! `serve`: self-service exposure through the gateway. This runtime uses the targets (and
//! their per-target operator boxes); the rest is kept for the gateway.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::operator_box::OperatorBox;

/// `spec.crds.<name>.serve`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Serve {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub category: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub ignore: Vec<String>,
    #[serde(default)]
    pub fields: BTreeMap<String, Value>,
    #[serde(default)]
    pub labels: BTreeMap<String, Value>,
    #[serde(default)]
    pub annotations: BTreeMap<String, Value>,
    /// A single target name, or a map of targets and aliases.
    #[serde(default)]
    pub target: Option<ServeTarget>,
    /// Templated CR name (resolved by the gateway).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub tokens: Option<Value>,
    #[serde(default)]
    pub config: Option<Value>,
    #[serde(default)]
    pub modes: Option<Value>,
    #[serde(default)]
    pub clusters: Option<Value>,
    #[serde(default)]
    pub cluster: Option<Value>,
}

/// `serve.target`: a name, or named entries (one `primary: true`, the others aliases).
#[derive(Debug, Clone, PartialEq)]
pub enum ServeTarget {
    Single(String),
    Entries(BTreeMap<String, TargetEntry>),
}

impl serde::Serialize for ServeTarget {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ServeTarget::Single(name) => serializer.serialize_str(name),
            ServeTarget::Entries(entries) => entries.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ServeTarget {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TargetVisitor;
        impl<'de> serde::de::Visitor<'de> for TargetVisitor {
            type Value = ServeTarget;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a target name or a map of targets")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ServeTarget, E> {
                Ok(ServeTarget::Single(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ServeTarget, A::Error> {
                let mut entries = BTreeMap::new();
                while let Some(name) = map.next_key::<String>()? {
                    entries.insert(name, map.next_value()?);
                }
                Ok(ServeTarget::Entries(entries))
            }
        }
        deserializer.deserialize_any(TargetVisitor)
    }
}

/// One serve target or alias.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetEntry {
    #[serde(default)]
    pub primary: bool,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub tokens: Option<Value>,
    #[serde(default)]
    pub config: Option<Value>,
    #[serde(default)]
    pub modes: Option<Value>,
    #[serde(default)]
    pub apply: Option<Value>,
    #[serde(default)]
    pub field_selector: Option<Value>,
    #[serde(default)]
    pub clusters: Option<Value>,
    #[serde(default)]
    pub cluster: Option<Value>,
    /// The box CRs routed through this target run with (overlaid on the CRD's box).
    #[serde(default)]
    pub operator_box: Option<OperatorBox>,
}
