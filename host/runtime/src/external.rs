//! External HTTP calls declared on a template block: made before the block's resources,
//! one after the other (a call sees the results before it), each with its own timeout.
//! A call that fails (transport error, timeout, unexpected status) fails the reconcile
//! unless it says `continueOnError`; either way its result is at `.external.<name>`:
//! `{called, status: success|failed|skipped, statusCode, body, error, durationSeconds}`,
//! where `body` is the parsed JSON, or the text (first 4096 bytes) when it is not JSON.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use orkestra_katalog::ExternalCall;
use orkestra_katalog::condition::Conditions;
use orkestra_katalog::resolver::Resolver;
use orkestra_katalog::template::{Functions, Template};
use orkestra_katalog::tree::Tree;

/// Default per-call timeout (upstream's code default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bodies beyond this are not read: a reconcile should not buffer someone's download.
const BODY_LIMIT: usize = 1 << 20;
/// Non-JSON bodies are kept to this many bytes.
const TEXT_LIMIT: usize = 4096;

/// One call, compiled.
#[derive(Debug, Clone)]
pub struct Call {
    pub name: String,
    url: Template,
    method: reqwest::Method,
    headers: Vec<(String, Template)>,
    body: Option<Tree>,
    timeout: Duration,
    /// Accepted status codes; empty means any 2xx.
    expected: Vec<u16>,
    continue_on_error: bool,
    conditions: Conditions,
}

impl Call {
    pub fn compile(spec: &ExternalCall, functions: &Functions) -> Result<Self, String> {
        let at = |e: String| format!("external.{}: {e}", spec.name);
        if let Some(protocol) = spec.protocol.as_deref().filter(|p| *p != "http") {
            return Err(at(format!("protocol {protocol} is not supported yet (http is)")));
        }
        let url = spec.url.as_deref().ok_or_else(|| at("url is required".into()))?;
        let method = spec.method.as_deref().unwrap_or("GET").to_uppercase();
        let status = |value: &Value| {
            value
                .as_u64()
                .filter(|code| (100..=599).contains(code))
                .map(|code| code as u16)
                .ok_or_else(|| {
                    at(format!(
                        "expectedStatus: {value} is not an HTTP status code (100 to 599)"
                    ))
                })
        };
        let expected = match &spec.expected_status {
            None => Vec::new(),
            Some(Value::Array(list)) => list.iter().map(status).collect::<Result<_, _>>()?,
            Some(one) => vec![status(one)?],
        };
        Ok(Self {
            name: spec.name.clone(),
            url: Template::compile(url, functions).map_err(|e| at(format!("url: {}", e.message)))?,
            method: reqwest::Method::from_bytes(method.as_bytes())
                .map_err(|_| at(format!("method {method} is not an HTTP method")))?,
            headers: spec
                .headers
                .iter()
                .map(|(k, v)| {
                    Template::compile(v, functions)
                        .map(|t| (k.clone(), t))
                        .map_err(|e| at(format!("headers.{k}: {}", e.message)))
                })
                .collect::<Result<_, _>>()?,
            body: spec
                .body
                .as_ref()
                .map(|b| Tree::compile(b, functions))
                .transpose()
                .map_err(|e| at(format!("body: {e}")))?,
            timeout: match &spec.timeout {
                Some(text) => orkestra_katalog::duration::parse(text).map_err(|e| at(format!("timeout: {e}")))?,
                None => DEFAULT_TIMEOUT,
            },
            expected,
            continue_on_error: spec.continue_on_error,
            conditions: Conditions::compile(&spec.when, &spec.or, functions)
                .map_err(|(path, e)| at(format!("{path}: {}", e.message)))?,
        })
    }

    fn accepts(&self, status: u16) -> bool {
        match self.expected.is_empty() {
            true => (200..300).contains(&status),
            false => self.expected.contains(&status),
        }
    }
}

/// Makes `calls` in order, adding each result to `resolver` under `external.<name>`.
/// Returns the first error of a call without `continueOnError`.
pub async fn run(client: &reqwest::Client, calls: &[Call], resolver: &mut Resolver<'_, '_>) -> Result<(), String> {
    for call in calls {
        if !call.conditions.passes(resolver, None) {
            resolver.set_entry("external", &call.name, json!({"called": false, "status": "skipped"}));
            continue;
        }
        let started = Instant::now();
        let outcome = request(client, call, resolver).await;
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
            return Err(format!("external call {}: {error}", call.name));
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
    let mut builder = client.request(call.method.clone(), &url).timeout(call.timeout);
    for (key, template) in &call.headers {
        builder = builder.header(
            key,
            resolver
                .render(template)
                .map_err(|e| (0, format!("headers.{key}: {}", e.message)))?,
        );
    }
    if let Some(body) = &call.body {
        builder = builder.json(&body.render(resolver).map_err(|e| (0, format!("body: {e}")))?);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn call(yaml: &str) -> Result<Call, String> {
        let spec: ExternalCall = serde_yaml_ng::from_str(yaml).unwrap();
        Call::compile(&spec, Functions::builtin())
    }

    #[test]
    fn expected_status_defaults_to_2xx_and_bad_settings_are_named() {
        let plain = call("{name: a, url: 'http://x/{{ .metadata.name }}'}").unwrap();
        assert!(plain.accepts(204) && !plain.accepts(404));
        let listed = call("{name: a, url: 'http://x', expectedStatus: [200, 404]}").unwrap();
        assert!(listed.accepts(404) && !listed.accepts(201));
        assert!(
            call("{name: a, url: 'http://x', protocol: redis}")
                .unwrap_err()
                .contains("protocol redis is not supported")
        );
        assert!(call("{name: a}").unwrap_err().contains("url is required"));
        assert!(
            call("{name: a, url: 'http://x', timeout: soon}")
                .unwrap_err()
                .contains("timeout")
        );
        let single = call("{name: a, url: 'http://x', expectedStatus: 404}").unwrap();
        assert!(single.accepts(404) && !single.accepts(200));
        for bad in ["-1", "70000", "2.5", "[200, ok]"] {
            let error = call(&format!("{{name: a, url: 'http://x', expectedStatus: {bad}}}")).unwrap_err();
            assert!(error.contains("is not an HTTP status code"), "{bad}: {error}");
        }
    }
}
