//! Deletion and namespace protection (`security.deletionProtection`,
//! `security.namespaceProtection`). A CR of a protected CRD is labelled at its creation (and
//! the ones that exist when the gateway starts, once), and a DELETE of a labelled CR, or of a
//! labelled CRD of the Katalog, is refused until the label is removed; in strict mode the
//! label itself may only go from an object marked exempt. Namespace protection refuses a
//! CR created in a namespace the CRD's lists (else the Katalog's) forbid, where the runtime
//! would otherwise skip it without a word.
//!
//! Only the Katalog's own CRDs are guarded: a label on anything else, which whoever writes
//! that object could set, decides nothing here.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use base64::Engine;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_kube::objects::Objects;
use serde_json::{Value, json};

use orkestra_expr::labels::{DELETION_PROTECTION, STRICT_MODE_EXEMPT};
use orkestra_katalog::Compiled;
use orkestra_katalog::compile::CompiledCrd;
use orkestra_katalog::model::{DeletionProtection, NamespaceProtection};

use crate::review::{self, Counts, review};
use crate::scope::Scope;

/// The Katalog's deletion protection, when on.
pub fn deletion(compiled: &Compiled) -> Option<&DeletionProtection> {
    let security = compiled.katalog.security.as_ref()?;
    security.deletion_protection.as_ref().filter(|d| d.enabled)
}

/// The Katalog's namespace protection, when on.
pub fn namespaces(compiled: &Compiled) -> Option<&NamespaceProtection> {
    let security = compiled.katalog.security.as_ref()?;
    security.namespace_protection.as_ref().filter(|n| n.enabled)
}

/// Whether the CRs of `crd` are protected from deletion (`protectCRs`, default true).
pub fn protects_crs(compiled: &Compiled, crd: &CompiledCrd) -> bool {
    deletion(compiled).is_some() && overrides(compiled, crd).protect_crs.unwrap_or(true)
}

/// Whether `crd` itself is protected from deletion (`protectCRD`, default true): only a CRD
/// the Katalog installs, never a built-in kind's (there is none) or another's.
pub fn protects_crd(compiled: &Compiled, crd: &CompiledCrd) -> bool {
    deletion(compiled).is_some()
        && !orkestra_katalog::is_builtin_group(&crd.group)
        && overrides(compiled, crd).protect_crd.unwrap_or(true)
}

fn overrides(compiled: &Compiled, crd: &CompiledCrd) -> orkestra_katalog::model::CrdDeletionProtection {
    compiled.katalog.crds[&*crd.name]
        .entry
        .deletion_protection
        .clone()
        .unwrap_or_default()
}

/// Whether namespace protection lets a CR of `crd` live in `namespace`: the CRD's own
/// `runtime` lists when it has any, else the Katalog's.
pub fn admits(policy: &NamespaceProtection, crd: &CompiledCrd, object: &Value, namespace: &str) -> bool {
    let guard = crd.for_object(object).0;
    if !guard.allowed_namespaces.is_empty() || !guard.restricted_namespaces.is_empty() {
        return guard.admits_namespace(namespace);
    }
    match policy.allowed_namespaces.is_empty() {
        false => policy.allowed_namespaces.iter().any(|n| n == namespace),
        true => !policy.restricted_namespaces.iter().any(|n| n == namespace),
    }
}

#[derive(Clone)]
struct Shared {
    compiled: Arc<Compiled>,
    counts: Arc<Counts>,
}

/// The protection routes: `/deletion`, `/protect` (labels new CRs), `/namespaces`.
pub fn router(compiled: Arc<Compiled>, counts: Arc<Counts>) -> axum::Router {
    axum::Router::new()
        .route("/deletion", post(guard_deletion))
        .route("/protect", post(label_new))
        .route("/namespaces", post(guard_namespace))
        .with_state(Shared { compiled, counts })
}

fn labelled(object: &Value, label: &str) -> bool {
    object["metadata"]["labels"][label] == "true"
}

/// The Katalog CRD a review is about, for CRs; for a CRD object itself, the Katalog CRD it is.
fn crd_of<'c>(compiled: &'c Compiled, request: &Value) -> Option<(&'c CompiledCrd, bool)> {
    let resource = &request["resource"];
    if resource["group"] == "apiextensions.k8s.io" && resource["resource"] == "customresourcedefinitions" {
        let name = request["name"].as_str()?;
        let crd = compiled.enabled().find(|c| c.crd_name() == name)?;
        return Some((crd, true));
    }
    review::crd_of(compiled, request).map(|crd| (crd.as_ref(), false))
}

fn deny(uid: &Value, message: String) -> Json<Value> {
    review(json!({"uid": uid, "allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": message}}))
}

async fn guard_deletion(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let request = &body["request"];
    let uid = &request["uid"];
    let allow = || review(json!({"uid": uid, "allowed": true}));
    let (Some(policy), Some((crd, is_crd))) = (deletion(&shared.compiled), crd_of(&shared.compiled, request)) else {
        return allow();
    };
    let guarded = match is_crd {
        true => protects_crd(&shared.compiled, crd),
        false => protects_crs(&shared.compiled, crd),
    };
    let old = &request["oldObject"];
    let selected = is_crd || Scope::of(&shared.compiled, crd).selects(old);
    if !guarded || !selected || !labelled(old, DELETION_PROTECTION) {
        return allow();
    }
    let what = match is_crd {
        true => format!("CustomResourceDefinition {}", crd.crd_name()),
        false => format!("{} {}", crd.kind, qualified(request)),
    };
    let refused = match request["operation"].as_str() {
        Some("DELETE") => Some(match policy.strict_mode {
            false => format!(
                "{what} is protected from deletion by Katalog {} (label {DELETION_PROTECTION}=true); remove the label to delete it",
                shared.compiled.katalog.name
            ),
            true => format!(
                "{what} is protected from deletion by Katalog {} in strict mode: label it {STRICT_MODE_EXEMPT}=true, then remove {DELETION_PROTECTION}, then delete it",
                shared.compiled.katalog.name
            ),
        }),
        Some("UPDATE")
            if policy.strict_mode
                && !labelled(&request["object"], DELETION_PROTECTION)
                && !labelled(&request["object"], STRICT_MODE_EXEMPT) =>
        {
            Some(format!(
                "{what}: the label {DELETION_PROTECTION} may only be removed from an object labelled {STRICT_MODE_EXEMPT}=true (strict mode of Katalog {})",
                shared.compiled.katalog.name
            ))
        }
        _ => None,
    };
    match refused {
        Some(message) => {
            shared.counts.deletion_blocked.fetch_add(1, Ordering::Relaxed);
            tracing::info!(%message, "deletion protection refused a write");
            deny(uid, message)
        }
        None => allow(),
    }
}

fn qualified(request: &Value) -> String {
    let name = request["name"].as_str().unwrap_or_default();
    match request["namespace"].as_str().filter(|n| !n.is_empty()) {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_string(),
    }
}

/// The label on a CR being created, as a JSON Patch.
async fn label_new(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let request = &body["request"];
    let uid = &request["uid"];
    let object = &request["object"];
    let protect = match crd_of(&shared.compiled, request) {
        Some((crd, false)) => protects_crs(&shared.compiled, crd) && Scope::of(&shared.compiled, crd).selects(object),
        _ => false,
    };
    if request["operation"] != "CREATE" || !protect || labelled(object, DELETION_PROTECTION) {
        return review(json!({"uid": uid, "allowed": true}));
    }
    let op = match object["metadata"]["labels"].is_object() {
        true => {
            json!({"op": "add", "path": format!("/metadata/labels/{}", DELETION_PROTECTION.replace('/', "~1")), "value": "true"})
        }
        false => json!({"op": "add", "path": "/metadata/labels", "value": {DELETION_PROTECTION: "true"}}),
    };
    let patch = base64::engine::general_purpose::STANDARD.encode(json!([op]).to_string());
    review(json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch}))
}

async fn guard_namespace(State(shared): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let request = &body["request"];
    let uid = &request["uid"];
    let allow = || review(json!({"uid": uid, "allowed": true}));
    let (Some(policy), Some((crd, false))) = (namespaces(&shared.compiled), crd_of(&shared.compiled, request)) else {
        return allow();
    };
    let Some(namespace) = request["namespace"].as_str().filter(|n| !n.is_empty()) else {
        return allow();
    };
    if admits(policy, crd, &request["object"], namespace) {
        return allow();
    }
    shared.counts.namespace_blocked.fetch_add(1, Ordering::Relaxed);
    deny(
        uid,
        format!(
            "{} may not be created in namespace {namespace}: Katalog {} protects it (namespace protection)",
            crd.kind, shared.compiled.katalog.name
        ),
    )
}

/// Labels what deletion protection guards and is not labelled yet: the Katalog's CRDs and
/// the CRs each entry selects that exist (new ones are labelled as they are created). Run
/// once at start; an object already labelled costs no write.
pub async fn label_existing(client: &kube::Client, compiled: &Compiled) -> Result<usize, kube::Error> {
    if deletion(compiled).is_none() {
        return Ok(0);
    }
    let patch = Patch::Merge(json!({"metadata": {"labels": {DELETION_PROTECTION: "true"}}}));
    let params = PatchParams::default();
    let mut written = 0;
    let crds = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let crds = Objects::<DynamicObject>::all_with(client.clone(), &crds);
    for crd in compiled.enabled() {
        if protects_crd(compiled, crd)
            && let Some(object) = crds.get_opt(&crd.crd_name()).await?
            && object
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(DELETION_PROTECTION))
                .map(String::as_str)
                != Some("true")
        {
            crds.patch(&crd.crd_name(), &params, &patch).await?;
            written += 1;
        }
        if !protects_crs(compiled, crd) {
            continue;
        }
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&crd.group, &crd.version, &crd.kind), &crd.plural);
        let scope = Scope::of(compiled, crd);
        let selected = Objects::<DynamicObject>::within(client.clone(), scope.namespace.as_deref(), &resource)?;
        let unlabelled = ListParams::default().labels(&scope.list_selector(&format!("{DELETION_PROTECTION}!=true")));
        for object in selected.list(&unlabelled).await? {
            let name = object.metadata.name.clone().unwrap_or_default();
            let api =
                Objects::<DynamicObject>::within(client.clone(), object.metadata.namespace.as_deref(), &resource)?;
            api.patch(&name, &params, &patch).await?;
            written += 1;
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const KATALOG: &str = "
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: guarded}
security:
  deletionProtection: {enabled: true, strictMode: STRICT}
  namespaceProtection: {enabled: true, restrictedNamespaces: [kube-system]}
spec:
  crds:
    site:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Site, plural: sites}
    scratch:
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Scratch, plural: scratches}
      deletionProtection: {protectCRs: false}
      operatorBox:
        runtime: {allowedNamespaces: [sandbox]}
";

    async fn ask(strict: bool, path: &str, request: Value) -> Value {
        let katalog = KATALOG.replace("STRICT", &strict.to_string());
        let compiled = orkestra_katalog::load_sources(&[(PathBuf::from("k.yaml"), katalog)]).unwrap();
        let app = router(Arc::new(compiled), Arc::default());
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
        crate::review::answer(app, path, body).await
    }

    fn review_of(operation: &str, plural: &str, old: Value, new: Value) -> Value {
        json!({"uid": "u", "operation": operation, "name": "a", "namespace": "team",
               "resource": {"group": "demo.orkestra.io", "version": "v1", "resource": plural},
               "oldObject": old, "object": new})
    }

    fn with_labels(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "labels": labels}})
    }

    #[tokio::test]
    async fn a_labelled_cr_is_not_deleted_until_the_label_goes() {
        let protected = with_labels(json!({DELETION_PROTECTION: "true"}));
        let answer = ask(
            false,
            "/deletion",
            review_of("DELETE", "sites", protected.clone(), Value::Null),
        )
        .await;
        assert_eq!(answer["allowed"], false);
        assert_eq!(answer["status"]["code"], 403);
        let message = answer["status"]["message"].as_str().unwrap();
        assert!(
            message.contains("Site team/a is protected") && message.contains("remove the label"),
            "{message}"
        );
        let bare = ask(
            false,
            "/deletion",
            review_of("DELETE", "sites", with_labels(json!({})), Value::Null),
        )
        .await;
        assert_eq!(bare["allowed"], true);
        let opted_out = ask(
            false,
            "/deletion",
            review_of("DELETE", "scratches", protected.clone(), Value::Null),
        )
        .await;
        assert_eq!(opted_out["allowed"], true, "protectCRs: false");
        let unlabel = ask(
            false,
            "/deletion",
            review_of("UPDATE", "sites", protected, with_labels(json!({}))),
        )
        .await;
        assert_eq!(unlabel["allowed"], true, "outside strict mode the label may go");
    }

    #[tokio::test]
    async fn strict_mode_lets_the_label_go_only_from_an_exempt_object() {
        let protected = with_labels(json!({DELETION_PROTECTION: "true"}));
        let unlabel = ask(
            true,
            "/deletion",
            review_of("UPDATE", "sites", protected.clone(), with_labels(json!({}))),
        )
        .await;
        assert_eq!(unlabel["allowed"], false);
        let exempt = with_labels(json!({STRICT_MODE_EXEMPT: "true"}));
        let allowed = ask(
            true,
            "/deletion",
            review_of("UPDATE", "sites", protected.clone(), exempt),
        )
        .await;
        assert_eq!(allowed["allowed"], true);
        let relabel = ask(
            true,
            "/deletion",
            review_of("UPDATE", "sites", protected.clone(), protected),
        )
        .await;
        assert_eq!(relabel["allowed"], true, "an update that keeps the label is fine");
    }

    #[tokio::test]
    async fn only_the_katalogs_own_crds_are_guarded() {
        let protected = with_labels(json!({DELETION_PROTECTION: "true"}));
        let mut other = review_of("DELETE", "widgets", protected.clone(), Value::Null);
        other["resource"]["group"] = json!("other.io");
        assert_eq!(ask(false, "/deletion", other).await["allowed"], true);
        let crd = |name: &str| {
            json!({"uid": "u", "operation": "DELETE", "name": name,
                   "resource": {"group": "apiextensions.k8s.io", "version": "v1", "resource": "customresourcedefinitions"},
                   "oldObject": protected.clone()})
        };
        assert_eq!(
            ask(false, "/deletion", crd("sites.demo.orkestra.io")).await["allowed"],
            false
        );
        assert_eq!(ask(false, "/deletion", crd("widgets.other.io")).await["allowed"], true);
    }

    #[tokio::test]
    async fn a_new_cr_is_labelled_in_its_own_write() {
        let answer = ask(
            false,
            "/protect",
            review_of("CREATE", "sites", Value::Null, json!({"metadata": {"name": "a"}})),
        )
        .await;
        let patch = base64::engine::general_purpose::STANDARD
            .decode(answer["patch"].as_str().unwrap())
            .unwrap();
        let ops: Value = serde_json::from_slice(&patch).unwrap();
        assert_eq!(
            ops,
            json!([{"op": "add", "path": "/metadata/labels", "value": {DELETION_PROTECTION: "true"}}])
        );
        let labelled = ask(
            false,
            "/protect",
            review_of("CREATE", "sites", Value::Null, with_labels(json!({"x": "y"}))),
        )
        .await;
        let patch = base64::engine::general_purpose::STANDARD
            .decode(labelled["patch"].as_str().unwrap())
            .unwrap();
        let ops: Value = serde_json::from_slice(&patch).unwrap();
        assert_eq!(ops[0]["path"], "/metadata/labels/orkestra.io~1deletion-protection");
        let scratch = ask(
            false,
            "/protect",
            review_of("CREATE", "scratches", Value::Null, json!({})),
        )
        .await;
        assert!(scratch.get("patch").is_none());
    }

    #[tokio::test]
    async fn a_cr_in_a_protected_namespace_is_refused_and_the_crd_lists_win() {
        let mut system = review_of("CREATE", "sites", Value::Null, json!({}));
        system["namespace"] = json!("kube-system");
        let answer = ask(false, "/namespaces", system).await;
        assert_eq!(answer["allowed"], false);
        assert!(
            answer["status"]["message"]
                .as_str()
                .unwrap()
                .contains("namespace kube-system")
        );
        assert_eq!(
            ask(
                false,
                "/namespaces",
                review_of("CREATE", "sites", Value::Null, json!({}))
            )
            .await["allowed"],
            true
        );
        // scratches allows only sandbox, whatever the Katalog restricts.
        assert_eq!(
            ask(
                false,
                "/namespaces",
                review_of("CREATE", "scratches", Value::Null, json!({}))
            )
            .await["allowed"],
            false
        );
        let mut sandbox = review_of("CREATE", "scratches", Value::Null, json!({}));
        sandbox["namespace"] = json!("sandbox");
        assert_eq!(ask(false, "/namespaces", sandbox).await["allowed"], true);
    }
}
