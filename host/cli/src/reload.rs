//! `ork reload`: asks a running runtime (its admin endpoint) to re-read and apply the
//! Katalog and reload its Wasm components; prints which runtime answered, what changed and
//! what serves afterwards. Another process on the port (another `ork dev`, anything else)
//! is found out before anything is asked of it.

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
    /// The Katalog the runtime should be running: nothing is reloaded when the runtime at
    /// the address runs another one.
    #[arg(short = 'f', long = "file", value_name = "KATALOG")]
    files: Vec<std::path::PathBuf>,
}

impl ReloadArgs {
    fn request(&self, client: &reqwest::Client, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = client.request(method, format!("http://{}{path}", self.http_addr));
        match std::env::var(&self.token_env) {
            Ok(token) if !token.trim().is_empty() => request.bearer_auth(token.trim()),
            _ => request,
        }
    }

    /// The name of the Katalog the runtime at the address runs, or why it is not a runtime
    /// this can reload (nothing answers, something else answers, the other Katalog).
    async fn answering(&self, client: &reqwest::Client) -> anyhow::Result<String> {
        let addr = self.http_addr;
        let response = self
            .request(client, reqwest::Method::GET, "/katalog")
            .timeout(std::time::Duration::from_secs(10))
            .send()
            .await
            .with_context(|| format!("no runtime answers at {addr} (is `ork run` or `ork dev` running?)"))?;
        let status = response.status();
        let body = json_answer(response).await.ok();
        let named = body.as_ref().and_then(|b| b["name"].as_str());
        let Some(name) = named.filter(|_| status.is_success()) else {
            anyhow::bail!(
                "the process at {addr} is not an Orkestra runtime (GET /katalog answered {status}{}); give the --http-addr of `ork run` or `ork dev`",
                match status.as_u16() {
                    401 | 403 => ", so a token may be missing (--token-env)",
                    _ => "",
                }
            );
        };
        if body.as_ref().is_some_and(|b| b["source"] == "gateway") {
            anyhow::bail!(
                "{addr} is a gateway on its own (`ork gateway`), which runs no components; give the runtime's --http-addr"
            );
        }
        if !self.files.is_empty() {
            let cache = super::component::cache_dir();
            let given = orkestra::runtime::motifs::load_cached(&self.files, cache)?.katalog.name;
            if given != name {
                anyhow::bail!(
                    "the runtime at {addr} runs Katalog {name:?}, not {given:?} (from {}); nothing was reloaded: give the --http-addr of the runtime that runs it",
                    self.files
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        Ok(name.to_string())
    }
}

pub async fn reload(args: ReloadArgs) -> anyhow::Result<ExitCode> {
    let client = reqwest::Client::new();
    let katalog = args.answering(&client).await?;
    let mut request = args.request(&client, reqwest::Method::POST, "/reload");
    if let Some(name) = &args.component {
        request = request.query(&[("component", name)]);
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
    let body = json_answer(response).await?;
    if let Some(error) = body["error"].as_str() {
        anyhow::bail!("{error}");
    }
    super::reload_report::print(&body, ok, &format!("Katalog {katalog:?} at {}", args.http_addr));
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// A runtime's JSON answer, read up to the size the Control Center reads of one: whatever
/// answers on the address may send anything.
async fn json_answer(response: reqwest::Response) -> anyhow::Result<Value> {
    let bytes = orkestra_net::read::bounded(response, orkestra_control_center::runtimes::ANSWER_LIMIT).await?;
    serde_json::from_slice(&bytes).context("the runtime's answer is not JSON")
}
