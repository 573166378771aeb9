//! CR bookkeeping: the finalizers this runtime owns, the managed label, CRD-level labels and
//! the write-once managed-by / managed-since annotations, as one merge patch (or none when
//! everything is in place, so a steady state writes nothing).
//!
//! Pure: no kube or wasmtime imports.

use serde_json::{Map, Value, json};

use orkestra_expr::labels::{MANAGED_BY, MANAGED_LABEL, MANAGED_SINCE};
use orkestra_expr::resolver::Resolver;
use orkestra_katalog::compile::CompiledCrd;

/// The finalizer older releases put on CRs; removed on deletion like ours.
pub const LEGACY_FINALIZER: &str = "orkestra.orkspace.io/finalizer";

/// Whether a Job has reached Complete or Failed.
pub fn job_finished(job: &Value) -> bool {
    job["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
}

/// The finalizers on an object.
pub fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

/// The merge patch that brings a CR's metadata in line, if any is needed.
pub fn bookkeeping_patch(
    crd: &CompiledCrd,
    object: &Value,
    resolver: &Resolver<'_, '_>,
    now: jiff::Timestamp,
) -> Result<Option<Value>, String> {
    let meta = &object["metadata"];
    let mut patch = Map::new();
    let current = finalizers(object);
    let wanted: Vec<String> = if crd.remove_finalizers {
        current
            .iter()
            .filter(|f| !crd.finalizers.contains(f))
            .cloned()
            .collect()
    } else {
        let mut list = current.clone();
        list.extend(crd.finalizers.iter().filter(|f| !current.contains(f)).cloned());
        list
    };
    if wanted != current {
        patch.insert("finalizers".into(), json!(wanted));
    }
    let mut labels = Map::new();
    let mut want = vec![(MANAGED_LABEL.to_string(), "true".to_string())];
    for (key, template) in &crd.labels {
        want.push((
            key.clone(),
            resolver
                .render(template)
                .map_err(|e| format!("labels.{key}: {}", e.message))?,
        ));
    }
    for (key, value) in want {
        if meta["labels"][key.as_str()].as_str() != Some(value.as_str()) {
            labels.insert(key, json!(value));
        }
    }
    if !labels.is_empty() {
        patch.insert("labels".into(), Value::Object(labels));
    }
    let mut annotations = Map::new();
    if !crd.katalog.is_empty() && meta["annotations"][MANAGED_BY].is_null() {
        annotations.insert(MANAGED_BY.into(), json!(crd.katalog));
    }
    if meta["annotations"][MANAGED_SINCE].is_null() {
        annotations.insert(MANAGED_SINCE.into(), json!(orkestra_expr::calendar::rfc3339(now)));
    }
    if !annotations.is_empty() {
        patch.insert("annotations".into(), Value::Object(annotations));
    }
    Ok((!patch.is_empty()).then(|| json!({"metadata": patch})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::compile_for_test;

    #[test]
    fn bookkeeping_adds_what_is_missing_once_and_nothing_after() {
        let crd = compile_for_test("        runtime:\n          finalizers: [example.io/audit]\n");
        let object = json!({"metadata": {"name": "a", "finalizers": ["someone.else/keep"]}});
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let patch = bookkeeping_patch(&crd, &object, &Resolver::new(&object, &[]), now)
            .unwrap()
            .unwrap();
        assert_eq!(
            patch["metadata"]["finalizers"],
            json!(["someone.else/keep", "orkestra.orkspace.io/cleanup", "example.io/audit"]),
            "others' finalizers stay, ours are added"
        );
        assert_eq!(patch["metadata"]["labels"][MANAGED_LABEL], "true");
        assert_eq!(patch["metadata"]["annotations"][MANAGED_SINCE], "2026-01-01T00:00:00Z");
        let mut applied = object.clone();
        applied["metadata"]["finalizers"] = patch["metadata"]["finalizers"].clone();
        applied["metadata"]["labels"] = patch["metadata"]["labels"].clone();
        applied["metadata"]["annotations"] = patch["metadata"]["annotations"].clone();
        assert_eq!(
            bookkeeping_patch(&crd, &applied, &Resolver::new(&applied, &[]), now).unwrap(),
            None,
            "a steady state needs no patch"
        );
    }

    #[test]
    fn a_job_is_finished_when_complete_or_failed_is_true() {
        let job = |t: &str, s: &str| json!({"status": {"conditions": [{"type": t, "status": s}]}});
        assert!(job_finished(&job("Complete", "True")));
        assert!(job_finished(&job("Failed", "True")));
        assert!(!job_finished(&job("Failed", "False")));
        assert!(!job_finished(&job("Suspended", "True")));
        assert!(!job_finished(&json!({"status": {"active": 1}})));
    }
}
