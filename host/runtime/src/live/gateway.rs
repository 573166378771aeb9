//! `/gateway`: what the gateway this runtime serves (its webhooks and Serve API) says of
//! itself, as a gateway on its own answers `/katalog`: per CRD its Serve API targets,
//! admission rules, protection and conversion, and what its webhooks have answered.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Shared, not_found};

pub(super) fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new().routes(routes!(gateway))
}

/// The gateway's statistics, when this runtime serves the gateway.
#[utoipa::path(get, path = "/gateway", tag = "gateway",
    responses((status = 200, description = "`{source: gateway, katalog, crds: [...], webhooks}`"),
              (status = 404, description = "this runtime serves no gateway")))]
async fn gateway(State(shared): State<Shared>) -> Response {
    match &shared.inspect.gateway {
        Some(stats) => Json(stats()).into_response(),
        None => not_found(
            "this runtime serves no gateway (its Katalog enables none, or it runs --no-gateway beside a gateway of its own)"
                .into(),
        ),
    }
}
