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

/// The merge patch that brings a CR's metadata in line, if it needs one. It needs one for
/// our finalizers, when `holds` (the CR's deletion waits for this runtime, see
/// [`CompiledCrd::holds_deletion`]) and they are not all there, or their removal with
/// `removeFinalizers`; and for the CRD's `labels` that differ. The managed label and the
/// write-once managed-by / managed-since annotations ride along with such a patch, never
/// cause one: marking a CR costs no write of its own.
pub fn bookkeeping_patch(
    crd: &CompiledCrd,
    holds: bool,
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
    } else if holds {
        let mut list = current.clone();
        list.extend(crd.finalizers.iter().filter(|f| !current.contains(f)).cloned());
        list
    } else {
        current.clone()
    };
    if wanted != current {
        patch.insert("finalizers".into(), json!(wanted));
    }
    let mut labels = Map::new();
    for (key, template) in &crd.labels {
        let value = resolver
            .render(template)
            .map_err(|e| format!("labels.{key}: {}", e.message))?;
        if meta["labels"][key.as_str()].as_str() != Some(value.as_str()) {
            labels.insert(key.clone(), json!(value));
        }
    }
    if patch.is_empty() && labels.is_empty() {
        return Ok(None);
    }
    if meta["labels"][MANAGED_LABEL].as_str() != Some("true") {
        labels.insert(MANAGED_LABEL.into(), json!("true"));
    }
    patch.insert("labels".into(), Value::Object(labels));
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
    Ok(Some(json!({"metadata": patch})))
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
        let patch = bookkeeping_patch(&crd, true, &object, &Resolver::new(&object, &[]), now)
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
            bookkeeping_patch(&crd, true, &applied, &Resolver::new(&applied, &[]), now).unwrap(),
            None,
            "a steady state needs no patch"
        );
    }

    #[test]
    fn a_cr_whose_deletion_needs_nothing_of_us_is_not_written_just_to_be_marked() {
        let crd =
            compile_for_test("        reconcile:\n          onReconcile:\n            configMaps: [{data: {a: b}}]\n");
        let object = json!({"metadata": {"name": "a"}});
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let resolver = Resolver::new(&object, &[]);
        assert_eq!(bookkeeping_patch(&crd, false, &object, &resolver, now).unwrap(), None);
        // The CRD entry's own `labels`, after an empty box.
        let labelled = compile_for_test("        {}\n      labels:\n        team: '{{ .metadata.name }}'\n");
        let patch = bookkeeping_patch(&labelled, false, &object, &resolver, now)
            .unwrap()
            .expect("a declared label is a reason to write");
        assert_eq!(patch["metadata"]["labels"]["team"], "a");
        assert_eq!(
            patch["metadata"]["labels"][MANAGED_LABEL], "true",
            "the mark rides along"
        );
        assert_eq!(patch["metadata"]["annotations"][MANAGED_SINCE], "2026-01-01T00:00:00Z");
        assert!(
            patch["metadata"]["finalizers"].is_null(),
            "no finalizer it does not need"
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
