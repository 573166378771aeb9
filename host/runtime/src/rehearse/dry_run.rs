//! A client that writes nothing: every request that would change something (POST, PUT,
//! PATCH, DELETE) goes to the API server with `dryRun=All`, so defaulting, admission and
//! ownership are the cluster's own, and is recorded with the server's answer; reads go
//! through unchanged. What a reconcile would do shows in the record, and the cluster is left
//! as it was.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use parking_lot::Mutex;
use serde_json::Value;

/// One write the API server answered in a dry run.
#[derive(Debug, Clone)]
pub struct Write {
    pub method: Method,
    /// The request's path (no query).
    pub path: String,
    /// What it sent (JSON bodies only).
    pub body: Option<Value>,
    /// The answer's status code.
    pub status: u16,
    /// The answer: for an object, the object as it would be.
    pub answer: Option<Value>,
}

/// The writes of a dry-run client, in order.
#[derive(Debug, Default)]
pub struct Writes(Mutex<Vec<Write>>);

impl Writes {
    pub(super) fn push(&self, write: Write) {
        self.0.lock().push(write);
    }

    fn count(&self) -> usize {
        self.0.lock().len()
    }

    /// Waits for the writes a reconcile leaves in flight after it returns (its Events are
    /// published in the background): until none has come for 100 ms, 2 s at most.
    pub async fn settle(&self) {
        let (step, quiet_for, most) = (Duration::from_millis(25), 4, 80);
        let (mut last, mut quiet) = (self.count(), 0);
        for _ in 0..most {
            tokio::time::sleep(step).await;
            let now = self.count();
            quiet = if now == last { quiet + 1 } else { 0 };
            last = now;
            if quiet >= quiet_for {
                return;
            }
        }
    }

    /// Takes the writes recorded so far.
    pub fn take(&self) -> Vec<Write> {
        std::mem::take(&mut *self.0.lock())
    }
}

/// Bodies larger than this are passed on but not kept.
const KEPT_BODY: usize = 4 << 20;

/// A delete's options (its body; none is `{}`), with `dryRun: [All]`.
fn dry_run_options(body: &[u8]) -> Result<Vec<u8>, kube::Error> {
    let mut options: serde_json::Map<String, Value> = match body.iter().all(u8::is_ascii_whitespace) {
        true => serde_json::Map::new(),
        false => serde_json::from_slice(body).map_err(kube::Error::SerdeError)?,
    };
    options.insert("dryRun".into(), Value::from(vec!["All"]));
    serde_json::to_vec(&options).map_err(kube::Error::SerdeError)
}

/// `live`, every write turned into a dry run and recorded in the [`Writes`] returned.
pub fn client(live: kube::Client) -> (kube::Client, Arc<Writes>) {
    let writes = Arc::new(Writes::default());
    let default_namespace = live.default_namespace().to_string();
    let record = writes.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (live, record) = (live.clone(), record.clone());
        async move {
            let method = request.method().clone();
            if matches!(method, Method::GET | Method::HEAD | Method::OPTIONS) {
                return live.send(request).await;
            }
            let (mut parts, body) = request.into_parts();
            let path = parts.uri.path().to_string();
            let query = match parts.uri.query() {
                Some(query) => format!("{query}&dryRun=All"),
                None => "dryRun=All".to_string(),
            };
            parts.uri = format!("{path}?{query}")
                .parse()
                .map_err(|e: http::uri::InvalidUri| kube::Error::Service(e.into()))?;
            let mut sent = body.collect_bytes().await?;
            if method == Method::DELETE {
                // A delete's options travel in its body, and the API server reads them from
                // there rather than from the query when there is one: the dry run must be
                // said in the body too, or the object is deleted for real.
                sent = dry_run_options(&sent)?.into();
                parts.headers.insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
            }
            let body = (sent.len() <= KEPT_BODY)
                .then(|| serde_json::from_slice(&sent).ok())
                .flatten();
            let response = live.send(http::Request::from_parts(parts, sent.into())).await?;
            let (parts, answer) = response.into_parts();
            let answer = answer.collect_bytes().await?;
            record.push(Write {
                method,
                path,
                body,
                status: parts.status.as_u16(),
                answer: serde_json::from_slice(&answer).ok(),
            });
            Ok(http::Response::from_parts(parts, answer.into()))
        }
    });
    (kube::Client::new(service, default_namespace), writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deletes_options_say_dry_run_whatever_they_said_before() {
        let said = |body: &[u8]| serde_json::from_slice::<Value>(&dry_run_options(body).unwrap()).unwrap();
        assert_eq!(said(b""), serde_json::json!({"dryRun": ["All"]}));
        assert_eq!(
            said(br#"{"propagationPolicy": "Background", "dryRun": []}"#),
            serde_json::json!({"propagationPolicy": "Background", "dryRun": ["All"]})
        );
        assert!(dry_run_options(b"not json").is_err(), "refused, not sent as it was");
    }
}
