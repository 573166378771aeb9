//! Webhook intake (`gateway.webhooks`): deliveries from GitHub and GitLab pushes, Slack slash
//! commands and signed JSON from anyone, each proved genuine with its entry's secret
//! ([`signature`]), turned into target-mode intents and applied through the Serve API's
//! chain as the entry (its name is the token `serve.tokens` checks and the `serve-source`
//! stamped). Pushes and slash commands are answered at once and worked in a bounded pool
//! ([`workers`]); a push's files are read through the provider's API ([`fetch`]), from the
//! repository the entry names (a push of another is refused), a slash command's result goes
//! to its `response_url` ([`slack`]). Each entry counts what it was sent and did
//! ([`Stats`]).
//!
//! What can be refused before the body is read is: the signature headers' presence and
//! form, a signed timestamp outside its window, a body larger than the limit, an entry with
//! no room in the pool. A delivery already taken is refused when it comes again within its
//! window ([`delivered`]).

mod delivered;
mod fetch;
mod push;
mod signature;
mod slack;
mod workers;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use orkestra_katalog::gateway::{Repository, WatchGlobs};
use orkestra_katalog::model::{GenericEntry, GitEntry, Provider, SlackEntry, Webhooks};

pub use signature::sign_generic;

use crate::api::{BODY_LIMIT, Shared, apply_as};
use crate::secrets::Recent;
use delivered::Delivered;
use workers::Workers;

/// How long a webhook secret read from its Secret is used before it is read again.
const SECRET_FRESH_FOR: Duration = Duration::from_secs(30);
/// How long a push's delivery id is remembered (its proof has no timestamp).
const PUSH_REMEMBERED: Duration = Duration::from_secs(3600);

/// Webhook intake, running: its routes (each entry's path) and its counts.
pub struct Intake {
    pub router: Router,
    pub stats: Arc<Stats>,
}

/// What every entry's counts say.
pub struct Stats(Vec<Arc<Entry>>);

impl Stats {
    /// One object per entry: its provider, path and counts, and its last outcome.
    pub fn json(&self) -> Value {
        let entries: Vec<Value> = self
            .0
            .iter()
            .map(|e| {
                let c = &e.counts;
                let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
                json!({
                    "name": e.name, "provider": e.provider.key(), "path": e.path,
                    "received": n(&c.received), "refused": n(&c.refused), "ignored": n(&c.ignored),
                    "busy": n(&c.busy), "applied": n(&c.applied), "failed": n(&c.failed),
                    "last": c.last.lock().clone(),
                })
            })
            .collect();
        Value::Array(entries)
    }
}

/// One enabled entry.
pub struct Entry {
    name: String,
    provider: Provider,
    path: String,
    kind: Kind,
    counts: Counts,
}

enum Kind {
    Git(Box<Git>),
    Slack(SlackEntry),
    Generic(GenericEntry),
}

/// A GitHub or GitLab entry, its globs compiled and its repository read.
struct Git {
    entry: GitEntry,
    watch: WatchGlobs,
    repository: Repository,
}

#[derive(Default)]
struct Counts {
    received: AtomicU64,
    /// A signature or token that did not hold (or a response_url outside the entry's hosts).
    refused: AtomicU64,
    /// Genuine, but nothing to apply (another branch, no watched file, another event).
    ignored: AtomicU64,
    /// Turned away: the pool had no room.
    busy: AtomicU64,
    /// Intents applied, and intents that failed (fetch, parse, or the apply's refusal).
    applied: AtomicU64,
    failed: AtomicU64,
    last: Mutex<Value>,
}

impl Entry {
    fn count(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// An intent's outcome counted, logged and kept as the entry's last.
    fn outcome(&self, what: &str, result: &Result<String, String>) {
        match result {
            Ok(done) => {
                self.count(&self.counts.applied);
                tracing::info!(webhook = %self.name, %what, %done, "webhook intake applied an intent");
            }
            Err(why) => {
                self.count(&self.counts.failed);
                tracing::warn!(webhook = %self.name, %what, %why, "webhook intake could not apply an intent");
            }
        }
        let (ok, text) = match result {
            Ok(text) => (true, text),
            Err(text) => (false, text),
        };
        *self.counts.last.lock() = json!({
            "at": jiff::Timestamp::now().to_string(), "what": what, "ok": ok, "outcome": text,
        });
    }
}

/// What the handlers share.
struct Context {
    shared: Shared,
    secrets: Recent,
    http: reqwest::Client,
    workers: Workers,
    delivered: Delivered,
}

/// The routes of every enabled entry of `webhooks`, applying through `shared`; Secrets are
/// read in `namespace` unless an entry names another.
pub fn start(shared: Shared, webhooks: &Webhooks, namespace: &str) -> Intake {
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(15))
        // A redirect could take a request to an address the Katalog never named.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("orkestra-gateway/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default();
    let context = Arc::new(Context {
        secrets: Recent::new(shared.client.clone(), namespace, SECRET_FRESH_FOR),
        shared,
        http,
        workers: Workers::default(),
        delivered: Delivered::default(),
    });
    // The Katalog's check compiled these globs and read the repositories already.
    fn git(e: &GitEntry, provider: Provider) -> Option<(orkestra_katalog::model::Common<'_>, Kind)> {
        let watch = WatchGlobs::new(&e.watch).ok()?;
        let repository = e.repository(provider).ok()?;
        let git = Git {
            entry: e.clone(),
            watch,
            repository,
        };
        Some((e.common(provider), Kind::Git(Box::new(git))))
    }
    let github = webhooks.github.iter().filter_map(|e| git(e, Provider::GitHub));
    let gitlab = webhooks.gitlab.iter().filter_map(|e| git(e, Provider::GitLab));
    let declared = github
        .chain(gitlab)
        .chain(webhooks.slack.iter().map(|e| (e.common(), Kind::Slack(e.clone()))))
        .chain(webhooks.generic.iter().map(|e| (e.common(), Kind::Generic(e.clone()))))
        .filter(|(common, _)| common.enabled);
    let mut entries = Vec::new();
    let mut router = Router::new();
    for (common, kind) in declared {
        let (path, provider) = (common.path(), common.provider);
        let entry = Arc::new(Entry {
            name: common.name.to_string(),
            provider,
            path: path.clone(),
            kind,
            counts: Counts::default(),
        });
        tracing::info!(webhook = %entry.name, provider = provider.key(), %path, "webhook intake");
        let (context, handler_entry) = (context.clone(), entry.clone());
        router = router.route(
            &path,
            post(move |request: axum::extract::Request| deliver(context.clone(), handler_entry.clone(), request)),
        );
        entries.push(entry);
    }
    Intake {
        router: router.layer(DefaultBodyLimit::max(BODY_LIMIT)),
        stats: Arc::new(Stats(entries)),
    }
}

async fn deliver(context: Arc<Context>, entry: Arc<Entry>, request: axum::extract::Request) -> Response {
    entry.count(&entry.counts.received);
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = jiff::Timestamp::now().as_second();
    // Before the body: whatever refuses it without reading it.
    if let Err(refused) = signature::before_body(entry.provider, header, now) {
        entry.count(&entry.counts.refused);
        tracing::debug!(webhook = %entry.name, %refused, "webhook delivery refused before its body");
        return answer(StatusCode::UNAUTHORIZED, refused.to_string());
    }
    let length = header(header::CONTENT_LENGTH.as_str()).and_then(|n| n.parse::<u64>().ok());
    if length.is_some_and(|n| n > BODY_LIMIT as u64) {
        return answer(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a delivery is at most {BODY_LIMIT} bytes"),
        );
    }
    if let Err(busy) = context.workers.has_room(&entry.name) {
        entry.count(&entry.counts.busy);
        return busy_answer(&entry, busy);
    }
    let body = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(body) => body,
        Err(error) => return answer(StatusCode::BAD_REQUEST, format!("the body could not be read: {error}")),
    };
    let secret_ref = match &entry.kind {
        Kind::Git(git) => git.entry.secret_ref.as_ref(),
        Kind::Slack(slack) => slack.signing_secret_ref.as_ref(),
        Kind::Generic(generic) => generic.secret_ref.as_ref(),
    };
    let secret = match secret_ref {
        Some(secret_ref) => context.secrets.get(secret_ref).await,
        None => Err("no secret is declared".to_string()),
    };
    let secret = match secret {
        Ok(secret) if !secret.is_empty() => secret,
        Ok(_) | Err(_) => {
            let why = secret.err().unwrap_or_else(|| "the secret is empty".into());
            tracing::warn!(webhook = %entry.name, %why, "webhook intake cannot check deliveries");
            return answer(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "webhook \"{}\" cannot check deliveries: its secret cannot be read",
                    entry.name
                ),
            );
        }
    };
    let verified = match &entry.kind {
        Kind::Git(..) if entry.provider == Provider::GitHub => {
            signature::github(&secret, header("x-hub-signature-256"), &body)
        }
        Kind::Git(..) => signature::gitlab(&secret, header("x-gitlab-token")),
        Kind::Slack(_) => signature::slack(
            &secret,
            header("x-slack-request-timestamp"),
            header("x-slack-signature"),
            &body,
            now,
        ),
        Kind::Generic(_) => signature::generic(
            &secret,
            header("x-orkestra-timestamp"),
            header("x-orkestra-signature"),
            &body,
            now,
        ),
    };
    if let Err(refused) = verified {
        entry.count(&entry.counts.refused);
        tracing::debug!(webhook = %entry.name, %refused, "webhook delivery refused");
        return answer(StatusCode::UNAUTHORIZED, refused.to_string());
    }
    // Genuine; taken once per window.
    let (id, window) = signature::delivery_id(entry.provider, header, &body);
    let window = window.unwrap_or(PUSH_REMEMBERED);
    let Some(claim) = context.delivered.claim(&entry.name, id, window) else {
        entry.count(&entry.counts.refused);
        tracing::warn!(webhook = %entry.name, "a delivery already taken came again; refused");
        return answer(
            StatusCode::CONFLICT,
            "this delivery was taken already: a delivery is applied once",
        );
    };
    let answered = match &entry.kind {
        Kind::Git(git) => {
            let event = header("x-github-event")
                .or(header("x-gitlab-event"))
                .unwrap_or_default();
            pushed(&context, &entry, git, event, &body)
        }
        Kind::Slack(slack) => command(&context, &entry, slack, &body),
        Kind::Generic(_) => signed_intent(&context, &entry, &body).await,
    };
    // Turned away (no room, a malformed body): it may come again.
    if matches!(
        answered.status(),
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::BAD_REQUEST | StatusCode::GATEWAY_TIMEOUT
    ) {
        claim.release();
    }
    answered
}

/// A 503 for an entry with no room (for Slack, an ephemeral answer).
fn busy_answer(entry: &Entry, busy: workers::Busy) -> Response {
    match entry.kind {
        Kind::Slack(_) => (
            StatusCode::OK,
            axum::Json(json!({"response_type": "ephemeral", "text": busy.to_string()})),
        )
            .into_response(),
        _ => answer(StatusCode::SERVICE_UNAVAILABLE, busy.to_string()),
    }
}

/// `{accepted: false, message}` with a status.
fn answer(status: StatusCode, message: impl Into<String>) -> Response {
    let mut response = (
        status,
        axum::Json(json!({"accepted": false, "message": message.into()})),
    )
        .into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("10"));
    }
    response
}

/// Genuine, but nothing to do: 200, so the provider does not report a failed delivery.
fn ignored(entry: &Entry, why: String) -> Response {
    entry.count(&entry.counts.ignored);
    tracing::debug!(webhook = %entry.name, %why, "webhook delivery ignored");
    (
        StatusCode::OK,
        axum::Json(json!({"accepted": false, "ignored": true, "message": why})),
    )
        .into_response()
}

/// A push: the watched files it touched on the branch, read and applied in the pool.
fn pushed(context: &Arc<Context>, entry: &Arc<Entry>, git: &Git, event: &str, body: &[u8]) -> Response {
    let Git {
        entry: git,
        watch,
        repository,
    } = git;
    let github = entry.provider == Provider::GitHub;
    match (github, event) {
        (true, "ping") => return (StatusCode::OK, axum::Json(json!({"message": "pong"}))).into_response(),
        (true, "push") | (false, "Push Hook") => {}
        (_, other) => return ignored(entry, format!("a {other:?} event, not a push")),
    }
    let push: push::Push = match serde_json::from_slice(body) {
        Ok(push) => push,
        Err(e) => return answer(StatusCode::BAD_REQUEST, format!("not a push event: {e}")),
    };
    // Its secret proves the sender, not what it names: a push of another repository (one
    // the content token can read) is never read.
    if !push.is_of(repository) {
        entry.count(&entry.counts.refused);
        tracing::warn!(webhook = %entry.name, named = %push.named(), "a push of another repository was refused");
        return answer(
            StatusCode::FORBIDDEN,
            format!(
                "a push of {}; this webhook takes pushes of {repository} only",
                push.named()
            ),
        );
    }
    let branch = git.branch().to_string();
    let (files, skipped, refused) = match push.plan(&branch, watch) {
        push::Plan::Ignore(why) => return ignored(entry, why),
        push::Plan::Apply {
            files,
            skipped,
            refused,
        } => (files, skipped, refused),
    };
    let refused: Vec<Value> = refused
        .into_iter()
        .map(|(file, why)| json!({"file": file, "why": why}))
        .collect();
    if files.is_empty() {
        entry.count(&entry.counts.refused);
        let reply = json!({"accepted": false, "message": "no watched file to apply", "refused": refused});
        return (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(reply)).into_response();
    }
    let api = git.api_url.clone().unwrap_or_else(|| {
        match github {
            true => "https://api.github.com",
            false => "https://gitlab.com",
        }
        .to_string()
    });
    let repository = repository.clone();
    let slot = match context.workers.take(&entry.name) {
        Ok(slot) => slot,
        Err(busy) => {
            entry.count(&entry.counts.busy);
            return answer(StatusCode::SERVICE_UNAVAILABLE, busy.to_string());
        }
    };
    let message = format!("applying {} file(s) from {branch}", files.len());
    let mut reply = json!({"accepted": true, "message": message, "files": files, "skipped": skipped});
    if !refused.is_empty() {
        reply["refused"] = Value::Array(refused);
    }
    let (context, entry, token_ref) = (context.clone(), entry.clone(), git.content_token_ref.clone());
    context.clone().workers.spawn(slot, async move {
        let token = match &token_ref {
            Some(token_ref) => context.secrets.get(token_ref).await.map(Some),
            None => Ok(None),
        };
        for file in &files {
            let result = match &token {
                Ok(token) => {
                    let name = repository.api_name();
                    let source = match &repository {
                        Repository::GitHub { owner, name } => fetch::Source::GitHub {
                            api: &api,
                            owner,
                            repo: name,
                        },
                        _ => fetch::Source::GitLab {
                            api: &api,
                            project: &name,
                        },
                    };
                    match fetch::file(&context.http, &source, file, &branch, token.as_deref()).await {
                        Ok(text) => match fetch::intent(file, &text) {
                            Ok(intent) => applied(&context.shared, &entry.name, &intent).await,
                            Err(why) => Err(why),
                        },
                        Err(why) => Err(why),
                    }
                }
                Err(why) => Err(format!("the content token: {why}")),
            };
            entry.outcome(file, &result);
        }
    });
    (StatusCode::ACCEPTED, axum::Json(reply)).into_response()
}

/// An intent applied as the entry: what was applied, or why not.
async fn applied(shared: &Shared, entry: &str, intent: &Map<String, Value>) -> Result<String, String> {
    let (status, answer) = apply_as(shared, entry, intent).await;
    summary(status, &answer)
}

/// An apply's answer in one line.
fn summary(status: StatusCode, answer: &Value) -> Result<String, String> {
    let text = |key: &str| answer[key].as_str().unwrap_or_default().to_string();
    match status.is_success() {
        true => {
            let at = match answer["namespace"].as_str() {
                Some(namespace) => format!("{namespace}/{}", text("name")),
                None => text("name"),
            };
            Ok(format!(
                "applied {} {at} through target {}",
                text("kind"),
                text("target")
            ))
        }
        false => Err(format!("refused ({}): {}", status.as_u16(), text("message"))),
    }
}

/// A slash command: answered at once (Slack waits three seconds), applied in the pool, its
/// result posted to the command's `response_url`.
fn command(context: &Arc<Context>, entry: &Arc<Entry>, slack: &SlackEntry, body: &[u8]) -> Response {
    let mut command = slack::Command::default();
    for (key, value) in form_urlencoded::parse(body) {
        match &*key {
            "command" => command.command = value.into_owned(),
            "text" => command.text = value.into_owned(),
            "response_url" => command.response_url = value.into_owned(),
            "user_name" => command.user_name = value.into_owned(),
            _ => {}
        }
    }
    let reply = |text: String| {
        (
            StatusCode::OK,
            axum::Json(json!({"response_type": "ephemeral", "text": text})),
        )
            .into_response()
    };
    if !slack.commands.is_empty() && !slack.commands.contains(&command.command) {
        entry.count(&entry.counts.ignored);
        return reply(format!("{} is not a command of this webhook", command.command));
    }
    let intent = match slack::intent(&command.text) {
        Ok(intent) => intent,
        Err(why) => {
            entry.count(&entry.counts.ignored);
            return reply(format!("{why}\n{}", slack::usage(&command.command)));
        }
    };
    let url = match slack::response_url(&command.response_url, &slack.response_hosts()) {
        Ok(url) => url,
        Err(why) => {
            entry.count(&entry.counts.refused);
            tracing::warn!(webhook = %entry.name, %why, "a slash command named a response_url outside the entry's hosts");
            return reply(why);
        }
    };
    let slot = match context.workers.take(&entry.name) {
        Ok(slot) => slot,
        Err(busy) => {
            entry.count(&entry.counts.busy);
            return reply(busy.to_string());
        }
    };
    let target = intent["target"].as_str().unwrap_or_default().to_string();
    let (context, entry) = (context.clone(), entry.clone());
    let what = format!("{} {}", command.command, command.text);
    let acked = format!("applying {target}…");
    context.clone().workers.spawn(slot, async move {
        let result = applied(&context.shared, &entry.name, &intent).await;
        entry.outcome(&what, &result);
        let text = match &result {
            Ok(done) => format!("{done} (asked by @{})", command.user_name),
            Err(why) => format!("{target}: {why}"),
        };
        let posted = context
            .http
            .post(url)
            .json(&json!({"response_type": "ephemeral", "replace_original": false, "text": text}))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status);
        if let Err(error) = posted {
            tracing::warn!(webhook = %entry.name, %error, "the result of a slash command could not be posted back");
        }
    });
    reply(acked)
}

/// A generic delivery: its body is the intent, applied before the answer, in the pool.
async fn signed_intent(context: &Context, entry: &Entry, body: &[u8]) -> Response {
    let intent = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(intent)) => intent,
        Ok(_) => return answer(StatusCode::BAD_REQUEST, "the body is a JSON object: the intent"),
        Err(e) => return answer(StatusCode::BAD_REQUEST, format!("the body is not JSON: {e}")),
    };
    let slot = match context.workers.take(&entry.name) {
        Ok(slot) => slot,
        Err(busy) => {
            entry.count(&entry.counts.busy);
            return answer(StatusCode::SERVICE_UNAVAILABLE, busy.to_string());
        }
    };
    let Some((status, answer_body)) = context
        .workers
        .run(slot, apply_as(&context.shared, &entry.name, &intent))
        .await
    else {
        entry.outcome("intent", &Err("ran out of time".into()));
        return answer(StatusCode::GATEWAY_TIMEOUT, "the apply ran out of time");
    };
    entry.outcome("intent", &summary(status, &answer_body));
    (status, axum::Json(answer_body)).into_response()
}
