//! `ork token`: the Serve API's token entries (`gateway.api.auth.tokens`).
//!
//! - `list` prints each entry, where its value comes from and what the serve targets grant
//!   it, from the Katalog alone.
//! - `verify` says which entry accepts a bearer token: static tokens from the environment or
//!   (read, never made) from their Secrets, OIDC tokens verified against their issuer.
//! - `probe` asks a running gateway whether it accepts the token.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::Value;

use orkestra_katalog::Compiled;
use orkestra_katalog::model::{TokenAccess, TokenSource};
use orkestra_katalog::serve::access::EVERY_TOKEN;

use crate::katalog_args::KatalogArgs;

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Each token entry: where its value comes from, and what each serve target grants it.
    List(ListArgs),
    /// Which token entry accepts a bearer token (static, from a Secret, or OIDC); exit 1
    /// when none does.
    Verify(VerifyArgs),
    /// Whether a running gateway accepts a bearer token, and which targets it may see; exit 1
    /// when it does not.
    Probe(ProbeArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
}

/// The bearer token to check, from an environment variable (never from the command line,
/// where other users of the machine could read it).
#[derive(Debug, Args)]
pub struct Bearer {
    /// The environment variable that holds the token.
    #[arg(long, value_name = "VAR", default_value = "ORK_GATEWAY_TOKEN")]
    token_env: String,
}

impl Bearer {
    fn value(&self) -> anyhow::Result<String> {
        std::env::var(&self.token_env)
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .with_context(|| format!("set {} to the token to check (or pass --token-env)", self.token_env))
    }
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    #[command(flatten)]
    bearer: Bearer,
    /// Where token Secrets without a namespace live: the gateway's namespace. They are read
    /// with KUBECONFIG (or the in-cluster config), never created.
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    gateway_namespace: String,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The Serve API's base URL.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080/api/v1")]
    gateway: String,
    #[command(flatten)]
    bearer: Bearer,
    /// The Katalog the gateway must serve (`metadata.name`): a gateway of another one that
    /// accepts the token fails the probe.
    #[arg(long, value_name = "NAME")]
    katalog: Option<String>,
}

pub async fn token(command: TokenCommand) -> anyhow::Result<ExitCode> {
    match command {
        TokenCommand::List(args) => list(args),
        TokenCommand::Verify(args) => verify(args).await,
        TokenCommand::Probe(args) => probe(args).await,
    }
}

/// The Katalog's token entries.
pub fn sources(compiled: &Compiled) -> Vec<TokenSource> {
    compiled
        .katalog
        .gateway
        .as_ref()
        .map(|g| g.tokens().to_vec())
        .unwrap_or_default()
}

/// Where an entry's value comes from, in words; a Secret without a namespace is in
/// `gateway_namespace` when the command was told it.
pub fn source_of(source: &TokenSource, gateway_namespace: Option<&str>) -> String {
    if let Some(var) = source.env_var() {
        return format!("environment {var}");
    }
    if let Some(secret) = &source.secret_ref {
        let namespace = secret
            .namespace
            .as_deref()
            .or(gateway_namespace)
            .unwrap_or("<gateway namespace>");
        let mut text = format!(
            "Secret {namespace}/{} (key {})",
            secret.name,
            secret.key.as_deref().unwrap_or("token")
        );
        if let Some(rotate) = &secret.rotate_after {
            text.push_str(&format!(", rotated after {rotate}"));
        }
        return text;
    }
    match source.oidc_source() {
        Some((kind, oidc)) => {
            let issuer = oidc.issuer_for(kind).unwrap_or_else(|| "(no issuer)".into());
            let mut text = format!("OIDC {issuer}");
            if let Some(audience) = oidc.audience.as_deref().filter(|a| !a.is_empty()) {
                text.push_str(&format!(", aud {audience}"));
            }
            for (claim, value) in &oidc.allow {
                text.push_str(&format!(
                    ", {claim}={}",
                    value.as_str().map_or(value.to_string(), String::from)
                ));
            }
            text
        }
        None => "(no source)".into(),
    }
}

/// What one access entry grants, in words (`resources create, get in default`).
pub fn grant_of(access: &TokenAccess) -> String {
    let verbs = |list: &[orkestra_katalog::model::Verb]| -> String {
        let names: Vec<String> = list
            .iter()
            .map(|v| {
                serde_json::to_value(v)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            })
            .collect();
        names.join(",")
    };
    let p = &access.permissions;
    let mut parts = Vec::new();
    for (class, list) in [
        ("global", &p.global),
        ("schema", &p.schema),
        ("resources", &p.resources),
    ] {
        if !list.is_empty() {
            parts.push(format!("{class} {}", verbs(list)));
        }
    }
    if parts.is_empty() {
        parts.push("nothing".into());
    }
    let mut text = parts.join("; ");
    if !access.namespaces.is_empty() {
        text.push_str(&format!(" in {}", access.namespaces.join(",")));
    }
    text
}

/// What each target grants the token `name` (its own list or `*`), at the target's level
/// and the CRD's: a call needs both.
pub fn grants_to(compiled: &Compiled, name: &str) -> Vec<String> {
    let mut grants = Vec::new();
    for crd in compiled.served_crds() {
        let Some(serve) = crd.serve.as_deref() else { continue };
        for (target, surface) in serve.surfaces.iter().filter(|(_, s)| s.enabled) {
            for (level, list) in [("target", &surface.tokens), ("CRD", &surface.crd_tokens)] {
                let Some(list) = list else { continue };
                let access = list.get(name).or_else(|| list.get(EVERY_TOKEN));
                grants.push(match access {
                    Some(access) => format!("{target} ({level} list): {}", grant_of(access)),
                    None => format!("{target} ({level} list): not listed, so refused"),
                });
            }
        }
    }
    grants
}

/// The names of the Katalog's webhook intake entries: identities of their own, which
/// `serve.tokens` lists as it lists tokens.
pub fn webhook_identities(compiled: &Compiled) -> Vec<orkestra_katalog::model::Common<'_>> {
    compiled
        .katalog
        .gateway
        .as_ref()
        .and_then(|g| g.intake())
        .map(|w| w.entries().collect())
        .unwrap_or_default()
}

fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let compiled = args.katalog.load()?;
    let sources = sources(&compiled);
    let webhooks = webhook_identities(&compiled);
    if sources.is_empty() && webhooks.is_empty() {
        crate::stdout::write("no token entries (gateway.api.auth.tokens): the Serve API refuses every call\n")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    let mut identity = |name: &str, from: String| {
        out.push_str(&format!("{name}\n  from: {from}\n"));
        let grants = grants_to(&compiled, name);
        match grants.is_empty() {
            true => out.push_str("  grants: none (no served target lists it)\n"),
            false => {
                for grant in grants {
                    out.push_str(&format!("  grants: {grant}\n"));
                }
            }
        }
    };
    for source in &sources {
        identity(&source.name, source_of(source, None));
    }
    for webhook in &webhooks {
        let from = format!(
            "webhook {} at POST {} (a signed delivery; ork webhook list shows how it is checked)",
            webhook.provider.key(),
            webhook.path()
        );
        identity(webhook.name, from);
    }
    crate::stdout::write(&out)?;
    Ok(ExitCode::SUCCESS)
}

async fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let compiled = args.katalog.load()?;
    let bearer = args.bearer.value()?;
    let sources = sources(&compiled);
    let mut refusals = Vec::new();
    // Static tokens: compared whole, in constant time, as the gateway compares them.
    let mut client = None;
    for source in sources.iter().filter(|s| s.oidc_source().is_none()) {
        let value = match (source.env_var(), &source.secret_ref) {
            (Some(var), _) => std::env::var(var).ok(),
            (None, Some(secret)) => {
                if client.is_none() {
                    client = Some(crate::cluster::client("token", "a token's secretRef").await);
                }
                let namespace = secret.namespace.as_deref().unwrap_or(&args.gateway_namespace);
                match client.as_ref() {
                    Some(Ok(client)) => match read_secret(client, namespace, &secret.name, secret.key.as_deref()).await
                    {
                        Ok(value) => value,
                        Err(error) => {
                            refusals.push(format!("{}: {error}", source.name));
                            continue;
                        }
                    },
                    Some(Err(error)) => {
                        refusals.push(format!("{}: cannot read its Secret: {error}", source.name));
                        continue;
                    }
                    None => None,
                }
            }
            (None, None) => None,
        };
        let tokens = orkestra_gateway::tokens::Tokens::with(value.map(|v| (source.name.clone(), v.trim().to_string())));
        if tokens.identify(&bearer).is_some() {
            crate::stdout::write(&format!(
                "accepted by token entry \"{}\" ({})\n",
                source.name,
                source_of(source, Some(&args.gateway_namespace))
            ))?;
            return Ok(ExitCode::SUCCESS);
        }
        refusals.push(format!("{}: not its value", source.name));
    }
    let verifiers = orkestra_gateway::oidc::Verifiers::new(&sources);
    if !verifiers.is_empty() {
        match verifiers.verify(&bearer).await {
            Ok(identity) => {
                crate::stdout::write(&format!(
                    "accepted by token entry \"{}\" (OIDC): subject {}\n",
                    identity.token, identity.subject
                ))?;
                return Ok(ExitCode::SUCCESS);
            }
            Err(refused) => refusals.push(format!("OIDC: {refused}")),
        }
    }
    let mut out = String::from("refused: no token entry accepts it\n");
    for refusal in refusals {
        out.push_str(&format!("  {refusal}\n"));
    }
    crate::stdout::write(&out)?;
    Ok(ExitCode::FAILURE)
}

/// The text under `key` (default `token`) of a Secret, if it exists.
async fn read_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    key: Option<&str>,
) -> anyhow::Result<Option<String>> {
    let secrets = orkestra_kube::objects::namespaced::<k8s_openapi::api::core::v1::Secret>(client.clone(), namespace)?;
    let Some(secret) = secrets.get_opt(name).await? else {
        return Ok(None);
    };
    let data = secret.data.unwrap_or_default();
    let value = data
        .get(key.unwrap_or("token"))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned());
    Ok(value)
}

async fn probe(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    let bearer = args.bearer.value()?;
    let url = format!("{}/schema", args.gateway.trim_end_matches('/'));
    let response = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()?
        .get(&url)
        .bearer_auth(&bearer)
        .send()
        .await
        .with_context(|| format!("the gateway at {} did not answer", args.gateway))?;
    let status = response.status();
    // A refusal says why below, whichever Katalog it came from.
    let katalog = match status.is_success() {
        true => super::answered::answered_by(&response, &args.gateway, args.katalog.as_deref())?,
        false => None,
    };
    let body: Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        let why = body["message"]
            .as_str()
            .or(body["error"].as_str())
            .unwrap_or("no reason given");
        let code = status.as_u16();
        // Only 401 and 403 judge the token; anything else says the URL or the gateway is wrong.
        let said = match code {
            401 | 403 => format!("refused ({code}): {why}\n"),
            404 => format!(
                "no Serve API at {url} (404): --gateway is the Serve API's base URL, as http://HOST:PORT/api/v1\n"
            ),
            _ => format!("the gateway failed at {url} ({code}): {why}\n"),
        };
        crate::stdout::write(&said)?;
        return Ok(ExitCode::FAILURE);
    }
    let targets: Vec<&str> = body["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["target"].as_str())
        .collect();
    crate::stdout::write(&format!(
        "accepted by the gateway of Katalog {:?}: it may see {} target(s): {}\n",
        katalog.unwrap_or_default(),
        targets.len(),
        targets.join(", ")
    ))?;
    Ok(ExitCode::SUCCESS)
}
