//! What a call returns, and a builder for the objects in it.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::types;

/// The outcome of a call, with the children, status fields and events the host applies.
#[derive(Debug, Clone)]
pub struct Response {
    outcome: Outcome,
    resources: Vec<Value>,
    status: Map<String, Value>,
    events: Vec<(bool, String, String)>,
}

#[derive(Debug, Clone)]
enum Outcome {
    Ok,
    RequeueAfter(Duration),
    Error { reason: String, message: String },
}

impl Response {
    /// Done until the next event.
    pub fn ok() -> Self {
        Self {
            outcome: Outcome::Ok,
            resources: Vec::new(),
            status: Map::new(),
            events: Vec::new(),
        }
    }

    /// Run again after `after`.
    pub fn requeue_after(after: Duration) -> Self {
        Self {
            outcome: Outcome::RequeueAfter(after),
            ..Self::ok()
        }
    }

    /// The reconcile failed: Ready=False with `reason` (CamelCase), then a retry.
    pub fn error(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Error {
                reason: reason.into(),
                message: message.into(),
            },
            ..Self::ok()
        }
    }

    /// A child the host applies (server-side apply, owned by the custom resource).
    pub fn resource(mut self, resource: impl Into<Value>) -> Self {
        self.resources.push(resource.into());
        self
    }

    /// A field merged into `.status` (top level).
    pub fn status(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.status.insert(field.to_string(), value.into());
        self
    }

    /// A Normal event on the custom resource.
    pub fn event(mut self, reason: &str, message: impl Into<String>) -> Self {
        self.events.push((false, reason.to_string(), message.into()));
        self
    }

    /// A Warning event on the custom resource.
    pub fn warning(mut self, reason: &str, message: impl Into<String>) -> Self {
        self.events.push((true, reason.to_string(), message.into()));
        self
    }

    pub(crate) fn into_wit(self) -> types::Response {
        types::Response {
            outcome: match self.outcome {
                Outcome::Ok => types::Outcome::Ok,
                Outcome::RequeueAfter(after) => types::Outcome::RequeueAfter(after.as_millis() as u64),
                Outcome::Error { reason, message } => types::Outcome::Error(types::Failure { reason, message }),
            },
            resources: self.resources.iter().map(Value::to_string).collect(),
            status: (!self.status.is_empty()).then(|| Value::Object(self.status).to_string()),
            events: self
                .events
                .into_iter()
                .map(|(warning, reason, message)| types::Event {
                    event_type: if warning {
                        types::EventType::Warning
                    } else {
                        types::EventType::Normal
                    },
                    reason,
                    message,
                })
                .collect(),
        }
    }
}

/// A Kubernetes object under construction.
#[derive(Debug, Clone)]
pub struct Resource(Value);

impl Resource {
    /// `apiVersion`, `kind` and `metadata.name`. The namespace defaults to the custom
    /// resource's.
    pub fn new(api_version: &str, kind: &str, name: &str) -> Self {
        Self(json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}))
    }

    pub fn namespace(mut self, namespace: &str) -> Self {
        self.0["metadata"]["namespace"] = json!(namespace);
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["labels"][key] = json!(value);
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["annotations"][key] = json!(value);
        self
    }

    /// A top-level field such as `spec` or `data`.
    pub fn field(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0[key] = value.into();
        self
    }

    pub fn into_value(self) -> Value {
        self.0
    }
}

impl From<Resource> for Value {
    fn from(resource: Resource) -> Value {
        resource.0
    }
}
