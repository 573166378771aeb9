//! `ork control-center`: the web UI over any number of runtimes' Live APIs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use orkestra_control_center::config::RuntimeConfig;
use orkestra_control_center::login::Login;
use orkestra_control_center::runtimes::Tokens;

#[derive(Debug, Args)]
pub struct ControlCenterArgs {
    /// A runtime's Live API (`http://host:8080`); repeat for several.
    #[arg(long = "runtime", value_name = "URL")]
    runtimes: Vec<String>,
    /// Where the UI listens (under /controlcenter).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    addr: SocketAddr,
    /// A YAML file of runtimes (`runtimes: [{name, url, tokenEnv}]`), read at start; the
    /// runtimes added or removed in the UI are written back to it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The admin password, from this environment variable (user `admin`).
    #[arg(long, value_name = "VAR", default_value = "ORK_CC_PASSWORD")]
    password_env: String,
    /// The admin password kept in a Secret (`NAMESPACE/NAME`, key `password`, or
    /// `NAMESPACE/NAME/KEY`), read with KUBECONFIG or the in-cluster config.
    #[arg(long, value_name = "SECRET")]
    password_secret: Option<String>,
    /// No sign-in at all (only on a loopback address).
    #[arg(long)]
    no_login: bool,
    /// The bearer token the runtimes' Live APIs ask for, from this environment variable
    /// (sent to the runtimes given at start and in the config file, not to ones added from
    /// the UI unless --token-to-added-runtimes).
    #[arg(long, value_name = "VAR", default_value = "ORK_API_TOKEN")]
    runtime_token_env: String,
    /// An environment variable a runtime added from the UI may name as its token
    /// (`tokenEnv`); repeat for several. None by default: whoever reaches the UI must not
    /// be able to send the Control Center's environment to an address of their choosing.
    #[arg(long = "allow-token-env", value_name = "VAR")]
    allow_token_env: Vec<String>,
    /// Send the --runtime-token-env token to runtimes added from the UI as well.
    #[arg(long)]
    token_to_added_runtimes: bool,
    /// A token of the runtimes' Serve API (`gateway.api`), from this environment variable:
    /// with it, the create forms apply intents through the Serve API, as this token may. It
    /// goes only where the --runtime-token-env token goes.
    #[arg(long, value_name = "VAR", default_value = "ORK_SERVE_TOKEN")]
    serve_token_env: String,
    /// A host name the UI is reached by besides loopback ones (`cc.example.com`); repeat for
    /// several. Without a login only loopback names and these are answered (against DNS
    /// rebinding); with one, when given, only these and loopback names.
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// How often each runtime is asked (`10s`, `1m`).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    poll: Duration,
    /// Watch every runtime whose Live API Service in this namespace is labelled
    /// `orkestra.io/live-api=true` (`*`: every namespace), found again at each poll; repeat
    /// for several. They get the --runtime-token-env token: name only namespaces whose
    /// Services the platform controls.
    #[arg(long = "discover", value_name = "NAMESPACE")]
    discover: Vec<String>,
    /// The URLs a discovered runtime may have (`scheme://host[:port]`, a host `*.suffix`, a
    /// port `*`); repeat for several. A Service naming another (in its
    /// orkestra.io/live-api-url annotation) is not watched and sent no token. Default: the
    /// Services' own names in the --discover namespaces (`http://*.NAMESPACE.svc:*`).
    #[arg(long = "discover-allow", value_name = "URL")]
    discover_allow: Vec<String>,
    /// A gateway on its own (`ork gateway`, `http://host:8080`): what it serves and its
    /// webhooks' counts show with the runtimes of its Katalog; repeat for several.
    #[arg(long = "gateway", value_name = "URL")]
    gateways: Vec<String>,
}

fn duration(text: &str) -> Result<Duration, String> {
    orkestra_expr::duration::parse(text).map_err(String::from)
}

pub async fn control_center(args: ControlCenterArgs) -> anyhow::Result<ExitCode> {
    let login = match (&args.password_secret, std::env::var(&args.password_env), args.no_login) {
        (_, _, true) => Login::none(),
        (Some(secret), _, false) => {
            let client = crate::cluster::client("control-center", "--password-secret").await?;
            Login::password(super::run::secret_value(&client, secret, "password").await?)
        }
        (None, Ok(password), false) if !password.is_empty() => Login::password(password),
        (None, _, false) => anyhow::bail!(
            "the Control Center needs an admin password: set {} (or --password-secret), or pass --no-login on a loopback address",
            args.password_env
        ),
    };
    let runtimes = args
        .runtimes
        .iter()
        .map(|url| RuntimeConfig::new(url, None, None))
        .collect::<Result<Vec<_>, _>>()?;
    let token = std::env::var(&args.runtime_token_env)
        .ok()
        .filter(|t| !t.trim().is_empty());
    let options = orkestra_control_center::Options {
        addr: args.addr,
        runtimes,
        config_file: args.config,
        tokens: Tokens {
            default: token,
            allowed_envs: args.allow_token_env,
            default_to_added: args.token_to_added_runtimes,
            serve: std::env::var(&args.serve_token_env)
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty()),
        },
        login,
        hosts: args.allowed_hosts,
        poll: args.poll,
        gateways: args.gateways.clone(),
        discovered: match args.discover.is_empty() {
            true => None,
            false => {
                let allowed =
                    super::discover::Allowed::new(&args.discover_allow, &args.discover).map_err(anyhow::Error::msg)?;
                let client = crate::cluster::client("control-center", "--discover").await?;
                let (found, receiver) = tokio::sync::watch::channel(Vec::new());
                tokio::spawn(super::discover::discover(
                    client,
                    (args.discover.clone(), allowed),
                    args.poll,
                    found,
                ));
                Some(receiver)
            }
        },
    };
    let bound = orkestra_control_center::server::bind(options).await?;
    eprintln!("control center: http://{}/controlcenter/", bound.local_addr()?);
    bound
        .serve(async {
            let _ = crate::signal::shutdown_signal().await;
        })
        .await?;
    Ok(ExitCode::SUCCESS)
}
