//! `ork gateway`: the gateway on its own (webhooks and Serve API for a Katalog's CRDs), and the
//! webhook options `ork run` and `ork dev` share, which start the same webhooks inside the
//! runtime when the Katalog enables them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use orkestra_gateway::webhooks::{Options, Webhooks};

use super::KatalogArgs;

/// Where the admission webhooks listen and how the API server reaches them.
#[derive(Debug, Clone, Args)]
pub struct WebhookArgs {
    /// Address of the webhooks (HTTPS), served when the Katalog turns on admission rules
    /// (`security.webhooks.admission.enabled`), deletion or namespace protection, or
    /// conversion.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8443")]
    pub https_addr: SocketAddr,
    /// The URL the API server calls them at. Default: https://<https-addr>, or the Service
    /// the Katalog names (security.serviceName).
    #[arg(long, value_name = "URL")]
    pub webhook_url: Option<String>,
    /// A certificate (PEM) to present instead of one made at start-up.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The CA that signed it, for the webhooks' caBundle (default: the certificate itself).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    /// How long a made certificate is valid (`365d`, `12h`); it is renewed when two thirds
    /// of that have passed.
    #[arg(long, value_name = "DURATION", default_value = "365d")]
    pub cert_valid_for: String,
    /// The gateway's namespace (its Service, its token Secrets). Default: $POD_NAMESPACE, else `default`.
    #[arg(long, value_name = "NAMESPACE", env = "POD_NAMESPACE", default_value = "default")]
    pub gateway_namespace: String,
}

impl WebhookArgs {
    /// Starts the webhooks when the Katalog enables them.
    pub async fn start(
        &self,
        client: &kube::Client,
        katalog: &orkestra_katalog::Compiled,
    ) -> anyhow::Result<Option<Webhooks>> {
        if !orkestra_gateway::webhooks::any_enabled(katalog) {
            return Ok(None);
        }
        let valid_for = orkestra_expr::duration::parse(&self.cert_valid_for)
            .map_err(|e| anyhow::anyhow!("--cert-valid-for: {e}"))?;
        let options = Options {
            https_addr: self.https_addr,
            url: self.webhook_url.clone(),
            namespace: self.gateway_namespace.clone(),
            cert: self
                .tls_cert
                .clone()
                .zip(self.tls_key.clone())
                .map(|(cert, key)| (cert, key, self.tls_ca.clone())),
            valid_for,
        };
        let webhooks = Webhooks::start(client.clone(), Arc::new(katalog.clone()), options)
            .await
            .context("starting the admission webhooks")?;
        eprintln!(
            "gateway: webhooks on https://{} (registered with the API server)",
            webhooks.addr
        );
        Ok(Some(webhooks))
    }
}

/// The Serve API of the Katalog when it opens one: its routes (for `/api/v1`) and the
/// task that keeps its tokens fresh.
pub async fn serve_api(
    client: &kube::Client,
    katalog: &orkestra_katalog::Compiled,
    namespace: &str,
) -> anyhow::Result<Option<(axum::Router, tokio::task::JoinHandle<()>)>> {
    if !orkestra_gateway::api::enabled(katalog) {
        return Ok(None);
    }
    let started = orkestra_gateway::api::start(client.clone(), Arc::new(katalog.clone()), namespace)
        .await
        .context("starting the Serve API")?;
    Ok(Some(started))
}

#[derive(Debug, Args)]
pub struct GatewayArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    /// Address of the HTTP server: `/healthz`, `/katalog` (what the gateway serves and its
    /// webhooks' counts), and the Serve API (`/api/v1/...`) when the Katalog sets
    /// `gateway.api.enabled`.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    http_addr: SocketAddr,
    #[command(flatten)]
    webhooks: WebhookArgs,
}

pub async fn gateway(args: GatewayArgs) -> anyhow::Result<ExitCode> {
    let katalog = args.katalog.load()?;
    let client = kube::Client::try_default()
        .await
        .context("no cluster to talk to (KUBECONFIG or in-cluster config)")?;
    let webhooks = args.webhooks.start(&client, &katalog).await?;
    let api = serve_api(&client, &katalog, &args.webhooks.gateway_namespace).await?;
    if webhooks.is_none() && api.is_none() {
        anyhow::bail!(
            "nothing to serve: the Katalog enables no webhook (security.webhooks.admission, deletionProtection, namespaceProtection, conversion) and no Serve API (gateway.api.enabled)"
        );
    }
    // Probes and statistics always; the Serve API when the Katalog opens it.
    let listener = tokio::net::TcpListener::bind(args.http_addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.http_addr))?;
    let addr = listener.local_addr()?;
    let stats = (Arc::new(katalog.clone()), webhooks.as_ref().map(|w| w.counts.clone()));
    let mut app = axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route(
            "/katalog",
            axum::routing::get(move || async move {
                axum::Json(orkestra_gateway::stats::katalog(&stats.0, stats.1.as_deref()))
            }),
        );
    let mut refresh = None;
    if let Some((router, task)) = api {
        app = app.nest("/api/v1", router);
        refresh = Some(task);
        eprintln!("gateway: Serve API on http://{addr}/api/v1");
    }
    eprintln!("gateway: statistics on http://{addr}/katalog");
    // Its /katalog is open: on loopback, only loopback names may read it.
    let hosts = addr.ip().is_loopback().then(orkestra_net::Hosts::loopback);
    let door = orkestra_net::Door::new("gateway").hosts(hosts);
    let server = tokio::spawn(orkestra_net::serve(listener, app, door, std::future::pending()));
    super::shutdown_signal().await?;
    eprintln!("gateway: stopping");
    server.abort();
    if let Some(refresh) = refresh {
        refresh.abort();
    }
    if let Some(webhooks) = webhooks {
        webhooks.stop().await;
    }
    Ok(ExitCode::SUCCESS)
}
