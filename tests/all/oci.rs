//! Components distributed like images: pushed with `ork component push` to a real registry
//! (Debian's docker-registry on loopback, with htpasswd users), pulled by digest by the
//! runtime with credentials from a docker-config Secret or file, verified, and kept beside
//! the compiled artifacts so the registry can go away.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_test_support::registry::Registry;
use orkestra_test_support::{TestNamespace, eventually, guests, namespace};
use serde_json::{Value, json};

use crate::ork::{Ork, run};
use crate::pipeline::WAIT;
use crate::wasm::{hook_spec, sha256};

const USER: (&str, &str) = ("pusher", "correct-horse");

/// `ork component push FILE REFERENCE` with these credentials; its output.
fn push(file: &Path, reference: &str, registry: &Registry, config: &Path) -> std::process::Output {
    run(
        &[
            "component",
            "push",
            file.to_str().unwrap(),
            reference,
            "--registry-config",
            config.to_str().unwrap(),
            "--insecure-registry",
            &registry.addr,
        ],
        &[],
    )
}

/// Pushes the Rust hook as `team/site-hook:v1`; the pinned reference `ork` printed.
fn push_hook(registry: &Registry, dir: &Path) -> String {
    let hook = guests::component("rust-hook").unwrap();
    let config = registry.write_docker_config(dir).unwrap();
    let output = push(
        &hook,
        &format!("oci://{}/team/site-hook:v1", registry.addr),
        registry,
        &config,
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

#[tokio::test]
async fn a_push_writes_the_wasm_artifact_layout_and_needs_the_registry_s_credentials() {
    let registry = Registry::start(Some(USER)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hook = guests::component("rust-hook").unwrap();
    let target = format!("oci://{}/team/site-hook:v1", registry.addr);

    let anonymous = dir.path().join("anonymous.json");
    std::fs::write(&anonymous, r#"{"auths": {}}"#).unwrap();
    let refused = push(&hook, &target, &registry, &anonymous);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "an anonymous push is refused");
    assert!(stderr.contains("cannot push the component"), "{stderr}");

    let pinned = push_hook(&registry, dir.path());
    let digest = pinned
        .strip_prefix(&format!("{target}@sha256:"))
        .unwrap_or_else(|| panic!("{pinned} is the target pinned to a digest"));

    let manifest = registry
        .request(reqwest::Method::GET, "/v2/team/site-hook/manifests/v1")
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap();
    assert_eq!(
        manifest.headers()["docker-content-digest"].to_str().unwrap(),
        format!("sha256:{digest}"),
        "the printed digest is the registry's for the tag"
    );
    let bytes = manifest.bytes().await.unwrap();
    assert_eq!(sha256(&bytes), digest);
    let manifest: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(manifest["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    assert_eq!(manifest["config"]["mediaType"], "application/vnd.wasm.config.v0+json");
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    let component = std::fs::read(&hook).unwrap();
    assert_eq!(layers[0]["digest"], format!("sha256:{}", sha256(&component)));
    assert_eq!(layers[0]["size"], component.len());

    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    let config: Value = registry
        .request(
            reqwest::Method::GET,
            &format!("/v2/team/site-hook/blobs/{config_digest}"),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (config["architecture"].as_str(), config["os"].as_str()),
        (Some("wasm"), Some("wasip2"))
    );
    assert_eq!(config["layerDigests"][0], layers[0]["digest"]);
    let exports: Vec<&str> = config["component"]["exports"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        exports.iter().any(|e| e.starts_with("orkestra:operator/hooks")),
        "{config}"
    );

    // What is not a component, and a reference that already names a digest, are refused
    // before anything is sent.
    let module = dir.path().join("module.wasm");
    std::fs::write(&module, b"\0asm\x01\x00\x00\x00").unwrap();
    let config_file = registry.write_docker_config(dir.path()).unwrap();
    let output = push(&module, &target, &registry, &config_file);
    assert!(String::from_utf8_lossy(&output.stderr).contains("core Wasm module, not a component"));
    let output = push(&hook, &pinned, &registry, &config_file);
    assert!(String::from_utf8_lossy(&output.stderr).contains("push to a tag"));
}

/// The site-hook Katalog of katalogs/, its group the test's own (the runtime below watches
/// every namespace), its component `reference`.
fn site_katalog(ns: &TestNamespace, reference: &str) -> String {
    let text = std::fs::read_to_string(crate::running::katalogs_dir().join("site-hook/katalog.yaml")).unwrap();
    text.replace(
        "group: hooks.orkestra.io",
        &format!("group: {}.oci.orkestra.io", ns.name),
    )
    .replace("../../examples/target/wasm32-wasip2/release/rust_hook.wasm", reference)
    .replace("      crFiles: [samples/site.yaml]\n", "")
}

/// `ork run` on `katalog`, pulling with `pull` (extra flags), its artifacts in `cache`.
fn run_host(katalog: &Path, cache: &Path, port: u16, pull: &[&str]) -> Ork {
    let cluster = orkestra_test_support::cluster().unwrap();
    let addr = format!("127.0.0.1:{port}");
    let mut args = vec!["run", "-f", katalog.to_str().unwrap(), "--http-addr", &addr];
    args.extend_from_slice(pull);
    Ork::spawn(
        &args,
        &[
            ("KUBECONFIG", cluster.kubeconfig.to_str().unwrap()),
            ("ORK_CACHE_DIR", cache.to_str().unwrap()),
            ("ORK_API_TOKEN", ""),
            // No ~/.docker/config.json of the machine's decides what is sent.
            ("DOCKER_CONFIG", cache.join("no-docker").to_str().unwrap()),
        ],
    )
}

/// The manifest of `team/site-hook` at `reference` (a tag or a digest), as the registry keeps it.
async fn manifest_of(registry: &Registry, reference: &str) -> Vec<u8> {
    registry
        .request(
            reqwest::Method::GET,
            &format!("/v2/team/site-hook/manifests/{reference}"),
        )
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec()
}

async fn site_content(ns: &TestNamespace, wanted: &str) -> String {
    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    eventually(&format!("blog-content with {wanted:?}"), WAIT, || async {
        let data = configmaps.get_opt("blog-content").await.ok()??.data?;
        let page = data.get("index.html")?.clone();
        page.contains(wanted).then_some(page)
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_component_pulled_by_digest_with_a_pull_secret_keeps_running_when_the_registry_is_gone() {
    let mut registry = Registry::start(Some(USER)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pinned = push_hook(&registry, dir.path());
    let ns = namespace("oci-pull").await.unwrap();
    let katalog_text = site_katalog(&ns, &pinned);
    let katalog_file = dir.path().join("katalog.yaml");
    std::fs::write(&katalog_file, &katalog_text).unwrap();
    let katalog = orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text)]).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &katalog.katalog, WAIT)
        .await
        .unwrap();

    // As `kubectl create secret docker-registry` makes it.
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "regcred"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": registry.docker_config()},
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &secret).await.unwrap();

    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let defaults: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "site-defaults"}, "data": {"footer": "From a registry"}}))
            .unwrap();
    configmaps.create(&PostParams::default(), &defaults).await.unwrap();
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        &format!("{}.oci.orkestra.io", ns.name),
        "v1",
        "Site",
    ));
    let sites: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let site: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}.oci.orkestra.io/v1", ns.name), "kind": "Site",
        "metadata": {"name": "blog"}, "spec": {"title": "Pulled", "body": "by digest"},
    }))
    .unwrap();
    sites.create(&PostParams::default(), &site).await.unwrap();

    let cache = dir.path().join("cache");
    let port = crate::replicas::free_port();
    let secret_ref = format!("{}/regcred", ns.name);
    let mut host = run_host(
        &katalog_file,
        &cache,
        port,
        &["--insecure-registry", &registry.addr, "--pull-secret", &secret_ref],
    );
    let page = site_content(&ns, "<h1>Hello: Pulled</h1>").await;
    assert!(page.contains("From a registry"), "{page}");
    let site_slot = crate::wasm::listed_component(&format!("127.0.0.1:{port}"), "site").await;
    assert_eq!(site_slot["source"], pinned);
    let wasm = std::fs::read(guests::component("rust-hook").unwrap()).unwrap();
    assert_eq!(
        site_slot["digest"],
        sha256(&wasm),
        "the layer is the component as pushed"
    );
    assert_eq!(
        host.signal_and_wait(libc::SIGTERM, Duration::from_secs(30)).code(),
        Some(0)
    );

    // No registry and no Secret: the next start loads what it kept.
    registry.stop();
    secrets.delete("regcred", &DeleteParams::default()).await.unwrap();
    let mut host = run_host(&katalog_file, &cache, port, &["--insecure-registry", &registry.addr]);
    let patch = json!({"spec": {"title": "Kept"}});
    sites
        .patch("blog", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    site_content(&ns, "<h1>Hello: Kept</h1>").await;
    assert_eq!(
        host.signal_and_wait(libc::SIGTERM, Duration::from_secs(30)).code(),
        Some(0)
    );
}

#[tokio::test]
async fn a_pull_refuses_what_the_pin_does_not_name_and_never_loads_a_changed_copy() {
    let mut registry = Registry::start(Some(USER)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pinned = push_hook(&registry, dir.path());
    let config_file = registry.write_docker_config(dir.path()).unwrap();
    let addr = registry.addr.clone();
    let host_with = |files: Vec<std::path::PathBuf>, cache: &Path| {
        let options = orkestra_wasm::HostOptions {
            cache_dir: cache.to_path_buf(),
            fuel: false,
            registries: orkestra_wasm::Registries {
                config_files: files,
                secrets: vec![],
                insecure: vec![addr.clone()],
            },
            ..Default::default()
        };
        orkestra_wasm::WasmHost::with_options(None, reqwest::Client::new(), options).unwrap()
    };

    // Without credentials the registry says no, and the error says who.
    let anonymous = host_with(vec![], &dir.path().join("anonymous"));
    let refused = anonymous.load(&hook_spec(&pinned, None).unwrap()).await.err().unwrap();
    assert!(
        refused
            .cause
            .to_string()
            .contains(&format!("cannot pull the manifest from {}", registry.addr)),
        "{refused}"
    );

    // A digest the registry does not hold.
    let host = host_with(vec![config_file.clone()], &dir.path().join("cache"));
    let unknown = format!("oci://{}/team/site-hook:v1@sha256:{}", registry.addr, "0".repeat(64));
    let refused = host.load(&hook_spec(&unknown, None).unwrap()).await.err().unwrap();
    assert!(
        refused.cause.to_string().contains("cannot pull the manifest"),
        "{refused}"
    );

    // The digest of an image index (here: one listing the artifact) is not a component.
    let manifest = manifest_of(&registry, "v1").await;
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": format!("sha256:{}", sha256(&manifest)),
            "size": manifest.len(),
            "platform": {"architecture": "wasm", "os": "wasip2"},
        }],
    }))
    .unwrap();
    let put = registry
        .request(reqwest::Method::PUT, "/v2/team/site-hook/manifests/multi")
        .header("Content-Type", "application/vnd.oci.image.index.v1+json")
        .body(index.clone())
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.text().await.unwrap());
    let by_index = format!("oci://{}/team/site-hook:multi@sha256:{}", registry.addr, sha256(&index));
    let refused = host.load(&hook_spec(&by_index, None).unwrap()).await.err().unwrap();
    assert!(refused.cause.to_string().contains("names an image index"), "{refused}");

    // The Katalog's own sha256 pin of the bytes still applies on top of the digest.
    let wrong = "1".repeat(64);
    let refused = host
        .load(&hook_spec(&pinned, Some(&wrong)).unwrap())
        .await
        .err()
        .unwrap();
    assert!(
        refused
            .cause
            .to_string()
            .contains(&format!("but the Katalog pins {wrong}")),
        "{refused}"
    );

    let loaded = host.load(&hook_spec(&pinned, None).unwrap()).await.unwrap();
    let wasm = std::fs::read(guests::component("rust-hook").unwrap()).unwrap();
    assert_eq!(loaded.digest, sha256(&wasm));

    // A kept copy that changed on disk is dropped, and pulled again while the registry is up.
    let kept = dir.path().join("cache/blobs/sha256").join(&loaded.digest);
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        wasm,
        "the component is kept by its digest"
    );
    std::fs::write(&kept, b"\0asm\x0d\x00\x01\x00tampered").unwrap();
    let again = host_with(vec![config_file.clone()], &dir.path().join("cache"));
    assert_eq!(
        again.load(&hook_spec(&pinned, None).unwrap()).await.unwrap().digest,
        loaded.digest
    );
    assert_eq!(std::fs::read(&kept).unwrap(), wasm);

    // With the registry down, a changed copy is an error, never a load.
    registry.stop();
    std::fs::write(&kept, b"tampered again").unwrap();
    let offline = host_with(vec![config_file], &dir.path().join("cache"));
    let refused = offline.load(&hook_spec(&pinned, None).unwrap()).await.err().unwrap();
    assert!(
        refused.cause.to_string().contains("cannot pull the component"),
        "{refused}"
    );
}

/// A registry that serves one artifact the way an attacker would (issue 33, finding 5):
/// its manifest, or an endless one, and its layer a byte at a time.
#[derive(Clone)]
struct Hostile {
    /// `None`: a manifest that never ends.
    manifest: Option<Vec<u8>>,
    blob: Vec<u8>,
    /// The wait between two bytes of the layer.
    drip: Duration,
}

async fn hostile_registry(registry: Hostile) -> String {
    use axum::body::Body;
    use axum::response::IntoResponse;
    use futures::StreamExt;
    let answer = move |uri: axum::http::Uri| {
        let registry = registry.clone();
        async move {
            let path = uri.path();
            if path.contains("/manifests/") {
                return match registry.manifest {
                    Some(manifest) => (
                        [("content-type", "application/vnd.oci.image.manifest.v1+json")],
                        manifest,
                    )
                        .into_response(),
                    // Whitespace is JSON too: it never stops being a valid prefix.
                    None => Body::from_stream(futures::stream::repeat_with(|| {
                        Ok::<_, std::io::Error>(vec![b' '; 64 << 10])
                    }))
                    .into_response(),
                };
            }
            if path.contains("/blobs/") {
                let drip = registry.drip;
                let bytes = futures::stream::iter(registry.blob).then(move |byte| async move {
                    tokio::time::sleep(drip).await;
                    Ok::<_, std::io::Error>(vec![byte])
                });
                return Body::from_stream(bytes).into_response();
            }
            axum::Json(json!({})).into_response()
        }
    };
    let app = axum::Router::new().fallback(answer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test]
async fn a_manifest_that_never_ends_is_dropped_at_its_limit() {
    let addr = hostile_registry(Hostile {
        manifest: None,
        blob: Vec::new(),
        drip: Duration::ZERO,
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let options = orkestra_wasm::HostOptions {
        cache_dir: dir.path().to_path_buf(),
        fuel: false,
        registries: orkestra_wasm::Registries {
            config_files: vec![],
            secrets: vec![],
            insecure: vec![addr.clone()],
        },
        ..Default::default()
    };
    let host = orkestra_wasm::WasmHost::with_options(None, reqwest::Client::new(), options).unwrap();
    let pinned = format!("oci://{addr}/team/endless:v1@sha256:{}", "0".repeat(64));
    let started = std::time::Instant::now();
    let refused = host.load(&hook_spec(&pinned, None).unwrap()).await.err().unwrap();
    assert!(
        refused.cause.to_string().contains("larger than the 1048576 bytes"),
        "{refused}"
    );
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_registry_that_drips_holds_only_the_crds_its_component_serves() {
    // The real artifact, pushed as `ork component push` does, then served by a registry that
    // sends its layer a byte a second.
    let registry = Registry::start(Some(USER)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pinned = push_hook(&registry, dir.path());
    let digest = pinned.rsplit_once("sha256:").unwrap().1.to_string();
    let manifest = manifest_of(&registry, &format!("sha256:{digest}")).await;
    let hostile = hostile_registry(Hostile {
        manifest: Some(manifest),
        blob: std::fs::read(guests::component("rust-hook").unwrap()).unwrap(),
        drip: Duration::from_secs(1),
    })
    .await;
    let ns = namespace("oci-drip").await.unwrap();
    let group = format!("{}.drip.orkestra.io", ns.name);
    let katalog_text = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: drip}}
spec:
  crds:
    dripping:
      apiTypes: {{group: {group}, version: v1, kind: Dripping}}
      namespace: {ns}
      operatorBox:
        reconcile:
          hooks: {{component: 'oci://{hostile}/team/site-hook:v1@sha256:{digest}'}}
    plain:
      apiTypes: {{group: {group}, version: v1, kind: Plain}}
      namespace: {ns}
      operatorBox:
        reconcile:
          onReconcile:
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}-c', data: {{a: b}}}}
",
        ns = ns.name
    );
    let katalog_file = dir.path().join("katalog.yaml");
    std::fs::write(&katalog_file, &katalog_text).unwrap();
    let katalog = orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog_text)]).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &katalog.katalog, WAIT)
        .await
        .unwrap();
    let plains: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1", "Plain")),
    );
    let plain: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Plain", "metadata": {"name": "p"}, "spec": {}}))
    .unwrap();
    plains.create(&PostParams::default(), &plain).await.unwrap();

    let port = crate::replicas::free_port();
    let spawned = std::time::Instant::now();
    let mut host = run_host(
        &katalog_file,
        &dir.path().join("cache"),
        port,
        &["--insecure-registry", &hostile],
    );
    // The other CRD is served, and the runtime has started, while the pull still drips.
    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    eventually("the plain CR's ConfigMap", Duration::from_secs(20), || async {
        configmaps.get_opt("p-c").await.ok().flatten().map(|_| ())
    })
    .await
    .unwrap();
    let started = reqwest::get(format!("http://127.0.0.1:{port}/startup")).await.unwrap();
    assert_eq!(started.status(), 200);
    assert!(spawned.elapsed() < Duration::from_secs(20), "{:?}", spawned.elapsed());
    // The dripping pull is given up on, long before the whole layer could arrive.
    let slot = eventually("the dripping pull to be given up", WAIT, || async {
        let slot = crate::wasm::listed_component(&format!("127.0.0.1:{port}"), "dripping").await;
        slot["lastError"].is_string().then_some(slot)
    })
    .await
    .unwrap();
    let error = slot["lastError"].as_str().unwrap();
    assert!(error.contains("sent less than 32 KiB in 10s"), "{error}");
    assert_eq!(slot["revision"], 0);
    host.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
}

/// A motif of upstream's kind: a Job template whose image is an input, and a ConfigMap.
const JOBS_MOTIF: &str = "apiVersion: orkestra.orkspace.io/v1
kind: Motif
metadata: {name: jobs}
inputs:
  - {name: image, default: busybox}
resources:
  onReconcile:
    configMaps:
      - name: '{{ .metadata.name }}-from-motif'
        data: {image: '{{ index .inputs \"image\" }}'}
";

#[test]
fn motifs_pushed_to_a_registry_run_under_ork_dev_pinned_by_digest_and_validate_from_the_cache() {
    use orkestra_test_support::kubectl_with;

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let registry = runtime.block_on(Registry::start(Some(USER))).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = registry.write_docker_config(dir.path()).unwrap();
    let motif = dir.path().join("jobs.yaml");
    std::fs::write(&motif, JOBS_MOTIF).unwrap();
    let flags = [
        "--registry-config",
        config.to_str().unwrap(),
        "--insecure-registry",
        &registry.addr,
    ];
    let target = format!("oci://{}/motifs/jobs:v1", registry.addr);
    let mut args = vec!["motif", "push", motif.to_str().unwrap(), &target];
    args.extend_from_slice(&flags);
    let pushed = run(&args, &[]);
    assert!(pushed.status.success(), "{}", String::from_utf8_lossy(&pushed.stderr));
    let pinned = String::from_utf8(pushed.stdout).unwrap().trim().to_string();
    assert!(pinned.starts_with(&format!("{target}@sha256:")), "{pinned}");

    // Upstream's two spellings: `motif: oci://...` and `oci: HOST/REPO:TAG@sha256:...`.
    let bare = pinned.trim_start_matches("oci://");
    let katalog = dir.path().join("katalog.yaml");
    std::fs::write(
        &katalog,
        format!(
            "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: motifs}}
spec:
  crds:
    build:
      apiTypes: {{group: motifs.orkestra.io, version: v1, kind: Build}}
      crFiles: [build.yaml]
      operatorBox:
        reconcile:
          imports: [{{motif: '{pinned}'}}]
    deploy:
      apiTypes: {{group: motifs.orkestra.io, version: v1, kind: Deploy}}
      crFiles: [deploy.yaml]
      operatorBox:
        reconcile:
          imports: [{{oci: '{bare}', with: {{image: alpine}}}}]
"
        ),
    )
    .unwrap();
    for (kind, name) in [("Build", "b1"), ("Deploy", "d1")] {
        let file = dir.path().join(format!("{}.yaml", kind.to_lowercase()));
        let cr = format!(
            "apiVersion: motifs.orkestra.io/v1\nkind: {kind}\nmetadata: {{name: {name}, namespace: default}}\nspec: {{}}\n"
        );
        std::fs::write(file, cr).unwrap();
    }

    // A command that reaches no registry reads the cache only, and says how to fill it.
    let cache = dir.path().join("cache");
    let offline = [("ORK_CACHE_DIR", cache.to_str().unwrap())];
    let refused = run(&["validate", "-f", katalog.to_str().unwrap()], &offline);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("the motif {pinned} is not in the local cache")) && stderr.contains("ork motif pull"),
        "{stderr}"
    );
    let mut args = vec!["motif", "pull", &pinned];
    args.extend_from_slice(&flags);
    let pulled = run(&args, &offline);
    assert!(pulled.status.success(), "{}", String::from_utf8_lossy(&pulled.stderr));
    let valid = run(&["validate", "-f", katalog.to_str().unwrap()], &offline);
    assert!(valid.status.success(), "{}", String::from_utf8_lossy(&valid.stderr));

    // `ork dev` pulls what its cache lacks with the same flags as components, and runs it.
    let plane = dir.path().join("dev");
    let mut args = vec![
        "dev",
        "-f",
        katalog.to_str().unwrap(),
        "--apply-cr",
        "--dir",
        plane.to_str().unwrap(),
    ];
    args.extend_from_slice(&flags);
    let mut ork = Ork::spawn(&args, &[]);
    ork.wait_for("applied Deploy/d1", Duration::from_secs(240));
    let kubeconfig = plane.join("kubeconfig");
    let image = |name: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let image = kubectl_with(
                &kubeconfig,
                &[
                    "get",
                    "configmap",
                    &format!("{name}-from-motif"),
                    "--ignore-not-found",
                    "-o",
                    "jsonpath={.data.image}",
                ],
            )
            .unwrap_or_default();
            if !image.is_empty() || std::time::Instant::now() > deadline {
                break image;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    assert_eq!(image("b1"), "busybox", "the motif's input default");
    assert_eq!(image("d1"), "alpine", "the import's `with`");
    assert!(ork.signal_and_wait(libc::SIGINT, Duration::from_secs(30)).success());
}
