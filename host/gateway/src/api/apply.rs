//! `POST /apply[?dryRun=true][&overwrite=true][&override=true]`: an intent (`{"target":
//! ...}`) or a whole CR (apiVersion and kind) made into a CR, checked against the caller's
//! token (create when the CR does not exist, update when it does), refused with 409 when it
//! would move a CR to another surface (unless `override` is asked for and allowed), and
//! written with server-side apply under the gateway's field manager. The API server's
//! refusals (its schema, the admission webhooks) come back as 422 with violations.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::api::{Patch, PatchParams};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use orkestra_katalog::access::{Class, permits};
use orkestra_katalog::intent::{self, Made, Refusal, api_version_of, stored_surface};
use orkestra_katalog::model::Verb;

use super::{Caller, Shared, api_of, failure, from_kube, shape};
use crate::registration::MANAGER;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApplyQuery {
    #[serde(default)]
    dry_run: bool,
    /// Take fields another field manager owns (when the surface allows it).
    #[serde(default)]
    overwrite: bool,
    /// Move the CR to this surface (when the surface allows it).
    #[serde(default, rename = "override")]
    override_: bool,
    cluster: Option<String>,
}

pub async fn apply(
    State(shared): State<Shared>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<ApplyQuery>, axum::extract::rejection::QueryRejection>,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    let Query(query) = match query {
        Ok(query) => query,
        Err(r) => {
            return failure(
                StatusCode::BAD_REQUEST,
                format!("{r}; the parameters are dryRun, overwrite and override"),
            );
        }
    };
    if query.cluster.is_some() {
        return failure(
            StatusCode::NOT_FOUND,
            "cluster routing is not served by this gateway yet",
        );
    }
    let body = match body {
        Ok(Json(Value::Object(body))) => body,
        Ok(Json(_)) => return failure(StatusCode::BAD_REQUEST, "the body is a JSON object: an intent or a CR"),
        Err(rejection) => return failure(rejection.status(), rejection.body_text()),
    };
    let made = match make(&shared, &caller, &body).await {
        Ok(made) => made,
        Err(response) => return *response,
    };
    write(&shared, &caller, made, &query).await
}

/// Stages 1 and 3-4: the CRD and surface, the CR, its provenance.
async fn make(shared: &Shared, caller: &Caller, body: &Map<String, Value>) -> Result<Made, Box<Response>> {
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
        let Some((crd, surface)) = intent::find_target(&shared.compiled, name) else {
            let message = format!(
                "unknown target \"{name}\" — available: {}",
                available(shared).join(", ")
            );
            return Err(Box::new(failure(StatusCode::BAD_REQUEST, message)));
        };
        let schema = shared.schemas.of(crd).await.unwrap_or(Value::Null);
        let types = |path: &[String]| orkestra_katalog::serve_schema::type_at(&schema, path);
        return intent::from_target(crd, surface, body, source, &types).map_err(refused);
    }
    let (Some(api_version), Some(kind)) = (
        body.get("apiVersion").and_then(Value::as_str),
        body.get("kind").and_then(Value::as_str),
    ) else {
        let message = "give a target (target mode), or apiVersion and kind (a whole CR)";
        return Err(Box::new(failure(StatusCode::BAD_REQUEST, message)));
    };
    let Some(crd) = intent::find_kind(&shared.compiled, None, kind).filter(|crd| crd.serve.is_some()) else {
        let message = format!("kind {kind} ({api_version}) is not served");
        return Err(Box::new(failure(StatusCode::BAD_REQUEST, message)));
    };
    intent::from_cr(crd, body, source).map_err(refused)
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
async fn write(shared: &Shared, caller: &Caller, made: Made, query: &ApplyQuery) -> Response {
    let Made { object, crd, surface } = made;
    let Some(serve) = crd.serve.as_deref() else {
        return failure(StatusCode::BAD_REQUEST, format!("kind {} is not served", crd.kind));
    };
    let Some(surface) = serve.surfaces.get(&surface) else {
        return failure(StatusCode::BAD_REQUEST, format!("unknown target \"{surface}\""));
    };
    let metadata = &object["metadata"];
    let (name, namespace) = (
        metadata["name"].as_str().unwrap_or_default(),
        metadata["namespace"].as_str(),
    );
    let api = api_of(&shared.client, &crd, namespace);
    let existing = match api.get_opt(name).await {
        Ok(existing) => existing.and_then(|o| serde_json::to_value(o).ok()),
        Err(error) => return from_kube(error, "reading the CR"),
    };
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
        Err(error) => return from_kube(error, "applying the CR"),
    };
    tracing::info!(crd = %crd.name, %name, surface = %surface.name, token = %caller.token, dry_run = query.dry_run, "applied through the gateway");
    let response = &surface.response;
    let mut answer = json!({
        "accepted": true, "dryRun": query.dry_run, "name": name, "namespace": namespace,
        "kind": crd.kind, "apiVersion": api_version_of(&crd), "target": surface.name,
        "pollUrl": shape::poll_url(&crd, response, &applied),
        "warnings": warnings, "payload": shape::payload(&crd, response, &applied),
    });
    if response.include_cr {
        answer["object"] = shape::read(&crd, response, applied);
        if let Some(object) = answer["object"].as_object_mut() {
            object.remove("payload");
        }
    }
    (StatusCode::OK, Json(answer)).into_response()
}
