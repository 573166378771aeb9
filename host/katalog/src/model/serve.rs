//! `serve`: self-service exposure through the gateway: the targets callers name (and their
//! per-target operator boxes, which the runtime uses), the intent's fields, which tokens
//! may do what, and how answers are shaped.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::operator_box::OperatorBox;
use orkestra_expr::condition::ConditionSpec;

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
    /// Spec paths left out of the schema the gateway serves.
    #[serde(default)]
    pub ignore: Vec<String>,
    /// The intent's fields: where each goes in the CR's spec, and how the schema shows it.
    #[serde(default)]
    pub fields: BTreeMap<String, ServeField>,
    /// Intent fields written to `metadata.labels`.
    #[serde(default)]
    pub labels: BTreeMap<String, ServeField>,
    /// Intent fields written to `metadata.annotations`.
    #[serde(default)]
    pub annotations: BTreeMap<String, ServeField>,
    /// A single target name, or a map of targets and aliases.
    #[serde(default)]
    pub target: Option<ServeTarget>,
    /// The CR's name, a template over the intent (always wins over the caller's).
    #[serde(default)]
    pub name: Option<String>,
    /// The CR's namespace, a template over the intent (required for a namespaced CRD).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Which gateway tokens may use this CRD, and for what.
    #[serde(default)]
    pub tokens: Option<BTreeMap<String, TokenAccess>>,
    #[serde(default)]
    pub config: Option<ServeConfig>,
    #[serde(default)]
    pub modes: Option<Modes>,
    #[serde(default)]
    pub apply: Option<ApplySettings>,
    /// The older spelling of `apply.overrides.targetConflict`.
    #[serde(default)]
    pub target_override: Option<bool>,
    /// The clusters a CR applied through this CRD goes to (names of `gateway.clusters`, or
    /// `local`; templates over the intent allowed). Default: the gateway's own.
    #[serde(default)]
    pub clusters: Vec<String>,
    #[serde(default)]
    pub cluster: Option<String>,
}

/// One field of an intent (`serve.fields.<name>`, `serve.labels.<key>`, ...).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServeField {
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub hint: Option<String>,
    #[serde(default)]
    pub placeholder: Option<String>,
    /// The form section (default `Spec`).
    #[serde(default)]
    pub category: Option<String>,
    /// Form order, and which failing field is reported first.
    #[serde(default)]
    pub order: i64,
    /// When the field is shown (evaluated by clients).
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
    /// The intent must carry it (an `exists` deny rule at admission).
    #[serde(default)]
    pub required: bool,
    /// Shown but not editable, with this reason.
    #[serde(default)]
    pub disabled: Option<String>,
    /// Where under `spec` it goes (default: `spec.<name>`).
    #[serde(default)]
    pub path: Option<String>,
    /// A template turning the submitted `.value` into what is written.
    #[serde(default)]
    pub value: Option<String>,
    /// One field written to several spec paths: `{spec.a.b: template}`.
    #[serde(default)]
    pub values: BTreeMap<String, String>,
    /// Written when the intent leaves the field out.
    #[serde(default)]
    pub default: Option<Value>,
    /// Always written, whatever the intent says.
    #[serde(default, rename = "override")]
    pub override_: Option<Value>,
    /// The field's type (required for labels and annotations; spec fields take the CRD
    /// schema's).
    #[serde(default, rename = "type")]
    pub type_: Option<FieldType>,
    /// The values of a `type: enum` field.
    #[serde(default, rename = "enum")]
    pub enum_: Vec<Value>,
}

/// A serve field's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FieldType {
    String,
    Integer,
    Number,
    Boolean,
    Enum,
}

/// What one gateway token may do with a CRD or target.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenAccess {
    /// Only these namespaces (empty: all; ignored for a cluster-scoped CRD).
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub permissions: Permissions,
}

/// `permissions`: verbs per endpoint class. A plain list is `global`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Permissions {
    /// Every endpoint, where the class has no list of its own.
    pub global: Vec<Verb>,
    /// The schema endpoints (`get`, `list`).
    pub schema: Vec<Verb>,
    /// Resources and apply.
    pub resources: Vec<Verb>,
}

impl<'de> Deserialize<'de> for Permissions {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        struct Classes {
            #[serde(default)]
            global: Vec<Verb>,
            #[serde(default)]
            schema: Vec<Verb>,
            #[serde(default)]
            resources: Vec<Verb>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            List(Vec<Verb>),
            Classes(Classes),
        }
        Ok(match Written::deserialize(deserializer)? {
            Written::List(global) => Permissions {
                global,
                ..Permissions::default()
            },
            Written::Classes(c) => Permissions {
                global: c.global,
                schema: c.schema,
                resources: c.resources,
            },
        })
    }
}

/// What a caller does to a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verb {
    Get,
    List,
    Create,
    Update,
    Delete,
    /// Create or update.
    Apply,
    #[serde(rename = "*")]
    All,
}

impl Verb {
    /// Whether a grant of `self` allows `wanted`.
    pub fn allows(self, wanted: Verb) -> bool {
        self == wanted || self == Verb::All || (self == Verb::Apply && matches!(wanted, Verb::Create | Verb::Update))
    }
}

/// `serve.config`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServeConfig {
    #[serde(default)]
    pub response: Option<ResponseShape>,
}

/// `serve.config.response`: what the apply and read answers hold.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseShape {
    /// Whether the CR itself is in the answer (default true); `payload` is always added.
    #[serde(default)]
    pub default: Option<bool>,
    /// Named templates over the CR.
    #[serde(default)]
    pub payload: BTreeMap<String, String>,
    /// Paths left out of the CR in a read (a template may give several, comma-separated).
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub poll: Option<Poll>,
}

/// `response.poll`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Poll {
    /// A template replacing the default `/api/v1/resources/{kind}/{namespace}/{name}`.
    #[serde(default)]
    pub url: Option<String>,
    /// Appended as `?field=`.
    #[serde(default)]
    pub field: Option<String>,
}

/// `serve.modes`: which apply shapes are open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Modes {
    /// `{"target": ...}` intents (default true).
    #[serde(default)]
    pub target: Option<bool>,
    /// Whole CRs with apiVersion and kind (default true).
    #[serde(default)]
    pub cr: Option<bool>,
}

/// `apply`: what a caller may force.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplySettings {
    #[serde(default)]
    pub overrides: Overrides,
}

/// `apply.overrides`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overrides {
    /// `?override=true` may move a CR to another surface.
    #[serde(default)]
    pub target_conflict: bool,
    /// `?overwrite=true` may take fields another manager owns.
    #[serde(default)]
    pub resource_conflict: bool,
    #[serde(default)]
    pub keep_previous_surface: bool,
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
    /// Off: callers see no such target (default on).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Narrows `serve.tokens` for this surface (never widens it).
    #[serde(default)]
    pub tokens: Option<BTreeMap<String, TokenAccess>>,
    #[serde(default)]
    pub config: Option<ServeConfig>,
    #[serde(default)]
    pub modes: Option<Modes>,
    #[serde(default)]
    pub apply: Option<ApplySettings>,
    #[serde(default)]
    pub target_override: Option<bool>,
    /// A whole-CR apply whose fields have these values is routed through this target
    /// (`{path: value}`, at most three).
    #[serde(default)]
    pub field_selector: BTreeMap<String, String>,
    /// This target's clusters (else the CRD's).
    #[serde(default)]
    pub clusters: Vec<String>,
    #[serde(default)]
    pub cluster: Option<String>,
    /// The box CRs routed through this target run with (overlaid on the CRD's box).
    #[serde(default)]
    pub operator_box: Option<OperatorBox>,
}
