//! The runtimes the Control Center watches, and what each last said: `/katalog` and
//! `/components`, polled every interval (a runtime that does not answer is marked
//! unreachable, with why, and asked again at the next poll), with a history for the
//! charts. Pages ask a runtime for the rest when they are shown.
//!
//! Several replicas may stand behind one URL (a Service); only the konductor reconciles. An
//! answer from a replica that says `isKonductor: false` is asked again, up to three times,
//! on a fresh connection each (so it may reach another replica), as upstream's Control
//! Center does.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use crate::config::{ConfigFile, Error, RuntimeConfig};
use crate::history::{History, Point};

/// How long one request to a runtime may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// The largest answer read from a runtime (a Live API's `/katalog` is kilobytes; a CR list of
/// tens of thousands a few megabytes): past this it is dropped as it streams in.
pub const ANSWER_LIMIT: usize = 16 << 20;
/// How often an answer from a follower is asked again.
const KONDUCTOR_TRIES: usize = 3;

/// What one runtime last said.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub katalog: Option<Value>,
    pub components: Option<Value>,
    /// Whether the last poll got an answer.
    pub up: bool,
    pub last_error: Option<String>,
    /// When it last answered, and when it was last asked.
    pub last_seen: Option<jiff::Timestamp>,
    pub polled: Option<jiff::Timestamp>,
    /// `false`: only followers answered (none of the tries reached the konductor).
    pub konductor: Option<bool>,
    /// What the gateway it serves says of itself (`/gateway`), when it serves one.
    pub gateway: Option<Value>,
}

/// A gateway on its own (`ork gateway`), whose `/katalog` is shown with the runtimes of the
/// same Katalog.
#[derive(Debug)]
pub struct Gateway {
    pub url: String,
    seen: RwLock<Result<Value, String>>,
}

/// One watched runtime.
#[derive(Debug)]
pub struct Watched {
    pub config: RuntimeConfig,
    token: Option<String>,
    serve_token: Option<String>,
    seen: RwLock<Seen>,
    history: Mutex<History>,
}

impl Watched {
    pub fn seen(&self) -> Seen {
        self.seen.read().clone()
    }

    pub fn history(&self) -> History {
        self.history.lock().clone()
    }
}

/// Why a runtime's answer is missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("{0} is unreachable: {1}")]
    Unreachable(String, String),
    #[error("{0} answered {1}: {2}")]
    Status(String, u16, String),
}

impl FetchError {
    /// The runtime answered 404: there is no such thing there.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FetchError::Status(_, 404, _))
    }
}

/// Every watched runtime.
#[derive(Debug)]
pub struct Runtimes {
    list: RwLock<Vec<Arc<Watched>>>,
    http: reqwest::Client,
    /// For a second try at another replica: no connection kept between requests.
    fresh: reqwest::Client,
    /// Where added and removed runtimes are written.
    config_file: Option<PathBuf>,
    tokens: Tokens,
    gateways: Vec<Gateway>,
}

/// Which bearer token goes to which runtime. A runtime added from the UI has a URL whoever
/// reached the UI chose, so it names only variables allowed at start, and gets the default
/// token only when the operator said so.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    /// The token of runtimes that name no variable of their own.
    pub default: Option<String>,
    /// The variables a runtime added from the UI may name.
    pub allowed_envs: Vec<String>,
    /// Whether runtimes added from the UI get the default token.
    pub default_to_added: bool,
    /// The Serve API token the create forms apply with; it goes where the default token goes.
    pub serve: Option<String>,
}

impl Tokens {
    /// The token for `config`, or why it may not have the one it names.
    fn of(&self, config: &RuntimeConfig) -> Result<Option<String>, Error> {
        match (&config.token_env, config.from_ui) {
            (Some(var), true) if !self.allowed_envs.contains(var) => Err(Error::Runtime(format!(
                "token variable {var:?} is not one the Control Center was started to allow for added runtimes ({}); ask its operator (--allow-token-env)",
                match self.allowed_envs.is_empty() {
                    true => "none".to_string(),
                    false => self.allowed_envs.join(", "),
                }
            ))),
            (Some(var), _) => Ok(std::env::var(var).ok().filter(|t| !t.trim().is_empty())),
            (None, true) if !self.default_to_added => Ok(None),
            (None, _) => Ok(self.default.clone()),
        }
    }

    /// The Serve API token for `config`: only where the default token may go.
    fn serve_of(&self, config: &RuntimeConfig) -> Option<String> {
        (!config.from_ui || self.default_to_added)
            .then(|| self.serve.clone())
            .flatten()
    }
}

impl Runtimes {
    pub fn new(configs: Vec<RuntimeConfig>, config_file: Option<PathBuf>, tokens: Tokens) -> Result<Self, Error> {
        let build = |pool: bool| {
            let builder = reqwest::Client::builder().timeout(REQUEST_TIMEOUT);
            let builder = if pool {
                builder
            } else {
                builder.pool_max_idle_per_host(0)
            };
            builder
                .build()
                .map_err(|e| Error::Runtime(format!("cannot build an HTTP client: {e}")))
        };
        let runtimes = Self {
            list: RwLock::default(),
            http: build(true)?,
            fresh: build(false)?,
            config_file,
            tokens,
            gateways: Vec::new(),
        };
        for config in configs {
            runtimes.insert(config.checked()?)?;
        }
        Ok(runtimes)
    }

    /// Also shows the gateways at these URLs (`http://gateway:8080`) with the runtimes of
    /// their Katalog.
    pub fn with_gateways(mut self, urls: Vec<String>) -> Self {
        self.gateways = urls
            .into_iter()
            .map(|url| Gateway {
                url: url.trim_end_matches('/').to_string(),
                seen: RwLock::new(Err("not asked yet".into())),
            })
            .collect();
        self
    }

    /// The gateway statistics to show with `runtime`: the ones of the gateway it serves, else
    /// those of a gateway on its own that serves the same Katalog; and where they came from.
    pub fn gateway_of(&self, runtime: &Watched) -> Option<(String, Value)> {
        let seen = runtime.seen();
        if let Some(own) = seen.gateway {
            return Some(("served by this runtime".into(), own));
        }
        let katalog = seen.katalog.as_ref()?["name"].clone();
        self.gateways.iter().find_map(|gateway| {
            let stats = gateway.seen.read().clone().ok()?;
            (stats["katalog"] == katalog).then(|| (format!("the gateway at {}", gateway.url), stats))
        })
    }

    async fn poll_gateway(&self, gateway: &Gateway) {
        let answer = match answer(&gateway.url, self.http.get(format!("{}/katalog", gateway.url))).await {
            Ok((200, stats)) if stats["source"] == "gateway" => Ok(stats),
            Ok((status, _)) => Err(format!("{} answered {status}", gateway.url)),
            Err(error) => Err(error.to_string()),
        };
        if let Err(error) = &answer {
            tracing::debug!(gateway = %gateway.url, %error, "gateway not read");
        }
        *gateway.seen.write() = answer;
    }

    pub fn all(&self) -> Vec<Arc<Watched>> {
        self.list.read().clone()
    }

    pub fn get(&self, name: &str) -> Option<Arc<Watched>> {
        self.all().into_iter().find(|r| r.config.name == name)
    }

    /// The name of the runtime at `address`: its URL, or the URL's host and port.
    pub fn named_at(&self, address: &str) -> Option<String> {
        let address = address.trim_end_matches('/');
        self.all()
            .into_iter()
            .find(|r| {
                let url = r.config.url.as_str();
                let host = url.split_once("://").map_or(url, |(_, rest)| rest);
                url == address || host == address
            })
            .map(|r| r.config.name.clone())
    }

    fn insert(&self, config: RuntimeConfig) -> Result<Arc<Watched>, Error> {
        let mut list = self.list.write();
        if let Some(taken) = list
            .iter()
            .find(|r| r.config.name == config.name || r.config.url == config.url)
        {
            return Err(Error::Runtime(format!(
                "a runtime named {:?} at {} is watched already",
                taken.config.name, taken.config.url
            )));
        }
        let token = self.tokens.of(&config)?;
        let serve_token = self.tokens.serve_of(&config);
        let watched = Arc::new(Watched {
            config,
            token,
            serve_token,
            seen: RwLock::default(),
            history: Mutex::default(),
        });
        list.push(watched.clone());
        Ok(watched)
    }

    /// Watches one more runtime, added from the UI (and writes the config file); it is
    /// polled at once.
    pub async fn add(&self, config: RuntimeConfig) -> Result<(), Error> {
        let watched = self.insert(RuntimeConfig {
            from_ui: true,
            ..config
        })?;
        self.save()?;
        self.poll_one(&watched).await;
        Ok(())
    }

    /// Stops watching `name` (and writes the config file).
    pub fn remove(&self, name: &str) -> Result<(), Error> {
        let mut list = self.list.write();
        let before = list.len();
        list.retain(|r| r.config.name != name);
        if list.len() == before {
            return Err(Error::Runtime(format!("no runtime named {name:?} is watched")));
        }
        drop(list);
        self.save()
    }

    /// Watches the runtimes discovery found now (labelled Services in the namespaces the
    /// operator named, so they get the default token) and stops watching those it no longer
    /// finds; configured runtimes stay as they are, and one at a URL already watched is not
    /// watched twice.
    pub async fn sync_discovered(&self, found: Vec<RuntimeConfig>) {
        self.list
            .write()
            .retain(|r| !r.config.discovered || found.iter().any(|f| f.url == r.config.url));
        for config in found {
            if self.all().iter().any(|r| r.config.url == config.url) {
                continue;
            }
            let config = RuntimeConfig {
                discovered: true,
                from_ui: false,
                token_env: None,
                ..config
            };
            match config.checked().and_then(|config| self.insert(config)) {
                Ok(watched) => {
                    tracing::info!(runtime = %watched.config.name, url = %watched.config.url, "runtime discovered");
                    self.poll_one(&watched).await;
                }
                Err(error) => tracing::warn!(%error, "a discovered runtime is not watched"),
            }
        }
    }

    fn save(&self) -> Result<(), Error> {
        let Some(path) = &self.config_file else { return Ok(()) };
        let configured = self.all().into_iter().filter(|r| !r.config.discovered);
        let runtimes = configured.map(|r| r.config.clone()).collect();
        ConfigFile { runtimes }.write(path)
    }

    /// `path` of a runtime's Live API, as JSON.
    pub async fn fetch(&self, runtime: &Watched, path: &str) -> Result<Value, FetchError> {
        self.fetch_with(&self.http, runtime, path).await
    }

    async fn fetch_with(&self, client: &reqwest::Client, runtime: &Watched, path: &str) -> Result<Value, FetchError> {
        let mut request = client.get(format!("{}{path}", runtime.config.url));
        if let Some(token) = &runtime.token {
            request = request.bearer_auth(token);
        }
        let (status, body) = answer(&runtime.config.name, request).await?;
        match (200..300).contains(&status) || status == 503 {
            true => Ok(body),
            false => Err(FetchError::Status(
                runtime.config.name.clone(),
                status,
                body["error"].as_str().unwrap_or("no reason given").to_string(),
            )),
        }
    }

    /// A call of the runtime's Serve API (`/api/v1...`) with the Serve API token: its status
    /// and answer, whatever the status (a refusal says why in its body).
    pub async fn serve(
        &self,
        runtime: &Watched,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), FetchError> {
        let Some(token) = &runtime.serve_token else {
            return Err(FetchError::Status(
                runtime.config.name.clone(),
                401,
                "the Control Center has no Serve API token for it (--serve-token-env)".into(),
            ));
        };
        let url = format!("{}/api/v1{path}", runtime.config.url);
        let mut request = self.http.request(method, url).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(body);
        }
        answer(&runtime.config.name, request).await
    }

    /// `/katalog`, from the konductor when a try reaches it.
    async fn katalog(&self, runtime: &Watched) -> Result<(Value, bool), FetchError> {
        let mut answer = self.fetch(runtime, "/katalog").await?;
        // Something else on the address (another service, a gateway's own door) is said to
        // be so rather than shown as a runtime with no Katalog.
        if answer["name"].as_str().is_none() {
            return Err(FetchError::Status(
                runtime.config.name.clone(),
                200,
                "this is not an Orkestra runtime's Live API (its /katalog names no Katalog)".into(),
            ));
        }
        for _ in 0..KONDUCTOR_TRIES {
            if answer["isKonductor"] != false {
                return Ok((answer, true));
            }
            answer = self.fetch_with(&self.fresh, runtime, "/katalog").await?;
        }
        let konductor = answer["isKonductor"] != false;
        Ok((answer, konductor))
    }

    /// Asks one runtime for its state now.
    pub async fn poll_one(&self, runtime: &Watched) {
        let now = jiff::Timestamp::now();
        let katalog = self.katalog(runtime).await;
        let (components, gateway) = match &katalog {
            Ok(_) => (
                self.fetch(runtime, "/components").await.ok(),
                // 404: it serves no gateway.
                self.fetch(runtime, "/gateway").await.ok(),
            ),
            Err(_) => (None, None),
        };
        let at = now.as_millisecond() as f64 / 1e3;
        let mut seen = runtime.seen.write();
        seen.polled = Some(now);
        match katalog {
            Ok((katalog, konductor)) => {
                runtime.history.lock().push(Point::of(at, Some(&katalog)));
                seen.katalog = Some(katalog);
                seen.components = components;
                seen.gateway = gateway;
                seen.up = true;
                seen.last_error = None;
                seen.last_seen = Some(now);
                seen.konductor = Some(konductor);
            }
            Err(error) => {
                runtime.history.lock().push(Point::of(at, None));
                if seen.up {
                    tracing::warn!(runtime = %runtime.config.name, %error, "runtime unreachable; asking again at the next poll");
                }
                seen.up = false;
                seen.last_error = Some(error.to_string());
            }
        }
    }

    /// Polls every runtime every `interval`, until dropped.
    pub async fn poll(self: Arc<Self>, interval: Duration) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let all = self.all();
            // Together: one slow runtime does not hold the others' polls.
            let runtimes = futures::future::join_all(all.iter().map(|runtime| self.poll_one(runtime)));
            let gateways = futures::future::join_all(self.gateways.iter().map(|g| self.poll_gateway(g)));
            futures::future::join(runtimes, gateways).await;
        }
    }
}

/// A request's status and JSON answer, read up to [`ANSWER_LIMIT`].
async fn answer(name: &str, request: reqwest::RequestBuilder) -> Result<(u16, Value), FetchError> {
    let unreachable = |why: String| FetchError::Unreachable(name.to_string(), why);
    let response = request.send().await.map_err(|e| unreachable(describe(&e)))?;
    let status = response.status().as_u16();
    let bytes = orkestra_net::read::bounded(response, ANSWER_LIMIT)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let body = serde_json::from_slice(&bytes).map_err(|e| unreachable(format!("its answer is not JSON: {e}")))?;
    Ok((status, body))
}

/// The cause at the bottom of a request's failure (connection refused, a DNS error), which
/// is what an operator looking at the dashboard needs.
fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return format!("no answer within {}s", REQUEST_TIMEOUT.as_secs());
    }
    let mut cause: &dyn std::error::Error = error;
    while let Some(deeper) = cause.source() {
        cause = deeper;
    }
    cause.to_string()
}
