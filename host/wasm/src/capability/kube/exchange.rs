//! A kube call and its answer as a tape keeps them: what a recorded call takes down and a
//! replay serves back, in the recording's JSON shape. A tape is whatever implements
//! [`KubeTap`]; the kube functions know no more of recording than that.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::super::super::bindings::kube::{KubeError, ObjectRef};

/// Where a call's kube calls go besides the cluster: a recorded call takes each down with
/// its answer, a replay answers each from what was taken down.
pub trait KubeTap: Send + Sync {
    /// The recorded answer to `call`, when this call is a replay.
    fn played(&self, call: &KubeCall) -> Option<KubeAnswer>;
    /// Takes `call` and its answer down, when this call is recorded.
    fn took(&self, call: KubeCall, answer: KubeAnswer);
}

/// A kube function's result, as a tape keeps it and gives it back.
pub trait OnTape: Sized {
    fn taken(answer: &Result<Self, KubeError>) -> KubeAnswer;
    fn played(answer: &KubeAnswer) -> Result<Self, KubeError>;
}

/// An object (get, apply, patch-status).
impl OnTape for String {
    fn taken(answer: &Result<Self, KubeError>) -> KubeAnswer {
        KubeAnswer::of_object(answer)
    }
    fn played(answer: &KubeAnswer) -> Result<Self, KubeError> {
        answer.object()
    }
}

/// Objects (list).
impl OnTape for Vec<String> {
    fn taken(answer: &Result<Self, KubeError>) -> KubeAnswer {
        KubeAnswer::of_list(answer)
    }
    fn played(answer: &KubeAnswer) -> Result<Self, KubeError> {
        answer.list()
    }
}

/// Nothing (delete).
impl OnTape for () {
    fn taken(answer: &Result<Self, KubeError>) -> KubeAnswer {
        KubeAnswer::of_unit(answer)
    }
    fn played(answer: &KubeAnswer) -> Result<Self, KubeError> {
        answer.unit()
    }
}

/// One kube call as the guest made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verb", rename_all = "kebab-case", rename_all_fields = "camelCase")]
pub enum KubeCall {
    Get {
        #[serde(flatten)]
        object: Named,
    },
    List {
        api_version: String,
        kind: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    },
    Apply {
        object: Value,
    },
    Delete {
        #[serde(flatten)]
        object: Named,
    },
    PatchStatus {
        #[serde(flatten)]
        object: Named,
        status: Value,
    },
}

/// An object a kube call names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Named {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl From<&ObjectRef> for Named {
    fn from(object: &ObjectRef) -> Self {
        Self {
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
        }
    }
}

impl std::fmt::Display for Named {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ", self.api_version, self.kind)?;
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl std::fmt::Display for KubeCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KubeCall::Get { object } => write!(f, "get {object}"),
            KubeCall::Delete { object } => write!(f, "delete {object}"),
            KubeCall::PatchStatus { object, .. } => write!(f, "patch-status {object}"),
            KubeCall::List {
                api_version,
                kind,
                namespace,
                label_selector,
            } => {
                write!(f, "list {api_version} {kind}")?;
                match namespace {
                    Some(ns) => write!(f, " in {ns}")?,
                    None => f.write_str(" in every namespace")?,
                }
                match label_selector {
                    Some(selector) => write!(f, " ({selector})"),
                    None => Ok(()),
                }
            }
            KubeCall::Apply { object } => write!(f, "apply {}", identity(object)),
        }
    }
}

/// `apiVersion kind namespace/name` of an object a guest sent or returned (`?` for a part
/// it lacks).
pub fn identity(object: &Value) -> String {
    let field = |path: &str| object.pointer(path).and_then(Value::as_str).unwrap_or("?");
    let name = match object.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => format!("{ns}/{}", field("/metadata/name")),
        None => field("/metadata/name").to_string(),
    };
    format!("{} {} {name}", field("/apiVersion"), field("/kind"))
}

/// What a kube call answered: the object(s) as JSON values, or why not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KubeAnswer {
    /// An object (get, apply, patch-status), a list of them (list), or null (delete).
    Ok(Value),
    NotFound,
    Forbidden(String),
    Rejected(String),
    Unavailable(String),
}

impl KubeAnswer {
    fn failed(error: &KubeError) -> Self {
        match error {
            KubeError::NotFound => KubeAnswer::NotFound,
            KubeError::Forbidden(m) => KubeAnswer::Forbidden(m.clone()),
            KubeError::Rejected(m) => KubeAnswer::Rejected(m.clone()),
            KubeError::Unavailable(m) => KubeAnswer::Unavailable(m.clone()),
        }
    }

    pub fn of_object(answer: &Result<String, KubeError>) -> Self {
        match answer {
            Ok(text) => KubeAnswer::Ok(value_of(text)),
            Err(error) => Self::failed(error),
        }
    }

    pub fn of_list(answer: &Result<Vec<String>, KubeError>) -> Self {
        match answer {
            Ok(items) => KubeAnswer::Ok(Value::Array(items.iter().map(|i| value_of(i)).collect())),
            Err(error) => Self::failed(error),
        }
    }

    pub fn of_unit(answer: &Result<(), KubeError>) -> Self {
        match answer {
            Ok(()) => KubeAnswer::Ok(Value::Null),
            Err(error) => Self::failed(error),
        }
    }

    fn error(&self) -> Option<KubeError> {
        match self {
            KubeAnswer::Ok(_) => None,
            KubeAnswer::NotFound => Some(KubeError::NotFound),
            KubeAnswer::Forbidden(m) => Some(KubeError::Forbidden(m.clone())),
            KubeAnswer::Rejected(m) => Some(KubeError::Rejected(m.clone())),
            KubeAnswer::Unavailable(m) => Some(KubeError::Unavailable(m.clone())),
        }
    }

    /// As a get, apply or patch-status answers the guest.
    pub fn object(&self) -> Result<String, KubeError> {
        match self {
            KubeAnswer::Ok(value) => Ok(text_of(value)),
            failed => Err(failed.error().unwrap_or(KubeError::NotFound)),
        }
    }

    /// As a list answers the guest.
    pub fn list(&self) -> Result<Vec<String>, KubeError> {
        match self {
            KubeAnswer::Ok(Value::Array(items)) => Ok(items.iter().map(text_of).collect()),
            KubeAnswer::Ok(other) => Ok(vec![text_of(other)]),
            failed => Err(failed.error().unwrap_or(KubeError::NotFound)),
        }
    }

    /// As a delete answers the guest.
    pub fn unit(&self) -> Result<(), KubeError> {
        match self.error() {
            None => Ok(()),
            Some(error) => Err(error),
        }
    }
}

/// JSON text as a value; text that is not JSON is kept as a string.
pub(crate) fn value_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// A value as the JSON text a guest receives; a string is text that was not JSON.
pub(crate) fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => crate::json::json_text(other),
    }
}
