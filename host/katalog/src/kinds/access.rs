//! Roles, ClusterRoles and their bindings (`role`/`clusterRole` and `serviceAccount` shorthands).

use crate::error::Error;
use serde_json::{Value, json};

use super::shorthand::*;
use super::{KindSpec, Shorthand};

pub(super) const ROLES: KindSpec = KindSpec {
    key: "roles",
    resource: "roles",
    suffix: Some("role"),
    api_version: "rbac.authorization.k8s.io/v1",
    kind: "Role",
    namespaced: true,
    pod: false,
    fields: &["rules"],
    render: render_roles,
};

fn render_roles(s: &Shorthand<'_>) -> Result<Value, Error> {
    Ok(json!({"rules": s.get("rules").unwrap_or_else(|| json!([]))}))
}

pub(super) const ROLE_BINDINGS: KindSpec = KindSpec {
    key: "roleBindings",
    resource: "rolebindings",
    suffix: Some("binding"),
    api_version: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    namespaced: true,
    pod: false,
    fields: &["roleRef", "subjects", "role", "clusterRole", "serviceAccount"],
    render: render_binding,
};

fn render_binding(s: &Shorthand<'_>) -> Result<Value, Error> {
    let role_ref = match (s.get("roleRef"), s.get("role"), s.get("clusterRole")) {
        (Some(role_ref), _, _) => role_ref,
        (None, Some(role), _) if s.kind.key == "roleBindings" => {
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role})
        }
        (None, _, Some(role)) => {
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role})
        }
        _ => return Err(Error::Render("roleRef (or role / clusterRole) is required".into())),
    };
    let mut subjects: Vec<Value> = s
        .get("subjects")
        .and_then(|s| s.as_array().cloned())
        .unwrap_or_default();
    if let Some(account) = s.get("serviceAccount") {
        subjects.push(json!({"kind": "ServiceAccount", "name": account, "namespace": s.cr_namespace}));
    }
    Ok(json!({"roleRef": role_ref, "subjects": subjects}))
}

pub(super) const CLUSTER_ROLES: KindSpec = KindSpec {
    key: "clusterRoles",
    resource: "clusterroles",
    suffix: Some("role"),
    api_version: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    namespaced: false,
    pod: false,
    fields: &["rules", "aggregationRule"],
    render: render_cluster_roles,
};

fn render_cluster_roles(s: &Shorthand<'_>) -> Result<Value, Error> {
    let mut body = json!({"rules": s.get("rules").unwrap_or_else(|| json!([]))});
    copy(s.fields, &mut body, &["aggregationRule"]);
    Ok(body)
}

pub(super) const CLUSTER_ROLE_BINDINGS: KindSpec = KindSpec {
    key: "clusterRoleBindings",
    resource: "clusterrolebindings",
    suffix: Some("binding"),
    api_version: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    namespaced: false,
    pod: false,
    fields: &["roleRef", "subjects", "clusterRole", "serviceAccount"],
    render: render_binding,
};
