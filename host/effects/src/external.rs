//! External HTTP calls declared on a template block: made before the block's resources,
//! one after the other (a call sees the results before it), each with its own timeout.
//! A call that fails (transport error, timeout, unexpected status) fails the reconcile
//! unless it says `continueOnError`; either way its result is at `.external.<name>`:
//! `{called, status: success|failed|skipped, statusCode, body, error, durationSeconds}`,
//! where `body` is the parsed JSON, or the text (first 4096 bytes) when it is not JSON.
//!
//! A rehearsal (`ork plan`) makes none: each call it would make is noted ([`NotMade`]) and
//! answered `{called: false, status: "skipped", rehearsal: true}`, since any request, a GET
//! included, may be what provisions, bills or notifies.

use crate::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Value, json};

use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::Call;

/// How a Katalog's external calls are made: for real, or noted and not made (a rehearsal).
#[derive(Clone, Default)]
pub struct Externals {
    client: reqwest::Client,
    rehearsal: Option<Arc<Mutex<Vec<NotMade>>>>,
}

/// A call a rehearsal would have made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NotMade {
    /// `external.<name>` it answers.
    pub name: String,
    pub method: String,
    /// As rendered, or the template with why it did not render.
    pub url: String,
}

impl Externals {
    /// Calls made with `client`.
    pub fn live(client: reqwest::Client) -> Self {
        Self {
            client,
            rehearsal: None,
        }
    }

    /// Calls noted and never made; the notes are taken with [`Externals::not_made`].
    pub fn rehearsal() -> Self {
        Self {
            client: reqwest::Client::new(),
            rehearsal: Some(Arc::default()),
        }
    }

    /// The calls a rehearsal did not make since the last take, in order.
    pub fn not_made(&self) -> Vec<NotMade> {
        match &self.rehearsal {
            Some(log) => std::mem::take(&mut *log.lock()),
            None => Vec::new(),
        }
    }
}
/// Bodies beyond this are not read: a reconcile should not buffer someone's download.
const BODY_LIMIT: usize = 1 << 20;
/// Non-JSON bodies are kept to this many bytes.
const TEXT_LIMIT: usize = 4096;

/// Makes `calls` in order, adding each result to `resolver` under `external.<name>`.
/// Returns the first error of a call without `continueOnError`.
pub async fn run(externals: &Externals, calls: &[Call], resolver: &mut Resolver<'_, '_>) -> Result<(), Error> {
    for call in calls {
        if !call.conditions.passes(resolver, None) {
            resolver.set_entry("external", &call.name, json!({"called": false, "status": "skipped"}));
            continue;
        }
        if let Some(log) = &externals.rehearsal {
            let url = resolver
                .render(&call.url)
                .unwrap_or_else(|e| format!("{} (does not render: {})", call.url.source(), e.message));
            let note = NotMade {
                name: call.name.clone(),
                method: call.method.clone(),
                url,
            };
            log.lock().push(note);
            resolver.set_entry(
                "external",
                &call.name,
                json!({"called": false, "status": "skipped", "rehearsal": true}),
            );
            continue;
        }
        let started = Instant::now();
        let outcome = request(&externals.client, call, resolver).await;
        let seconds = started.elapsed().as_secs_f64();
        let result = match &outcome {
            Ok((code, body)) => json!({
                "called": true, "status": "success", "statusCode": code, "body": body,
                "error": "", "durationSeconds": seconds,
            }),
            Err((code, error)) => json!({
                "called": true, "status": "failed", "statusCode": code, "body": null,
                "error": error, "durationSeconds": seconds,
            }),
        };
        resolver.set_entry("external", &call.name, result);
        if let Err((_, error)) = outcome
            && !call.continue_on_error
        {
            return Err(Error::External {
                name: call.name.clone(),
                why: error,
            });
        }
    }
    Ok(())
}

/// One request: the status code and body, or the status code (0 without a response) and why.
async fn request(
    client: &reqwest::Client,
    call: &Call,
    resolver: &Resolver<'_, '_>,
) -> Result<(u16, Value), (u16, String)> {
    let url = resolver
        .render(&call.url)
        .map_err(|e| (0, format!("url: {}", e.message)))?;
    // The Katalog's compile checked the method is a token, which is all reqwest asks.
    let method = reqwest::Method::from_bytes(call.method.as_bytes())
        .map_err(|_| (0, format!("method {} is not an HTTP method", call.method)))?;
    let mut builder = client.request(method, &url).timeout(call.timeout);
    for (key, template) in &call.headers {
        builder = builder.header(
            key,
            resolver
                .render(template)
                .map_err(|e| (0, format!("headers.{key}: {}", e.message)))?,
        );
    }
    if let Some(body) = &call.body {
        builder = builder.json(&body.render(resolver).map_err(|e| (0, format!("body: {}", e.message)))?);
    }
    let mut response = builder.send().await.map_err(|e| (0, describe(&e, call.timeout)))?;
    let code = response.status().as_u16();
    // Read in chunks so a body without a length cannot grow past the cap either.
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| (code, describe(&e, call.timeout)))? {
        if bytes.len() + chunk.len() > BODY_LIMIT {
            return Err((code, format!("the response body exceeds {BODY_LIMIT} bytes")));
        }
        bytes.extend_from_slice(&chunk);
    }
    if !call.accepts(code) {
        return Err((code, format!("{method} {url} answered {code}", method = call.method)));
    }
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(TEXT_LIMIT)]).into_owned();
        Value::String(text)
    });
    Ok((code, body))
}

fn describe(error: &reqwest::Error, timeout: Duration) -> String {
    if error.is_timeout() {
        format!("no answer within {}s", timeout.as_secs_f64())
    } else {
        // The source chain names the cause (connection refused, DNS, TLS).
        let mut text = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }
}
