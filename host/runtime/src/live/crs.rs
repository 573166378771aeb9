//! `/katalog/{crd}/cr...`: a CRD's custom resources from its informer cache, one CR with
//! its children (from the owned-kind watches, grouped by kind, with readiness) and its
//! recent events. A CRD with `crossAccess: false` shows none of them (what the `cr` and
//! `events` cross reads of other runtimes ask for).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Shared, not_found, unknown_crd};
use crate::pipeline::roster::CrdHandle;

pub(super) fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(cluster_cr))
        .routes(routes!(namespaced_cr))
        .routes(routes!(cluster_events))
        .routes(routes!(namespaced_events))
}

/// A CRD whose CRs the Live API shows.
fn readable(shared: &Shared, crd: &str) -> Option<CrdHandle> {
    shared.inspect.crd(crd).filter(|h| h.crd.cross_access)
}

/// The most CRs one list answer holds.
const PAGE_LIMIT: usize = 1000;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// Only CRs of this namespace.
    namespace: Option<String>,
    /// At most this many items (default and cap 1000).
    limit: Option<usize>,
    /// Skip this many items of the ordered list first.
    offset: Option<usize>,
}

/// Age in the shape kubectl prints it.
fn age(created: &Value) -> Option<String> {
    let created: jiff::Timestamp = created.as_str()?.parse().ok()?;
    let seconds = jiff::Timestamp::now().duration_since(created).as_secs().max(0);
    Some(match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    })
}

/// Whether the CR's Ready condition is true (`null` when it has none).
fn ready(cr: &Value) -> Value {
    cr["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map_or(Value::Null, |c| json!(c["status"] == "True"))
}

/// A CRD's custom resources, ordered by namespace and name.
#[utoipa::path(get, path = "/katalog/{crd}/cr", tag = "custom resources",
    params(("crd" = String, Path, description = "the CRD's key in the Katalog"), ListQuery),
    responses((status = 200, description = "`{crd, total, items: [{name, namespace, phase, ready, age, generation}]}`"),
              (status = 400, description = "a bad query"), (status = 404, description = "no such CRD, or closed to cross reads")))]
async fn list(
    State(shared): State<Shared>,
    Path(crd): Path<String>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Query(query) = match query {
        Ok(query) => query,
        Err(rejection) => {
            return super::bad_request(format!("{rejection}; the parameters are namespace, limit and offset"));
        }
    };
    let Some(handle) = readable(&shared, &crd) else {
        return unknown_crd(&crd);
    };
    let mut keys = handle.cache.keys();
    if let Some(namespace) = &query.namespace {
        keys.retain(|k| k.split_once('/').is_some_and(|(ns, _)| ns == namespace));
    }
    keys.sort();
    let total = keys.len();
    let limit = query.limit.unwrap_or(PAGE_LIMIT).min(PAGE_LIMIT);
    let items: Vec<Value> = keys
        .iter()
        .skip(query.offset.unwrap_or(0))
        .take(limit)
        .filter_map(|key| handle.cache.get(key))
        .map(|cr| {
            let metadata = &cr["metadata"];
            json!({
                "name": metadata["name"], "namespace": metadata["namespace"],
                "phase": cr["status"]["phase"], "ready": ready(&cr), "age": age(&metadata["creationTimestamp"]),
                "generation": metadata["generation"],
            })
        })
        .collect();
    Json(json!({"crd": crd, "total": total, "items": items})).into_response()
}

/// One CR: spec, status, conditions, its children by kind with their readiness.
fn one(shared: &Shared, crd: &str, key: String) -> Response {
    let Some(handle) = readable(shared, crd) else {
        return unknown_crd(crd);
    };
    let Some(cr) = handle.cache.get(&key) else {
        return not_found(format!("no {crd} {key}"));
    };
    let metadata = &cr["metadata"];
    let mut children: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    if let Some(uid) = metadata["uid"].as_str() {
        for child in handle.children.owned_by(uid) {
            let readiness = crate::outcome::readiness::of(&child);
            let why = match &readiness {
                crate::outcome::readiness::Readiness::Ready => None,
                crate::outcome::readiness::Readiness::Waiting(why)
                | crate::outcome::readiness::Readiness::Failed(why) => Some(why.clone()),
            };
            let kind = child["kind"].as_str().unwrap_or_default().to_string();
            children.entry(kind).or_default().push(json!({
                "name": child["metadata"]["name"], "namespace": child["metadata"]["namespace"],
                "ready": readiness.is_ready(), "reason": why,
                "replicas": child["spec"]["replicas"], "readyReplicas": child["status"]["readyReplicas"],
            }));
        }
    }
    for items in children.values_mut() {
        items.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }
    Json(json!({
        "name": metadata["name"],
        "namespace": metadata["namespace"],
        "uid": metadata["uid"],
        "generation": metadata["generation"],
        "age": age(&metadata["creationTimestamp"]),
        "phase": cr["status"]["phase"],
        "ready": ready(&cr),
        "labels": metadata["labels"],
        "annotations": metadata["annotations"],
        "finalizers": metadata["finalizers"],
        "deleting": !metadata["deletionTimestamp"].is_null(),
        "spec": cr["spec"],
        "status": cr["status"],
        "conditions": cr["status"]["conditions"],
        "children": children,
        "eventsEndpoint": format!("/katalog/{crd}/cr/{key}/events"),
    }))
    .into_response()
}

/// A cluster-scoped CR.
#[utoipa::path(get, path = "/katalog/{crd}/cr/{name}", tag = "custom resources",
    params(("crd" = String, Path, description = "the CRD's key in the Katalog"), ("name" = String, Path, description = "the CR's name")),
    responses((status = 200, description = "the CR with its children"), (status = 404, description = "no such CRD or CR")))]
async fn cluster_cr(State(shared): State<Shared>, Path((crd, name)): Path<(String, String)>) -> Response {
    one(&shared, &crd, name)
}

/// A namespaced CR.
#[utoipa::path(get, path = "/katalog/{crd}/cr/{namespace}/{name}", tag = "custom resources",
    params(("crd" = String, Path, description = "the CRD's key in the Katalog"), ("namespace" = String, Path, description = "the CR's namespace"), ("name" = String, Path, description = "the CR's name")),
    responses((status = 200, description = "the CR with its children"), (status = 404, description = "no such CRD or CR")))]
async fn namespaced_cr(
    State(shared): State<Shared>,
    Path((crd, namespace, name)): Path<(String, String, String)>,
) -> Response {
    one(&shared, &crd, format!("{namespace}/{name}"))
}

/// A CR's recent events, newest first (at most 100).
fn events(shared: &Shared, crd: &str, key: String) -> Response {
    let Some(handle) = readable(shared, crd) else {
        return unknown_crd(crd);
    };
    let Some(cr) = handle.cache.get(&key) else {
        return not_found(format!("no {crd} {key}"));
    };
    let events: Vec<Value> = handle
        .events
        .of(&key)
        .into_iter()
        .map(|mut event| {
            event["age"] = json!(age(&event["lastTimestamp"]));
            event
        })
        .collect();
    Json(json!({"name": cr["metadata"]["name"], "namespace": cr["metadata"]["namespace"], "events": events}))
        .into_response()
}

/// A cluster-scoped CR's events.
#[utoipa::path(get, path = "/katalog/{crd}/cr/{name}/events", tag = "custom resources",
    params(("crd" = String, Path, description = "the CRD's key in the Katalog"), ("name" = String, Path, description = "the CR's name")),
    responses((status = 200, description = "`{name, namespace, events: [{type, reason, message, count, lastTimestamp, age}]}`"), (status = 404, description = "no such CRD or CR")))]
async fn cluster_events(State(shared): State<Shared>, Path((crd, name)): Path<(String, String)>) -> Response {
    // Of a namespaced kind, this is the CR named `events` in namespace `name`.
    let namespaced = shared
        .inspect
        .katalog()
        .katalog
        .crds
        .get(&crd)
        .is_some_and(|c| c.entry.namespaced);
    match namespaced {
        true => one(&shared, &crd, format!("{name}/events")),
        false => events(&shared, &crd, name),
    }
}

/// A namespaced CR's events.
#[utoipa::path(get, path = "/katalog/{crd}/cr/{namespace}/{name}/events", tag = "custom resources",
    params(("crd" = String, Path, description = "the CRD's key in the Katalog"), ("namespace" = String, Path, description = "the CR's namespace"), ("name" = String, Path, description = "the CR's name")),
    responses((status = 200, description = "`{name, namespace, events: [...]}`"), (status = 404, description = "no such CRD or CR")))]
async fn namespaced_events(
    State(shared): State<Shared>,
    Path((crd, namespace, name)): Path<(String, String, String)>,
) -> Response {
    events(&shared, &crd, format!("{namespace}/{name}"))
}
