//! What `ork plan` reports of one CR: the writes of its rehearsed reconcile (dry runs, in
//! order) read against the objects as they are: children created, changed (the fields) or
//! deleted, the CR's own metadata and status changes, and the Events it would record.

use serde::Serialize;
use serde_json::Value;

use super::ApiPath;
use super::diff::{Change, changes};
use super::dry_run::Write;
use crate::runtime::{Rehearsed, key_of};

/// What the plan of one CR says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Its reconcile would write nothing that changes anything.
    Unchanged,
    Changes,
    /// Its reconcile gate is closed: nothing would run.
    Gated,
    /// Its reconcile would fail: a change from a CR that reconciles, so it counts as one.
    Failed,
}

/// One child the reconcile would write.
#[derive(Debug, Clone, Serialize)]
pub struct ChildPlan {
    /// `create`, `change` or `delete`.
    pub action: &'static str,
    pub kind: String,
    /// `namespace/name`, or `name`.
    pub name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Change>,
}

/// The plan of one CR.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CrPlan {
    pub cr: String,
    pub verdict: Verdict,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildPlan>,
    /// Its labels, annotations and finalizers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub metadata: Vec<Change>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<Change>,
    /// `Type Reason: note`, as each would be recorded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_after: Option<String>,
    /// The Katalog's external calls the reconcile would have made: a plan makes none, so
    /// what a block or gate would have done with their answers is not shown either.
    #[serde(rename = "externalCallsNotMade", skip_serializing_if = "Vec::is_empty")]
    pub external: Vec<orkestra_effects::external::NotMade>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The plan of `object` (the CR as it is, at `cr_path`, its URL path) from how its
/// rehearsal ended and the `writes` it made; `live` reads each child as it is.
pub async fn report(
    live: &kube::Client,
    cr_path: &str,
    object: &Value,
    rehearsed: Rehearsed,
    writes: Vec<Write>,
) -> CrPlan {
    let metadata = &object["metadata"];
    let mut plan = CrPlan {
        cr: key_of(object),
        verdict: Verdict::Unchanged,
        children: Vec::new(),
        metadata: Vec::new(),
        status: Vec::new(),
        events: Vec::new(),
        requeue_after: rehearsed.requeue_after(),
        external: Vec::new(),
        error: None,
    };
    match rehearsed {
        Rehearsed::Gated => {
            plan.verdict = Verdict::Gated;
            return plan;
        }
        Rehearsed::Failed(why) => plan.error = Some(why),
        Rehearsed::Reconciled(_) => {}
    }
    for write in last_per_path(writes) {
        let answer = write.answer.clone().unwrap_or(Value::Null);
        if write.path == cr_path {
            plan.metadata = changes("metadata", metadata, &answer["metadata"]);
        } else if write.path == format!("{cr_path}/status") {
            plan.status = changes("status", &object["status"], &answer["status"]);
        } else if is_event(&write.path) {
            plan.events
                .push(event_line(write.body.as_ref().unwrap_or(&Value::Null)));
        } else if let Some(child) = child(live, &write).await {
            plan.children.push(child);
        }
    }
    let changed = !(plan.children.is_empty() && plan.metadata.is_empty() && plan.status.is_empty());
    plan.verdict = match (&plan.error, changed) {
        (Some(_), _) => Verdict::Failed,
        (None, true) => Verdict::Changes,
        (None, false) => Verdict::Unchanged,
    };
    plan
}

/// The writes by path, in the order each path was first written, each with its last answer
/// (a delete wins over writes before it).
fn last_per_path(writes: Vec<Write>) -> Vec<Write> {
    let mut kept: Vec<Write> = Vec::new();
    for write in writes {
        match kept.iter_mut().find(|k| k.path == write.path) {
            Some(earlier) => *earlier = write,
            None => kept.push(write),
        }
    }
    kept
}

/// Whether `path` is of an Event (either API group).
pub(super) fn is_event(path: &str) -> bool {
    ApiPath::parse(path).is_some_and(|p| p.resource == Some("events"))
}

/// An Event as a line: `Type Reason: note`.
pub(super) fn event_line(event: &Value) -> String {
    let text = |key: &str| event[key].as_str().unwrap_or_default().to_string();
    let note = Some(text("note"))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| text("message"));
    format!("{} {}: {note}", text("type"), text("reason"))
}

/// What a write does to a child, or nothing when it changes nothing.
async fn child(live: &kube::Client, write: &Write) -> Option<ChildPlan> {
    let answer = write.answer.as_ref();
    let source = answer
        .filter(|a| a["metadata"]["name"].is_string())
        .or(write.body.as_ref());
    let kind = source
        .and_then(|o| o["kind"].as_str())
        .map_or_else(|| resource_of(&write.path), String::from);
    let name = name_of(&write.path);
    if write.method == http::Method::DELETE {
        return Some(ChildPlan {
            action: "delete",
            kind,
            name,
            fields: Vec::new(),
        });
    }
    let request = http::Request::get(&write.path).body(Vec::new()).ok()?;
    let before = live.request::<Value>(request).await.ok();
    let after = answer?;
    match before {
        None => Some(ChildPlan {
            action: "create",
            kind,
            name,
            fields: Vec::new(),
        }),
        Some(before) => {
            // Its status is the cluster's, not ours to write.
            let fields: Vec<Change> = changes("", &before, after)
                .into_iter()
                .filter(|c| c.path != "status" && !c.path.starts_with("status."))
                .collect();
            (!fields.is_empty()).then_some(ChildPlan {
                action: "change",
                kind,
                name,
                fields,
            })
        }
    }
}

/// `namespace/name` (or `name`) from an object's URL path.
pub(super) fn name_of(path: &str) -> String {
    match ApiPath::parse(path).map(|p| (p.namespace, p.name)) {
        Some((Some(namespace), Some(name))) => format!("{namespace}/{name}"),
        Some((None, Some(name))) => name.to_string(),
        _ => path.to_string(),
    }
}

/// The resource (plural) from an object's URL path, where no kind is known.
pub(super) fn resource_of(path: &str) -> String {
    ApiPath::parse(path)
        .and_then(|p| p.resource)
        .map_or_else(|| path.to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_name_their_object_and_events_are_told_apart() {
        assert_eq!(name_of("/api/v1/namespaces/team-a/configmaps/web"), "team-a/web");
        assert_eq!(name_of("/apis/rbac.authorization.k8s.io/v1/clusterroles/r"), "r");
        assert_eq!(resource_of("/api/v1/namespaces/team-a/configmaps/web"), "configmaps");
        assert!(is_event("/apis/events.k8s.io/v1/namespaces/team-a/events"));
        assert!(is_event("/api/v1/namespaces/team-a/events/x.1"));
        assert!(!is_event("/api/v1/namespaces/events/configmaps/x"));
        assert!(
            !is_event("/api/v1/namespaces/a/configmaps/events"),
            "a ConfigMap named events"
        );
        let event = json!({"type": "Normal", "reason": "Created", "note": "made web"});
        assert_eq!(event_line(&event), "Normal Created: made web");
    }
}
