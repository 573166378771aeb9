//! Any other kind: the entry names its apiVersion and kind and gives the body as written.

use crate::error::Error;
use serde_json::{Map, Value};

use super::{KindSpec, Shorthand};

pub(super) const CUSTOM: KindSpec = KindSpec {
    key: "custom",
    resource: "",
    suffix: None,
    api_version: "",
    kind: "",
    namespaced: true,
    pod: false,
    fields: &["apiVersion", "kind", "metadata", "spec", "status", "hasStatus", "data"],
    render: render_custom,
};

fn render_custom(s: &Shorthand<'_>) -> Result<Value, Error> {
    let mut body = Map::new();
    for (key, value) in s.fields {
        if key != "hasStatus" {
            body.insert(key.clone(), value.clone());
        }
    }
    Ok(Value::Object(body))
}
