//! Namespaces, and the LimitRanges and ResourceQuotas that bound what runs in them.

use crate::error::Error;
use serde_json::{Value, json};

use super::shorthand::*;
use super::{KindSpec, Shorthand};

pub(super) const NAMESPACES: KindSpec = KindSpec {
    key: "namespaces",
    resource: "namespaces",
    suffix: None,
    api_version: "v1",
    kind: "Namespace",
    namespaced: false,
    pod: false,
    fields: &[],
    render: render_namespaces,
};

/// A namespace needs nothing but its name.
fn render_namespaces(_: &Shorthand<'_>) -> Result<Value, Error> {
    Ok(json!({}))
}

pub(super) const LIMIT_RANGES: KindSpec = KindSpec {
    key: "limitRanges",
    resource: "limitranges",
    suffix: Some("limits"),
    api_version: "v1",
    kind: "LimitRange",
    namespaced: true,
    pod: false,
    fields: &["limits", "profile"],
    render: render_limit_ranges,
};

fn render_limit_ranges(s: &Shorthand<'_>) -> Result<Value, Error> {
    Ok(json!({"spec": {"limits": s.get("limits").ok_or_else(|| Error::Render("limits is required".into()))?}}))
}

pub(super) const RESOURCE_QUOTAS: KindSpec = KindSpec {
    key: "resourceQuotas",
    resource: "resourcequotas",
    suffix: Some("quota"),
    api_version: "v1",
    kind: "ResourceQuota",
    namespaced: true,
    pod: false,
    fields: &["hard", "scopes", "scopeSelector", "profile"],
    render: render_resource_quotas,
};

fn render_resource_quotas(s: &Shorthand<'_>) -> Result<Value, Error> {
    let mut spec = json!({"hard": s.get("hard").ok_or_else(|| Error::Render("hard is required".into()))?});
    copy(s.fields, &mut spec, &["scopes", "scopeSelector"]);
    Ok(json!({"spec": spec}))
}
