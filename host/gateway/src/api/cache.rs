//! The CRs the gateway serves in its own cluster, as watched: an apply that updates a CR
//! reads its current surface and version from here instead of asking the API server, and
//! sends that version as a precondition, so a stale view can only cost a retry (the API
//! server refuses the write with a conflict and the apply reads the CR afresh). A CR not in
//! the view is read from the API server, so an object made a moment ago elsewhere is never
//! taken for a new one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use orkestra_kube::objects::Objects;

use orkestra_katalog::Compiled;

struct Watched {
    store: Store<DynamicObject>,
    resource: ApiResource,
    ready: Arc<AtomicBool>,
}

/// One watch per served CRD; stopped when dropped.
pub struct Cache {
    watched: BTreeMap<String, Watched>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Cache {
    /// Starts watching the CRs of every serve-enabled CRD.
    pub fn start(client: &kube::Client, compiled: &Compiled) -> Arc<Self> {
        let mut watched = BTreeMap::new();
        let mut tasks = Vec::new();
        for crd in compiled.served_crds() {
            let gvk = GroupVersionKind::gvk(&crd.group, &crd.version, &crd.kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.plural);
            let namespace = crd.namespace.as_deref().filter(|_| crd.namespaced);
            let api = match Objects::<DynamicObject>::within(client.clone(), namespace, &resource) {
                Ok(objects) => objects.api().clone(),
                Err(error) => {
                    tracing::warn!(crd = %crd.name, %error, "the Serve API's view of these CRs is off");
                    continue;
                }
            };
            let writer = reflector::store::Writer::new(resource.clone());
            let store = writer.as_reader();
            let ready = Arc::new(AtomicBool::new(false));
            let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()).default_backoff());
            tasks.push(tokio::spawn(stream.for_each(|_| async {})));
            let (waiting, flag) = (store.clone(), ready.clone());
            tasks.push(tokio::spawn(async move {
                if waiting.wait_until_ready().await.is_ok() {
                    flag.store(true, Ordering::Release);
                }
            }));
            watched.insert(crd.name.to_string(), Watched { store, resource, ready });
        }
        Arc::new(Self { watched, tasks })
    }

    /// The CR as last watched; `None` when it is not in the view (or the view is not
    /// complete yet).
    pub fn get(&self, crd: &str, namespace: Option<&str>, name: &str) -> Option<Arc<DynamicObject>> {
        let watched = self.watched.get(crd)?;
        if !watched.ready.load(Ordering::Acquire) {
            return None;
        }
        let mut key = ObjectRef::new_with(name, watched.resource.clone());
        if let Some(namespace) = namespace {
            key = key.within(namespace);
        }
        watched.store.get(&key)
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
