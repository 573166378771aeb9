//! `/components` (each Wasm component: revision, digest, source, grants, limits, calls with
//! their latency and its phases, traps by reason, denials and memory, swap history, last
//! error) and `POST /reload[?component=NAME]` (what `ork reload` asks: the Katalog read again
//! and the components reloaded; 422 with the reasons when one did not load, the old one
//! serving).

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Shared, bad_request, not_found, slot};

pub(super) fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new().routes(routes!(list)).routes(routes!(reload))
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
