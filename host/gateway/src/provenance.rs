//! Provenance only the gateway writes. `serve-source` (who asked) and `serve-intent` (what
//! they asked for) are what admission rules read as `.request` and templates as
//! `serveSource`; were anyone able to write them, a plain `kubectl apply` could claim to
//! come from the verified CI or to carry an approved intent. The `POST /provenance` webhook
//! refuses a create or update that sets, changes or removes either annotation unless the
//! API server says the writer is the gateway itself, whose user name the gateway learns
//! from the API server at start (a SelfSubjectReview: what the API server authenticated, not
//! what a client claims). It guards every CRD of the Katalog whenever the gateway registers
//! webhooks for it at all (something writes provenance, or admission rules, protection or
//! conversion are on), served or not: a rule or a template reads the annotation on any CR,
//! and only a guarded one can be trusted.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::PostParams;
use serde_json::{Value, json};

use orkestra_expr::labels::{SERVE_INTENT, SERVE_SOURCE};
use orkestra_katalog::Compiled;
use orkestra_katalog::compile::CompiledCrd;

use crate::review::{Counts, crd_of, review};
use crate::scope::Scope;

/// The annotations only the gateway may write.
pub const GATEWAY_OWNED: [&str; 2] = [SERVE_SOURCE, SERVE_INTENT];

/// Who the gateway is to the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gateway {
    pub username: String,
}

impl Gateway {
    /// The user the API server authenticates this client as.
    pub async fn whoami(client: &kube::Client) -> Result<Self, kube::Error> {
        let reviews = orkestra_kube::objects::all::<SelfSubjectReview>(client.clone());
        let review = reviews
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await?;
        let username = review
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username)
            .unwrap_or_default();
        Ok(Self { username })
    }

    /// Whether the review's writer is the gateway.
    fn wrote(&self, request: &Value) -> bool {
        !self.username.is_empty() && request["userInfo"]["username"] == self.username.as_str()
    }

    /// The intent recorded on the review's object, when the gateway wrote it: by this very
    /// request, or earlier (left as it was). Anything else is not provenance.
    pub fn intent(&self, request: &Value) -> Option<Value> {
        let object = &request["object"];
        let unchanged = annotation(object, SERVE_INTENT) == annotation(&request["oldObject"], SERVE_INTENT);
        if !self.wrote(request) && !unchanged {
            return None;
        }
        annotation(object, SERVE_INTENT).and_then(|text| serde_json::from_str(text).ok())
    }
}

fn annotation<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    object["metadata"]["annotations"][key].as_str()
}

/// The CRDs whose provenance the webhook guards: every enabled one, whenever the gateway
/// registers webhooks for the Katalog (something writes provenance, or another webhook is
/// on); none when it registers none.
pub fn guarded(compiled: &Compiled) -> impl Iterator<Item = &Arc<CompiledCrd>> {
    let registers = crate::serving::any(compiled);
    compiled.enabled().filter(move |_| registers)
}

#[derive(Clone)]
struct Shared {
    compiled: Arc<Compiled>,
    counts: Arc<Counts>,
    gateway: Arc<Gateway>,
}

/// `POST /provenance`.
pub fn router(compiled: Arc<Compiled>, counts: Arc<Counts>, gateway: Arc<Gateway>) -> axum::Router {
    axum::Router::new()
        .route("/provenance", post(guard))
        .with_state(Shared {
            compiled,
            counts,
            gateway,
        })
}

/// Which gateway-owned annotation a write sets, changes or removes, if any.
pub fn forged<'k>(request: &Value) -> Option<&'k str> {
    GATEWAY_OWNED
        .into_iter()
        .find(|key| annotation(&request["object"], key) != annotation(&request["oldObject"], key))
}

async fn guard(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let request = &body["request"];
    let uid = &request["uid"];
    let allow = || review(json!({"uid": uid, "allowed": true}));
    let selected = crd_of(&shared.compiled, request)
        .is_some_and(|crd| Scope::of(&shared.compiled, crd).selects(&request["object"]));
    if !matches!(request["operation"].as_str(), Some("CREATE" | "UPDATE")) || !selected || shared.gateway.wrote(request)
    {
        return allow();
    }
    let Some(key) = forged(request) else {
        return allow();
    };
    shared.counts.denied.fetch_add(1, Ordering::Relaxed);
    let user = request["userInfo"]["username"].as_str().unwrap_or("an unknown user");
    tracing::warn!(%user, annotation = key, name = %request["name"], "provenance the gateway did not write was refused");
    let message = format!(
        "annotation {key} is provenance that only the gateway writes; {user} may not set, change or remove it (apply through the Serve API instead)"
    );
    review(json!({"uid": uid, "allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": message}}))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const KATALOG: &str = "
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: provenance}
gateway: {api: {enabled: true}}
spec:
  crds:
    site:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Site, plural: sites}
      serve: {enabled: true, namespace: default}
    plain:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Plain, plural: plains}
";

    fn gateway() -> Gateway {
        Gateway {
            username: "system:serviceaccount:orkestra:gateway".into(),
        }
    }

    fn with_source(source: Option<&str>) -> Value {
        match source {
            Some(source) => json!({"metadata": {"annotations": {SERVE_SOURCE: source, "other": "x"}}}),
            None => json!({"metadata": {"annotations": {"other": "x"}}}),
        }
    }

    async fn ask(user: &str, operation: &str, object: Value, old: Value) -> Value {
        let compiled = orkestra_katalog::load_sources(&[(PathBuf::from("k.yaml"), KATALOG.to_string())]).unwrap();
        let app = router(Arc::new(compiled), Arc::default(), Arc::new(gateway()));
        let body = json!({"request": {
            "uid": "u", "operation": operation, "userInfo": {"username": user},
            "resource": {"group": "demo.orkestra.io", "version": "v1", "resource": "sites"},
            "object": object, "oldObject": old}});
        crate::review::answer(app, "/provenance", body).await
    }

    #[tokio::test]
    async fn only_the_gateway_sets_changes_or_removes_provenance() {
        let gw = gateway().username;
        let source = Some("repo:shop/web");
        let forged = ask("alice", "CREATE", with_source(source), Value::Null).await;
        assert_eq!(forged["allowed"], false);
        let message = forged["status"]["message"].as_str().unwrap();
        assert!(message.contains(SERVE_SOURCE) && message.contains("alice"), "{message}");
        assert_eq!(
            ask(&gw, "CREATE", with_source(source), Value::Null).await["allowed"],
            true
        );
        let changed = ask("alice", "UPDATE", with_source(Some("repo:evil")), with_source(source)).await;
        assert_eq!(changed["allowed"], false, "changing it");
        let removed = ask("alice", "UPDATE", with_source(None), with_source(source)).await;
        assert_eq!(removed["allowed"], false, "removing it");
        let kept = ask("alice", "UPDATE", with_source(source), with_source(source)).await;
        assert_eq!(kept["allowed"], true, "an edit that leaves it as the gateway wrote it");
        let plain = ask("alice", "CREATE", with_source(None), Value::Null).await;
        assert_eq!(plain["allowed"], true, "no provenance at all");
    }

    #[test]
    fn the_intent_is_read_only_where_the_gateway_wrote_it() {
        let intent = json!({"approvedBy": "security-team"}).to_string();
        let object = json!({"metadata": {"annotations": {SERVE_INTENT: intent}}});
        let request =
            |user: &str, old: Value| json!({"userInfo": {"username": user}, "object": object, "oldObject": old});
        let gw = gateway();
        assert_eq!(
            gw.intent(&request(&gw.username, Value::Null)).unwrap()["approvedBy"],
            "security-team"
        );
        assert!(
            gw.intent(&request("alice", Value::Null)).is_none(),
            "set by another user"
        );
        assert!(
            gw.intent(&request("alice", object.clone())).is_some(),
            "left as the gateway wrote it"
        );
        let nobody = Gateway {
            username: String::new(),
        };
        assert!(nobody.intent(&request("", Value::Null)).is_none());
    }
}
