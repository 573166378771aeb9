//! `ork serve`: a Serve API client, and a dry run of the gateway's stages on this machine.
//!
//! - `apply -f intent.yaml [--target t]` sends an intent (or a whole CR) to a gateway.
//! - `schema [--target t]` lists the targets a token may use, or one target's fields.
//! - `play -f KATALOG --intent intent.yaml` prints each of the six stages the gateway goes
//!   through for an intent, without a gateway or a cluster, and applies nothing.
//! - `validate`, `targets`, `can-i` read the serve settings offline ([`super::serve_config`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use orkestra_katalog::serve::intent::{self, Refusal};

use crate::katalog_args::KatalogArgs;

#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// Send an intent (flat fields, or a whole CR) to a gateway's Serve API.
    Apply(ApplyArgs),
    /// List the serve targets a token may use, or one target's fields.
    Schema(SchemaArgs),
    /// Show each of the gateway's six stages for an intent, locally: nothing is applied.
    Play(PlayArgs),
    /// Check the Katalog's serve settings offline: what would refuse calls (exit 1) or
    /// leave a target unusable.
    Validate(super::serve_config::ValidateArgs),
    /// List the targets callers may name, offline: CRD, kind, modes, category, tokens.
    Targets(super::serve_config::TargetsArgs),
    /// Whether a token entry may do an operation, target by target (exit 0: through at
    /// least one).
    CanI(super::serve_config::CanIArgs),
}

/// Where the Serve API is and the token to call it with.
#[derive(Debug, Args)]
pub struct GatewayClient {
    /// The Serve API's base URL.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080/api/v1")]
    gateway: String,
    /// The environment variable that holds the bearer token.
    #[arg(long, value_name = "VAR", default_value = "ORK_GATEWAY_TOKEN")]
    token_env: String,
    /// The Katalog the gateway must serve (`metadata.name`): it is asked first, and nothing
    /// is sent to a gateway of another one.
    #[arg(long, value_name = "NAME")]
    katalog: Option<String>,
}

impl GatewayClient {
    fn request(&self, method: reqwest::Method, path: &str) -> anyhow::Result<reqwest::RequestBuilder> {
        let token = std::env::var(&self.token_env)
            .ok()
            .filter(|t| !t.trim().is_empty())
            .with_context(|| format!("set {} to a token of the gateway (or pass --token-env)", self.token_env))?;
        let url = format!("{}{path}", self.gateway.trim_end_matches('/'));
        Ok(reqwest::Client::new()
            .request(method, url)
            .bearer_auth(token.trim())
            .timeout(std::time::Duration::from_secs(30)))
    }

    /// With `--katalog`, that the gateway serves it (asked with `GET /schema`).
    async fn check(&self) -> anyhow::Result<()> {
        if self.katalog.is_none() {
            return Ok(());
        }
        let response = self
            .request(reqwest::Method::GET, "/schema")?
            .send()
            .await
            .with_context(|| format!("the gateway at {} did not answer", self.gateway))?;
        super::answered::answered_by(&response, &self.gateway, self.katalog.as_deref())
            .map_err(|e| anyhow::anyhow!("{e}; nothing was sent"))?;
        Ok(())
    }
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The intent (YAML or JSON): flat fields, or a whole CR with apiVersion and kind.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: PathBuf,
    /// The target to send it to (sets `target` in the intent).
    #[arg(long, value_name = "TARGET")]
    target: Option<String>,
    /// Ask the API server to check the write without making it.
    #[arg(long)]
    dry_run: bool,
    /// Move an existing CR to this target's surface (when the target allows it).
    #[arg(long = "override")]
    override_: bool,
    /// Take fields another field manager owns (when the target allows it).
    #[arg(long)]
    overwrite: bool,
    #[command(flatten)]
    client: GatewayClient,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// One target's fields instead of the catalog.
    #[arg(long, value_name = "TARGET")]
    target: Option<String>,
    #[command(flatten)]
    client: GatewayClient,
}

#[derive(Debug, Args)]
pub struct PlayArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    /// The intent (YAML or JSON).
    #[arg(long, value_name = "FILE")]
    intent: PathBuf,
    /// The target (sets `target` in the intent).
    #[arg(long, value_name = "TARGET")]
    target: Option<String>,
    /// Check this token's grants too (a name of gateway.api.auth.tokens).
    #[arg(long, value_name = "NAME")]
    token: Option<String>,
}

pub async fn serve(command: ServeCommand) -> anyhow::Result<ExitCode> {
    match command {
        ServeCommand::Apply(args) => apply(args).await,
        ServeCommand::Schema(args) => schema(args).await,
        ServeCommand::Play(args) => play(args),
        ServeCommand::Validate(args) => super::serve_config::validate(args),
        ServeCommand::Targets(args) => super::serve_config::targets(args),
        ServeCommand::CanI(args) => super::serve_config::can_i(args),
    }
}

/// An intent file as a JSON object, with `target` set when asked.
fn read_intent(file: &PathBuf, target: Option<&String>) -> anyhow::Result<Map<String, Value>> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let node = orkestra_katalog::yaml::parse(&text)
        .map_err(|e| anyhow::anyhow!("{}:{}:{}: {}", file.display(), e.pos.line, e.pos.column, e.message))?;
    let Value::Object(mut intent) = node.to_json() else {
        anyhow::bail!("{}: an intent is a map of fields (or a whole CR)", file.display());
    };
    if let Some(target) = target {
        intent.insert("target".into(), json!(target));
    }
    Ok(intent)
}

async fn apply(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let intent = read_intent(&args.file, args.target.as_ref())?;
    args.client.check().await?;
    let query = format!(
        "?dryRun={}&override={}&overwrite={}",
        args.dry_run, args.override_, args.overwrite
    );
    let response = args
        .client
        .request(reqwest::Method::POST, &format!("/apply{query}"))?
        .json(&intent)
        .send()
        .await
        .with_context(|| format!("the gateway at {} did not answer", args.client.gateway))?;
    let status = response.status();
    let katalog = super::answered::answered_by(&response, &args.client.gateway, args.client.katalog.as_deref())?;
    let body: Value = response.json().await.context("the gateway's answer is not JSON")?;
    println!("{}", serde_json::to_string_pretty(&body)?);
    if let Some(katalog) = katalog {
        eprintln!(
            "answered by the gateway of Katalog {katalog:?} at {}",
            args.client.gateway
        );
    }
    Ok(match status.is_success() && body["accepted"] == true {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    })
}

async fn schema(args: SchemaArgs) -> anyhow::Result<ExitCode> {
    let path = match &args.target {
        Some(target) => format!("/schema?target={target}"),
        None => "/schema".to_string(),
    };
    let response = args
        .client
        .request(reqwest::Method::GET, &path)?
        .send()
        .await
        .with_context(|| format!("the gateway at {} did not answer", args.client.gateway))?;
    let status = response.status();
    let katalog = super::answered::answered_by(&response, &args.client.gateway, args.client.katalog.as_deref())?;
    let body: Value = response.json().await.context("the gateway's answer is not JSON")?;
    if let Some(katalog) = katalog {
        eprintln!("Katalog {katalog:?} at {}", args.client.gateway);
    }
    if !status.is_success() {
        eprintln!("error: {}", body["message"].as_str().unwrap_or("the gateway refused"));
        return Ok(ExitCode::FAILURE);
    }
    match args.target {
        None => {
            println!("{:<24} {:<10} {:<24} CATEGORY", "TARGET", "PRIMARY", "KIND");
            for item in body["items"].as_array().into_iter().flatten() {
                println!(
                    "{:<24} {:<10} {:<24} {}",
                    item["target"].as_str().unwrap_or_default(),
                    item["primary"].to_string(),
                    item["kind"].as_str().unwrap_or_default(),
                    item["category"].as_str().unwrap_or("-"),
                );
            }
        }
        Some(_) => {
            println!("{:<24} {:<36} {:<9} REQUIRED", "FIELD", "PATH", "TYPE");
            for field in body["fields"].as_array().into_iter().flatten() {
                println!(
                    "{:<24} {:<36} {:<9} {}",
                    field["name"].as_str().unwrap_or_default(),
                    field["path"].as_str().unwrap_or_default(),
                    field["type"].as_str().unwrap_or_default(),
                    field["required"],
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The stages, as `ork serve play` prints them.
fn play(args: PlayArgs) -> anyhow::Result<ExitCode> {
    let compiled = args.katalog.load()?;
    let intent = read_intent(&args.intent, args.target.as_ref())?;
    let stage = |n: u8, name: &str| println!("== {n}. {name}");
    stage(1, "target resolution");
    let (crd, made) = match intent.get("target").and_then(Value::as_str) {
        Some(target) => {
            let Some((crd, served, surface)) = compiled.target(target) else {
                println!("refused (400): unknown target \"{target}\"");
                return Ok(ExitCode::FAILURE);
            };
            println!(
                "target mode: target \"{}\" of CRD {} ({})",
                surface.name, crd.name, crd.kind
            );
            play_token(args.token.as_deref(), surface);
            stage(3, "CR construction");
            (crd, intent::from_target(served, surface, &intent, "", &|_| None))
        }
        None => {
            let kind = intent.get("kind").and_then(Value::as_str).unwrap_or_default();
            let Some((crd, served)) = compiled.served_kind(None, kind) else {
                println!("refused (400): give a target, or apiVersion and kind of a served CRD");
                return Ok(ExitCode::FAILURE);
            };
            println!("whole-CR mode: kind {} of CRD {}", crd.kind, crd.name);
            if let Some(serve) = crd.serve.as_deref() {
                play_token(args.token.as_deref(), serve.primary_surface());
            }
            stage(3, "CR construction");
            (crd, intent::from_cr(served, &intent, ""))
        }
    };
    let made = match made {
        Ok(made) => made,
        Err(Refusal::BadRequest(message)) => {
            println!("refused (400): {message}");
            return Ok(ExitCode::FAILURE);
        }
        Err(Refusal::Invalid(violations)) => {
            for violation in violations {
                println!("refused (422): {}: {}", violation.field, violation.message);
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    println!("{}", serde_json::to_string_pretty(&made.object["spec"])?);
    stage(4, "provenance");
    for (key, value) in made.object["metadata"]["annotations"].as_object().into_iter().flatten() {
        if key.starts_with("orkestra.orkspace.io/serve-") {
            println!("{key}: {value}");
        }
    }
    stage(5, "admission (the Katalog's rules, as the webhooks run them)");
    let (mutated, skipped) = crd.admission_rules.mutated(&made.object, &crd.notes, &Map::new());
    for ops in orkestra_gateway::patch::diff(&made.object, &mutated) {
        println!("mutation: {ops}");
    }
    let verdict = crd.admission_rules.verdict(&mutated, &crd.notes, &Map::new());
    for skipped in &skipped.skipped {
        println!("mutation skipped: {skipped}");
    }
    for warning in &verdict.warnings {
        println!("warning: {warning}");
    }
    for denied in &verdict.denied {
        println!("denied: {denied}");
    }
    stage(6, "apply (not made: this is a play)");
    if !verdict.denied.is_empty() {
        println!("refused (422): the write would be denied at admission");
        return Ok(ExitCode::FAILURE);
    }
    println!("{}", serde_json::to_string_pretty(&*mutated)?);
    Ok(ExitCode::SUCCESS)
}

fn play_token(token: Option<&str>, surface: &orkestra_katalog::compile::Surface) {
    println!("== 2. token check");
    match token {
        None => println!("skipped (give --token NAME to check a token's grants)"),
        Some(token) => {
            let verdict = orkestra_katalog::serve::access::permits(
                surface,
                token,
                orkestra_katalog::serve::access::Class::Resources,
                orkestra_katalog::model::Verb::Create,
                None,
            );
            match verdict {
                Ok(()) => println!("token \"{token}\" may create through \"{}\"", surface.name),
                Err(why) => println!("refused (403): {why}"),
            }
        }
    }
}
