//! The runtime's admin endpoint: the components as the Live API shows them, and reloads.
//!
//! - `GET /components`: every component slot (revision, digest, source, last error);
//! - `POST /reload[?component=NAME]`: re-reads the Katalog and reloads every component (or
//!   the one named). 200 when all loaded; 422 with the reasons when one did not (the old
//!   version keeps serving); 404 for an unknown component.

use std::net::SocketAddr;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::reload::Reloader;
use orkestra_wasm::Components;

#[derive(Clone)]
struct Admin {
    components: Components,
    reloader: Reloader,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReloadQuery {
    component: Option<String>,
}

/// The router, for [`serve`] and tests.
pub fn router(components: Components, reloader: Reloader) -> Router {
    Router::new()
        .route("/components", get(list))
        .route("/reload", post(reload))
        .with_state(Admin { components, reloader })
}

/// Serves the admin endpoint on `addr` until the process ends.
pub async fn serve(addr: SocketAddr, components: Components, reloader: Reloader) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "admin endpoint listening");
    axum::serve(listener, router(components, reloader)).await
}

async fn list(State(admin): State<Admin>) -> Json<serde_json::Value> {
    Json(json!({ "components": admin.components.statuses() }))
}

async fn reload(
    State(admin): State<Admin>,
    query: Result<Query<ReloadQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Query(query) = match query {
        Ok(query) => query,
        Err(rejection) => {
            let error = format!("bad query: {rejection}; the only parameter is component=NAME");
            return (StatusCode::BAD_REQUEST, Json(json!({ "error": error }))).into_response();
        }
    };
    if let Some(name) = &query.component
        && admin.components.get(name).is_none()
    {
        let known: Vec<String> = admin.components.slots().iter().map(|s| s.name.to_string()).collect();
        let error = format!("no component named {name:?}; known: {}", known.join(", "));
        return (StatusCode::NOT_FOUND, Json(json!({ "error": error }))).into_response();
    }
    let outcome = admin.reloader.reload(true, query.component.as_deref()).await;
    let status = if outcome.errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    let body = json!({
        "reloaded": outcome.reloaded,
        "errors": outcome.errors,
        "restartNeeded": outcome.restart_needed,
        "components": admin.components.statuses(),
    });
    (status, Json(body)).into_response()
}
