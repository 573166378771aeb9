//! `admission`: validation and mutation rules (run at admission and at every reconcile),
//! conversion and webhook settings.

use serde::Deserialize;
use serde_json::Value;

use super::calls::ExternalCall;
use orkestra_expr::condition::{ConditionSpec, ValueType};
use orkestra_expr::with_condition_fields;

/// `spec.crds.<name>.admission`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    #[serde(default)]
    pub validation: Option<ValidationSpec>,
    #[serde(default)]
    pub mutation: Option<MutationSpec>,
    /// Multi-version conversion (served by the gateway).
    #[serde(default)]
    pub conversion: Option<Conversion>,
    /// Which of the rules the gateway's admission webhooks run.
    #[serde(default)]
    pub webhooks: Option<super::gateway::CrdWebhooks>,
}

/// `admission.validation`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidationSpec {
    #[serde(default)]
    pub external: Vec<ExternalCall>,
    #[serde(default)]
    pub rules: Vec<ValidationRule>,
}

/// Deny or warn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RuleAction {
    /// The reconcile fails and nothing is applied (the default).
    #[default]
    Deny,
    /// Reported as ValidationWarning; the reconcile continues.
    Warn,
}

with_condition_fields! {
    /// A validation rule: a condition that must hold, and what to say when it does not.
    pub struct ValidationRule {
        /// The message when the rule fails (templated).
        #[serde(default)]
        pub message: String,
        #[serde(default)]
        pub action: Option<RuleAction>,
        /// Only check when these hold.
        #[serde(default)]
        pub when: Vec<ConditionSpec>,
        #[serde(default)]
        pub or: Vec<ConditionSpec>,
        /// The serve field the error maps to.
        #[serde(default)]
        pub link: Option<String>,
        /// `{reconcile: false}`: admission only.
        #[serde(default)]
        pub fires: Option<Value>,
    }
}

/// `admission.mutation`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MutationSpec {
    /// Mutate before validating (default false).
    #[serde(default)]
    pub mutate_first: bool,
    #[serde(default)]
    pub external: Vec<ExternalCall>,
    #[serde(default)]
    pub rules: Vec<MutationRule>,
}

/// A mutation rule: set `field` to `default` (when absent or empty) or to `override`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MutationRule {
    pub field: String,
    /// A template (a string), or any other YAML value set as written (`{}`, `[]`, `2`).
    #[serde(default)]
    pub default: Option<Value>,
    #[serde(default, rename = "override")]
    pub override_: Option<Value>,
    #[serde(default)]
    pub value_type: Option<ValueType>,
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
    #[serde(default)]
    pub fires: Option<Value>,
}

/// `admission.conversion`: how the gateway's conversion webhook turns an object of one
/// version of a multi-version CRD into another.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Conversion {
    /// The version objects are stored as.
    #[serde(default)]
    pub storage_version: String,
    /// Point the CRD's `spec.conversion` at the gateway (and keep its CA bundle current).
    #[serde(default, rename = "updateCRD")]
    pub update_crd: bool,
    /// Upstream's hub-and-spoke marker; accepted, it changes nothing here.
    #[serde(default)]
    pub participant: bool,
    #[serde(default)]
    pub paths: Vec<ConversionPath>,
}

/// One declared conversion, `from` one version `to` another.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionPath {
    pub from: String,
    pub to: String,
    /// Fields of the converted object's spec (dotted paths allowed), each a template over
    /// the source object; fields not named are carried over as they are.
    #[serde(default)]
    pub spec: std::collections::BTreeMap<String, Value>,
}
