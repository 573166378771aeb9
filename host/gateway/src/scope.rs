//! What a Katalog entry selects: the objects of its kind in its namespace (all namespaces
//! when it names none) that carry its `labelSelector`. The gateway's webhooks (an
//! `objectSelector` and a `namespaceSelector`), the labels it writes and the protections it
//! enforces reach no further: an entry for a built-in kind, which must have a
//! `labelSelector`, never touches the Deployments of kube-system or of another tenant.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use orkestra_katalog::Compiled;
use orkestra_katalog::compile::CompiledCrd;

/// The label Kubernetes puts on every namespace with its name.
const NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";

/// One entry's reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    pub namespace: Option<String>,
    pub labels: BTreeMap<String, String>,
}

impl Scope {
    pub fn of(compiled: &Compiled, crd: &CompiledCrd) -> Self {
        let labels = compiled
            .katalog
            .crds
            .get(&*crd.name)
            .map(|loaded| loaded.entry.label_selector.clone())
            .unwrap_or_default();
        Self {
            namespace: crd.namespace.clone().filter(|_| crd.namespaced),
            labels,
        }
    }

    /// Whether `object` (as the API server sends it in a review) is within reach.
    pub fn selects(&self, object: &Value) -> bool {
        let metadata = &object["metadata"];
        self.namespace.as_deref().is_none_or(|ns| metadata["namespace"] == ns)
            && self
                .labels
                .iter()
                .all(|(key, value)| metadata["labels"][key] == value.as_str())
    }

    /// A webhook's `objectSelector`: the entry's labels and `extra`.
    pub fn object_selector(&self, extra: &[(&str, &str)]) -> Option<Value> {
        let mut labels = self.labels.clone();
        labels.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        (!labels.is_empty()).then(|| json!({"matchLabels": labels}))
    }

    /// A webhook's `namespaceSelector`, when the entry keeps to one namespace.
    pub fn namespace_selector(&self) -> Option<Value> {
        self.namespace
            .as_ref()
            .map(|ns| json!({"matchExpressions": [{"key": NAMESPACE_NAME, "operator": "In", "values": [ns]}]}))
    }

    /// The entry's labels as a list's label selector (`k=v,k2=v2`), with `extra` terms.
    pub fn list_selector(&self, extra: &str) -> String {
        self.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .chain((!extra.is_empty()).then(|| extra.to_string()))
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reaches_its_namespace_and_labels_only() {
        let scope = Scope {
            namespace: Some("team-a".into()),
            labels: [("app".to_string(), "grabby".to_string())].into(),
        };
        let object = |ns: &str, app: &str| json!({"metadata": {"namespace": ns, "labels": {"app": app}}});
        assert!(scope.selects(&object("team-a", "grabby")));
        assert!(!scope.selects(&object("kube-system", "grabby")));
        assert!(!scope.selects(&object("team-a", "other")));
        assert!(!scope.selects(&json!({"metadata": {"namespace": "team-a"}})));
        assert_eq!(
            scope.object_selector(&[("protected", "true")]),
            Some(json!({"matchLabels": {"app": "grabby", "protected": "true"}}))
        );
        assert_eq!(
            scope.namespace_selector().unwrap()["matchExpressions"][0]["values"],
            json!(["team-a"])
        );
        assert_eq!(scope.list_selector("x!=true"), "app=grabby,x!=true");
        let everything = Scope::default();
        assert!(everything.selects(&object("any", "thing")));
        assert_eq!(everything.object_selector(&[]), None);
        assert_eq!(everything.namespace_selector(), None);
    }
}
