//! A CR as JSON text for its component, kept per resourceVersion: the resyncs of a settled CR
//! call its component with the same text, serialized once. Bounded in bytes, as the text
//! sits beside the informer's copy of the CR.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

/// Text kept for all CRs of one component together; past it, CRs are serialized per call.
const BUDGET: usize = 16 << 20;

#[derive(Default)]
pub(super) struct SerializedCrs {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// By CR key: the resourceVersion serialized and its text.
    texts: HashMap<String, (String, Arc<str>)>,
    bytes: usize,
}

impl SerializedCrs {
    /// `object` (the CR at `key` as the informer holds it) as JSON text.
    pub(super) fn text(&self, key: &str, object: &Value) -> Arc<str> {
        let Some(version) = object["metadata"]["resourceVersion"].as_str() else {
            return orkestra_wasm::json_text(object).into();
        };
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((seen, text)) = inner.texts.get(key)
            && seen == version
        {
            return text.clone();
        }
        let text: Arc<str> = orkestra_wasm::json_text(object).into();
        let freed = inner.texts.remove(key).map_or(0, |(_, old)| old.len());
        inner.bytes -= freed;
        if inner.bytes + text.len() <= BUDGET {
            inner.bytes += text.len();
            inner.texts.insert(key.to_string(), (version.to_string(), text.clone()));
        }
        text
    }

    /// Drops what is kept for `key` (the CR is gone).
    pub(super) fn forget(&self, key: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, text)) = inner.texts.remove(key) {
            inner.bytes -= text.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn one_text_per_resource_version_and_none_kept_past_the_budget() {
        let crs = SerializedCrs::default();
        let v1 = json!({"metadata": {"name": "a", "resourceVersion": "1"}, "spec": {"x": 1}});
        let first = crs.text("ns/a", &v1);
        assert!(
            Arc::ptr_eq(&first, &crs.text("ns/a", &v1)),
            "the same version is not serialized again"
        );
        let v2 = json!({"metadata": {"name": "a", "resourceVersion": "2"}, "spec": {"x": 2}});
        let second = crs.text("ns/a", &v2);
        assert_eq!(serde_json::from_str::<Value>(&second).unwrap(), v2);
        assert_eq!(
            crs.inner.lock().unwrap().bytes,
            second.len(),
            "the old version's text was freed"
        );
        crs.forget("ns/a");
        assert_eq!(crs.inner.lock().unwrap().bytes, 0);
        let huge = json!({"metadata": {"resourceVersion": "1"}, "spec": "x".repeat(BUDGET)});
        let text = crs.text("ns/huge", &huge);
        assert!(
            !Arc::ptr_eq(&text, &crs.text("ns/huge", &huge)),
            "over the budget: not kept"
        );
        assert!(crs.inner.lock().unwrap().texts.is_empty());
    }
}
