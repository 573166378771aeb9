//! `GET /resources/{kind}/{namespace}/{name}` (one CR, shaped by the surface it came
//! through; `?field=` for one value), `GET /resources/{kind}/{namespace}` (the CRs of a
//! namespace), `DELETE` of one. A cluster-scoped kind drops the namespace from the path.

use axum::Json;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::api::{DeleteParams, ListParams};
use serde::Deserialize;
use serde_json::{Value, json};

use orkestra_katalog::compile::CompiledCrd;
use orkestra_katalog::model::Verb;
use orkestra_katalog::serve::access::{Class, permits};

use super::{Caller, Shared, api_of, cluster_client, crd_of_kind, failure, from_kube, params, shape, surface_of};

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReadQuery {
    /// One value of the CR (`status.phase`).
    field: Option<String>,
    cluster: Option<String>,
}

type Query_ = Result<Query<ReadQuery>, axum::extract::rejection::QueryRejection>;

/// A refusal made before the handler's own work (boxed: a response is large).
type Early = Box<Response>;

/// The query, and the client of the cluster it names.
fn query_of(shared: &Shared, query: Query_) -> Result<(ReadQuery, kube::Client), Early> {
    let query = params(query, "field and cluster")?;
    let client = cluster_client(shared, query.cluster.as_deref())?;
    Ok((query, client.clone()))
}

/// The 400 for a namespace or name in the path that no CR could have, before anything
/// reaches the API server (a CR's name is a DNS-1123 subdomain).
fn checked(namespace: Option<&str>, name: Option<&str>) -> Result<(), Early> {
    let bad = |why: String| Box::new(failure(StatusCode::BAD_REQUEST, why));
    if let Some(namespace) = namespace {
        orkestra_expr::names::check_namespace(namespace).map_err(|e| bad(e.to_string()))?;
    }
    match name {
        Some(name) if !orkestra_expr::names::is_dns1123_subdomain(name) => Err(bad(format!(
            "name {:?} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253)",
            orkestra_expr::text::bounded(name.to_string(), 80)
        ))),
        _ => Ok(()),
    }
}

fn served<'c>(shared: &'c Shared, kind: &str) -> Result<&'c std::sync::Arc<CompiledCrd>, Early> {
    crd_of_kind(&shared.compiled, kind)
        .ok_or_else(|| Box::new(failure(StatusCode::NOT_FOUND, format!("kind {kind} is not served"))))
}

#[utoipa::path(get, path = "/resources/{kind}/{namespace}/{name}", tag = "serve",
    params(("kind" = String, Path, description = "the CR kind (any case) or its plural"), ("namespace" = String, Path, description = "the CR's namespace"), ("name" = String, Path, description = "the CR's name"), ReadQuery),
    responses(
        (status = 200, description = "the CR as its surface shapes it, or one `field` of it"),
        (status = 400, description = "a name, namespace or query that is not one"),
        (status = 401, description = "no bearer token the gateway knows"),
        (status = 403, description = "the token may not read through this surface"),
        (status = 404, description = "no such kind, or no such CR"),
    ))]
pub async fn get(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path((kind, namespace, name)): Path<(String, String, String)>,
    query: Query_,
) -> Response {
    let (query, client) = match query_of(&shared, query) {
        Ok(query) => query,
        Err(response) => return *response,
    };
    read_one(&shared, &client, &caller, &kind, Some(&namespace), &name, query.field).await
}

/// `/resources/{kind}/{x}`: one CR of a cluster-scoped kind, or the CRs of namespace `x`.
#[utoipa::path(get, path = "/resources/{kind}/{first}", tag = "serve",
    params(("kind" = String, Path, description = "the CR kind (any case) or its plural"), ("first" = String, Path, description = "a namespace (namespaced kinds: its CRs) or a name (cluster-scoped kinds: that CR)"), ReadQuery),
    responses(
        (status = 200, description = "the namespace's CRs, or the cluster-scoped CR"),
        (status = 400, description = "a name, namespace or query that is not one"),
        (status = 401, description = "no bearer token the gateway knows"),
        (status = 403, description = "the token may not read through this surface"),
        (status = 404, description = "no such kind, or no such CR"),
    ))]
pub async fn one_or_list(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path((kind, first)): Path<(String, String)>,
    query: Query_,
) -> Response {
    let (query, client) = match query_of(&shared, query) {
        Ok(query) => query,
        Err(response) => return *response,
    };
    let crd = match served(&shared, &kind) {
        Ok(crd) => crd,
        Err(response) => return *response,
    };
    match crd.namespaced {
        true => list(&client, &caller, crd, Some(&first)).await,
        false => read_one(&shared, &client, &caller, &kind, None, &first, query.field).await,
    }
}

/// `/resources/{kind}`: every CR of a cluster-scoped kind.
#[utoipa::path(get, path = "/resources/{kind}", tag = "serve",
    params(("kind" = String, Path, description = "the CR kind (any case) or its plural"), ReadQuery),
    responses(
        (status = 200, description = "every CR of the kind the token may read"),
        (status = 400, description = "a name, namespace or query that is not one"),
        (status = 401, description = "no bearer token the gateway knows"),
        (status = 403, description = "the token may not read through this surface"),
        (status = 404, description = "no such kind, or no such CR"),
    ))]
pub async fn list_all(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(kind): Path<String>,
    query: Query_,
) -> Response {
    let client = match query_of(&shared, query) {
        Ok((_, client)) => client,
        Err(response) => return *response,
    };
    let crd = match served(&shared, &kind) {
        Ok(crd) => crd,
        Err(response) => return *response,
    };
    if crd.namespaced {
        return failure(
            StatusCode::BAD_REQUEST,
            format!(
                "{} is namespaced: list /api/v1/resources/{kind}/{{namespace}}",
                crd.kind
            ),
        );
    }
    list(&client, &caller, crd, None).await
}

async fn read_one(
    shared: &Shared,
    client: &kube::Client,
    caller: &Caller,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    field: Option<String>,
) -> Response {
    let crd = match served(shared, kind).and_then(|crd| checked(namespace, Some(name)).map(|()| crd)) {
        Ok(crd) => crd,
        Err(response) => return *response,
    };
    let Some(serve) = crd.serve.as_deref() else {
        return failure(StatusCode::NOT_FOUND, format!("kind {kind} is not served"));
    };
    if let Err(why) = may_somewhere(serve, caller, Verb::Get, namespace) {
        return failure(StatusCode::FORBIDDEN, why);
    }
    let object = match api_of(client, crd, namespace) {
        Ok(api) => fetch(&api, crd, namespace, name).await,
        Err(response) => Err(response),
    };
    let object = match object {
        Ok(object) => object,
        Err(response) => return *response,
    };
    let surface = surface_of(serve, Some(&object));
    if let Err(why) = permits(surface, &caller.token, Class::Resources, Verb::Get, namespace) {
        return failure(StatusCode::FORBIDDEN, why);
    }
    if let Some(field) = field {
        let value = shape::field(crd, &surface.response, object, &field);
        return Json(json!({"name": name, "namespace": namespace, "field": field, "value": value})).into_response();
    }
    Json(shape::read(crd, &surface.response, object)).into_response()
}

async fn list(client: &kube::Client, caller: &Caller, crd: &CompiledCrd, namespace: Option<&str>) -> Response {
    let Some(serve) = crd.serve.as_deref() else {
        return failure(StatusCode::NOT_FOUND, format!("kind {} is not served", crd.kind));
    };
    if let Err(response) = checked(namespace, None) {
        return *response;
    }
    if let Err(why) = permits(
        serve.primary_surface(),
        &caller.token,
        Class::Resources,
        Verb::List,
        namespace,
    ) {
        return failure(StatusCode::FORBIDDEN, why);
    }
    let api = match api_of(client, crd, namespace) {
        Ok(api) => api,
        Err(response) => return *response,
    };
    let listed = match api.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(error) => return from_kube(error, "listing the CRs"),
    };
    let items: Vec<Value> = listed
        .items
        .into_iter()
        .filter_map(|object| serde_json::to_value(object).ok())
        .filter_map(|object| {
            // Each CR as its own surface shows it, when the token may see that surface.
            let surface = surface_of(serve, Some(&object));
            permits(surface, &caller.token, Class::Resources, Verb::List, namespace).ok()?;
            Some(shape::read(crd, &surface.response, object))
        })
        .collect();
    Json(json!({"kind": crd.kind, "namespace": namespace, "items": items})).into_response()
}

#[utoipa::path(delete, path = "/resources/{kind}/{namespace}/{name}", tag = "serve",
    params(("kind" = String, Path, description = "the CR kind (any case) or its plural"), ("namespace" = String, Path, description = "the CR's namespace"), ("name" = String, Path, description = "the CR's name"), ReadQuery),
    responses(
        (status = 200, description = "`{accepted: true}`: the CR is being deleted"),
        (status = 400, description = "a name, namespace or query that is not one"),
        (status = 401, description = "no bearer token the gateway knows"),
        (status = 403, description = "the token may not delete through this surface"),
        (status = 404, description = "no such kind, or no such CR"),
    ))]
pub async fn delete(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path((kind, namespace, name)): Path<(String, String, String)>,
    query: Query_,
) -> Response {
    match query_of(&shared, query) {
        Ok((_, client)) => remove(&shared, &client, &caller, &kind, Some(&namespace), &name).await,
        Err(response) => *response,
    }
}

#[utoipa::path(delete, path = "/resources/{kind}/{first}", tag = "serve",
    params(("kind" = String, Path, description = "the CR kind (any case) or its plural"), ("first" = String, Path, description = "a namespace (namespaced kinds: its CRs) or a name (cluster-scoped kinds: that CR)"), ReadQuery),
    responses(
        (status = 200, description = "`{accepted: true}`: the cluster-scoped CR is being deleted"),
        (status = 400, description = "a name, namespace or query that is not one"),
        (status = 401, description = "no bearer token the gateway knows"),
        (status = 403, description = "the token may not delete through this surface"),
        (status = 404, description = "no such kind, or no such CR"),
    ))]
pub async fn delete_cluster(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path((kind, name)): Path<(String, String)>,
    query: Query_,
) -> Response {
    match query_of(&shared, query) {
        Ok((_, client)) => remove(&shared, &client, &caller, &kind, None, &name).await,
        Err(response) => *response,
    }
}

async fn remove(
    shared: &Shared,
    client: &kube::Client,
    caller: &Caller,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Response {
    let crd = match served(shared, kind).and_then(|crd| checked(namespace, Some(name)).map(|()| crd)) {
        Ok(crd) => crd,
        Err(response) => return *response,
    };
    let Some(serve) = crd.serve.as_deref() else {
        return failure(StatusCode::NOT_FOUND, format!("kind {kind} is not served"));
    };
    if crd.namespaced != namespace.is_some() {
        return failure(
            StatusCode::BAD_REQUEST,
            format!(
                "{} is {}",
                crd.kind,
                if crd.namespaced {
                    "namespaced: give its namespace"
                } else {
                    "cluster-scoped: give no namespace"
                }
            ),
        );
    }
    if let Err(why) = may_somewhere(serve, caller, Verb::Delete, namespace) {
        return failure(StatusCode::FORBIDDEN, why);
    }
    let api = match api_of(client, crd, namespace) {
        Ok(api) => api,
        Err(response) => return *response,
    };
    let object = match fetch(&api, crd, namespace, name).await {
        Ok(object) => object,
        Err(response) => return *response,
    };
    if let Err(why) = permits(
        surface_of(serve, Some(&object)),
        &caller.token,
        Class::Resources,
        Verb::Delete,
        namespace,
    ) {
        return failure(StatusCode::FORBIDDEN, why);
    }
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {
            Json(json!({"accepted": true, "kind": crd.kind, "name": name, "namespace": namespace})).into_response()
        }
        Err(error) => from_kube(error, "deleting the CR"),
    }
}

/// Whether some surface of the CRD lets the caller do `verb` in `namespace`: checked before
/// the CR is read, so a caller learns nothing of namespaces it may not see (the CR's own
/// surface is checked once it is read).
fn may_somewhere(
    serve: &orkestra_katalog::compile::CompiledServe,
    caller: &Caller,
    verb: Verb,
    namespace: Option<&str>,
) -> Result<(), orkestra_katalog::Error> {
    let allowed = |surface| permits(surface, &caller.token, Class::Resources, verb, namespace);
    match serve.surfaces.values().any(|s| allowed(s).is_ok()) {
        true => Ok(()),
        // The primary surface's reason, as the caller would meet it there.
        false => allowed(serve.primary_surface()),
    }
}

/// One CR, or the 404 (or the API server's error) that answers instead.
async fn fetch(
    api: &orkestra_kube::objects::Objects<kube::api::DynamicObject>,
    crd: &CompiledCrd,
    namespace: Option<&str>,
    name: &str,
) -> Result<Value, Early> {
    match api.get_opt(name).await {
        Ok(Some(object)) => Ok(serde_json::to_value(object).unwrap_or_default()),
        Ok(None) => Err(Box::new(failure(
            StatusCode::NOT_FOUND,
            format!("no {} {}", crd.kind, key(namespace, name)),
        ))),
        Err(error) => Err(Box::new(from_kube(error, "reading the CR"))),
    }
}

fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_string(),
    }
}
