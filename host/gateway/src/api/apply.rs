//! `POST /apply[?dryRun=true][&overwrite=true][&override=true]`: an intent (`{"target":
//! ...}`) or a whole CR (apiVersion and kind) made into a CR, checked against the caller's
//! token (create when the CR does not exist, update when it does), refused with 409 when it
//! would move a CR to another surface (unless `override` is asked for and allowed), and
//! written with server-side apply under the gateway's field manager. The API server's
//! refusals (its schema, the admission webhooks) come back as 422 with violations.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::api::{Patch, PatchParams};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use orkestra_katalog::compile::CompiledCrd;
use orkestra_katalog::model::{LOCAL_CLUSTER, Verb};
use orkestra_katalog::serve::access::{Class, permits};
use orkestra_katalog::serve::intent::{self, Made, Refusal, stored_surface};

use super::cache::Cache;
use super::{Caller, Shared, api_of, cluster_client, failure, from_kube, params, shape};
use crate::registration::MANAGER;

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ApplyQuery {
    /// Check and shape the CR without writing it.
    #[serde(default)]
    dry_run: bool,
    /// Take fields another field manager owns (when the surface allows it).
    #[serde(default)]
    overwrite: bool,
    /// Move the CR to this surface (when the surface allows it).
    #[serde(default, rename = "override")]
    override_: bool,
    /// The cluster to write to (default: the gateway's own; a target may name several).
    cluster: Option<String>,
}

/// An intent (`{target, ...fields}`) or a whole CR in; the CR applied with server-side
/// apply and the gateway's provenance, and answered as its surface shapes it.
#[utoipa::path(post, path = "/apply", tag = "serve", params(ApplyQuery),
    request_body(content = Object, content_type = "application/json",
        description = "an intent (`{target, ...fields}`) or a whole custom resource"),
    responses(
        (status = 200, description = "`{accepted: true, ...}` with the CR as its surface shapes it"),
        (status = 400, description = "a malformed body or query; `{accepted: false, message}`"),
        (status = 401, description = "no bearer token the gateway knows"),
        (status = 403, description = "the token may not apply through this surface"),
        (status = 404, description = "no such target or kind"),
        (status = 409, description = "another field manager owns a field (retry with `overwrite`)"),
        (status = 422, description = "the API server refused the CR; `violations` lists why"),
    ))]
pub async fn apply(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
    query: Result<Query<ApplyQuery>, axum::extract::rejection::QueryRejection>,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    // Intent to Ready in one trace: a caller's own trace (a W3C `traceparent` header), this
    // apply, then the runtime's reconcile of the CR it writes (the annotation it carries).
    let span = tracing::info_span!("serve.apply", token = %caller.token);
    if let Some(traceparent) = headers.get("traceparent").and_then(|v| v.to_str().ok()) {
        orkestra_kube::trace::follow(&span, traceparent);
    }
    applied(shared, caller, query, body).instrument(span).await
}

async fn applied(
    shared: Shared,
    caller: Caller,
    query: Result<Query<ApplyQuery>, axum::extract::rejection::QueryRejection>,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    let query = match params(query, "dryRun, overwrite, override and cluster") {
        Ok(query) => query,
        Err(response) => return *response,
    };
    let body = match body {
        Ok(Json(Value::Object(body))) => body,
        Ok(Json(_)) => return failure(StatusCode::BAD_REQUEST, "the body is a JSON object: an intent or a CR"),
        Err(rejection) => return failure(rejection.status(), rejection.body_text()),
    };
    apply_body(&shared, &caller, &query, &body).await
}

/// An intent from webhook intake, applied as the entry `identity` (its name is the token
/// `serve.tokens` checks and the `serve-source` stamped): the status and the answer.
pub(crate) async fn apply_as(shared: &Shared, identity: &str, intent: &Map<String, Value>) -> (StatusCode, Value) {
    let caller = Caller {
        token: identity.to_string(),
        source: identity.to_string(),
    };
    let span = tracing::info_span!("serve.apply", token = %identity);
    let response = apply_body(shared, &caller, &ApplyQuery::default(), intent)
        .instrument(span)
        .await;
    answer_of(response).await
}

/// A response's status and JSON body.
async fn answer_of(response: Response) -> (StatusCode, Value) {
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let answer = serde_json::from_slice(&bytes).unwrap_or_else(|_| json!({"accepted": false}));
    (status, answer)
}

/// Stages 1 to 6 for a parsed body: made, routed to its clusters, checked and written.
async fn apply_body(shared: &Shared, caller: &Caller, query: &ApplyQuery, body: &Map<String, Value>) -> Response {
    let (crd, made) = match make(shared, caller, body).await {
        Ok(made) => made,
        Err(response) => return *response,
    };
    let clusters = match clusters_of(shared, &crd, &made, body, query.cluster.as_deref()) {
        Ok(clusters) => clusters,
        Err(response) => return *response,
    };
    match clusters.as_slice() {
        [only] if only == LOCAL_CLUSTER && query.cluster.is_none() => {
            write(&shared.client, None, Some(&shared.cache), caller, &crd, made, query).await
        }
        [only] => match cluster_client(shared, Some(only)) {
            Ok(client) => write(client, Some(only), local_cache(shared, only), caller, &crd, made, query).await,
            Err(response) => *response,
        },
        many => fan_out(shared, many, caller, &crd, made, query).await,
    }
}

/// The view of the CRs, for writes to the gateway's own cluster.
fn local_cache<'s>(shared: &'s Shared, cluster: &str) -> Option<&'s Cache> {
    (cluster == LOCAL_CLUSTER).then_some(&*shared.cache)
}

/// The clusters a CR goes to: its surface's (templates rendered over the CR, with the intent
/// as `.request`), narrowed to `?cluster=` when given.
fn clusters_of(
    shared: &Shared,
    crd: &CompiledCrd,
    made: &Made,
    body: &Map<String, Value>,
    asked: Option<&str>,
) -> Result<Vec<String>, Box<Response>> {
    let surface = crd.serve.as_deref().and_then(|s| s.surfaces.get(&made.surface));
    let templates = surface.map(|s| s.clusters.as_slice()).unwrap_or_default();
    let overlay = Map::from_iter([("request".to_string(), Value::Object(body.clone()))]);
    let env = orkestra_expr::template::Env::now();
    let mut names = Vec::new();
    for template in templates {
        let name = template.render_in(&env, &made.object, Some(&overlay)).map_err(|e| {
            Box::new(failure(
                StatusCode::BAD_REQUEST,
                format!("the target's cluster {:?}: {}", template.source(), e.message),
            ))
        })?;
        let name = name.trim().to_string();
        if name.is_empty() || names.contains(&name) {
            continue;
        }
        if shared.clusters.client(&name).is_none() {
            return Err(Box::new(failure(
                StatusCode::BAD_REQUEST,
                format!("target \"{}\" routes to unknown cluster \"{name}\"", made.surface),
            )));
        }
        names.push(name);
    }
    if names.is_empty() {
        names.push(LOCAL_CLUSTER.to_string());
    }
    match asked {
        None => Ok(names),
        Some(asked) if names.iter().any(|n| n == asked) => Ok(vec![asked.to_string()]),
        Some(asked) if shared.clusters.client(asked).is_none() => Err(Box::new(failure(
            StatusCode::NOT_FOUND,
            format!(
                "unknown cluster \"{asked}\"; clusters: {}",
                shared.clusters.names().join(", ")
            ),
        ))),
        Some(asked) => Err(Box::new(failure(
            StatusCode::BAD_REQUEST,
            format!(
                "target \"{}\" does not route to cluster \"{asked}\" (it routes to {})",
                made.surface,
                names.join(", ")
            ),
        ))),
    }
}

/// The same CR applied to several clusters at once: one result each, `accepted` when any
/// took it, `partialSuccess` when some did not (answered 207).
async fn fan_out(
    shared: &Shared,
    clusters: &[String],
    caller: &Caller,
    crd: &CompiledCrd,
    made: Made,
    query: &ApplyQuery,
) -> Response {
    let writes = clusters.iter().map(|name| {
        let made = made.clone();
        async move {
            let response = match cluster_client(shared, Some(name)) {
                Ok(client) => write(client, Some(name), local_cache(shared, name), caller, crd, made, query).await,
                Err(response) => *response,
            };
            let (status, mut result) = answer_of(response).await;
            result["cluster"] = json!(name);
            result["status"] = json!(status.as_u16());
            (status, result)
        }
    });
    let results = futures::future::join_all(writes).await;
    let accepted = results.iter().filter(|(status, _)| status.is_success()).count();
    let status = match accepted {
        n if n == results.len() => StatusCode::OK,
        0 => results.first().map_or(StatusCode::BAD_GATEWAY, |(status, _)| *status),
        _ => StatusCode::MULTI_STATUS,
    };
    let metadata = &made.object["metadata"];
    let answer = json!({
        "accepted": accepted > 0,
        "partialSuccess": accepted > 0 && accepted < results.len(),
        "dryRun": query.dry_run,
        "kind": crd.kind, "apiVersion": crd.api_version(), "target": made.surface,
        "name": metadata["name"], "namespace": metadata["namespace"],
        "clusters": results.into_iter().map(|(_, result)| result).collect::<Vec<_>>(),
    });
    (status, Json(answer)).into_response()
}

/// Stages 1 and 3-4: the CRD and surface, the CR, its provenance; the CRD with the CR.
async fn make(
    shared: &Shared,
    caller: &Caller,
    body: &Map<String, Value>,
) -> Result<(Arc<CompiledCrd>, Made), Box<Response>> {
    // The identity an OIDC token proved; a static token carries none.
    let source = caller.source.as_str();
    let refused = |refusal: Refusal| {
        Box::new(match refusal {
            Refusal::BadRequest(message) => failure(StatusCode::BAD_REQUEST, message),
            Refusal::Invalid(violations) => {
                let message = violations.first().map(|v| v.message.clone()).unwrap_or_default();
                let body = json!({"accepted": false, "message": message, "violations": violations});
                (StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response()
            }
        })
    };
    if let Some(target) = body.get("target") {
        let Some(name) = target.as_str() else {
            return Err(Box::new(failure(StatusCode::BAD_REQUEST, "target is a name")));
        };
        let Some((crd, served, surface)) = shared.compiled.target(name) else {
            let message = format!(
                "unknown target \"{name}\" — available: {}",
                available(shared).join(", ")
            );
            return Err(Box::new(failure(StatusCode::BAD_REQUEST, message)));
        };
        let schema = shared
            .schemas
            .of(&shared.client, LOCAL_CLUSTER, crd)
            .await
            .unwrap_or(Value::Null);
        let types = |path: &[String]| orkestra_katalog::serve::schema::type_at(&schema, path);
        let made = intent::from_target(served, surface, body, source, &types).map_err(refused)?;
        return Ok((crd.clone(), made));
    }
    let (Some(api_version), Some(kind)) = (
        body.get("apiVersion").and_then(Value::as_str),
        body.get("kind").and_then(Value::as_str),
    ) else {
        let message = "give a target (target mode), or apiVersion and kind (a whole CR)";
        return Err(Box::new(failure(StatusCode::BAD_REQUEST, message)));
    };
    let Some((crd, served)) = shared.compiled.served_kind(None, kind) else {
        let message = format!("kind {kind} ({api_version}) is not served");
        return Err(Box::new(failure(StatusCode::BAD_REQUEST, message)));
    };
    let made = intent::from_cr(served, body, source).map_err(refused)?;
    Ok((crd.clone(), made))
}

/// The enabled targets, for an unknown target's message.
fn available(shared: &Shared) -> Vec<String> {
    shared
        .compiled
        .enabled()
        .filter_map(|crd| crd.serve.as_deref())
        .flat_map(|serve| serve.surfaces.values().filter(|s| s.enabled).map(|s| s.name.clone()))
        .collect()
}

/// Stages 2, 5 and 6: the token, the surface conflict, the write, the answer.
async fn write(
    client: &kube::Client,
    cluster: Option<&str>,
    cache: Option<&Cache>,
    caller: &Caller,
    crd: &CompiledCrd,
    made: Made,
    query: &ApplyQuery,
) -> Response {
    // Kept for the retry a stale view of the CR costs.
    let retry = cache.is_some().then(|| made.clone());
    let Made { mut object, surface } = made;
    let Some(serve) = crd.serve.as_deref() else {
        return failure(StatusCode::BAD_REQUEST, format!("kind {} is not served", crd.kind));
    };
    let Some(surface) = serve.surfaces.get(&surface) else {
        return failure(StatusCode::BAD_REQUEST, format!("unknown target \"{surface}\""));
    };
    let metadata = &object["metadata"];
    let (name, namespace) = (
        metadata["name"].as_str().unwrap_or_default().to_string(),
        metadata["namespace"].as_str().map(str::to_string),
    );
    let (name, namespace) = (name.as_str(), namespace.as_deref());
    if let Some(traceparent) = orkestra_kube::trace::current() {
        object["metadata"]["annotations"][orkestra_kube::trace::TRACEPARENT] = Value::String(traceparent);
    }
    let api = match api_of(client, crd, namespace) {
        Ok(api) => api,
        Err(response) => return *response,
    };
    let watched = cache
        .and_then(|c| c.get(&crd.name, namespace, name))
        .and_then(|o| serde_json::to_value(&*o).ok());
    let from_cache = watched.is_some();
    let existing = match watched {
        Some(watched) => Some(watched),
        None => match api.get_opt(name).await {
            Ok(existing) => existing.and_then(|o| serde_json::to_value(o).ok()),
            Err(error) => return from_kube(error, "reading the CR"),
        },
    };
    if from_cache && let Some(version) = existing.as_ref().map(|e| e["metadata"]["resourceVersion"].clone()) {
        // The write holds only if the CR is still what the checks below looked at.
        object["metadata"]["resourceVersion"] = version;
    }
    let verb = if existing.is_some() { Verb::Update } else { Verb::Create };
    if let Err(why) = permits(surface, &caller.token, Class::Resources, verb, namespace) {
        return failure(StatusCode::FORBIDDEN, why);
    }
    let mut warnings = Vec::new();
    if let Some(stored) = existing
        .as_ref()
        .and_then(stored_surface)
        .filter(|s| *s != surface.name)
    {
        if !query.override_ {
            return failure(
                StatusCode::CONFLICT,
                format!(
                    "routing surface conflict: resource was created via \"{stored}\", cannot update via \"{}\" without ?override=true",
                    surface.name
                ),
            );
        }
        if !surface.overrides.target_conflict {
            return failure(
                StatusCode::BAD_REQUEST,
                format!(
                    "target override not enabled for \"{}\" (apply.overrides.targetConflict)",
                    surface.name
                ),
            );
        }
        tracing::warn!(crd = %crd.name, %name, from = %stored, to = %surface.name, token = %caller.token, "a CR moved to another surface");
        warnings.push(format!("moved from surface \"{stored}\" to \"{}\"", surface.name));
    }
    if query.overwrite && !surface.overrides.resource_conflict {
        return failure(
            StatusCode::BAD_REQUEST,
            format!(
                "overwrite not enabled for \"{}\" (apply.overrides.resourceConflict)",
                surface.name
            ),
        );
    }
    let mut params = PatchParams::apply(MANAGER);
    params.force = query.overwrite;
    params.dry_run = query.dry_run;
    let applied = match api.patch(name, &params, &Patch::Apply(&object)).await {
        Ok(applied) => serde_json::to_value(applied).unwrap_or_default(),
        Err(kube::Error::Api(status)) if from_cache && matches!(status.code, 404 | 409) => {
            // The view was behind the API server: check and write again from a fresh read.
            let Some(made) = retry else {
                return failure(StatusCode::CONFLICT, status.message);
            };
            return Box::pin(write(client, cluster, None, caller, crd, made, query)).await;
        }
        Err(error) => return from_kube(error, "applying the CR"),
    };
    tracing::info!(crd = %crd.name, %name, surface = %surface.name, token = %caller.token, cluster = cluster.unwrap_or(LOCAL_CLUSTER), dry_run = query.dry_run, "applied through the gateway");
    let response = &surface.response;
    let mut answer = json!({
        "accepted": true, "dryRun": query.dry_run, "name": name, "namespace": namespace,
        "kind": crd.kind, "apiVersion": crd.api_version(), "target": surface.name,
        "pollUrl": shape::poll_url(crd, response, &applied),
        "warnings": warnings, "payload": shape::payload(crd, response, &applied),
    });
    if let Some(cluster) = cluster {
        answer["cluster"] = json!(cluster);
        if let Some(url) = answer["pollUrl"].as_str() {
            let joiner = if url.contains('?') { '&' } else { '?' };
            answer["pollUrl"] = json!(format!("{url}{joiner}cluster={cluster}"));
        }
    }
    if response.include_cr {
        answer["object"] = shape::read(crd, response, applied);
        if let Some(object) = answer["object"].as_object_mut() {
            object.remove("payload");
        }
    }
    (StatusCode::OK, Json(answer)).into_response()
}
