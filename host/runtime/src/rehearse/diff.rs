//! Field-level differences between an object as it is and as it would be: every leaf that
//! differs, by its dot path (`spec.replicas`, `data.x`, `metadata.labels.app`, an item of a
//! list of the same length as `status.conditions[1].message`), leaving out what the API
//! server keeps for itself (resourceVersion, managedFields, ...).

use serde_json::Value;

/// Metadata the API server sets on every write: no change of the object's meaning.
const SERVER_METADATA: [&str; 6] = [
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "selfLink",
];

/// One field that differs: `before` is `None` where it is added, `after` where removed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Change {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

/// Where `after` differs from `before`, both whole objects (or both a part of one, `at` its
/// path).
pub fn changes(at: &str, before: &Value, after: &Value) -> Vec<Change> {
    let mut found = Vec::new();
    walk(at, before, after, &mut found);
    found
}

fn walk(path: &str, before: &Value, after: &Value, found: &mut Vec<Change>) {
    let join = |key: &str| match path.is_empty() {
        true => key.to_string(),
        false => format!("{path}.{key}"),
    };
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys().filter(|k| !b.contains_key(*k))).collect();
            keys.sort();
            for key in keys {
                if path == "metadata" && SERVER_METADATA.contains(&key.as_str()) {
                    continue;
                }
                match (b.get(key), a.get(key)) {
                    (Some(b), Some(a)) => walk(&join(key), b, a, found),
                    (b, a) => found.push(Change {
                        path: join(key),
                        before: b.cloned(),
                        after: a.cloned(),
                    }),
                }
            }
        }
        // Lists of one length, item by item (`status.conditions[1].message`); others whole.
        (Value::Array(b), Value::Array(a)) if b.len() == a.len() => {
            for (i, (b, a)) in b.iter().zip(a).enumerate() {
                walk(&format!("{path}[{i}]"), b, a, found);
            }
        }
        (b, a) if b != a => found.push(Change {
            path: path.to_string(),
            before: Some(b.clone()).filter(|v| !v.is_null()),
            after: Some(a.clone()).filter(|v| !v.is_null()),
        }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leaves_that_differ_are_named_by_path_and_server_metadata_is_left_out() {
        let before = json!({
            "metadata": {"name": "a", "resourceVersion": "1", "labels": {"app": "a"}, "managedFields": [1]},
            "data": {"x": "1", "gone": "y"},
            "spec": {"ports": [{"port": 80}]},
        });
        let after = json!({
            "metadata": {"name": "a", "resourceVersion": "2", "labels": {"app": "a", "tier": "web"}},
            "data": {"x": "2"},
            "spec": {"ports": [{"port": 8080}]},
        });
        let found = changes("", &before, &after);
        let paths: Vec<&str> = found.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            paths,
            ["data.gone", "data.x", "metadata.labels.tier", "spec.ports[0].port"]
        );
        assert_eq!(found[0].after, None, "removed");
        assert_eq!(found[1].before, Some(json!("1")));
        assert_eq!(found[2].before, None, "added");
        assert!(changes("", &before, &before).is_empty());
        assert_eq!(
            changes("status", &json!({"a": 1}), &json!({"a": 2}))[0].path,
            "status.a"
        );
    }
}
