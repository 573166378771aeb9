//! The Live API: what a running runtime says about itself, on one HTTP port, every answer
//! from its own caches (never a list against the API server per request). Upstream
//! Orkestra's shapes, so its tooling, the Control Center and other runtimes' cross reads
//! work against it:
//!
//! - probes ([`probes`]): `/startup`, `/health`, `/ready` (and `/healthz`, `/readyz`);
//! - the Katalog ([`katalog`]): `/katalog`, `/katalog/raw`, `/katalog/enriched`,
//!   `/katalog/{crd}` (configuration and live figures), `/katalog/{crd}/health`,
//!   `/katalog/{crd}/raw`, `/katalog/{crd}/enriched`;
//! - custom resources ([`crs`]): `/katalog/{crd}/cr`, `/katalog/{crd}/cr/{ns}/{name}` (or
//!   `/cr/{name}`) and their `/events`;
//! - ours ([`components`]): `/components`, `POST /reload`; ([`recordings`]) `/recordings`
//!   (record a component's calls on demand); ([`tenants`]) `/tenants`; ([`gateway`])
//!   `/gateway`, the statistics of the gateway the runtime serves;
//! - `/metrics` ([`metrics`]) and `/openapi.json`, which lists every endpoint.
//!
//! A bearer token ([`Auth`]) guards everything but the probes when one is set. A CRD's
//! `endpoints` switches and `crossAccess` hide parts of it; a hidden CRD answers 404 as if
//! it were not there.

mod components;
mod crs;
mod gateway;
mod katalog;
pub mod metrics;
mod probes;
mod recordings;
mod tenants;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

pub use crate::runtime::Inspect;
use crate::runtime::reload::Reloader;

/// Who may call the Live API: anyone (`token: None`), or callers with this bearer token.
/// The probes never ask. The recording sessions (`/recordings`: what components read,
/// Secrets of every tenant they may read among it) always ask: for the Live API's token, or
/// on an open Live API for the recordings token the runtime wrote beside them.
#[derive(Clone, Default)]
pub struct Auth {
    token: Option<Arc<str>>,
    recordings: Option<Arc<str>>,
}

impl Auth {
    pub fn open() -> Self {
        Self::default()
    }

    pub fn token(token: impl Into<Arc<str>>) -> Self {
        Self {
            token: Some(token.into()),
            recordings: None,
        }
    }

    /// Asks `token` of the recording sessions where the Live API asks none.
    pub fn with_recordings_token(mut self, token: impl Into<Arc<str>>) -> Self {
        self.recordings = Some(token.into());
        self
    }

    /// Who may use the recording sessions: the Live API's token, or the recordings token
    /// where the Live API is open (with neither, recordings are off and anyone may see so).
    fn for_recordings(&self) -> Auth {
        Auth {
            token: self.token.clone().or_else(|| self.recordings.clone()),
            recordings: None,
        }
    }

    pub fn is_open(&self) -> bool {
        self.token.is_none()
    }

    /// The Host names a Live API on `addr` answers to: on loopback without a token, only
    /// loopback names (a page elsewhere cannot rebind its own name to it and read every CR);
    /// with a token, or opened beyond loopback on purpose, any.
    pub fn hosts(&self, addr: SocketAddr) -> Option<orkestra_net::Hosts> {
        (self.is_open() && addr.ip().is_loopback()).then(orkestra_net::Hosts::loopback)
    }

    fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else { return true };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        given.is_some_and(|given| same(given.as_bytes(), token.as_bytes()))
    }
}

/// Compares in time that depends on the lengths only, so a wrong token's timing does not
/// tell how much of it was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

async fn require_token(State(auth): State<Auth>, request: Request, next: Next) -> Response {
    if auth.admits(request.headers()) {
        return next.run(request).await;
    }
    let body = Json(json!({"error": "this endpoint needs a bearer token: Authorization: Bearer <token>"}));
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], body).into_response()
}

#[derive(OpenApi)]
#[openapi(info(
    title = "Orkestra-rs Live API",
    description = "What a running Orkestra-rs runtime says about its Katalog, CRDs, custom resources and Wasm components."
))]
struct ApiDoc;

/// The Live API's router: `reloader` enables `POST /reload`.
pub fn router(inspect: Inspect, reloader: Option<Reloader>, auth: Auth) -> axum::Router {
    let registry = Arc::new(crate::live::metrics::registry(inspect.clone()));
    let (guarded, _) = guarded_routes(&auth).split_for_parts();
    let guarded = guarded.with_state(Shared {
        inspect: inspect.clone(),
        reloader,
        registry,
    });
    let (probes, _) = probes::routes().split_for_parts();
    let described = auth.clone();
    let guarded = guarded
        .route(
            "/openapi.json",
            axum::routing::get(move || {
                let auth = described.clone();
                async move { Json(openapi(&auth)) }
            }),
        )
        .layer(axum::middleware::from_fn_with_state(auth, require_token));
    probes
        .with_state(inspect)
        .merge(guarded)
        .fallback(|| async { not_found("no such endpoint; see /openapi.json".into()) })
}

/// The routes behind the token, each with its OpenAPI path.
fn guarded_routes(auth: &Auth) -> OpenApiRouter<Shared> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(katalog::routes())
        .merge(crs::routes())
        .merge(components::routes())
        .merge(recordings::routes().layer(axum::middleware::from_fn_with_state(
            auth.for_recordings(),
            require_token,
        )))
        .merge(gateway::routes())
        .merge(tenants::routes())
        .routes(utoipa_axum::routes!(metrics))
}

/// The Live API's OpenAPI description, made when it is asked for: kept, it held 190 KB for
/// as long as the runtime ran.
fn openapi(auth: &Auth) -> utoipa::openapi::OpenApi {
    let (_, mut api) = guarded_routes(auth).split_for_parts();
    api.merge(probes::routes().split_for_parts().1);
    api
}

/// What the guarded handlers share.
#[derive(Clone)]
struct Shared {
    inspect: Inspect,
    reloader: Option<Reloader>,
    registry: Arc<prometheus_client::registry::Registry>,
}

/// Every metric of the runtime, in the Prometheus exposition format.
#[utoipa::path(get, path = "/metrics", tag = "metrics", responses((status = 200, description = "OpenMetrics text", content_type = "application/openmetrics-text")))]
async fn metrics(State(shared): State<Shared>) -> Response {
    let text = crate::live::metrics::encode(&shared.registry);
    ([(header::CONTENT_TYPE, crate::live::metrics::CONTENT_TYPE)], text).into_response()
}

/// Serves `router` on `listener` until the process ends, through the doors' one server setup
/// (timeouts, connection caps). `hosts`: the Host names it answers to, where a browser could
/// otherwise read it without a token (an open Live API on loopback).
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    hosts: Option<orkestra_net::Hosts>,
) -> std::io::Result<()> {
    tracing::info!(addr = %listener.local_addr()?, "Live API listening");
    let door = orkestra_net::Door::new("Live API").hosts(hosts);
    orkestra_net::serve(listener, router, door, std::future::pending()).await
}

/// The slot `name`, or why not (naming the known ones).
fn slot(shared: &Shared, name: &str) -> Result<Arc<orkestra_wasm::Slot>, String> {
    let components = &shared.inspect.components;
    components.get(name).ok_or_else(|| {
        let known: Vec<String> = components.slots().iter().map(|s| s.name.to_string()).collect();
        format!("no component named {name:?}; known: {}", known.join(", "))
    })
}

fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({ "error": what }))).into_response()
}

fn bad_request(why: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({ "error": why }))).into_response()
}

fn unknown_crd(crd: &str) -> Response {
    not_found(format!("no CRD {crd:?} in this runtime's Live API"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_compared_whole() {
        let auth = Auth::token("s3cret");
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            headers
        };
        assert!(auth.admits(&with("Bearer s3cret")));
        assert!(!auth.admits(&with("Bearer s3cre")));
        assert!(!auth.admits(&with("Bearer s3cret!")));
        assert!(!auth.admits(&with("s3cret")));
        assert!(!auth.admits(&HeaderMap::new()));
        assert!(Auth::open().admits(&HeaderMap::new()));
        // Recordings ask for a token even of an open Live API.
        let open = Auth::open().with_recordings_token("rec");
        assert!(open.admits(&HeaderMap::new()));
        assert!(!open.for_recordings().admits(&HeaderMap::new()));
        assert!(open.for_recordings().admits(&with("Bearer rec")));
        assert!(
            auth.with_recordings_token("rec")
                .for_recordings()
                .admits(&with("Bearer s3cret"))
        );
    }

    #[test]
    fn the_description_made_on_request_lists_every_route() {
        let api = openapi(&Auth::open());
        assert_eq!(api.info.title, "Orkestra-rs Live API");
        // One route of each part, and the probes outside the token.
        let parts = [
            "/katalog/{crd}",
            "/katalog/{crd}/cr/{namespace}/{name}",
            "/components",
            "/recordings/{id}",
            "/gateway",
            "/tenants",
            "/metrics",
            "/readyz",
            "/startup",
        ];
        for path in parts {
            assert!(
                api.paths.paths.contains_key(path),
                "{path} in {:?}",
                api.paths.paths.keys()
            );
        }
    }
}
