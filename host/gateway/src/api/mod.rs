//! The Serve API, under `/api/v1`: `POST /apply` (an intent or a whole CR in, a CR applied
//! with server-side apply and provenance), `GET`/`DELETE /resources/...` (shaped as the
//! CR's surface says), `GET /schema` (the catalog of targets, or one target's fields) and
//! `GET /raw-schema`. Every call carries a bearer token of the Katalog's gateway; what the
//! token may do is checked per surface. Bodies are capped at 1 MiB. Every admitted call's
//! answer names the Katalog ([`KATALOG_HEADER`]). `GET /openapi.json` describes every
//! endpoint.

mod apply;
mod cache;
mod resources;
mod schema;
mod shape;

pub(crate) use apply::apply_as;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_kube::objects::Objects;
use serde_json::{Value, json};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use orkestra_katalog::Compiled;
use orkestra_katalog::compile::{CompiledCrd, CompiledServe, Surface};

use crate::clusters::Clusters;
use crate::oidc::Verifiers;
use crate::tokens::Tokens;

/// The largest request body.
pub const BODY_LIMIT: usize = 1 << 20;

/// The response header that names the Katalog whose gateway answered an admitted call.
pub const KATALOG_HEADER: &str = "orkestra-katalog";

/// What every handler reads.
#[derive(Clone)]
pub struct Shared {
    pub client: kube::Client,
    pub compiled: Arc<Compiled>,
    pub tokens: Arc<Tokens>,
    pub oidc: Arc<Verifiers>,
    pub clusters: Arc<Clusters>,
    /// The served CRs of the gateway's own cluster, as watched.
    pub cache: Arc<cache::Cache>,
    pub schemas: Arc<schema::Schemas>,
}

/// Who a request was admitted as, for the handlers: the token entry's name, and the
/// identity an OIDC token proved (empty for a static token); a webhook entry's name is both.
#[derive(Debug, Clone)]
struct Caller {
    token: String,
    source: String,
}

/// Whether the Katalog opens the Serve API (`gateway.api.enabled`).
pub fn enabled(compiled: &Compiled) -> bool {
    crate::serving::serve_api_open(compiled)
}

/// The Serve API of the Katalog, to be nested at `/api/v1`: its tokens read (and their
/// Secrets made) first, then kept fresh by the returned task.
pub async fn start(
    client: kube::Client,
    compiled: Arc<Compiled>,
    namespace: &str,
) -> Result<(Router, tokio::task::JoinHandle<()>), crate::tokens::Error> {
    let (shared, refresh) = Shared::start(client, compiled, namespace).await?;
    Ok((router(shared), refresh))
}

impl Shared {
    /// What the apply chain needs, for the Serve API and webhook intake: the tokens (read,
    /// their Secrets made, kept fresh by the returned task) only when the Serve API is open,
    /// the clusters, and the watched CRs.
    pub async fn start(
        client: kube::Client,
        compiled: Arc<Compiled>,
        namespace: &str,
    ) -> Result<(Self, tokio::task::JoinHandle<()>), crate::tokens::Error> {
        let open = enabled(&compiled);
        let sources = match (open, compiled.katalog.gateway.as_ref()) {
            (true, Some(gateway)) => gateway.tokens().to_vec(),
            _ => Vec::new(),
        };
        let tokens = Tokens::load(&client, &sources, namespace).await?;
        let oidc = Verifiers::new(&sources);
        if open && tokens.is_empty() && oidc.is_empty() {
            tracing::warn!("the Serve API has no token: every call will be refused (declare gateway.api.auth.tokens)");
        }
        let refresh = tokens.keep_fresh(client.clone(), sources, namespace.to_string());
        let clusters = Clusters::connect(client.clone(), &compiled, namespace).await;
        let shared = Shared {
            cache: cache::Cache::start(&client, &compiled),
            schemas: Arc::default(),
            client,
            compiled,
            tokens,
            oidc,
            clusters,
        };
        Ok((shared, refresh))
    }
}

/// The Serve API's routes, to be nested at `/api/v1`.
pub fn router(shared: Shared) -> Router {
    let (routes, api) = documented().split_for_parts();
    let api = Arc::new(api);
    let guarded = routes.layer(axum::middleware::from_fn_with_state(shared.clone(), authenticate));
    // The document lists endpoints only (never a Katalog's targets), so it needs no token.
    Router::new()
        .route(
            "/openapi.json",
            get(move || {
                let api = api.clone();
                async move { Json(api.as_ref().clone()) }
            }),
        )
        .merge(guarded)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .fallback(|| async {
            failure(
                StatusCode::NOT_FOUND,
                "no such endpoint of the Serve API; see /api/v1/openapi.json",
            )
        })
        .with_state(shared)
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Orkestra-rs Serve API",
        description = "Self-service through the gateway: intents in, custom resources applied with provenance; every endpoint but this document takes a bearer token of the Katalog's gateway."
    ),
    servers((url = "/api/v1")),
    modifiers(&BearerToken),
    security(("bearer" = []))
)]
struct ApiDoc;

/// The bearer token every endpoint asks for (a static token of the Katalog, or an OIDC
/// token the gateway verifies).
struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let scheme = HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build();
        api.components
            .get_or_insert_with(Default::default)
            .add_security_scheme("bearer", SecurityScheme::Http(scheme));
    }
}

/// The Serve API's routes with their OpenAPI document.
fn documented() -> OpenApiRouter<Shared> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(apply::apply))
        .routes(routes!(resources::list_all))
        .routes(routes!(resources::one_or_list, resources::delete_cluster))
        .routes(routes!(resources::get, resources::delete))
        .routes(routes!(schema::schema))
        .routes(routes!(schema::raw_schema))
}

/// The Serve API's OpenAPI document (`GET /api/v1/openapi.json`).
pub fn openapi() -> utoipa::openapi::OpenApi {
    documented().split_for_parts().1
}

/// A bearer token the gateway knows (a static one, or an OIDC token it verifies), or 401.
async fn authenticate(State(shared): State<Shared>, mut request: Request, next: Next) -> Response {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .map(str::to_string);
    let caller = match bearer {
        None => Err("a bearer token is required".to_string()),
        Some(bearer) => match shared.tokens.identify(&bearer) {
            Some(token) => Ok(Caller {
                token,
                source: String::new(),
            }),
            None if !shared.oidc.is_empty() && bearer.matches('.').count() == 2 => {
                match shared.oidc.verify(&bearer).await {
                    Ok(identity) => Ok(Caller {
                        token: identity.token,
                        source: identity.subject,
                    }),
                    Err(why) => Err(format!("bearer token refused: {why}")),
                }
            }
            None => Err("a valid bearer token is required".to_string()),
        },
    };
    match caller {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            let mut response = next.run(request).await;
            // Which Katalog answered, for a caller that may have reached another gateway
            // than it meant to; only a caller it admitted learns it.
            if let Ok(name) = header::HeaderValue::from_str(&shared.compiled.katalog.name) {
                response.headers_mut().insert(KATALOG_HEADER, name);
            }
            response
        }
        Err(message) => {
            tracing::debug!(%message, "Serve API call refused");
            let mut response = failure(StatusCode::UNAUTHORIZED, message);
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            response
        }
    }
}

/// A request's query parameters, or the 400 that names the ones the endpoint takes.
pub(crate) fn params<T>(
    query: Result<axum::extract::Query<T>, axum::extract::rejection::QueryRejection>,
    names: &str,
) -> Result<T, Box<Response>> {
    query.map(|q| q.0).map_err(|rejection| {
        Box::new(failure(
            StatusCode::BAD_REQUEST,
            format!("{rejection}; the parameters are {names}"),
        ))
    })
}

/// `{accepted: false, message}` with a status.
pub(crate) fn failure(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"accepted": false, "message": message.into()}))).into_response()
}

/// The client of `?cluster=` (the gateway's own cluster when absent): 404 for a name that
/// is not a cluster, 502 for one that could not be reached.
pub(crate) fn cluster_client<'s>(shared: &'s Shared, cluster: Option<&str>) -> Result<&'s kube::Client, Box<Response>> {
    let name = cluster.unwrap_or(orkestra_katalog::model::LOCAL_CLUSTER);
    match shared.clusters.client(name) {
        Some(Ok(client)) => Ok(client),
        Some(Err(why)) => Err(Box::new(failure(
            StatusCode::BAD_GATEWAY,
            format!("cluster \"{name}\" is unavailable: {why}"),
        ))),
        None => Err(Box::new(failure(
            StatusCode::NOT_FOUND,
            format!(
                "unknown cluster \"{name}\"; clusters: {}",
                shared.clusters.names().join(", ")
            ),
        ))),
    }
}

/// The CRs of a CRD in `namespace` (all namespaces when `None`), or the 400 that names a
/// namespace that is not one.
pub(crate) fn api_of(
    client: &kube::Client,
    crd: &CompiledCrd,
    namespace: Option<&str>,
) -> Result<Objects<DynamicObject>, Box<Response>> {
    let gvk = GroupVersionKind::gvk(&crd.group, &crd.version, &crd.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.plural);
    Objects::within(client.clone(), namespace.filter(|_| crd.namespaced), &resource)
        .map_err(|refused| Box::new(failure(StatusCode::BAD_REQUEST, refused.to_string())))
}

/// An API server error as the Serve API answers it.
pub(crate) fn from_kube(error: kube::Error, doing: &str) -> Response {
    match error {
        kube::Error::Api(status) => {
            let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::BAD_GATEWAY);
            let violations = shape::violations(&status);
            let body = json!({"accepted": false, "message": status.message, "reason": status.reason, "violations": violations});
            let code = match code {
                // The API server's own 401/403 are the gateway's identity, not the caller's.
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN if status.reason != "Invalid" => {
                    StatusCode::BAD_GATEWAY
                }
                code => code,
            };
            (code, Json(body)).into_response()
        }
        other => failure(
            StatusCode::BAD_GATEWAY,
            format!("{doing}: the API server did not answer: {other}"),
        ),
    }
}

/// The CRD of a `{kind}` in a path: its kind (any case) or its plural.
pub(crate) fn crd_of_kind<'c>(compiled: &'c Compiled, kind: &str) -> Option<&'c Arc<CompiledCrd>> {
    compiled
        .served_crds()
        .find(|crd| crd.kind.eq_ignore_ascii_case(kind) || crd.plural == kind)
}

/// The surface a stored CR answers through: the one it came by (while open), else the
/// primary.
pub(crate) fn surface_of<'s>(serve: &'s CompiledServe, object: Option<&Value>) -> &'s Surface {
    object
        .and_then(orkestra_katalog::serve::intent::stored_surface)
        .and_then(|name| serve.surface(&name))
        .unwrap_or_else(|| serve.primary_surface())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    #[test]
    fn the_openapi_document_lists_every_endpoint_behind_a_bearer_token() {
        let api = super::openapi();
        let mut operations = BTreeSet::new();
        for (path, item) in &api.paths.paths {
            let methods = [
                ("get", &item.get),
                ("post", &item.post),
                ("delete", &item.delete),
                ("put", &item.put),
                ("patch", &item.patch),
            ];
            for (method, operation) in methods {
                let Some(operation) = operation else { continue };
                operations.insert(format!("{method} {path}"));
                assert!(
                    operation.responses.responses.contains_key("401"),
                    "{method} {path} documents no 401"
                );
            }
        }
        let expected: BTreeSet<String> = [
            "post /apply",
            "get /resources/{kind}",
            "get /resources/{kind}/{first}",
            "delete /resources/{kind}/{first}",
            "get /resources/{kind}/{namespace}/{name}",
            "delete /resources/{kind}/{namespace}/{name}",
            "get /schema",
            "get /raw-schema",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(operations, expected);
        let components = api.components.expect("components");
        assert!(components.security_schemes.contains_key("bearer"));
        assert!(
            api.security.is_some_and(|s| !s.is_empty()),
            "every operation asks for the bearer token"
        );
        let json = serde_json::to_value(api.servers.expect("servers")).unwrap();
        assert_eq!(json[0]["url"], "/api/v1");
    }
}
