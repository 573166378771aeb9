//! A CRD entry's `setup`: the prerequisite manifests `ork dev` applies in order, and the
//! objects it then waits for (`wait`) before the sample CRs go in.

use std::time::Duration;

use serde_json::Value;

use super::CrdEntry;

/// How long a wait entry without `timeout` waits.
pub const DEFAULT_SETUP_WAIT: Duration = Duration::from_secs(60);

/// One object `setup.wait` names: it must exist (and, with `condition`, have that condition
/// `True`) before the CRs are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupWait {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// Where it is; `None` for a cluster-scoped kind, or the default namespace.
    pub namespace: Option<String>,
    /// A condition type (`Available`, `Ready`) whose status must be `True`.
    pub condition: Option<String>,
    pub timeout: Duration,
}

impl SetupWait {
    /// `Kind namespace/name`, as messages name it.
    pub fn describe(&self) -> String {
        self.describe_in(self.namespace.as_deref())
    }

    /// As [`SetupWait::describe`], in `namespace` (where it was looked for).
    pub fn describe_in(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(namespace) => format!("{} {namespace}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// The apiVersion of a kind the Katalog knows (a child kind's row), for a wait entry that
/// names only its kind, as upstream's do.
pub fn known_api_version(kind: &str) -> Option<&'static str> {
    crate::kinds::RESOURCE_KINDS
        .iter()
        .find(|spec| spec.kind == kind)
        .map(|spec| spec.api_version)
}

impl CrdEntry {
    /// The `setup` files in order: written as a list, or as `{apply: [...]}`. Other shapes
    /// are refused at load.
    pub fn setup_files(&self) -> Vec<&str> {
        let list = match &self.setup {
            Some(Value::Array(list)) => list,
            Some(Value::Object(setup)) => match setup.get("apply") {
                Some(Value::Array(list)) => list,
                _ => return Vec::new(),
            },
            _ => return Vec::new(),
        };
        list.iter().filter_map(Value::as_str).collect()
    }

    /// The objects `setup.wait` names, in order. Entries the load refused (no kind or name, an
    /// unknown kind without apiVersion, a wrong timeout) are not here.
    pub fn setup_waits(&self) -> Vec<SetupWait> {
        let Some(Value::Array(list)) = self.setup.as_ref().and_then(|s| s.get("wait")) else {
            return Vec::new();
        };
        list.iter().filter_map(wait_entry).collect()
    }
}

fn wait_entry(entry: &Value) -> Option<SetupWait> {
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(String::from);
    let kind = text("kind")?;
    let api_version = text("apiVersion").or_else(|| known_api_version(&kind).map(String::from))?;
    let timeout = match entry.get("timeout").and_then(Value::as_str) {
        Some(text) => orkestra_expr::duration::parse(text).ok()?,
        None => DEFAULT_SETUP_WAIT,
    };
    Some(SetupWait {
        api_version,
        kind,
        name: text("name")?,
        namespace: text("namespace"),
        condition: text("condition"),
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(setup: Value) -> CrdEntry {
        serde_json::from_value(json!({"apiTypes": {"group": "x.io", "version": "v1", "kind": "X"}, "setup": setup}))
            .unwrap()
    }

    #[test]
    fn wait_entries_name_their_object_with_its_api_version_and_timeout() {
        let crd = entry(json!({
            "apply": ["./setup.yaml"],
            "wait": [
                {"kind": "ConfigMap", "name": "app-config", "namespace": "platform", "timeout": "15s"},
                {"apiVersion": "example.io/v1", "kind": "Database", "name": "db", "condition": "Ready"},
            ],
        }));
        assert_eq!(crd.setup_files(), ["./setup.yaml"]);
        let waits = crd.setup_waits();
        assert_eq!(waits.len(), 2);
        assert_eq!(
            (waits[0].api_version.as_str(), waits[0].describe(), waits[0].timeout),
            (
                "v1",
                "ConfigMap platform/app-config".to_string(),
                Duration::from_secs(15)
            )
        );
        assert_eq!(waits[1].api_version, "example.io/v1");
        assert_eq!(waits[1].condition.as_deref(), Some("Ready"));
        assert_eq!(waits[1].timeout, DEFAULT_SETUP_WAIT);
        assert_eq!(known_api_version("Deployment"), Some("apps/v1"));
        assert!(entry(json!(["a.yaml"])).setup_waits().is_empty());
    }
}
