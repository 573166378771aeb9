//! The Katalog as written (the newest grouped operatorBox shape; older shapes are
//! translated before they reach these types). The doc comments are the format reference.
//!
//! Unknown keys are rejected by the loader's deserializer, which knows each struct's
//! fields; sections that belong to features not hosted yet (publishing, cluster routing,
//! webhook intake, ...) are kept as opaque values so their Katalogs still load.

mod admission;
mod calls;
mod components;
mod gateway;
mod intake;
mod operator_box;
mod resources;
mod serve;
mod setup;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

pub use admission::{
    Admission, Conversion, ConversionPath, MutationRule, MutationSpec, RuleAction, ValidationRule, ValidationSpec,
};
pub use calls::{ExternalCall, RetryBackoff};
pub use components::*;
pub use gateway::*;
pub use intake::*;
pub use operator_box::*;
pub use resources::{ForEach, HookTemplates, ProfileChoice, ResourceEntry, ScaleStep, WorkloadAutoscale};
pub use serve::*;
pub use setup::{DEFAULT_SETUP_WAIT, SetupWait, known_api_version};

/// The current Katalog apiVersion.
pub const API_VERSION: &str = "orkestra.orkspace.io/v1";
/// The older apiVersion, still accepted.
pub const LEGACY_API_VERSION: &str = "orkestra.konductor.io/v1Alpha";

/// One Katalog file.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KatalogFile {
    /// `orkestra.orkspace.io/v1` (the older `orkestra.konductor.io/v1Alpha` is accepted).
    pub api_version: String,
    /// Always `Katalog`.
    pub kind: String,
    #[serde(default)]
    pub metadata: Metadata,
    #[serde(default)]
    pub spec: Spec,
    /// Template functions defined by this Katalog, callable in every template.
    #[serde(default)]
    pub notes: Option<Notes>,
    /// Maturity and deprecation information.
    #[serde(default)]
    pub lifecycle: Option<Value>,
    /// Named presets (reconciler, probes, resources, ...).
    #[serde(default)]
    pub profiles: Option<Value>,
    /// The gateway's Serve API and its tokens.
    #[serde(default)]
    pub gateway: Option<Gateway>,
    /// Admission webhooks and protection policy (served by the gateway).
    #[serde(default)]
    pub security: Option<Security>,
    /// Registry publishing settings.
    #[serde(default)]
    pub publish: Option<Value>,
    /// Notification teams used by `notify` on conditions.
    #[serde(default)]
    pub notification: Option<Value>,
    /// Provider requirements.
    #[serde(default)]
    pub providers: Option<Value>,
}

/// Katalog metadata; `name` is written on managed CRs as `managed-by`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub author: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Where the Katalog belongs (Control Center grouping); CRs are watched per CRD entry.
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub license: String,
    /// Written as on any Kubernetes object; informational here.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// `{message, migratedTo, ...}`: a deprecated Katalog warns at every load.
    #[serde(default)]
    pub deprecation: Option<Value>,
}

/// `spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// Finalizers added to every CR of every CRD (besides `orkestra.orkspace.io/cleanup`).
    #[serde(default)]
    pub finalizers: Vec<String>,
    /// Katalog-level motif imports (their notes).
    #[serde(default)]
    pub imports: Vec<Import>,
    /// The operators, keyed by a DNS-1123 name.
    #[serde(default)]
    pub crds: BTreeMap<String, CrdEntry>,
    /// How replicas of the runtime share the CRs (`ork run --ha` and its flags win).
    #[serde(default)]
    pub ha: Option<HaSpec>,
    /// What one namespace may take of the runtime, over every CRD: reconciles at once, API
    /// requests, Wasm calls at once.
    #[serde(default)]
    pub tenants: Option<TenantsSpec>,
}

/// `spec.tenants`: the share of one namespace (a tenant) of the whole runtime; the defaults,
/// then `namespaces` for those that get more or less.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantsSpec {
    /// Reconciles of one namespace at once, over every CRD (default: the most workers any
    /// one CRD may run, so one namespace can fill one CRD's workers but never all of them).
    #[serde(default)]
    pub reconciles: Option<u32>,
    /// API requests of one namespace, a token bucket (default: not limited; its reconciles
    /// at once bound it).
    #[serde(default)]
    pub api: Option<ApiRateSpec>,
    /// Wasm calls of one namespace at once, of the host's 64 (default 16).
    #[serde(default)]
    pub wasm_calls: Option<u32>,
    /// CPU its components' guest code may use, in cores (a quantity: `500m`, `2`; default
    /// `500m`): past it, its calls wait at their next yield.
    #[serde(default)]
    pub wasm_cpu: Option<String>,
    /// Other limits for some namespaces; a field left out keeps the default.
    #[serde(default)]
    pub namespaces: BTreeMap<String, TenantLimitsSpec>,
}

/// `spec.tenants.namespaces.<namespace>`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantLimitsSpec {
    #[serde(default)]
    pub reconciles: Option<u32>,
    #[serde(default)]
    pub api: Option<ApiRateSpec>,
    #[serde(default)]
    pub wasm_calls: Option<u32>,
    #[serde(default)]
    pub wasm_cpu: Option<String>,
}

/// `api`: requests a second, and how many may go at once after a quiet spell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiRateSpec {
    pub qps: f64,
    /// Default: twice `qps`, at least 1.
    #[serde(default)]
    pub burst: Option<u32>,
}

/// `spec.ha`: leader election or sharding over Leases.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HaSpec {
    #[serde(default)]
    pub mode: HaMode,
    /// Where the Leases live (default: the runtime's own namespace).
    #[serde(default)]
    pub lease_namespace: Option<String>,
    /// How long a Lease holds unrenewed (default 10s).
    #[serde(default)]
    pub lease_duration: Option<String>,
    /// How often a holder renews (default 2s).
    #[serde(default)]
    pub renew_period: Option<String>,
}

/// `spec.ha.mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HaMode {
    /// One replica; no Leases.
    #[default]
    None,
    /// One elected replica reconciles; others stand by with warm caches.
    Leader,
    /// Every live replica reconciles its share of the CRs.
    Shard,
}

/// One `enrich` entry: a target's name, or `{name: {when, or}}`.
#[derive(Debug, Clone, PartialEq)]
pub enum EnrichItem {
    Name(String),
    Gated(String, orkestra_expr::condition::ConditionsSpec),
}

impl serde::Serialize for EnrichItem {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            EnrichItem::Name(name) => serializer.serialize_str(name),
            EnrichItem::Gated(name, gate) => std::collections::BTreeMap::from([(name, gate)]).serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for EnrichItem {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ItemVisitor;
        impl<'de> serde::de::Visitor<'de> for ItemVisitor {
            type Value = EnrichItem;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a target name, or {name: {when, or}}")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<EnrichItem, E> {
                Ok(EnrichItem::Name(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<EnrichItem, A::Error> {
                let Some(name) = map.next_key::<String>()? else {
                    return Err(serde::de::Error::custom("an empty map names no target"));
                };
                let gate: Option<orkestra_expr::condition::ConditionsSpec> = map.next_value()?;
                if map.next_key::<String>()?.is_some() {
                    return Err(serde::de::Error::custom(
                        "one target per entry: write each as its own item",
                    ));
                }
                Ok(EnrichItem::Gated(name, gate.unwrap_or_default()))
            }
        }
        deserializer.deserialize_any(ItemVisitor)
    }
}

/// User notes: a bare list, `{functions: [...]}`, or by name: `{functions: {isProd: {...}}}`
/// or `{isProd: {expression: ...}}` (a note's body may be its expression alone).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Notes(pub Vec<NoteSpec>);

impl serde::Serialize for Notes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// Notes written as a list, or as a map by name.
fn notes_of(value: Value) -> Result<Vec<NoteSpec>, String> {
    match value {
        Value::Array(_) => serde_json::from_value(value).map_err(|e| e.to_string()),
        Value::Object(by_name) => by_name.into_iter().map(|(name, body)| note_named(name, body)).collect(),
        Value::Null => Ok(Vec::new()),
        other => Err(format!("notes are a list or a map by name, found {other}")),
    }
}

/// The note `name` from its body: the expression, or `{expression, description, shadow}`.
fn note_named(name: String, body: Value) -> Result<NoteSpec, String> {
    match body {
        Value::String(expression) => Ok(NoteSpec {
            name,
            expression,
            description: String::new(),
            shadow: false,
        }),
        Value::Object(mut fields) => {
            fields.insert("name".into(), Value::String(name.clone()));
            serde_json::from_value(Value::Object(fields)).map_err(|e| format!("note {name}: {e}"))
        }
        other => Err(format!(
            "note {name}: an expression or {{expression, description, shadow}}, found {other}"
        )),
    }
}

impl<'de> Deserialize<'de> for Notes {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = Value::deserialize(deserializer)?;
        let notes = match value {
            Value::Object(map) => {
                let mut notes = Vec::new();
                for (key, value) in map {
                    match key.as_str() {
                        "functions" => notes.extend(notes_of(value).map_err(D::Error::custom)?),
                        _ => notes.push(note_named(key, value).map_err(D::Error::custom)?),
                    }
                }
                notes
            }
            other => notes_of(other).map_err(D::Error::custom)?,
        };
        Ok(Notes(notes))
    }
}

/// One user note: a zero-argument function whose value is its template. Read from a JSON
/// value (either shape of [`Notes`]), so an unknown key is refused here.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoteSpec {
    pub name: String,
    /// The template the note evaluates.
    pub expression: String,
    #[serde(default)]
    pub description: String,
    /// Allow replacing a built-in function of the same name without a warning.
    #[serde(default)]
    pub shadow: bool,
}

/// `spec.crds.<name>`: one operator.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CrdEntry {
    /// `false` skips the CRD entirely (strip its finalizers first).
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub description: String,
    /// `typed` or `dynamic`; this runtime always handles objects dynamically.
    #[serde(default)]
    pub mode: Option<String>,
    /// The kind this operator reconciles (read from `crdFile` when absent).
    #[serde(default)]
    pub api_types: ApiTypes,
    /// A CRD manifest installed by `ork dev`; generated from `apiTypes` when absent.
    #[serde(default)]
    pub crd_file: Option<String>,
    /// Sample CRs applied by `ork dev --apply-cr`.
    #[serde(default)]
    pub cr_files: Vec<String>,
    /// Prerequisite manifests applied in order by `ork dev`: a list of files, or
    /// `{apply: [files], wait: [objects]}` (see [`CrdEntry::setup_files`] and
    /// [`CrdEntry::setup_waits`]).
    #[serde(default)]
    pub setup: Option<Value>,
    /// Namespaced (default) or cluster-scoped.
    #[serde(default = "yes")]
    pub namespaced: bool,
    /// Watch only this namespace (empty: all).
    #[serde(default)]
    pub namespace: String,
    /// Labels written onto every managed CR each reconcile (values templated).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations written onto every managed CR each reconcile (values templated).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Informer label filter; required for built-in kinds.
    #[serde(default)]
    pub label_selector: BTreeMap<String, String>,
    /// Informer field filter (`metadata.namespace`, `metadata.name`).
    #[serde(default)]
    pub field_selector: BTreeMap<String, String>,
    /// Start after these CRDs: a list (`started`), or a map to `started`/`healthy`.
    #[serde(default)]
    pub depends_on: DependsOn,
    /// What makes this CRD healthy (for `dependsOn: {this: healthy}` and the health state).
    #[serde(default)]
    pub healthy_when: HealthyWhen,
    /// Extra data embedded in `.children.*` (pods, events, ...).
    #[serde(default)]
    pub enrich: Option<Vec<EnrichItem>>,
    #[serde(default)]
    pub enrich_all: bool,
    /// `false`: other CRDs' `cross:` reads of this one return nothing.
    #[serde(default = "yes")]
    pub cross_access: bool,
    /// Per-CRD Live API switches.
    #[serde(default)]
    pub endpoints: Option<Value>,
    /// Admission: validation, mutation, conversion, webhooks.
    #[serde(default)]
    pub admission: Admission,
    /// Deletion protection overrides.
    #[serde(default)]
    pub deletion_protection: Option<gateway::CrdDeletionProtection>,
    /// Self-service exposure through the gateway, and per-target operator boxes.
    #[serde(default)]
    pub serve: Option<Serve>,
    /// What this operator does.
    #[serde(default)]
    pub operator_box: OperatorBox,
    /// Filled by the runtime (Control Center grouping).
    #[serde(default)]
    pub katalog_name: Option<String>,
    #[serde(default)]
    pub katalog_namespace: Option<String>,
}

impl CrdEntry {
    /// The CRD's own box (no target), then each serve target's own box with the target's
    /// name; [`box_path`] says where each is written.
    pub fn boxes(&self) -> Vec<(Option<&str>, &OperatorBox)> {
        let targets = match self.serve.as_ref().and_then(|s| s.target.as_ref()) {
            Some(ServeTarget::Entries(targets)) => targets
                .iter()
                .filter_map(|(name, t)| Some((Some(name.as_str()), t.operator_box.as_ref()?)))
                .collect(),
            _ => Vec::new(),
        };
        std::iter::once((None, &self.operator_box)).chain(targets).collect()
    }

    /// The same boxes, to change in place.
    pub fn boxes_mut(&mut self) -> Vec<(Option<&str>, &mut OperatorBox)> {
        let targets = match self.serve.as_mut().and_then(|s| s.target.as_mut()) {
            Some(ServeTarget::Entries(targets)) => targets
                .iter_mut()
                .filter_map(|(name, t)| Some((Some(name.as_str()), t.operator_box.as_mut()?)))
                .collect(),
            _ => Vec::new(),
        };
        std::iter::once((None, &mut self.operator_box)).chain(targets).collect()
    }
}

/// Where a box of [`CrdEntry::boxes`] is written in its CRD's entry: `operatorBox`, or
/// `serve.target.<target>.operatorBox`.
pub fn box_path(target: Option<&str>) -> String {
    match target {
        None => "operatorBox".to_string(),
        Some(target) => format!("serve.target.{target}.operatorBox"),
    }
}

/// `apiTypes`: group, version, kind and plural of the primary resource.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiTypes {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    pub kind: String,
    #[serde(default)]
    pub plural: String,
    /// `/apis` (default) or `/api` for core kinds.
    #[serde(default)]
    pub api_path: Option<String>,
    /// Typed mode only (Go import path); accepted and ignored here.
    #[serde(default)]
    pub location: Option<String>,
    #[serde(default)]
    pub object: Option<String>,
    #[serde(default)]
    pub object_list: Option<String>,
    #[serde(default)]
    pub alias: Option<String>,
}

/// When a dependency counts as met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DependencyCondition {
    Started,
    Healthy,
}

/// When a CRD counts as healthy. Upstream knows only the first: the operator reconciles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HealthyWhen {
    /// Reconciles succeed (upstream's meaning).
    #[default]
    Reconciled,
    /// Reconciles succeed and every CR's children are ready: Deployments Available, Jobs
    /// complete, claims Bound, custom resources with a true `Ready` condition.
    ChildrenReady,
}

/// `dependsOn` in its three forms: `[db]`, `{db: healthy}`, `{db: {condition: healthy}}`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DependsOn(pub Vec<(String, DependencyCondition)>);

#[derive(Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct DependencyDetail {
    condition: DependencyCondition,
}

impl serde::Serialize for DependsOn {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let by_name: BTreeMap<&String, &DependencyCondition> = self.0.iter().map(|(n, c)| (n, c)).collect();
        by_name.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for DependsOn {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DependsVisitor;
        impl<'de> serde::de::Visitor<'de> for DependsVisitor {
            type Value = DependsOn;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of CRD names or a map of CRD name to started/healthy")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<DependsOn, E> {
                Ok(DependsOn::default())
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<DependsOn, A::Error> {
                let mut out = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    out.push((name, DependencyCondition::Started));
                }
                Ok(DependsOn(out))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<DependsOn, A::Error> {
                let mut out = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    let value: Value = map.next_value()?;
                    let condition = match &value {
                        Value::String(_) => serde_json::from_value(value.clone()),
                        Value::Object(_) => serde_json::from_value::<DependencyDetail>(value.clone()).map(|d| d.condition),
                        Value::Null => Ok(DependencyCondition::Started),
                        _ => serde_json::from_value(Value::Null),
                    }
                    .map_err(|_| {
                        serde::de::Error::custom(format!(
                            "dependsOn.{name}: expected started or healthy (or {{condition: started|healthy}}), found {value}"
                        ))
                    })?;
                    out.push((name, condition));
                }
                Ok(DependsOn(out))
            }
        }
        deserializer.deserialize_any(DependsVisitor)
    }
}

fn yes() -> bool {
    true
}
