//! The gateway put together for a Katalog: the admission webhooks when it enables any, the
//! Serve API when it opens one, webhook intake when it declares any. Where its HTTP surfaces
//! are served is the gateway's to say: [`Gateway::routes`] is all of them (`/api/v1`,
//! `/webhooks/...`), which a gateway on its own serves inside its door (`/healthz`,
//! `/katalog`) and a runtime that hosts the gateway mounts whole on its Live API's port.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use orkestra_katalog::Compiled;

use crate::webhooks::{Options, Webhooks};

/// Why the gateway did not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting the admission webhooks")]
    Webhooks(#[from] crate::webhooks::Error),
    #[error("starting the Serve API")]
    ServeApi(#[from] crate::tokens::Error),
}

/// What the gateway serves for one Katalog, running.
pub struct Gateway {
    compiled: Arc<Compiled>,
    /// The admission webhooks, when the Katalog enables any.
    pub webhooks: Option<Webhooks>,
    /// The Serve API's routes (for `/api/v1`), until a server takes them.
    serve_api: Option<Router>,
    /// Whether the Katalog opens the Serve API.
    serves_api: bool,
    /// Webhook intake's routes (each entry's path), until a server takes them.
    intake: Option<Router>,
    /// Webhook intake's counts, per entry.
    intake_stats: Option<Arc<crate::intake::Stats>>,
    /// Keeps the Serve API's tokens fresh.
    token_refresh: Option<tokio::task::JoinHandle<()>>,
}

impl Gateway {
    /// Starts what the Katalog enables: the webhooks (registered with the API server) and
    /// the Serve API (its tokens read, their Secrets made). Either may be absent; see
    /// [`Gateway::is_empty`]. An error leaves nothing running.
    pub async fn start(client: kube::Client, compiled: Arc<Compiled>, options: Options) -> Result<Self, Error> {
        let namespace = options.namespace.clone();
        let webhooks = match crate::serving::any(&compiled) {
            true => Some(Webhooks::start(client.clone(), compiled.clone(), options).await?),
            false => None,
        };
        let serves_api = crate::api::enabled(&compiled);
        let intake = compiled.katalog.gateway.as_ref().and_then(|g| g.intake_enabled());
        let (shared, token_refresh) = match serves_api || intake.is_some() {
            true => match crate::api::Shared::start(client, compiled.clone(), &namespace).await {
                Ok((shared, refresh)) => (Some(shared), Some(refresh)),
                Err(error) => {
                    if let Some(webhooks) = webhooks {
                        webhooks.stop().await;
                    }
                    return Err(error.into());
                }
            },
            false => (None, None),
        };
        let intake = intake
            .zip(shared.clone())
            .map(|(declared, shared)| crate::intake::start(shared, declared, &namespace));
        Ok(Self {
            compiled,
            webhooks,
            serve_api: shared.filter(|_| serves_api).map(crate::api::router),
            serves_api,
            intake_stats: intake.as_ref().map(|i| i.stats.clone()),
            intake: intake.map(|i| i.router),
            token_refresh,
        })
    }

    /// Whether the Katalog enables no admission webhook, no Serve API and no intake.
    pub fn is_empty(&self) -> bool {
        self.webhooks.is_none() && !self.serves_api() && !self.takes_webhooks()
    }

    /// Whether the Katalog opens the Serve API (its token refresh runs for as long as the
    /// gateway does, wherever its routes were handed).
    pub fn serves_api(&self) -> bool {
        self.serves_api
    }

    /// Whether the Katalog enables any webhook intake entry.
    pub fn takes_webhooks(&self) -> bool {
        self.intake_stats.is_some()
    }

    /// Every HTTP surface the Katalog enables, once: the Serve API under `/api/v1` (its own
    /// tokens) and webhook intake's paths under `/webhooks/` (each delivery proves itself by
    /// its signature). Whoever mounts them keeps them outside any bearer-token layer of its
    /// own. Empty when the Katalog enables neither, or once taken.
    pub fn routes(&mut self) -> Router {
        let mut routes = Router::new();
        if let Some(api) = self.serve_api.take() {
            routes = routes.nest("/api/v1", api);
        }
        if let Some(intake) = self.intake.take() {
            routes = routes.merge(intake);
        }
        routes
    }

    /// What it says of itself (its `/katalog`), read when called.
    pub fn stats(&self) -> impl Fn() -> serde_json::Value + Send + Sync + 'static {
        let (compiled, counts) = (self.compiled.clone(), self.webhooks.as_ref().map(|w| w.counts.clone()));
        let intake = self.intake_stats.clone();
        move || crate::stats::katalog(&compiled, counts.as_deref(), intake.as_deref())
    }

    /// The HTTP app of a gateway on its own: `/healthz`, `/katalog` (what it serves and the
    /// webhooks' counts), and [`Gateway::routes`].
    pub fn router(&mut self) -> Router {
        let stats = std::sync::Arc::new(self.stats());
        Router::new()
            .route("/healthz", axum::routing::get(|| async { "ok" }))
            .route(
                "/katalog",
                axum::routing::get(move || async move { axum::Json(stats()) }),
            )
            .merge(self.routes())
    }

    /// Serves [`Gateway::router`] on `listener` through the doors' one server setup until
    /// `shutdown` resolves, then stops the webhooks and the token refresh.
    pub async fn serve(
        mut self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let addr = listener.local_addr()?;
        // Its /katalog is open: on loopback, only loopback names may read it.
        let hosts = addr.ip().is_loopback().then(orkestra_net::Hosts::loopback);
        let door = orkestra_net::Door::new("gateway").hosts(hosts);
        let served = orkestra_net::serve(listener, self.router(), door, shutdown).await;
        self.stop().await;
        served
    }

    /// Stops the webhooks and the token refresh.
    pub async fn stop(self) {
        if let Some(refresh) = self.token_refresh {
            refresh.abort();
        }
        if let Some(webhooks) = self.webhooks {
            webhooks.stop().await;
        }
    }
}
