//! `ork gateway`: the gateway on its own (webhooks and Serve API for a Katalog's CRDs), and the
//! gateway flags `ork run` and `ork dev` share, which start the same gateway inside the
//! runtime when the Katalog enables it. The gateway composes itself ([`Gateway`]); this
//! module only turns flags into its options.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use orkestra_gateway::Gateway;
use orkestra_gateway::webhooks::Options;

use crate::katalog_args::KatalogArgs;

/// Where the admission webhooks listen and how the API server reaches them.
#[derive(Debug, Clone, Args)]
pub struct WebhookArgs {
    /// Address of the webhooks (HTTPS), served when the Katalog turns on admission rules
    /// (`security.webhooks.admission.enabled`), deletion or namespace protection, or
    /// conversion [default: 127.0.0.1:8443; `ork dev` takes a free port when that one is
    /// taken].
    #[arg(long, value_name = "ADDR")]
    pub https_addr: Option<SocketAddr>,
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

/// The webhooks' default address.
const DEFAULT_HTTPS_ADDR: &str = "127.0.0.1:8443";

impl WebhookArgs {
    fn https_addr(&self) -> SocketAddr {
        self.https_addr
            .unwrap_or_else(|| DEFAULT_HTTPS_ADDR.parse().expect("a socket address"))
    }

    /// For `ork dev`: a free port on loopback when none was given and the default one is
    /// taken (the webhooks' registration names whichever port it gets).
    pub fn free_port_if_taken(&mut self) {
        if self.https_addr.is_none() && std::net::TcpListener::bind(self.https_addr()).is_err() {
            self.https_addr = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        }
    }
    /// The gateway's options as the flags give them.
    fn options(&self) -> anyhow::Result<Options> {
        let valid_for = orkestra_expr::duration::parse(&self.cert_valid_for)
            .map_err(|e| anyhow::anyhow!("--cert-valid-for: {e}"))?;
        Ok(Options {
            https_addr: self.https_addr(),
            url: self.webhook_url.clone(),
            namespace: self.gateway_namespace.clone(),
            cert: self
                .tls_cert
                .clone()
                .zip(self.tls_key.clone())
                .map(|(cert, key)| (cert, key, self.tls_ca.clone())),
            valid_for,
        })
    }

    /// Starts what the Katalog enables of the gateway (webhooks, Serve API).
    pub async fn start(&self, client: &kube::Client, katalog: &orkestra_katalog::Compiled) -> anyhow::Result<Gateway> {
        let gateway = Gateway::start(client.clone(), Arc::new(katalog.clone()), self.options()?).await?;
        if let Some(webhooks) = &gateway.webhooks {
            eprintln!(
                "gateway: webhooks on https://{} (registered with the API server)",
                webhooks.addr
            );
        }
        Ok(gateway)
    }
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
    let config = crate::cluster::config("gateway")
        .await
        .context("no cluster to talk to (KUBECONFIG or in-cluster config)")?;
    let client = kube::Client::try_from(config).context("cannot build a Kubernetes client")?;
    let gateway = args.webhooks.start(&client, &katalog).await?;
    if gateway.is_empty() {
        anyhow::bail!(
            "nothing to serve: the Katalog enables no webhook (security.webhooks.admission, deletionProtection, namespaceProtection, conversion), no Serve API (gateway.api.enabled) and no webhook intake (gateway.webhooks)"
        );
    }
    // Probes and statistics always; the Serve API when the Katalog opens it.
    let listener = tokio::net::TcpListener::bind(args.http_addr).await.with_context(|| {
        format!(
            "cannot listen on {}; --http-addr ADDR picks another address",
            args.http_addr
        )
    })?;
    let addr = listener.local_addr()?;
    if gateway.serves_api() {
        eprintln!("gateway: Serve API on http://{addr}/api/v1");
        eprintln!("gateway: its OpenAPI document on http://{addr}/api/v1/openapi.json");
    }
    if gateway.takes_webhooks() {
        eprintln!("gateway: webhook intake on http://{addr}/webhooks/... (ork webhook list shows each path)");
    }
    eprintln!("gateway: statistics on http://{addr}/katalog");
    let shutdown = async {
        let _ = crate::signal::shutdown_signal().await;
        eprintln!("gateway: stopping");
    };
    gateway.serve(listener, shutdown).await?;
    Ok(ExitCode::SUCCESS)
}
