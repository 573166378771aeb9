//! `GET /schema`: the catalog of serve targets the token may list (paginated), or with
//! `?target=` one target's flat fields (the CRD's OpenAPI schema with `serve.fields` on
//! top), from the gateway's own cluster or the one `?cluster=` names; `GET /raw-schema?kind=`:
//! the CRD's own OpenAPI schema. Schemas are read from the API servers' CRDs and kept for a
//! minute.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Extension, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use orkestra_kube::objects;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{Value, json};

use orkestra_katalog::compile::CompiledCrd;
use orkestra_katalog::model::{LOCAL_CLUSTER, Verb};
use orkestra_katalog::serve::access::{Class, permits};

use super::{Caller, Shared, cluster_client, failure, params};

/// How long a CRD's schema is reused.
const KEEP: Duration = Duration::from_secs(60);
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 500;

/// A schema as read (or its absence), and when.
type Kept = (Instant, Option<Value>);

/// CRD schemas read from the API servers, by cluster and CRD name.
#[derive(Default)]
pub struct Schemas {
    kept: Mutex<HashMap<(String, String), Kept>>,
}

impl Schemas {
    /// The `openAPIV3Schema` of the CRD's version in `cluster` (`None`: the CRD or its schema
    /// is not there).
    pub async fn of(&self, client: &kube::Client, cluster: &str, crd: &CompiledCrd) -> Option<Value> {
        let name = crd.crd_name();
        let key = (cluster.to_string(), name.clone());
        if let Some((at, schema)) = self.kept.lock().get(&key)
            && at.elapsed() < KEEP
        {
            return schema.clone();
        }
        let api = objects::all::<CustomResourceDefinition>(client.clone());
        let schema = match api.get_opt(&name).await {
            Ok(found) => found.and_then(|definition| {
                let version = definition.spec.versions.into_iter().find(|v| v.name == crd.version)?;
                serde_json::to_value(version.schema?.open_api_v3_schema?).ok()
            }),
            Err(error) => {
                tracing::debug!(%name, %error, "reading a CRD's schema failed");
                return None;
            }
        };
        self.kept.lock().insert(key, (Instant::now(), schema.clone()));
        schema
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SchemaQuery {
    /// One target's fields (without it: the catalog of targets).
    target: Option<String>,
    /// Catalog entries per page.
    limit: Option<usize>,
    /// Catalog entries to skip.
    offset: Option<usize>,
    /// The cluster whose CRD gives a target's field types (default: the gateway's own).
    cluster: Option<String>,
}

#[utoipa::path(get, path = "/schema", tag = "serve", params(SchemaQuery),
    responses(
        (status = 200, description = "the targets the token may use, or one target's flat field schema"),
        (status = 400, description = "a query that is not one"),
        (status = 401, description = "no bearer token the gateway knows"),
        (status = 404, description = "no such target, or not one the token may use"),
    ))]
pub async fn schema(
    State(shared): State<Shared>,
    Extension(Caller { token, .. }): Extension<Caller>,
    query: Result<Query<SchemaQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let query = match params(query, "target, limit, offset and cluster") {
        Ok(query) => query,
        Err(response) => return *response,
    };
    let client = match cluster_client(&shared, query.cluster.as_deref()) {
        Ok(client) => client.clone(),
        Err(response) => return *response,
    };
    let cluster = query.cluster.as_deref().unwrap_or(LOCAL_CLUSTER);
    let Some(target) = query.target else {
        return catalog(&shared, &token, query.limit, query.offset);
    };
    let Some((crd, _, surface)) = shared.compiled.target(&target) else {
        return failure(StatusCode::NOT_FOUND, format!("unknown target \"{target}\""));
    };
    if let Err(why) = permits(surface, &token, Class::Schema, Verb::Get, None) {
        return failure(StatusCode::FORBIDDEN, why);
    }
    let Some(serve) = crd.serve.as_deref() else {
        return failure(StatusCode::NOT_FOUND, format!("unknown target \"{target}\""));
    };
    let openapi = shared.schemas.of(&client, cluster, crd).await.unwrap_or(Value::Null);
    let fields = orkestra_katalog::serve::schema::fields(&openapi, serve);
    Json(json!({
        "target": target, "primaryTarget": serve.primary, "kind": crd.kind, "apiVersion": crd.api_version(),
        "namespaced": crd.namespaced, "requireServeName": serve.name.is_none(),
        "requireNamespace": crd.namespaced && serve.namespace.is_none(),
        "fields": fields,
    }))
    .into_response()
}

fn catalog(shared: &Shared, token: &str, limit: Option<usize>, offset: Option<usize>) -> Response {
    let mut items = Vec::new();
    for crd in shared.compiled.enabled() {
        let Some(serve) = crd.serve.as_deref() else { continue };
        for surface in serve.surfaces.values().filter(|s| s.enabled) {
            if permits(surface, token, Class::Schema, Verb::List, None).is_err() {
                continue;
            }
            items.push(json!({
                "target": surface.name, "primary": surface.primary, "primaryTarget": serve.primary,
                "kind": crd.kind, "apiVersion": crd.api_version(), "category": serve.category,
                "description": serve.description, "namespaced": crd.namespaced,
            }));
        }
    }
    let total = items.len();
    let limit = limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let offset = offset.unwrap_or(0);
    let page: Vec<Value> = items.into_iter().skip(offset).take(limit).collect();
    Json(json!({"items": page, "total": total, "limit": limit, "offset": offset})).into_response()
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct RawQuery {
    /// The CR kind.
    kind: String,
    /// Its apiVersion, where several CRDs share the kind.
    api_version: Option<String>,
}

#[utoipa::path(get, path = "/raw-schema", tag = "serve", params(RawQuery),
    responses(
        (status = 200, description = "the CRD's own OpenAPI schema of the kind"),
        (status = 400, description = "a query that is not one"),
        (status = 401, description = "no bearer token the gateway knows"),
        (status = 404, description = "the kind is not served, or not to this token"),
    ))]
pub async fn raw_schema(
    State(shared): State<Shared>,
    Extension(Caller { token, .. }): Extension<Caller>,
    query: Result<Query<RawQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let query = match params(query, "kind and apiVersion") {
        Ok(query) => query,
        Err(response) => return *response,
    };
    let Some((crd, _)) = shared.compiled.served_kind(query.api_version.as_deref(), &query.kind) else {
        return failure(StatusCode::NOT_FOUND, format!("kind {} is not served", query.kind));
    };
    let Some(serve) = crd.serve.as_deref() else {
        return failure(StatusCode::NOT_FOUND, format!("kind {} is not served", query.kind));
    };
    if let Err(why) = permits(serve.primary_surface(), &token, Class::Schema, Verb::Get, None) {
        return failure(StatusCode::FORBIDDEN, why);
    }
    match shared.schemas.of(&shared.client, LOCAL_CLUSTER, crd).await {
        Some(schema) => {
            Json(json!({"kind": crd.kind, "apiVersion": crd.api_version(), "openAPIV3Schema": schema})).into_response()
        }
        None => failure(
            StatusCode::NOT_FOUND,
            format!("the API server has no schema for {}", crd.crd_name()),
        ),
    }
}
