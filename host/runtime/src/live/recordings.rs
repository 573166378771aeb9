//! `/recordings`: recording a component's calls on demand. `POST /recordings` starts a
//! session on one component (its next `count` calls, of one CR or any, within `bytes`),
//! `GET /recordings` shows every session and what it wrote, `GET /recordings/{id}` serves one
//! recording (what `ork replay` reads), `DELETE /recordings?component=NAME` stops a session.
//! Only where the platform started the runtime with `--recordings DIR`.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Shared, bad_request, not_found, slot};
use orkestra_wasm::record::Ask;

pub(super) fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new()
        .routes(routes!(start, list, stop))
        .routes(routes!(one))
}

/// Starts recording a component's next calls (replacing a session under way on it).
#[utoipa::path(post, path = "/recordings", tag = "components",
    request_body(content = String, description = "`{component, count?: 1..1000 (10), bytes?: up to 256 MiB (16 MiB), key?: \"namespace/name\"}`", content_type = "application/json"),
    responses((status = 201, description = "the session"), (status = 400, description = "a bad body or bound"),
              (status = 403, description = "recordings are off in this runtime"), (status = 404, description = "no such component")))]
async fn start(State(shared): State<Shared>, body: Result<Json<Ask>, JsonRejection>) -> Response {
    // A JSON body only: a form posted from another site cannot start a recording.
    let Json(ask) = match body {
        Ok(body) => body,
        Err(rejection) => {
            return bad_request(format!(
                "{rejection}; send JSON {{\"component\": NAME, \"count\": N, \"bytes\": N, \"key\": \"namespace/name\"}}"
            ));
        }
    };
    let slot = match slot(&shared, &ask.component) {
        Ok(slot) => slot,
        Err(missing) => return not_found(missing),
    };
    if !slot.host().recordings.enabled() {
        let why = "this runtime records nothing: the platform enables recordings by starting it with --recordings DIR";
        return (StatusCode::FORBIDDEN, Json(json!({ "error": why }))).into_response();
    }
    match slot.record(&ask) {
        Ok(session) => (StatusCode::CREATED, Json(json!({ "session": session }))).into_response(),
        Err(why) => bad_request(why.to_string()),
    }
}

/// Every component's recording session and the recordings it wrote.
#[utoipa::path(get, path = "/recordings", tag = "components", responses((status = 200, description = "`{enabled, sessions: [...]}`")))]
async fn list(State(shared): State<Shared>) -> Json<serde_json::Value> {
    let slots = shared.inspect.components.slots();
    let enabled = slots.first().is_some_and(|s| s.host().recordings.enabled());
    let sessions: Vec<_> = slots.iter().filter_map(|s| s.recording()).collect();
    Json(json!({ "enabled": enabled, "sessions": sessions }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
struct StopQuery {
    /// The component whose session stops.
    component: String,
}

/// Stops a component's recording session; what it wrote stays.
#[utoipa::path(delete, path = "/recordings", tag = "components", params(StopQuery),
    responses((status = 200, description = "the session as it ended"), (status = 404, description = "no such component or session")))]
async fn stop(State(shared): State<Shared>, query: Result<Query<StopQuery>, QueryRejection>) -> Response {
    let Query(query) = match query {
        Ok(query) => query,
        Err(rejection) => return bad_request(format!("bad query: {rejection}; the only parameter is component=NAME")),
    };
    let slot = match slot(&shared, &query.component) {
        Ok(slot) => slot,
        Err(missing) => return not_found(missing),
    };
    match slot.stop_recording() {
        Some(session) => Json(json!({ "session": session })).into_response(),
        None => not_found(format!("component {:?} is not recording", query.component)),
    }
}

/// One recording, by the id its session listed.
#[utoipa::path(get, path = "/recordings/{id}", tag = "components", params(("id" = String, Path, description = "as listed by GET /recordings")),
    responses((status = 200, description = "the recording (JSON)"), (status = 404, description = "no such recording")))]
async fn one(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    // Ids are the runtime's own and looked up, never joined to a path.
    let slots = shared.inspect.components.slots();
    let found = match slots.first() {
        Some(slot) if id.len() <= 64 => slot.host().recordings.read(&id).await,
        _ => None,
    };
    match found {
        Some(text) => ([(header::CONTENT_TYPE, "application/json")], text).into_response(),
        None => not_found(format!("no recording {id:?}; GET /recordings lists them")),
    }
}
