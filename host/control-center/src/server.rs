//! The routes of the Control Center, under `/controlcenter`: the pages, the runtimes
//! manager's forms, sign-in and sign-out, the page script, and `/controlcenter/api/runtimes`
//! (what every runtime last said, as JSON).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, Form, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use maud::Markup;
use serde::Deserialize;
use serde_json::json;

use crate::config::RuntimeConfig;
use crate::csrf::Token;
use crate::login::{COOKIE, Login, session_of};
use crate::pages::layout::{BASE, Shape, crumb, here, page};
use crate::pages::{components, crd, create, dashboard};
use crate::runtimes::{Runtimes, Tokens};

/// How the Control Center runs.
pub struct Options {
    pub addr: SocketAddr,
    pub runtimes: Vec<RuntimeConfig>,
    /// Where added and removed runtimes are kept.
    pub config_file: Option<PathBuf>,
    /// Which bearer token goes to which runtime.
    pub tokens: Tokens,
    pub login: Login,
    /// Host names it answers to besides loopback ones, where it has no login (a browser
    /// could otherwise reach it under an attacker's name); with a login, when given, only
    /// these and loopback names.
    pub hosts: Vec<String>,
    /// How often every runtime is asked.
    pub poll: Duration,
    /// The runtimes discovery finds, each time it looks (`None`: no discovery).
    pub discovered: Option<tokio::sync::watch::Receiver<Vec<RuntimeConfig>>>,
    /// Gateways on their own (`http://gateway:8080`), shown with their Katalog's runtimes.
    pub gateways: Vec<String>,
}

/// Options errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] crate::config::Error),
    #[error("the Control Center would serve {0} without a password: --no-login is for a loopback address only")]
    OpenBeyondLoopback(SocketAddr),
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
}

#[derive(Clone)]
struct Shared {
    runtimes: Arc<Runtimes>,
    login: Arc<Login>,
    /// Held through the pause after a wrong password: failures are answered one at a time.
    refusals: Arc<tokio::sync::Mutex<()>>,
}

/// How long a wrong password holds the line.
const REFUSAL_PAUSE: Duration = Duration::from_secs(1);

/// Serves the Control Center until `shutdown` resolves.
pub async fn serve(options: Options, shutdown: impl std::future::Future<Output = ()>) -> Result<(), Error> {
    bind(options).await?.serve(shutdown).await
}

/// The Control Center bound to its address, its poller running, not serving yet.
pub struct Bound {
    listener: tokio::net::TcpListener,
    router: Router,
    door: orkestra_net::Door,
    poller: tokio::task::JoinHandle<()>,
}

impl Bound {
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves through the doors' one server setup until `shutdown` resolves.
    pub async fn serve(self, shutdown: impl std::future::Future<Output = ()>) -> Result<(), Error> {
        let addr = self
            .local_addr()
            .map_err(|e| Error::Listen(SocketAddr::from(([0, 0, 0, 0], 0)), e))?;
        let result = orkestra_net::serve(self.listener, self.router, self.door, shutdown).await;
        self.poller.abort();
        result.map_err(|e| Error::Listen(addr, e))
    }
}

/// Binds and builds everything; the poller runs in the background.
pub async fn bind(options: Options) -> Result<Bound, Error> {
    if !options.login.required() && !options.addr.ip().is_loopback() {
        return Err(Error::OpenBeyondLoopback(options.addr));
    }
    let mut configs = options.runtimes;
    if let Some(path) = &options.config_file {
        for runtime in crate::config::ConfigFile::read(path)?.runtimes {
            if !configs.iter().any(|c| c.url == runtime.url) {
                configs.push(runtime);
            }
        }
    }
    let runtimes =
        Arc::new(Runtimes::new(configs, options.config_file, options.tokens)?.with_gateways(options.gateways));
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| Error::Listen(options.addr, e))?;
    let poller = tokio::spawn(runtimes.clone().poll(options.poll));
    if let Some(mut found) = options.discovered {
        let runtimes = runtimes.clone();
        // Ends with the discovery that sends (the process's).
        tokio::spawn(async move {
            loop {
                let now = found.borrow_and_update().clone();
                runtimes.sync_discovered(now).await;
                if found.changed().await.is_err() {
                    break;
                }
            }
        });
    }
    // Without a login, a browser must reach it by a name it was given: no rebinding.
    let hosts = match (options.login.required(), options.hosts.is_empty()) {
        (true, true) => None,
        _ => Some(orkestra_net::Hosts::loopback().with(options.hosts)),
    };
    let shared = Shared {
        runtimes,
        login: Arc::new(options.login),
        refusals: Arc::default(),
    };
    Ok(Bound {
        listener,
        router: router(shared),
        door: orkestra_net::Door::new("Control Center").hosts(hosts),
        poller,
    })
}

fn router(shared: Shared) -> Router {
    let at = |path: &str| format!("{BASE}{path}");
    let pages = Router::new()
        .route(&at("/"), get(dashboard_page))
        .route(&at("/runtimes"), get(manager_page).post(add_runtime))
        .route(&at("/runtimes/{name}/remove"), post(remove_runtime))
        .route(&at("/r/{rt}"), get(katalog_page))
        .route(&at("/r/{rt}/components"), get(components_page))
        .route(&at("/r/{rt}/create"), get(create_flow::catalog_page))
        .route(
            &at("/r/{rt}/create/{target}"),
            get(create_flow::form_page).post(create_flow::submit),
        )
        .route(&at("/r/{rt}/crd/{crd}"), get(crd_page))
        .route(&at("/r/{rt}/crd/{crd}/cr"), get(cr_list_page))
        .route(&at("/r/{rt}/crd/{crd}/cr/{ns}/{name}"), get(cr_page))
        .route(&at("/api/runtimes"), get(api_runtimes))
        .route(&at("/logout"), post(sign_out))
        // Inside the session check: who is not signed in learns nothing of what is watched.
        .layer(axum::middleware::from_fn_with_state(
            shared.runtimes.clone(),
            crate::addressed::redirect,
        ))
        .layer(axum::middleware::from_fn_with_state(shared.clone(), require_session));
    let home = || async { Redirect::temporary(&format!("{BASE}/")) };
    Router::new()
        .merge(pages)
        .route(&at("/login"), get(sign_in_page).post(sign_in))
        .route(&at("/app.js"), get(script))
        .route(BASE, get(home))
        .route("/", get(home))
        .layer(axum::middleware::from_fn(crate::csrf::protect))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(shared)
}

/// No framing, no sniffing, scripts only from here.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
        ),
        (header::REFERRER_POLICY, "same-origin"),
    ] {
        headers.insert(name, header::HeaderValue::from_static(value));
    }
    response
}

async fn require_session(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    if shared.login.admits(request.headers()) {
        return next.run(request).await;
    }
    if request.uri().query().is_some_and(|q| q.contains("fragment=1")) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    Redirect::to(&format!("{BASE}/login")).into_response()
}

#[derive(Debug, Default, Deserialize)]
struct PageQuery {
    #[serde(default)]
    fragment: Option<String>,
}

impl PageQuery {
    fn shape(&self) -> Shape {
        match self.fragment.as_deref() {
            Some("1") => Shape::Fragment,
            _ => Shape::Page,
        }
    }
}

fn answer(
    shared: &Shared,
    token: &Token,
    title: &str,
    crumbs: &[crate::pages::layout::Crumb],
    content: Markup,
    shape: Shape,
) -> Response {
    let signed_in = shared.login.required().then_some(token);
    Html(page(title, crumbs, content, shape, true, signed_in).into_string()).into_response()
}

fn unknown_runtime(shared: &Shared, token: &Token, name: &str) -> Response {
    let content = crate::pages::layout::notice(&format!("No runtime named {name:?} is watched."));
    let html = page(
        "Not found",
        &[crumb("Dashboard", format!("{BASE}/")), here(name)],
        content,
        Shape::Page,
        false,
        shared.login.required().then_some(token),
    );
    (StatusCode::NOT_FOUND, Html(html.into_string())).into_response()
}

async fn dashboard_page(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Query(query): Query<PageQuery>,
) -> Response {
    let content = dashboard::dashboard(&shared.runtimes);
    answer(
        &shared,
        &token,
        "Dashboard",
        &[here("Dashboard")],
        content,
        query.shape(),
    )
}

async fn katalog_page(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Path(rt): Path<String>,
    Query(query): Query<PageQuery>,
) -> Response {
    let Some(runtime) = shared.runtimes.get(&rt) else {
        return unknown_runtime(&shared, &token, &rt);
    };
    let crumbs = [crumb("Dashboard", format!("{BASE}/")), here(&rt)];
    answer(
        &shared,
        &token,
        &rt,
        &crumbs,
        dashboard::katalog_panel(&runtime, shared.runtimes.gateway_of(&runtime)),
        query.shape(),
    )
}

async fn components_page(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Path(rt): Path<String>,
    Query(query): Query<PageQuery>,
) -> Response {
    let Some(runtime) = shared.runtimes.get(&rt) else {
        return unknown_runtime(&shared, &token, &rt);
    };
    let crumbs = [
        crumb("Dashboard", format!("{BASE}/")),
        crumb(&rt, format!("{BASE}/r/{rt}")),
        here("Components"),
    ];
    answer(
        &shared,
        &token,
        "Components",
        &crumbs,
        components::components(&runtime),
        query.shape(),
    )
}

async fn crd_page(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Path((rt, name)): Path<(String, String)>,
    Query(query): Query<PageQuery>,
) -> Response {
    let Some(runtime) = shared.runtimes.get(&rt) else {
        return unknown_runtime(&shared, &token, &rt);
    };
    let content = crd::crd(&shared.runtimes, &runtime, &name).await;
    let crumbs = [
        crumb("Dashboard", format!("{BASE}/")),
        crumb(&rt, format!("{BASE}/r/{rt}")),
        here(&name),
    ];
    answer(&shared, &token, &name, &crumbs, content, query.shape())
}

async fn cr_list_page(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Path((rt, name)): Path<(String, String)>,
    Query(query): Query<PageQuery>,
) -> Response {
    let Some(runtime) = shared.runtimes.get(&rt) else {
        return unknown_runtime(&shared, &token, &rt);
    };
    let content = crd::cr_list(&shared.runtimes, &runtime, &name).await;
    let crumbs = [
        crumb("Dashboard", format!("{BASE}/")),
        crumb(&rt, format!("{BASE}/r/{rt}")),
        crumb(&name, format!("{BASE}/r/{rt}/crd/{name}")),
        here("custom resources"),
    ];
    answer(&shared, &token, &name, &crumbs, content, query.shape())
}

async fn cr_page(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Path((rt, name, ns, cr)): Path<(String, String, String, String)>,
    Query(query): Query<PageQuery>,
) -> Response {
    let Some(runtime) = shared.runtimes.get(&rt) else {
        return unknown_runtime(&shared, &token, &rt);
    };
    let content = crd::cr(&shared.runtimes, &runtime, &name, &ns, &cr).await;
    let crumbs = [
        crumb("Dashboard", format!("{BASE}/")),
        crumb(&rt, format!("{BASE}/r/{rt}")),
        crumb(&name, format!("{BASE}/r/{rt}/crd/{name}")),
        crumb("custom resources", format!("{BASE}/r/{rt}/crd/{name}/cr")),
        here(&cr),
    ];
    answer(&shared, &token, &cr, &crumbs, content, query.shape())
}

async fn manager_page(State(shared): State<Shared>, Extension(token): Extension<Token>) -> Response {
    manager(&shared, &token, None, StatusCode::OK)
}

fn manager(shared: &Shared, token: &Token, error: Option<&str>, status: StatusCode) -> Response {
    let content = components::manager(&shared.runtimes, error, token);
    let html = page(
        "Runtimes",
        &[crumb("Dashboard", format!("{BASE}/")), here("Runtimes")],
        content,
        Shape::Page,
        false,
        shared.login.required().then_some(token),
    );
    (status, Html(html.into_string())).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AddRuntime {
    url: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    token_env: String,
}

async fn add_runtime(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Form(form): Form<AddRuntime>,
) -> Response {
    let token_env = Some(form.token_env.trim().to_string()).filter(|v| !v.is_empty());
    let added = match RuntimeConfig::new(&form.url, Some(&form.name), token_env) {
        Ok(config) => shared.runtimes.add(config).await,
        Err(error) => Err(error),
    };
    match added {
        Ok(()) => Redirect::to(&format!("{BASE}/runtimes")).into_response(),
        Err(error) => manager(
            &shared,
            &token,
            Some(&error.to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    }
}

async fn remove_runtime(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Path(name): Path<String>,
) -> Response {
    match shared.runtimes.remove(&name) {
        Ok(()) => Redirect::to(&format!("{BASE}/runtimes")).into_response(),
        Err(error) => manager(&shared, &token, Some(&error.to_string()), StatusCode::NOT_FOUND),
    }
}

async fn api_runtimes(State(shared): State<Shared>) -> Json<serde_json::Value> {
    let runtimes: Vec<serde_json::Value> = shared
        .runtimes
        .all()
        .iter()
        .map(|r| {
            let seen = r.seen();
            json!({
                "name": r.config.name, "url": r.config.url, "up": seen.up, "lastError": seen.last_error,
                "konductor": seen.konductor, "katalog": seen.katalog, "historyPoints": r.history().len(),
            })
        })
        .collect();
    Json(json!({ "runtimes": runtimes }))
}

async fn sign_in_page(State(shared): State<Shared>, Extension(token): Extension<Token>) -> Response {
    if !shared.login.required() {
        return Redirect::to(&format!("{BASE}/")).into_response();
    }
    let html = page(
        "Sign in",
        &[here("Sign in")],
        components::sign_in(false, &token),
        Shape::Page,
        false,
        None,
    );
    Html(html.into_string()).into_response()
}

#[derive(Debug, Deserialize)]
struct Credentials {
    #[serde(default)]
    user: String,
    #[serde(default)]
    password: String,
}

async fn sign_in(
    State(shared): State<Shared>,
    Extension(token): Extension<Token>,
    Form(form): Form<Credentials>,
) -> Response {
    match shared.login.sign_in(&form.user, &form.password) {
        Some(token) => {
            let cookie = format!("{COOKIE}={token}; Path={BASE}; HttpOnly; SameSite=Strict; Max-Age=43200");
            ([(header::SET_COOKIE, cookie)], Redirect::to(&format!("{BASE}/"))).into_response()
        }
        None => {
            // Guesses in parallel wait in line, so a password is tried once a second at most.
            let _turn = shared.refusals.lock().await;
            tokio::time::sleep(REFUSAL_PAUSE).await;
            let html = page(
                "Sign in",
                &[here("Sign in")],
                components::sign_in(true, &token),
                Shape::Page,
                false,
                None,
            );
            (StatusCode::UNAUTHORIZED, Html(html.into_string())).into_response()
        }
    }
}

async fn sign_out(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    if let Some(token) = session_of(&headers) {
        shared.login.sign_out(token);
    }
    let expired = format!("{COOKIE}=; Path={BASE}; HttpOnly; SameSite=Strict; Max-Age=0");
    ([(header::SET_COOKIE, expired)], Redirect::to(&format!("{BASE}/login"))).into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        crate::pages::layout::SCRIPT,
    )
        .into_response()
}

mod create_flow;

#[cfg(test)]
mod tests;
