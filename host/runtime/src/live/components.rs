//! `/components` (each Wasm component: revision, digest, source, grants, limits, calls with
//! their latency and its phases, traps by reason, denials and memory, swap history, last
//! error, rollout), `POST /reload[?component=NAME]` (what `ork reload` asks: the Katalog read
//! again and the components reloaded; 422 with the reasons when one did not load, the old one
//! serving) and `POST /rollouts` (a rollout under way promoted or rolled back now).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Shared, bad_request, not_found, slot};

pub(super) fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(reload))
        .routes(routes!(rollout))
}

/// Every component slot.
#[utoipa::path(get, path = "/components", tag = "components", responses((status = 200, description = "`{components: [...]}`")))]
async fn list(State(shared): State<Shared>) -> Json<Value> {
    Json(json!({ "components": shared.inspect.components.statuses() }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
struct ReloadQuery {
    /// Reload only this component (`crd`, or `crd/target`).
    component: Option<String>,
}

/// Reads the Katalog again and reloads every component (or the one named).
#[utoipa::path(post, path = "/reload", tag = "components", params(ReloadQuery),
    responses((status = 200, description = "all reloaded"), (status = 422, description = "one did not load; the old version serves"),
              (status = 404, description = "no such component"), (status = 400, description = "a bad query")))]
async fn reload(
    State(shared): State<Shared>,
    query: Result<Query<ReloadQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Query(query) = match query {
        Ok(query) => query,
        Err(rejection) => return bad_request(format!("bad query: {rejection}; the only parameter is component=NAME")),
    };
    let Some(reloader) = &shared.reloader else {
        return not_found("this runtime reloads nothing on request".into());
    };
    if let Some(name) = &query.component
        && let Err(missing) = slot(&shared, name)
    {
        return not_found(missing);
    }
    let components = &shared.inspect.components;
    let outcome = reloader.reload(true, query.component.as_deref()).await;
    let status = match outcome.errors.is_empty() {
        true => StatusCode::OK,
        false => StatusCode::UNPROCESSABLE_ENTITY,
    };
    let body = json!({
        "reloaded": outcome.reloaded,
        "started": outcome.started,
        "restarted": outcome.restarted,
        "stopped": outcome.stopped,
        "errors": outcome.errors,
        "restartNeeded": outcome.restart_needed,
        "components": components.statuses(),
    });
    (status, Json(body)).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RolloutAsk {
    component: String,
    action: RolloutAction,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum RolloutAction {
    Promote,
    RollBack,
}

/// Ends the rollout under way on a component now: promoted to every CR, or rolled back.
#[utoipa::path(post, path = "/rollouts", tag = "components",
    request_body(content = String, description = "`{component, action: promote | roll-back}`", content_type = "application/json"),
    responses((status = 200, description = "the step taken"), (status = 400, description = "a bad body"),
              (status = 404, description = "no such component"), (status = 409, description = "no rollout under way")))]
async fn rollout(State(shared): State<Shared>, body: Result<Json<RolloutAsk>, JsonRejection>) -> Response {
    // A JSON body only: a form posted from another site cannot end a rollout.
    let Json(ask) = match body {
        Ok(body) => body,
        Err(rejection) => {
            return bad_request(format!(
                "{rejection}; send JSON {{\"component\": NAME, \"action\": \"promote\" or \"roll-back\"}}"
            ));
        }
    };
    let slot = match slot(&shared, &ask.component) {
        Ok(slot) => slot,
        Err(missing) => return not_found(missing),
    };
    let step = match ask.action {
        RolloutAction::Promote => slot.promote(),
        RolloutAction::RollBack => slot.roll_back(),
    };
    match step {
        Ok(step) => Json(json!({ "step": step })).into_response(),
        Err(why) => (StatusCode::CONFLICT, Json(json!({ "error": why.to_string() }))).into_response(),
    }
}
