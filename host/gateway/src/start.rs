//! The gateway put together for a Katalog: the admission webhooks when it enables any, the
//! Serve API when it opens one, and for a gateway on its own the HTTP door around them
//! (`/healthz`, `/katalog`, `/api/v1`). A runtime that hosts the gateway nests the Serve API
//! under its Live API instead ([`Gateway::take_serve_api`]).

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use orkestra_katalog::Compiled;

use crate::webhooks::{Options, Webhooks};

/// Why the gateway did not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting the admission webhooks: {0}")]
    Webhooks(#[from] crate::webhooks::Error),
    #[error("starting the Serve API: {0}")]
    ServeApi(#[from] crate::tokens::Error),
}

/// What the gateway serves for one Katalog, running.
pub struct Gateway {
    compiled: Arc<Compiled>,
    /// The admission webhooks, when the Katalog enables any.
    pub webhooks: Option<Webhooks>,
    /// The Serve API's routes (for `/api/v1`), until a server takes them.
    serve_api: Option<Router>,
    /// Keeps the Serve API's tokens fresh.
    token_refresh: Option<tokio::task::JoinHandle<()>>,
}

impl Gateway {
    /// Starts what the Katalog enables: the webhooks (registered with the API server) and
    /// the Serve API (its tokens read, their Secrets made). Either may be absent; see
    /// [`Gateway::is_empty`]. An error leaves nothing running.
    pub async fn start(client: kube::Client, compiled: Arc<Compiled>, options: Options) -> Result<Self, Error> {
        let namespace = options.namespace.clone();
        let webhooks = match crate::webhooks::any_enabled(&compiled) {
            true => Some(Webhooks::start(client.clone(), compiled.clone(), options).await?),
            false => None,
        };
        let (serve_api, token_refresh) = match crate::api::enabled(&compiled) {
            true => match crate::api::start(client, compiled.clone(), &namespace).await {
                Ok((router, refresh)) => (Some(router), Some(refresh)),
                Err(error) => {
                    if let Some(webhooks) = webhooks {
                        webhooks.stop().await;
                    }
                    return Err(error.into());
                }
            },
            false => (None, None),
        };
        Ok(Self {
            compiled,
            webhooks,
            serve_api,
            token_refresh,
        })
    }

    /// Whether the Katalog enables neither webhooks nor the Serve API.
    pub fn is_empty(&self) -> bool {
        self.webhooks.is_none() && !self.serves_api()
    }

    /// Whether the Katalog opens the Serve API (its token refresh runs for as long as the
    /// gateway does, wherever its routes were handed).
    pub fn serves_api(&self) -> bool {
        self.token_refresh.is_some()
    }

    /// The Serve API's routes, to be nested at `/api/v1` by whoever serves them.
    pub fn take_serve_api(&mut self) -> Option<Router> {
        self.serve_api.take()
    }

    /// What it says of itself (its `/katalog`), read when called.
    pub fn stats(&self) -> impl Fn() -> serde_json::Value + Send + Sync + 'static {
        let (compiled, counts) = (self.compiled.clone(), self.webhooks.as_ref().map(|w| w.counts.clone()));
        move || crate::stats::katalog(&compiled, counts.as_deref())
    }

    /// The HTTP app of a gateway on its own: `/healthz`, `/katalog` (what it serves and the
    /// webhooks' counts) and, when the Katalog opens it, the Serve API under `/api/v1`.
    pub fn router(&mut self) -> Router {
        let stats = std::sync::Arc::new(self.stats());
        let mut app = Router::new()
            .route("/healthz", axum::routing::get(|| async { "ok" }))
            .route(
                "/katalog",
                axum::routing::get(move || async move { axum::Json(stats()) }),
            );
        if let Some(api) = self.take_serve_api() {
            app = app.nest("/api/v1", api);
        }
        app
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
