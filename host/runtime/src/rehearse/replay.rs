//! What a replay did differently from its recording: the result (outcome, children field by
//! field, status, events) and the kube calls, each difference by where it is. Reads past the
//! end of the recording (more clock reads or random bytes) are notes, not differences: they
//! were served, and what the guest made of them shows in its output.

use serde::Serialize;
use serde_json::Value;

use super::diff;
use orkestra_wasm::record::{CallResult, KubeCall, Recording, ResponseRecord, identity};
use orkestra_wasm::replay::Replayed;

/// One place where the replay differs: `recorded` is `None` where only the replay has it,
/// `replayed` where only the recording does.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed: Option<Value>,
}

/// A replay against its recording.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Comparison {
    pub differences: Vec<Difference>,
    pub notes: Vec<String>,
}

impl Comparison {
    pub fn same(&self) -> bool {
        self.differences.is_empty()
    }

    fn differ(&mut self, at: impl Into<String>, recorded: Option<Value>, replayed: Option<Value>) {
        self.differences.push(Difference {
            at: at.into(),
            recorded,
            replayed,
        });
    }

    /// Every field where `replayed` differs from `recorded`, under `at`.
    fn fields(&mut self, at: &str, recorded: &Value, replayed: &Value) {
        for change in diff::changes("", recorded, replayed) {
            let path = match change.path.is_empty() {
                true => at.to_string(),
                false => format!("{at}.{}", change.path),
            };
            self.differ(path, change.before, change.after);
        }
    }
}

/// How `replayed` differs from `recording`.
pub fn compare(recording: &Recording, replayed: &Replayed) -> Comparison {
    let mut comparison = Comparison::default();
    match (&recording.result, &replayed.result) {
        (CallResult::Response(before), CallResult::Response(after)) => responses(&mut comparison, before, after),
        (before, after) if before != after => {
            comparison.differ("result", Some(summary(before)), Some(summary(after)));
        }
        _ => {}
    }
    kube_calls(
        &mut comparison,
        &recording.kube.iter().map(|e| e.call.clone()).collect::<Vec<_>>(),
        &replayed.kube,
    );
    let beyond = &replayed.beyond;
    if beyond.clock_reads > 0 {
        comparison.notes.push(format!(
            "read the clocks {} more time(s) than recorded; each was served the last recorded value",
            beyond.clock_reads
        ));
    }
    if beyond.random_bytes > 0 {
        comparison.notes.push(format!(
            "read {} random byte(s) past the recording; they were served as zeros",
            beyond.random_bytes
        ));
    }
    comparison
}

fn summary(result: &CallResult) -> Value {
    match result {
        CallResult::Response(response) => serde_json::to_value(&response.outcome).unwrap_or_default(),
        CallResult::NoExport => "no export for this hook".into(),
        CallResult::Failed(why) => format!("failed: {why}").into(),
    }
}

fn responses(comparison: &mut Comparison, before: &ResponseRecord, after: &ResponseRecord) {
    if before.outcome != after.outcome {
        let value = |o| serde_json::to_value(o).unwrap_or_default();
        comparison.differ("outcome", Some(value(&before.outcome)), Some(value(&after.outcome)));
    }
    let keyed =
        |resources: &[Value]| -> Vec<(String, Value)> { resources.iter().map(|r| (identity(r), r.clone())).collect() };
    let (before_children, after_children) = (keyed(&before.resources), keyed(&after.resources));
    for (key, child) in &before_children {
        let at = format!("resources[{key}]");
        match after_children.iter().find(|(k, _)| k == key) {
            Some((_, replayed)) => comparison.fields(&at, child, replayed),
            None => comparison.differ(at, Some(child.clone()), None),
        }
    }
    for (key, child) in &after_children {
        if !before_children.iter().any(|(k, _)| k == key) {
            comparison.differ(format!("resources[{key}]"), None, Some(child.clone()));
        }
    }
    let empty = Value::Object(Default::default());
    comparison.fields(
        "status",
        before.status.as_ref().unwrap_or(&empty),
        after.status.as_ref().unwrap_or(&empty),
    );
    let events = |response: &ResponseRecord| -> Vec<Value> {
        let each = response.events.iter();
        each.map(|e| format!("{} {}: {}", e.type_, e.reason, e.message).into())
            .collect()
    };
    let (before_events, after_events) = (events(before), events(after));
    for i in 0..before_events.len().max(after_events.len()) {
        let (b, a) = (before_events.get(i), after_events.get(i));
        if b != a {
            comparison.differ(format!("events[{i}]"), b.cloned(), a.cloned());
        }
    }
}

/// Call by call, in order: a call of the same verb and object whose body differs (an apply,
/// a status patch) field by field; any other, whole.
fn kube_calls(comparison: &mut Comparison, recorded: &[KubeCall], replayed: &[KubeCall]) {
    for i in 0..recorded.len().max(replayed.len()) {
        let at = format!("kube[{i}]");
        match (recorded.get(i), replayed.get(i)) {
            (Some(b), Some(a)) if b == a => {}
            (Some(KubeCall::Apply { object: b }), Some(KubeCall::Apply { object: a }))
                if identity(b) == identity(a) =>
            {
                comparison.fields(&format!("{at} apply {}", identity(b)), b, a);
            }
            (
                Some(KubeCall::PatchStatus { object: b, status: sb }),
                Some(KubeCall::PatchStatus { object: a, status: sa }),
            ) if b == a => comparison.fields(&format!("{at} patch-status {b}"), sb, sa),
            (b, a) => comparison.differ(at, b.map(|c| c.to_string().into()), a.map(|c| c.to_string().into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orkestra_wasm::record::{Beyond, EventRecord, Named, OutcomeRecord};
    use serde_json::json;

    fn response(status: Value, resources: Vec<Value>) -> ResponseRecord {
        ResponseRecord {
            outcome: OutcomeRecord::Ok,
            resources,
            status: Some(status),
            events: vec![EventRecord {
                type_: "Normal".into(),
                reason: "Rendered".into(),
                message: "ok".into(),
            }],
        }
    }

    fn get(name: &str) -> KubeCall {
        KubeCall::Get {
            object: Named {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("a".into()),
                name: name.into(),
            },
        }
    }

    fn config(name: &str, page: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"page": page}})
    }

    fn replayed(result: CallResult, kube: Vec<KubeCall>) -> Replayed {
        Replayed {
            digest: "d".into(),
            result,
            kube,
            beyond: Beyond::default(),
        }
    }

    fn recording(result: CallResult, kube: Vec<KubeCall>) -> Recording {
        let text = json!({
            "format": 1, "at": "", "hook": "reconcile", "secretsRedacted": true, "logs": [],
            "component": {"slot": "site", "world": "hook", "source": "x.wasm", "digest": "d", "revision": 1,
                "limits": {"timeoutMs": 2000, "memory": 1, "resultSize": 1, "kubeCalls": 1, "kubeBytes": 1,
                           "children": 1, "events": 1, "logBytes": 1, "fuel": null}},
            "request": {"key": "a/b", "apiVersion": "v1", "kind": "Site", "target": null, "object": null,
                        "eventId": null, "sentinels": [], "context": {}},
            "kube": kube.into_iter().map(|call| json!({"call": call, "answer": "notFound"})).collect::<Vec<_>>(),
            "wasi": {"wall": [], "monotonic": [], "random": "", "insecureRandom": "", "insecureSeed": "0"},
            "result": result,
        });
        serde_json::from_value(text).unwrap()
    }

    #[test]
    fn the_same_output_and_calls_are_the_same() {
        let result = CallResult::Response(response(json!({"pageBytes": 5}), vec![config("c", "x")]));
        let comparison = compare(
            &recording(result.clone(), vec![get("x")]),
            &replayed(result, vec![get("x")]),
        );
        assert!(comparison.same(), "{comparison:?}");
    }

    #[test]
    fn every_difference_is_named_by_where_it_is() {
        let before = CallResult::Response(response(
            json!({"pageBytes": 5}),
            vec![config("c", "x"), config("gone", "x")],
        ));
        let mut changed = response(json!({"pageBytes": 7}), vec![config("c", "y"), config("new", "x")]);
        changed.outcome = OutcomeRecord::RequeueAfterMs(500);
        changed.events.clear();
        let comparison = compare(
            &recording(before, vec![get("x"), get("y")]),
            &replayed(CallResult::Response(changed), vec![get("x"), get("z"), get("w")]),
        );
        let at: Vec<&str> = comparison.differences.iter().map(|d| d.at.as_str()).collect();
        assert_eq!(
            at,
            [
                "outcome",
                "resources[v1 ConfigMap c].data.page",
                "resources[v1 ConfigMap gone]",
                "resources[v1 ConfigMap new]",
                "status.pageBytes",
                "events[0]",
                "kube[1]",
                "kube[2]",
            ]
        );
        let call = &comparison.differences[6];
        assert_eq!(call.recorded, Some(json!("get v1 ConfigMap a/y")));
        assert_eq!(call.replayed, Some(json!("get v1 ConfigMap a/z")));
        assert_eq!(comparison.differences[7].recorded, None, "only the replay made it");
    }

    #[test]
    fn a_failed_replay_differs_in_its_result() {
        let before = CallResult::Response(response(json!({}), vec![]));
        let after = CallResult::Failed("trapped: boom".into());
        let comparison = compare(&recording(before, vec![]), &replayed(after, vec![]));
        assert_eq!(comparison.differences.len(), 1);
        assert_eq!(comparison.differences[0].at, "result");
        assert_eq!(comparison.differences[0].replayed, Some(json!("failed: trapped: boom")));
    }
}
