//! Other objects, through the host. Each call needs a capability in the Katalog
//! (`capabilities: [{apiVersion, kinds, verbs, namespaces}]`); without one it returns
//! [`Error::Forbidden`] naming what to grant.

use serde_json::Value;

use crate::bindings::orkestra::operator::kube as wire;

/// Why a kube call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not granted; the message names the capability it needs.
    Forbidden(String),
    NotFound,
    /// The API server refused it.
    Rejected(String),
    /// Not served, unreachable, or the per-call budget is spent.
    Unavailable(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Forbidden(m) => write!(f, "forbidden: {m}"),
            Error::NotFound => f.write_str("not found"),
            Error::Rejected(m) => write!(f, "rejected: {m}"),
            Error::Unavailable(m) => write!(f, "unavailable: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<wire::KubeError> for Error {
    fn from(error: wire::KubeError) -> Self {
        match error {
            wire::KubeError::Forbidden(m) => Error::Forbidden(m),
            wire::KubeError::NotFound => Error::NotFound,
            wire::KubeError::Rejected(m) => Error::Rejected(m),
            wire::KubeError::Unavailable(m) => Error::Unavailable(m),
        }
    }
}

fn parse(text: String) -> Result<Value, Error> {
    serde_json::from_str(&text).map_err(|e| Error::Unavailable(format!("the host sent bad JSON: {e}")))
}

fn object_ref(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> wire::ObjectRef {
    wire::ObjectRef {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        namespace: namespace.map(String::from),
        name: name.to_string(),
    }
}

/// One object; `namespace: None` means the custom resource's own (for namespaced kinds).
pub fn get(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Result<Value, Error> {
    parse(wire::get(&object_ref(api_version, kind, namespace, name))?)
}

/// Objects of a kind; `namespace: None` lists every namespace (needs `namespaces: ["*"]`).
pub fn list(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<Value>, Error> {
    wire::list_objects(api_version, kind, namespace, label_selector)?
        .into_iter()
        .map(parse)
        .collect()
}

/// Server-side apply; returns the stored object.
pub fn apply(object: &Value) -> Result<Value, Error> {
    parse(wire::apply(&object.to_string())?)
}

pub fn delete(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Result<(), Error> {
    Ok(wire::delete(&object_ref(api_version, kind, namespace, name))?)
}

/// Merges `status` into another object's status; returns the stored object.
pub fn patch_status(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    status: &Value,
) -> Result<Value, Error> {
    parse(wire::patch_status(
        &object_ref(api_version, kind, namespace, name),
        &status.to_string(),
    )?)
}
