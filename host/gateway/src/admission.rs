//! The admission webhooks the API server calls (`POST /validate`, `POST /mutate`, an
//! `admission.k8s.io/v1` AdmissionReview each): the Katalog's validation rules refuse a bad
//! write with the rule's message (warnings go back to the client), and its mutation rules
//! come back as a JSON Patch, so a default lands in the same write. The CRD is found by the
//! request's group and resource; a review for anything else is allowed unchanged.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::post;
use base64::Engine;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use orkestra_katalog::Compiled;
use orkestra_katalog::compile::CompiledCrd;

use crate::provenance::Gateway;
pub use crate::review::Counts;
use crate::review::{crd_of, review};
use crate::scope::Scope;

/// An AdmissionReview body the API server sends is at most an object or two; past this it
/// is refused before parsing.
pub const BODY_LIMIT: usize = 8 << 20;

#[derive(Clone)]
struct Shared {
    compiled: Arc<Compiled>,
    counts: Arc<Counts>,
    /// Whose provenance `.request` may be read from.
    gateway: Arc<Gateway>,
    /// For the rules' external calls.
    externals: orkestra_effects::external::Externals,
    calls: Calls,
    /// When each CRD and namespace last got an Event for a failed call.
    reported: Arc<Mutex<HashMap<String, Instant>>>,
}

/// How the rules' external calls are bounded and reported.
#[derive(Clone)]
pub struct Calls {
    /// All of one review's calls together. Under the webhook's own timeout, so the API
    /// server always hears an answer: past it, with `failurePolicy: Ignore`, it would admit
    /// what was never checked.
    pub deadline: Duration,
    /// Where a failed call is recorded as an Event (`None`: logged and counted only).
    pub events: Option<kube::Client>,
}

impl Calls {
    /// The deadline for a webhook that must answer within `timeout`.
    pub fn within(timeout: Duration, events: Option<kube::Client>) -> Self {
        Self {
            deadline: timeout
                .saturating_sub(Duration::from_secs(1))
                .max(Duration::from_millis(500)),
            events,
        }
    }
}

/// The same CRD and namespace get an Event for a failed call at most this often.
const REPORT_EVERY: Duration = Duration::from_secs(60);

/// The webhook routes.
pub fn router(compiled: Arc<Compiled>, counts: Arc<Counts>, gateway: Arc<Gateway>, calls: Calls) -> axum::Router {
    axum::Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .with_state(Shared {
            compiled,
            counts,
            gateway,
            externals: orkestra_effects::external::Externals::live(reqwest::Client::new()),
            calls,
            reported: Arc::default(),
        })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
}

/// What the rules see besides the object: the intent the gateway recorded, as `.request`
/// (only what the gateway wrote: a served CRD's provenance, see [`crate::provenance`]),
/// and the results of the rules' external calls, as `.external` (made here as at reconcile;
/// a failing one refuses the write, as it fails a reconcile).
async fn context_of(shared: &Shared, crd: &CompiledCrd, request: &Value) -> Result<Map<String, Value>, String> {
    let object = &request["object"];
    let mut context = Map::new();
    let guarded = crate::provenance::guarded(&shared.compiled).any(|served| served.name == crd.name);
    if let Some(intent) = shared.gateway.intent(request).filter(|_| guarded) {
        context.insert("request".into(), intent);
    }
    if !crd.rule_calls.is_empty() {
        let mut resolver = orkestra_expr::resolver::Resolver::in_context(object, &crd.notes, &context);
        let deadline = shared.calls.deadline;
        let calls = orkestra_effects::external::run(&shared.externals, &crd.rule_calls, &mut resolver);
        let outcome = match tokio::time::timeout(deadline, calls).await {
            Ok(outcome) => outcome.map_err(String::from),
            Err(_) => Err(format!(
                "no answer within {}s (the webhook itself must answer before the API server stops waiting)",
                deadline.as_secs_f64()
            )),
        };
        let results = resolver.lookup("external").cloned();
        if let Some(results) = results {
            context.insert("external".into(), results);
        }
        if let Err(why) = &outcome {
            report(shared, crd, request, why);
        }
        outcome?;
    }
    Ok(context)
}

/// A failed external call of the rules, which refuses the write: counted, logged, and an
/// Event about the object (at most one per CRD and namespace a minute).
fn report(shared: &Shared, crd: &CompiledCrd, request: &Value, why: &str) {
    shared.counts.calls_failed.fetch_add(1, Ordering::Relaxed);
    let namespace = request["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    let name = request["name"]
        .as_str()
        .or_else(|| request["object"]["metadata"]["name"].as_str());
    tracing::warn!(crd = %crd.name, %namespace, name = name.unwrap_or_default(), %why, "an external call of the admission rules failed; the write is refused");
    let Some(client) = shared.calls.events.clone() else {
        return;
    };
    let now = Instant::now();
    let key = format!("{} {namespace}", crd.name);
    {
        let mut reported = shared.reported.lock();
        if reported
            .get(&key)
            .is_some_and(|at| now.duration_since(*at) < REPORT_EVERY)
        {
            return;
        }
        reported.insert(key, now);
    }
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::events::v1::Event;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    let event = Event {
        metadata: ObjectMeta {
            generate_name: Some("orkestra-gateway-".into()),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(jiff::Timestamp::now())),
        type_: Some("Warning".into()),
        reason: Some("AdmissionCallFailed".into()),
        action: Some("Admit".into()),
        note: Some(orkestra_expr::text::bounded(
            format!("refused: an external call of the rules failed: {why}"),
            1024,
        )),
        reporting_controller: Some("orkestra-gateway".into()),
        reporting_instance: Some("orkestra-gateway".into()),
        regarding: Some(ObjectReference {
            api_version: Some(crd.api_version()),
            kind: Some(crd.kind.clone()),
            name: name.map(String::from),
            namespace: request["namespace"].as_str().map(String::from),
            ..ObjectReference::default()
        }),
        ..Event::default()
    };
    let namespace = namespace.to_string();
    tokio::spawn(async move {
        let created = match orkestra_kube::objects::namespaced::<Event>(client, &namespace) {
            Ok(events) => events
                .create(&kube::api::PostParams::default(), &event)
                .await
                .map(|_| ()),
            Err(error) => Err(error),
        };
        if let Err(error) = created {
            tracing::warn!(%error, "could not record the failed call as an Event");
        }
    });
}

fn refuse(uid: &Value, message: String) -> Json<Value> {
    review(json!({"uid": uid, "allowed": false, "status": {"code": 422, "reason": "Invalid", "message": message}}))
}

/// The object a review asks about, when the rules have a say (a create or an update of an
/// object a CRD entry of the Katalog selects).
fn subject<'r>(shared: &'r Shared, body: &'r Value) -> Result<(&'r Arc<CompiledCrd>, &'r Value), Json<Value>> {
    let request = &body["request"];
    let allow = || review(json!({"uid": request["uid"], "allowed": true}));
    if !matches!(request["operation"].as_str(), Some("CREATE" | "UPDATE")) {
        return Err(allow());
    }
    match (crd_of(&shared.compiled, request), request.get("object")) {
        (Some(crd), Some(object)) if object.is_object() && Scope::of(&shared.compiled, crd).selects(object) => {
            Ok((crd, object))
        }
        _ => Err(allow()),
    }
}

async fn validate(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let (crd, object) = match subject(&shared, &body) {
        Ok(subject) => subject,
        Err(answer) => return answer,
    };
    let uid = &body["request"]["uid"];
    let context = match context_of(&shared, crd, &body["request"]).await {
        Ok(context) => context,
        Err(why) => return refuse(uid, format!("an external call of the rules failed: {why}")),
    };
    let verdict = crd.admission_rules.verdict(object, &crd.notes, &context);
    if !verdict.warnings.is_empty() {
        shared.counts.warned.fetch_add(1, Ordering::Relaxed);
    }
    if verdict.denied.is_empty() {
        shared.counts.allowed.fetch_add(1, Ordering::Relaxed);
        return review(json!({"uid": uid, "allowed": true, "warnings": verdict.warnings}));
    }
    shared.counts.denied.fetch_add(1, Ordering::Relaxed);
    tracing::info!(crd = %crd.name, name = %object["metadata"]["name"], denied = ?verdict.denied, "admission denied");
    let mut answer = refuse(uid, verdict.denied.join("; "));
    answer.0["response"]["warnings"] = json!(verdict.warnings);
    answer
}

async fn mutate(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let (crd, object) = match subject(&shared, &body) {
        Ok(subject) => subject,
        Err(answer) => return answer,
    };
    let uid = &body["request"]["uid"];
    let context = match context_of(&shared, crd, &body["request"]).await {
        Ok(context) => context,
        Err(why) => return refuse(uid, format!("an external call of the rules failed: {why}")),
    };
    let (mutated, verdict) = crd.admission_rules.mutated(object, &crd.notes, &context);
    // A mutation that does not produce a value is skipped, as at reconcile; the client hears.
    let warnings: Vec<String> = verdict
        .skipped
        .iter()
        .map(|s| format!("mutation skipped: {s}"))
        .collect();
    let ops = crate::patch::diff(object, &mutated);
    if ops.is_empty() {
        return review(json!({"uid": uid, "allowed": true, "warnings": warnings}));
    }
    shared.counts.mutated.fetch_add(1, Ordering::Relaxed);
    let patch = base64::engine::general_purpose::STANDARD.encode(Value::Array(ops).to_string());
    review(json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch, "warnings": warnings}))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const KATALOG: &str = "
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: policy}
spec:
  crds:
    site:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Site, plural: sites}
      admission:
        validation:
          rules:
            - {field: spec.image, prefix: 'myorg/', message: 'images come from myorg/, not {{ .spec.image }}'}
            - {field: spec.env, exists: true, action: warn, message: declare spec.env}
            - {field: spec.owner, exists: true, message: an owner is required, fires: {reconcile: false}}
        mutation:
          rules:
            - {field: spec.replicas, default: 2}
";

    async fn ask(path: &str, operation: &str, object: Value) -> Value {
        ask_with(KATALOG, path, operation, object).await
    }

    async fn ask_with(katalog: &str, path: &str, operation: &str, object: Value) -> Value {
        let compiled = orkestra_katalog::load_sources(&[(PathBuf::from("k.yaml"), katalog.to_string())]).unwrap();
        let gateway = Gateway {
            username: "gateway".into(),
        };
        let calls = Calls::within(Duration::from_secs(3), None);
        let app = router(Arc::new(compiled), Arc::default(), Arc::new(gateway), calls);
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u-1", "operation": operation, "resource": {"group": "demo.orkestra.io", "version": "v1", "resource": "sites"},
            "object": object}});
        crate::review::answer(app, path, body).await
    }

    #[tokio::test]
    async fn a_write_that_breaks_a_rule_is_refused_with_its_message_and_warnings() {
        let answer = ask("/validate", "CREATE", json!({"spec": {"image": "nginx"}})).await;
        assert_eq!(answer["uid"], "u-1");
        assert_eq!(answer["allowed"], false);
        let message = answer["status"]["message"].as_str().unwrap();
        assert!(message.contains("images come from myorg/, not nginx"), "{message}");
        assert!(
            message.contains("an owner is required"),
            "admission-only rules run here: {message}"
        );
        assert_eq!(answer["warnings"][0], "field \"spec.env\": declare spec.env");
        let fine = ask(
            "/validate",
            "UPDATE",
            json!({"spec": {"image": "myorg/web", "owner": "a", "env": "prod"}}),
        )
        .await;
        assert_eq!(fine["allowed"], true);
        let delete = ask("/validate", "DELETE", json!({})).await;
        assert_eq!(delete["allowed"], true, "a delete is not the rules' business");
    }

    #[tokio::test]
    async fn a_default_comes_back_as_a_patch_and_a_complete_object_as_none() {
        let answer = ask("/mutate", "CREATE", json!({"spec": {"image": "x"}})).await;
        assert_eq!(answer["patchType"], "JSONPatch");
        let patch = base64::engine::general_purpose::STANDARD
            .decode(answer["patch"].as_str().unwrap())
            .unwrap();
        let ops: Value = serde_json::from_slice(&patch).unwrap();
        assert_eq!(ops, json!([{"op": "add", "path": "/spec/replicas", "value": 2}]));
        let none = ask("/mutate", "CREATE", json!({"spec": {"image": "x", "replicas": 3}})).await;
        assert!(none.get("patch").is_none() && none["allowed"] == true);
    }

    #[tokio::test]
    async fn the_rules_external_calls_are_made_at_admission_too() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // The quota service allows as many replicas as the name is long.
        let quota = axum::Router::new().route(
            "/quota/{name}",
            axum::routing::get(|axum::extract::Path(name): axum::extract::Path<String>| async move {
                Json(json!({"allowed": name.len()}))
            }),
        );
        tokio::spawn(async move { axum::serve(listener, quota).await });
        let katalog = format!(
            "
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: quota}}
spec:
  crds:
    site:
      apiTypes: {{group: demo.orkestra.io, version: v1, kind: Site, plural: sites}}
      admission:
        validation:
          external:
            - {{name: quota, url: 'http://127.0.0.1:{port}/quota/{{{{ .metadata.name }}}}', timeout: 2s}}
          rules:
            - {{field: spec.replicas, lessThanOrEqual: '{{{{ .external.quota.body.allowed }}}}', valueType: int,
               message: 'at most {{{{ .external.quota.body.allowed }}}} replicas'}}
"
        );
        let over = ask_with(
            &katalog,
            "/validate",
            "CREATE",
            json!({"metadata": {"name": "abc"}, "spec": {"replicas": 4}}),
        )
        .await;
        assert_eq!(over["allowed"], false, "{over}");
        assert!(
            over["status"]["message"]
                .as_str()
                .unwrap()
                .contains("at most 3 replicas"),
            "{over}"
        );
        let within = ask_with(
            &katalog,
            "/validate",
            "CREATE",
            json!({"metadata": {"name": "abcdef"}, "spec": {"replicas": 4}}),
        )
        .await;
        assert_eq!(within["allowed"], true, "{within}");
    }
}
