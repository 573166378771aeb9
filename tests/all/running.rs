//! A runtime on Katalog files, as a user runs it: the CRDs installed, each confined to a
//! fresh namespace (so tests of the same Katalog never share CRs), the runtime started, and
//! helpers to create CRs and wait for their status.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra::runtime::{CrdHandle, Runtime};
use orkestra_katalog::Katalog;
use orkestra_test_support::{TestNamespace, eventually, guests, namespace};
use orkestra_wasm::Components;
use serde_json::{Value, json};

use crate::pipeline::WAIT;

/// The repository's `katalogs/` folder.
pub fn katalogs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../katalogs")
}

/// `text` written as `katalog.yaml` in a folder of its own: the folder (removed when
/// dropped) and the file.
pub(crate) fn written(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("katalog.yaml");
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

/// `text` [`written`] and its CRDs installed, as a user does before `ork run -f`: the folder
/// (removed when dropped) and the file.
pub(crate) async fn katalog_file(ns: &TestNamespace, text: &str) -> (tempfile::TempDir, PathBuf) {
    let (dir, file) = written(text);
    let compiled = orkestra_katalog::load(std::slice::from_ref(&file)).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    (dir, file)
}

/// `ork run -f file` with its gateway's Secrets in `ns` (and `flags`, and `env` besides
/// KUBECONFIG), once it says its Live API is on (said once the port is bound, so it answers
/// from then on): the process and the Live API's address.
pub(crate) fn ork_run(
    file: &Path,
    ns: &TestNamespace,
    flags: &[&str],
    env: &[(&str, &str)],
) -> (crate::ork::Ork, String) {
    let cluster = orkestra_test_support::cluster().unwrap();
    let addr = format!("127.0.0.1:{}", crate::replicas::free_port());
    let mut all = vec![("KUBECONFIG", cluster.kubeconfig.to_str().unwrap())];
    all.extend_from_slice(env);
    let mut args = vec![
        "run",
        "-f",
        file.to_str().unwrap(),
        "--http-addr",
        &addr,
        "--https-addr",
        "127.0.0.1:0",
        "--gateway-namespace",
        &ns.name,
    ];
    args.extend_from_slice(flags);
    let mut ork = crate::ork::Ork::spawn(&args, &all);
    ork.wait_for(&format!("Live API on http://{addr} "), WAIT);
    (ork, addr)
}

/// A runtime on some Katalog files, confined to a fresh namespace.
pub struct Running {
    pub ns: TestNamespace,
    pub components: Components,
    /// What its Live API serves.
    pub inspect: orkestra::live::Inspect,
    pub katalog: Katalog,
    /// Where reloads send the Katalog they read.
    pub pipelines: orkestra::runtime::Pipelines,
    handles: Vec<CrdHandle>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Builds `guests`, loads `files`, installs their CRDs and starts the runtime.
    pub async fn start(prefix: &str, files: &[PathBuf], guest_packages: &[&str]) -> Self {
        for package in guest_packages {
            guests::component(package).unwrap();
        }
        let mut katalog = orkestra_katalog::load(files).unwrap();
        let ns = namespace(prefix).await.unwrap();
        // Each test watches only its own namespace (a cluster-scoped kind has none to keep to).
        for (name, crd) in katalog.crds.iter_mut() {
            if katalog.katalog.crds[name].entry.namespaced {
                Arc::make_mut(crd).namespace = Some(ns.name.clone());
            }
        }
        orkestra_kube::crd_install::install_crds(&ns.client, &katalog.katalog, WAIT)
            .await
            .unwrap();
        // As `ork run` does: components may act as their own ServiceAccounts.
        let kubeconfig = &orkestra_test_support::cluster().unwrap().kubeconfig;
        let config = orkestra_control_plane::config_for(kubeconfig).await.unwrap();
        let runtime = Runtime::new(ns.client.clone(), &katalog)
            .unwrap()
            .with_event_log()
            .with_identities(config);
        let components = runtime.components();
        let inspect = runtime.inspect();
        let pipelines = runtime.pipelines();
        let handles = katalog.crds.keys().filter_map(|name| runtime.crd(name)).collect();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(runtime.run(async {
            let _ = stopped.await;
        }));
        // Components load (and compile, seconds for a Python one on a busy machine) before
        // the runtime takes any CR: wait for each to serve or to have failed.
        let slots = components.slots();
        eventually(
            "the components to load",
            std::time::Duration::from_secs(300),
            || async {
                slots
                    .iter()
                    .all(|slot| slot.active().is_some() || slot.last_error().is_some())
                    .then_some(())
            },
        )
        .await
        .unwrap();
        Self {
            ns,
            components,
            inspect,
            katalog: katalog.katalog,
            pipelines,
            handles,
            stop: Some(stop),
            task,
        }
    }

    /// Applies every CRD's sample CRs (`crFiles`).
    pub async fn apply_samples(&self) {
        for crd in self.katalog.crds.values() {
            for file in &crd.entry.cr_files {
                self.apply(&crd.resolve(file)).await;
            }
        }
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        Api::namespaced(self.ns.client.clone(), &self.ns.name)
    }

    pub async fn apply(&self, path: &Path) {
        orkestra_kube::manifests::apply_file(&self.ns.client, path, &self.ns.name)
            .await
            .unwrap();
    }

    pub fn counters(&self, crd: &str) -> &orkestra::outcome::counters::Counters {
        &self.handles.iter().find(|h| &*h.crd.name == crd).unwrap().counters
    }

    pub fn crs(&self, group: &str, kind: &str) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(group, "v1", kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()));
        Api::namespaced_with(self.ns.client.clone(), &self.ns.name, &resource)
    }

    pub async fn create(&self, crs: &Api<DynamicObject>, kind: &str, name: &str, spec: Value) {
        let group = crs.resource_url().split('/').nth(2).unwrap_or_default().to_string();
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1"), "kind": kind, "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap();
        crs.create(&PostParams::default(), &object).await.unwrap();
    }

    /// The CR's status once `check` accepts it.
    pub async fn status(&self, crs: &Api<DynamicObject>, name: &str, check: impl Fn(&Value) -> bool) -> Value {
        let found = eventually(&format!("the status of {name}"), WAIT, || async {
            let cr = crs.get(name).await.ok()?;
            check(&cr.data["status"]).then(|| cr.data["status"].clone())
        })
        .await;
        match found {
            Ok(status) => status,
            Err(error) => panic!("{error}; the CR is {:?}", crs.get(name).await.map(|cr| cr.data)),
        }
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.task.await;
    }
}
