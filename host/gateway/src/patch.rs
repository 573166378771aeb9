//! The JSON Patch (RFC 6902) from one object to another, for a mutating webhook's answer:
//! objects are compared key by key, anything else is replaced whole.

use serde_json::{Value, json};

/// The operations that turn `before` into `after`.
pub fn diff(before: &Value, after: &Value) -> Vec<Value> {
    let mut ops = Vec::new();
    walk(before, after, &mut String::new(), &mut ops);
    ops
}

fn walk(before: &Value, after: &Value, path: &mut String, ops: &mut Vec<Value>) {
    match (before, after) {
        (Value::Object(old), Value::Object(new)) => {
            for (key, value) in new {
                let len = path.len();
                path.push('/');
                path.push_str(&escape(key));
                match old.get(key) {
                    Some(previous) => walk(previous, value, path, ops),
                    None => ops.push(json!({"op": "add", "path": path.as_str(), "value": value})),
                }
                path.truncate(len);
            }
            for key in old.keys().filter(|k| !new.contains_key(*k)) {
                ops.push(json!({"op": "remove", "path": format!("{path}/{}", escape(key))}));
            }
        }
        (old, new) if old != new => ops.push(json!({"op": "replace", "path": path.as_str(), "value": new})),
        _ => {}
    }
}

/// A key as a JSON Pointer segment.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_changed_is_patched_with_keys_escaped() {
        let before = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 1, "image": "x", "gone": true}});
        let after = json!({"metadata": {"labels": {"a": "1", "team/x~y": "pay"}}, "spec": {"replicas": 2, "image": "x", "tier": {"n": 1}}});
        let ops = diff(&before, &after);
        assert!(ops.contains(&json!({"op": "add", "path": "/metadata/labels/team~1x~0y", "value": "pay"})));
        assert!(ops.contains(&json!({"op": "replace", "path": "/spec/replicas", "value": 2})));
        assert!(ops.contains(&json!({"op": "add", "path": "/spec/tier", "value": {"n": 1}})));
        assert!(ops.contains(&json!({"op": "remove", "path": "/spec/gone"})));
        assert_eq!(ops.len(), 4);
        assert!(diff(&after, &after).is_empty());
    }
}
