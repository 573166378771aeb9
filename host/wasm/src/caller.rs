//! Who a call is for, and the cluster it may reach as that caller: what the store and every
//! capability read of a call, beneath both.

use std::sync::Arc;

use orkestra_kube::discovery::KindCache;

/// The cluster, as a component may reach it.
#[derive(Clone)]
pub struct Cluster {
    pub client: kube::Client,
    pub kinds: KindCache,
}

/// Who is calling, for log records, grant checks and writes.
#[derive(Clone)]
pub struct Caller {
    /// The component's slot (`crd` or `crd/target`).
    pub component: Arc<str>,
    /// The custom resource's key.
    pub key: String,
    /// The custom resource's namespace (`self` in grants).
    pub namespace: Option<String>,
    /// The field manager of what it applies through `kube.apply`: its own, never shared
    /// with another tenant.
    pub manager: Arc<str>,
    /// A client acting as the component's own ServiceAccount, for its kube calls (`None`:
    /// the host's).
    pub client: Option<kube::Client>,
    /// The UID of the custom resource: objects another one controls are not the
    /// component's to write unless a grant says so.
    pub owner_uid: Option<String>,
    /// Writes its kube calls made (apply, delete, patch-status), for the CR's write budget.
    pub writes: Arc<std::sync::atomic::AtomicU32>,
}

impl Caller {
    /// The tenant the call is counted, budgeted and kept warm under: the custom resource's
    /// namespace (read from its key when the CR is gone), or, for a cluster-scoped one, that
    /// CR alone (`cluster/NAME`, never a namespace's name). Never one shared by calls of
    /// different tenants.
    pub fn tenant(&self) -> Arc<str> {
        orkestra_kube::tenant::of(&self.key, self.namespace.as_deref())
    }
}
