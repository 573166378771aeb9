//! `observe.cross` entries, compiled: which CRD of the same runtime a CR reads, under what
//! name, and the templates that pick the CR (reading is the runtime's, from its caches).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Error, template};
use crate::CrossSpec;
use crate::template::{Functions, Template};

/// One `observe.cross` entry, compiled.
#[derive(Debug, Clone)]
pub struct CrossRead {
    pub crd: String,
    pub as_: String,
    pub name: Option<Template>,
    pub namespace: Option<Template>,
    pub match_labels: BTreeMap<String, String>,
}

impl CrossRead {
    pub fn compile(spec: &CrossSpec, functions: &Functions) -> Result<Self, Error> {
        let Some(crd) = spec.crd.clone() else {
            return Err(Error::at(
                "crd",
                "labelSelector reads are not supported yet; name the crd",
            ));
        };
        if spec.source.is_some() {
            return Err(Error::at(
                "source",
                format!("{crd}: reads from another runtime are not supported yet"),
            ));
        }
        let selector = spec.selector.clone().unwrap_or(Value::Null);
        let compile = |key: &str| {
            selector[key]
                .as_str()
                .map(|text| template(text, functions).map_err(|e| e.within(key).within("selector")))
                .transpose()
        };
        let match_labels = selector["matchLabels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        Ok(Self {
            as_: spec.as_.clone().unwrap_or_else(|| crd.clone()),
            name: compile("name")?,
            namespace: compile("namespace")?,
            match_labels,
            crd,
        })
    }
}
