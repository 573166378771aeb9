//! Cross reads from another runtime (ONCOP over HTTP): `observe.cross` entries with
//! `source:` GET the other runtime's Live API (`/katalog/{crd}/cr/{ns}/{name}`, `/health`,
//! `/katalog/{crd}`) and show the answer as `.cross.<as>` in the shape local reads have.
//! Answers are reused for `cacheFor`; the cache is bounded, since CRs pick the URLs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Value, json};

use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::{CrossRead, Protocol, Remote, Token};

/// The most answers kept; past it, expired ones go, then the oldest.
const CACHE_LIMIT: usize = 4096;
/// How long one remote read may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read (a Live API answer for one CR is a few KiB).
const BODY_LIMIT: usize = 1 << 20;

/// Remote reads of one runtime, with their cache.
#[derive(Clone, Default)]
pub struct RemoteReads {
    http: reqwest::Client,
    cache: Arc<Mutex<HashMap<String, (Instant, Value)>>>,
}

impl RemoteReads {
    pub fn new(http: reqwest::Client) -> Self {
        Self {
            http,
            cache: Arc::default(),
        }
    }

    /// `.cross.<as>` for a read with `source:`.
    pub async fn read(&self, read: &CrossRead, remote: &Remote, resolver: &Resolver<'_, '_>) -> Value {
        let url = match resolver.render(&remote.url) {
            Ok(url) => url,
            Err(error) => return failed(format!("the URL does not render: {}", error.message)),
        };
        if let Some(answer) = self.cached(&url) {
            return answer;
        }
        let answer = self.fetch(read, remote, &url, resolver).await;
        self.remember(url, answer.clone(), remote.cache_for);
        answer
    }

    async fn fetch(&self, read: &CrossRead, remote: &Remote, url: &str, resolver: &Resolver<'_, '_>) -> Value {
        let mut request = self.http.get(url).timeout(TIMEOUT);
        match &remote.token {
            Some(Token::Written(template)) => match resolver.render(template) {
                Ok(token) => request = request.bearer_auth(token),
                Err(error) => return failed(format!("auth.token does not render: {}", error.message)),
            },
            Some(Token::FromEnv(var)) => match std::env::var(var) {
                Ok(token) => request = request.bearer_auth(token),
                Err(_) => return failed(format!("auth.fromEnv: {var} is not set")),
            },
            None => {}
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                tracing::debug!(remote_crd = %read.crd, %url, %error, "remote cross read failed");
                return failed(format!("GET {url}: {error}"));
            }
        };
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return json!({"found": false});
        }
        if !status.is_success() {
            return failed(format!("GET {url}: {status}"));
        }
        let body = match response.bytes().await {
            Ok(body) if body.len() <= BODY_LIMIT => body,
            Ok(body) => {
                return failed(format!(
                    "GET {url}: the answer is {} bytes, more than {BODY_LIMIT}",
                    body.len()
                ));
            }
            Err(error) => return failed(format!("GET {url}: {error}")),
        };
        match serde_json::from_slice::<Value>(&body) {
            Ok(answer) => shaped(remote.protocol, answer),
            Err(error) => failed(format!("GET {url}: not JSON: {error}")),
        }
    }

    fn cached(&self, url: &str) -> Option<Value> {
        let cache = self.cache.lock();
        cache
            .get(url)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, answer)| answer.clone())
    }

    fn remember(&self, url: String, answer: Value, cache_for: Duration) {
        if cache_for.is_zero() {
            return;
        }
        let mut cache = self.cache.lock();
        if cache.len() >= CACHE_LIMIT {
            let now = Instant::now();
            cache.retain(|_, (until, _)| *until > now);
            if cache.len() >= CACHE_LIMIT
                && let Some(oldest) = cache
                    .iter()
                    .min_by_key(|(_, (until, _))| *until)
                    .map(|(k, _)| k.clone())
            {
                cache.remove(&oldest);
            }
        }
        cache.insert(url, (Instant::now() + cache_for, answer));
    }
}

/// What a failed read shows: not found, and why.
fn failed(error: String) -> Value {
    json!({"found": false, "error": error})
}

/// A Live API answer in the shape of a local cross read.
fn shaped(protocol: Protocol, answer: Value) -> Value {
    match protocol {
        Protocol::Cr => json!({
            "found": true,
            "metadata": {
                "name": answer["name"],
                "namespace": answer["namespace"],
                "generation": answer["generation"],
            },
            "spec": answer["spec"],
            "status": answer["status"],
        }),
        Protocol::Health => json!({"found": true, "health": answer}),
        Protocol::Metrics => json!({"found": true, "metrics": answer["metrics"]}),
        Protocol::Info => json!({"found": true, "info": answer}),
        Protocol::Events => json!({"found": true, "events": answer["events"]}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_take_the_shape_of_local_reads() {
        let cr = json!({"name": "p", "namespace": "ns", "generation": 2, "phase": "Running", "spec": {"a": 1}, "status": {"endpoint": "x"}});
        let read = shaped(Protocol::Cr, cr);
        assert_eq!(
            (read["found"].clone(), read["status"]["endpoint"].clone()),
            (json!(true), json!("x"))
        );
        assert_eq!(read["metadata"]["name"], "p");
        let health = shaped(Protocol::Health, json!({"state": "healthy"}));
        assert_eq!(health["health"]["state"], "healthy");
        let metrics = shaped(Protocol::Metrics, json!({"name": "p", "metrics": {"queueDepth": 3}}));
        assert_eq!(metrics["metrics"]["queueDepth"], 3);
        let info = shaped(Protocol::Info, json!({"name": "p", "workers": {"current": 2}}));
        assert_eq!(info["info"]["workers"]["current"], 2);
        let events = shaped(
            Protocol::Events,
            json!({"name": "p", "events": [{"type": "Normal", "reason": "Ready"}]}),
        );
        assert_eq!(events["events"][0]["reason"], "Ready");
    }

    #[test]
    fn the_cache_keeps_answers_for_their_time_and_stays_bounded() {
        let reads = RemoteReads::new(reqwest::Client::new());
        reads.remember("http://a".into(), json!(1), Duration::from_secs(60));
        reads.remember("http://b".into(), json!(2), Duration::ZERO);
        assert_eq!(reads.cached("http://a"), Some(json!(1)));
        assert_eq!(reads.cached("http://b"), None, "cacheFor 0 keeps nothing");
        for i in 0..CACHE_LIMIT + 10 {
            reads.remember(format!("http://x/{i}"), json!(i), Duration::from_secs(60));
        }
        assert!(reads.cache.lock().len() <= CACHE_LIMIT);
    }
}
