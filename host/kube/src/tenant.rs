//! Whose work a request is: the tenant of the custom resource being reconciled, carried on
//! the task that reconciles it (and the component calls it makes), so what the request
//! costs (its namespace's API rate) is charged to the tenant that caused it, not to the
//! namespace its URL happens to name.

use std::future::Future;
use std::sync::Arc;

tokio::task_local! {
    static TENANT: Arc<str>;
}

/// The tenant of the custom resource `key` (`namespace/name`, or `name`), in `namespace` when
/// that is known: the namespace (read from the key when the CR is gone), or, for a
/// cluster-scoped CR, that CR alone (`cluster/NAME`, never a namespace's name).
pub fn of(key: &str, namespace: Option<&str>) -> Arc<str> {
    let namespace = namespace
        .filter(|ns| !ns.is_empty())
        .or_else(|| key.split_once('/').map(|(ns, _)| ns).filter(|ns| !ns.is_empty()));
    match namespace {
        Some(namespace) => namespace.into(),
        None => format!("cluster/{key}").into(),
    }
}

/// Runs `work` as the work of `tenant`.
pub async fn scope<F: Future>(tenant: Arc<str>, work: F) -> F::Output {
    TENANT.scope(tenant, work).await
}

/// The tenant whose work the current task is, if it is one's.
pub fn current() -> Option<Arc<str>> {
    TENANT.try_with(Arc::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tenant_is_known_inside_its_scope_only() {
        assert_eq!(current(), None);
        let inside = scope("team-a".into(), async { current() }).await;
        assert_eq!(inside.as_deref(), Some("team-a"));
        assert_eq!(current(), None);
    }

    #[test]
    fn a_cluster_scoped_cr_is_a_tenant_of_its_own_and_a_gone_cr_keeps_its_namespace() {
        assert_eq!(&*of("team-a/blog", Some("team-a")), "team-a");
        assert_eq!(&*of("team-a/blog", None), "team-a", "a CR already gone");
        assert_eq!(&*of("blog", None), "cluster/blog");
        assert_ne!(of("a", None), of("b", None));
    }
}
