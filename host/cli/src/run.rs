//! `ork run`: the runtime against an existing cluster.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use crate::katalog_args::KatalogArgs;
use crate::katalog_configmap::KatalogConfigMap;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    #[command(flatten)]
    http: HttpArgs,
    #[command(flatten)]
    webhooks: super::gateway::WebhookArgs,
    #[command(flatten)]
    ha: super::ha::HaArgs,
    #[command(flatten)]
    registry: super::component::PullArgs,
    #[command(flatten)]
    record: super::component::RecordArgs,
    /// Serve neither the webhooks nor the Serve API, whatever the Katalog enables: a gateway
    /// of its own (`ork gateway`, the Helm chart's `gateway.enabled`) serves them.
    #[arg(long)]
    no_gateway: bool,
    #[command(flatten)]
    state: StateArgs,
    /// The ConfigMap (`NAMESPACE/NAME`) the Katalog file is mounted from, as the Helm chart
    /// mounts it: watched, so a changed Katalog applies as soon as the ConfigMap changes,
    /// not when the kubelet updates the file. Its key is the file's name.
    #[arg(long, value_name = "CONFIGMAP")]
    katalog_configmap: Option<String>,
}

/// Where the runtime keeps what it decides over time.
#[derive(Debug, Clone, Default, Args)]
pub struct StateArgs {
    /// Namespace of the ConfigMap `orkestra-rollouts-<katalog>` that keeps the components'
    /// rollouts (serving version, canary, versions rolled back) across restarts. Default:
    /// the client's namespace (the pod's own in a cluster).
    #[arg(long, value_name = "NAMESPACE")]
    pub state_namespace: Option<String>,
}

impl StateArgs {
    pub fn namespace(&self, client: &kube::Client) -> String {
        self.state_namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string())
    }
}

/// Where the Live API (probes, /katalog, /metrics, /components, /reload) listens, and who
/// may call it.
#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// Address of the Live API: probes, /katalog..., /metrics, /components, POST /reload
    /// [default: 127.0.0.1:8080; `ork dev` takes a free port when that one is taken].
    #[arg(long, value_name = "ADDR", alias = "admin-addr")]
    pub http_addr: Option<std::net::SocketAddr>,
    /// Do not open the Live API.
    #[arg(long, alias = "no-admin")]
    pub no_http: bool,
    /// Require this bearer token (read from the named environment variable) on everything
    /// but the probes. Set when the variable is; required to listen beyond loopback.
    #[arg(long, value_name = "VAR", default_value = "ORK_API_TOKEN")]
    pub token_env: String,
    /// Require the bearer token kept in this Secret (`NAMESPACE/NAME`, key `token`, or
    /// `NAMESPACE/NAME/KEY`).
    #[arg(long, value_name = "SECRET")]
    pub token_secret: Option<String>,
    /// Serve the Live API without a token on a non-loopback address (anyone who reaches it
    /// may read every CR and trigger reloads).
    #[arg(long)]
    pub insecure_no_auth: bool,
}

/// The Live API's default address (loopback only).
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8080";

impl HttpArgs {
    /// Where the Live API listens: as given, else [`DEFAULT_HTTP_ADDR`].
    pub fn addr(&self) -> std::net::SocketAddr {
        self.http_addr
            .unwrap_or_else(|| DEFAULT_HTTP_ADDR.parse().expect("a socket address"))
    }

    /// The Live API's listener, bound before anything else starts so that a taken port
    /// fails the start naming it, instead of leaving the docs' `curl`s and `ork reload`
    /// talking to whatever holds it. With `free_port` (`ork dev`), a taken default port is
    /// traded for a free one, said on stderr; an address given with `--http-addr` never is.
    pub async fn listen(&self, free_port: bool) -> anyhow::Result<Option<tokio::net::TcpListener>> {
        if self.no_http {
            return Ok(None);
        }
        let addr = self.addr();
        let error = match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => return Ok(Some(listener)),
            Err(error) => error,
        };
        let taken = error.kind() == std::io::ErrorKind::AddrInUse;
        if free_port && taken && self.http_addr.is_none() {
            let listener = tokio::net::TcpListener::bind((addr.ip(), 0))
                .await
                .with_context(|| format!("cannot listen on {} for the Live API", addr.ip()))?;
            let got = listener.local_addr()?;
            eprintln!("runtime: {addr} is taken; the Live API listens on {got} instead (--http-addr picks one)");
            return Ok(Some(listener));
        }
        let held = match taken {
            true => " (another process holds it)",
            false => "",
        };
        anyhow::bail!(
            "cannot listen on {addr} for the Live API: {error}{held}; --http-addr ADDR picks another address, --no-http runs without the Live API"
        )
    }

    /// Who may call the Live API, or why it must not open as asked.
    async fn auth(&self, client: &kube::Client) -> anyhow::Result<orkestra::live::Auth> {
        let token = match (&self.token_secret, std::env::var(&self.token_env)) {
            (Some(secret), _) => Some(secret_value(client, secret, "token").await?),
            (None, Ok(token)) if !token.trim().is_empty() => Some(token.trim().to_string()),
            (None, _) => None,
        };
        match token {
            Some(token) => Ok(orkestra::live::Auth::token(token)),
            None if self.addr().ip().is_loopback() || self.insecure_no_auth => Ok(orkestra::live::Auth::open()),
            None => anyhow::bail!(
                "the Live API would listen on {} without a token: set {} (or --token-secret), or pass --insecure-no-auth",
                self.addr(),
                self.token_env
            ),
        }
    }
}

/// The text in Secret `NAMESPACE/NAME[/KEY]` (`key` unless it names one).
pub async fn secret_value(client: &kube::Client, reference: &str, key: &str) -> anyhow::Result<String> {
    let parts: Vec<&str> = reference.split('/').collect();
    let (namespace, name, key) = match parts[..] {
        [namespace, name] => (namespace, name, key),
        [namespace, name, key] => (namespace, name, key),
        _ => anyhow::bail!("Secret {reference}: give NAMESPACE/NAME or NAMESPACE/NAME/KEY"),
    };
    let secrets = orkestra_kube::objects::namespaced::<k8s_openapi::api::core::v1::Secret>(client.clone(), namespace)
        .with_context(|| format!("Secret {reference}"))?;
    let secret = secrets
        .get(name)
        .await
        .with_context(|| format!("reading Secret {namespace}/{name}"))?;
    let value = secret
        .data
        .and_then(|mut data| data.remove(key))
        .with_context(|| format!("Secret {namespace}/{name} has no key {key:?}"))?;
    let token =
        String::from_utf8(value.0).with_context(|| format!("Secret {namespace}/{name} key {key:?} is not text"))?;
    Ok(token.trim().to_string())
}

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // The Katalog first: a wrong one is named before a missing cluster is. The client (made
    // without reaching the server) reads the pull Secrets of OCI motifs, where there is one.
    let config = crate::cluster::config("run").await;
    let cluster = config
        .as_ref()
        .ok()
        .and_then(|c| kube::Client::try_from(c.clone()).ok());
    let katalog = args.katalog.load_pulling(&args.registry, cluster).await?;
    hosts_crds(&katalog)?;
    let config = config.context("cannot build a Kubernetes client from KUBECONFIG or the in-cluster config")?;
    let client = kube::Client::try_from(config.clone()).context("cannot build a Kubernetes client")?;
    let version = client
        .apiserver_version()
        .await
        .context("cannot reach the API server")?;
    tracing::info!(crds = katalog.crds.len(), server = %version.git_version, "Katalog loaded, API server reachable");
    let files = args.katalog.files();
    let katalog_configmap = KatalogConfigMap::of_files(args.katalog_configmap.as_deref(), &files)?;
    let listener = args.http.listen(false).await?;
    let hosting = Hosting {
        http: &args.http,
        listener,
        state: &args.state,
        webhooks: &args.webhooks,
        ha: &args.ha,
        components: args.registry.store()?,
        pull_secrets: args.registry.pull_secrets(),
        katalog_configmap,
        recording: args.record.folder()?,
        dev: false,
        gateway: !args.no_gateway,
    };
    serve(client, config, &katalog, &files, hosting).await?;
    Ok(ExitCode::SUCCESS)
}

/// How `ork run` and `ork dev` host a Katalog beyond the Katalog itself.
pub struct Hosting<'a> {
    pub http: &'a HttpArgs,
    /// The Live API's listener ([`HttpArgs::listen`]); none with `--no-http`.
    pub listener: Option<tokio::net::TcpListener>,
    pub state: &'a StateArgs,
    pub webhooks: &'a super::gateway::WebhookArgs,
    pub ha: &'a super::ha::HaArgs,
    pub components: orkestra::runtime::slots::ComponentStore,
    /// The `--pull-secret` Secrets the components' pulls read.
    pub pull_secrets: &'a [String],
    /// The ConfigMap the Katalog file is mounted from, followed for changes.
    pub katalog_configmap: Option<KatalogConfigMap>,
    /// Where component calls may be recorded (`--recordings`), with its sessions' token.
    pub recording: Option<super::component::Recording>,
    /// `ork dev`: a reload installs the Katalog's CRDs too.
    pub dev: bool,
    /// Whether it serves what the Katalog enables of the gateway (webhooks, Serve API).
    pub gateway: bool,
}

/// Refuses a Katalog that is a gateway alone (`gateway.standalone: true`): the runtime would
/// reconcile nothing, and its webhooks are `ork gateway`'s to serve.
pub fn hosts_crds(katalog: &orkestra_katalog::Compiled) -> anyhow::Result<()> {
    if katalog.katalog.gateway.as_ref().is_some_and(|g| g.standalone) {
        anyhow::bail!(
            "gateway.standalone: true: this Katalog is a gateway of its own, run it with `ork gateway -f FILE`; without standalone, the runtime serves its gateway in its own process"
        );
    }
    Ok(())
}

/// Runs the Katalog's runtime until SIGINT/SIGTERM; a second signal, or in-flight
/// reconciles outlasting `--shutdown-timeout`, exits at once. The Katalog `files` are
/// watched: a change applies live, each CRD added, removed or changed on its own.
pub async fn serve(
    client: kube::Client,
    config: kube::Config,
    katalog: &orkestra_katalog::Compiled,
    files: &[std::path::PathBuf],
    hosting: Hosting<'_>,
) -> anyhow::Result<()> {
    let Hosting {
        http,
        listener,
        state,
        webhooks: webhooks_args,
        ha: ha_args,
        mut components,
        pull_secrets,
        katalog_configmap,
        recording,
        dev,
        gateway: serves_gateway,
    } = hosting;
    let auth = match listener {
        None => None,
        Some(_) => Some(http.auth(&client).await?),
    };
    let auth = match (auth, recording) {
        (Some(auth), Some(recording)) => {
            if auth.is_open() {
                eprintln!(
                    "runtime: recording sessions (/recordings) need the token in {}",
                    recording.folder.dir.join(".token").display()
                );
            }
            components.recordings = Some(recording.folder);
            Some(auth.with_recordings_token(recording.token))
        }
        (auth, recording) => {
            components.recordings = recording.map(|r| r.folder);
            auth
        }
    };
    // A reload pulls the OCI motifs a changed Katalog imports as the start did.
    let motifs = components
        .cache_dir
        .clone()
        .map(|cache_dir| orkestra::runtime::motifs::Source::Registries {
            registries: components.registries.clone(),
            cache_dir,
            cluster: Some(client.clone()),
        });
    // Before the runtime starts: CRs written from now on are checked at admission.
    let mut gateway = match serves_gateway {
        true => Some(webhooks_args.start(&client, katalog).await?),
        false => None,
    };
    let live_addr = listener.as_ref().and_then(|l| l.local_addr().ok());
    let ha = ha_args.start(&client, katalog, live_addr)?;
    let watched = ha.watched();
    // What the runtime does besides its CRDs' work, as `ork manifests` grants it: asked of
    // the API server before anything reconciles.
    let state_namespace = state.namespace(&client);
    let own = super::manifests::Own {
        namespace: &state_namespace,
        leases: ha_args.leases(&client, katalog),
        gateway: serves_gateway,
        pull_secrets,
    };
    let (mut own, _) = super::manifests::own_needs(katalog, &own)?;
    if let Some(configmap) = &katalog_configmap {
        configmap.needs(&mut own);
    }
    let mut runtime = orkestra::runtime::Runtime::with_components(client.clone(), katalog, components)?
        .with_ownership(ha.ownership())
        .with_rollout_state(state_namespace)
        .with_identities(config)
        .with_permission_check(own);
    if auth.is_some() {
        runtime = runtime.with_event_log();
    }
    let components = runtime.components();
    let mut reloader = orkestra::runtime::reload::Reloader::new(files.to_vec(), components, runtime.pipelines());
    if let Some(source) = motifs {
        reloader = reloader.pulling_motifs(source);
    }
    if dev {
        // Logs are quiet by default: say what a saved Katalog changed where the user looks.
        let said = format!("Katalog {:?} (changed on disk)", katalog.katalog.name);
        reloader = reloader
            .installing_crds(client.clone())
            .reporting(Arc::new(move |outcome| {
                let body = serde_json::to_value(outcome).unwrap_or_default();
                super::reload_report::print(&body, outcome.errors.is_empty(), &said);
            }));
    }
    // A changed Katalog applies live, CRD by CRD (the webhooks, gateway and HA at restart).
    let watcher = tokio::spawn(reloader.clone().watch(orkestra::runtime::COMPONENT_POLL));
    let follower = katalog_configmap.map(|c| tokio::spawn(c.follow(client.clone(), reloader.clone())));
    // The gateway's surfaces (the Serve API, webhook intake) share the Live API's port,
    // outside its token: they have their own.
    if auth.is_none() {
        for (served, what) in [
            (gateway.as_ref().is_some_and(|g| g.serves_api()), "the Serve API"),
            (gateway.as_ref().is_some_and(|g| g.takes_webhooks()), "webhook intake"),
        ] {
            if served {
                eprintln!("runtime: {what} is not served: it shares the Live API's port, closed by --no-http");
            }
        }
    }
    let live = match auth.zip(listener) {
        Some((auth, listener)) => {
            let hosts = auth.hosts(listener.local_addr()?);
            let mut inspect = runtime.inspect();
            if let Some(gateway) = gateway.as_ref().filter(|g| !g.is_empty()) {
                inspect.gateway = Some(Arc::new(gateway.stats()));
            }
            let mut router = orkestra::live::router(inspect, Some(reloader), auth);
            if let Some(gateway) = gateway.as_mut() {
                router = router.merge(gateway.routes());
            }
            Some((listener, router, hosts))
        }
        None => None,
    };
    let names: Vec<&str> = katalog.enabled().map(|c| &*c.name).collect();
    eprintln!("runtime: reconciling {} CRD(s): {}", names.len(), names.join(", "));
    // Said once the port is bound, so whoever waits for the line can call it at once.
    let takes_webhooks = gateway.as_ref().is_some_and(|g| g.takes_webhooks());
    let endpoint = live.map(|(listener, router, hosts)| {
        if let Ok(addr) = listener.local_addr() {
            eprintln!("runtime: Live API on http://{addr} (/katalog, /metrics, /openapi.json)");
            if takes_webhooks {
                eprintln!("runtime: webhook intake on http://{addr}/webhooks/... (ork webhook list shows each path)");
            }
        }
        tokio::spawn(async move {
            if let Err(error) = orkestra::live::serve(listener, router, hosts).await {
                tracing::warn!(%error, "the Live API stopped");
            }
            if watched {
                // The other replicas take a closed port for a dead one: it must be.
                eprintln!("runtime: the Live API stopped, and the other replicas watch it; exiting");
                std::process::exit(1);
            }
        })
    });
    // Start-up is over: what runs from here maps its own pages again.
    let released = super::startup_pages::release();
    tracing::debug!(kib = released / 1024, "start-up's code pages given back");
    let (signalled, on_signal) = tokio::sync::oneshot::channel();
    let run = runtime.run(async {
        let _ = crate::signal::shutdown_signal().await;
        eprintln!("runtime: stopping (in-flight reconciles finish; signal again to force)");
        let _ = signalled.send(());
        tokio::spawn(async {
            let _ = crate::signal::shutdown_signal().await;
            eprintln!("runtime: forced exit");
            std::process::exit(130);
        });
    });
    let bound = ha_args.shutdown_timeout;
    let drained = tokio::select! {
        () = run => true,
        () = async {
            let _ = on_signal.await;
            tokio::time::sleep(bound).await;
        } => false,
    };
    if drained {
        // Nothing is in flight: the next replica may take over at once.
        ha.release(bound).await;
    } else {
        // A reconcile still runs: its Leases must expire before anyone takes its CRs.
        eprintln!("runtime: in-flight reconciles outlasted {bound:?}; exiting, the Leases expire");
    }
    watcher.abort();
    if let Some(follower) = follower {
        follower.abort();
    }
    if let Some(endpoint) = endpoint {
        endpoint.abort();
    }
    if let Some(gateway) = gateway {
        gateway.stop().await;
    }
    Ok(())
}
