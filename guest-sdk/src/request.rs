//! The request a call receives. The custom resource arrives as JSON text and is parsed only
//! when asked for: whole ([`Request::object`]) or into your own type ([`Request::parse`]),
//! which skips what the type does not name and costs a fraction of a full parse.

use std::cell::OnceCell;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::types;

/// One reconcile of one custom resource.
pub struct Request {
    wire: types::Request,
    object: OnceCell<Value>,
    context: OnceCell<Value>,
}

impl Request {
    pub(crate) fn from_wit(wire: types::Request) -> Self {
        Self {
            wire,
            object: OnceCell::new(),
            context: OnceCell::new(),
        }
    }

    /// `namespace/name` (or `name`).
    pub fn key(&self) -> &str {
        &self.wire.key
    }

    /// The custom resource's name (from the key; no parse).
    pub fn name(&self) -> &str {
        self.wire.key.rsplit('/').next().unwrap_or_default()
    }

    /// The custom resource's namespace (from the key; no parse).
    pub fn namespace(&self) -> Option<&str> {
        self.wire.key.split_once('/').map(|(ns, _)| ns)
    }

    /// The custom resource as JSON text (`None` in `on_not_found`).
    pub fn object_json(&self) -> Option<&str> {
        self.wire.object.as_deref()
    }

    /// The custom resource, parsed on first use (`Null` in `on_not_found`).
    pub fn object(&self) -> &Value {
        self.object.get_or_init(|| {
            self.wire
                .object
                .as_deref()
                .and_then(|o| serde_json::from_str(o).ok())
                .unwrap_or(Value::Null)
        })
    }

    /// The custom resource deserialized into `T`, with the result (value or error)
    /// `serde_json::from_str` gives; what `T` does not name is skipped without being parsed,
    /// much faster with WebAssembly SIMD (`-C target-feature=+simd128`).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        crate::skim::from_str(self.wire.object.as_deref().unwrap_or("null"))
    }

    /// `.spec` of the custom resource.
    pub fn spec(&self) -> &Value {
        &self.object()["spec"]
    }

    /// A value by JSON pointer into the object, e.g. `"/spec/replicas"`.
    pub fn get(&self, pointer: &str) -> Option<&Value> {
        self.object().pointer(pointer)
    }

    /// What the pipeline knows: `health`, `metrics`, `cross`, `external`, `args`, `children`.
    pub fn context(&self) -> &Value {
        self.context
            .get_or_init(|| serde_json::from_str(&self.wire.context).unwrap_or(Value::Null))
    }

    /// The Katalog's `args` for this component.
    pub fn args(&self) -> &Value {
        &self.context()["args"]
    }

    /// The serve target the resource is routed through.
    pub fn target(&self) -> Option<&str> {
        self.wire.target.as_deref()
    }

    /// Names of the sentinels behind this run (`generationChanged`, ...).
    pub fn sentinels(&self) -> &[String] {
        &self.wire.sentinels
    }

    /// Kind of the custom resource.
    pub fn kind(&self) -> &str {
        &self.wire.gvk.kind
    }

    /// Set for eventAware CRDs.
    pub fn event_id(&self) -> Option<u64> {
        self.wire.event_id
    }
}
