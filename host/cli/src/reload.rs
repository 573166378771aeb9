//! `ork reload`: asks a running runtime (its admin endpoint) to re-read and apply the
//! Katalog and reload its Wasm components; prints what changed and what serves afterwards.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use serde_json::Value;

use super::run::DEFAULT_HTTP_ADDR;

#[derive(Debug, Args)]
pub struct ReloadArgs {
    /// The runtime's Live API (`--http-addr` of `ork run` / `ork dev`).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_HTTP_ADDR, alias = "admin-addr")]
    http_addr: std::net::SocketAddr,
    /// The bearer token the runtime asks for, from this environment variable (when set).
    #[arg(long, value_name = "VAR", default_value = "ORK_API_TOKEN")]
    token_env: String,
    /// Reload only this component (`crd`, or `crd/target`).
    #[arg(long, value_name = "NAME")]
    component: Option<String>,
}

pub async fn reload(args: ReloadArgs) -> anyhow::Result<ExitCode> {
    let mut url = format!("http://{}/reload", args.http_addr);
    if let Some(name) = &args.component {
        url = format!("{url}?component={name}");
    }
    let mut request = reqwest::Client::new().post(&url);
    if let Ok(token) = std::env::var(&args.token_env)
        && !token.trim().is_empty()
    {
        request = request.bearer_auth(token.trim());
    }
    let response = request
        // A reload compiles what changed: seconds for big guests, not minutes.
        .timeout(std::time::Duration::from_secs(120))
        .send()
        .await
        .with_context(|| {
            format!(
                "no runtime answers at {} (is `ork run` or `ork dev` running?)",
                args.http_addr
            )
        })?;
    let ok = response.status().is_success();
    let body: Value = response.json().await.context("the runtime's answer is not JSON")?;
    if let Some(error) = body["error"].as_str() {
        anyhow::bail!("{error}");
    }
    for component in body["components"].as_array().into_iter().flatten() {
        println!(
            "{}: revision {} sha256 {} ({})",
            component["name"].as_str().unwrap_or_default(),
            component["revision"],
            component["digest"].as_str().unwrap_or("-"),
            component["source"].as_str().unwrap_or_default()
        );
    }
    for error in body["errors"].as_array().into_iter().flatten() {
        eprintln!("error: {}", error.as_str().unwrap_or_default());
    }
    let names = |key: &str| -> Vec<&str> {
        body[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    };
    for (key, said) in [
        ("started", "started (added to the Katalog)"),
        ("restarted", "restarted with its changed pipeline"),
        ("stopped", "stopped (removed from the Katalog)"),
    ] {
        for crd in names(key) {
            println!("CRD {crd}: {said}");
        }
    }
    for part in names("restartNeeded") {
        eprintln!("note: {part} changed; it applies at the next restart");
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
