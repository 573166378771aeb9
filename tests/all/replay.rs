//! Record and replay, as a platform team and an operator author use them: `ork run
//! --recordings DIR` on the real API server, a recording started through the Live API, the
//! recorded call replayed offline by `ork replay` (the same component: the same output;
//! a changed one: every difference named), clocks and random served from the recording, and
//! Secrets redacted unless a grant allows them.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use orkestra_test_support::{TestNamespace, eventually, guests, namespace};
use serde_json::{Value, json};

use crate::ork::{Ork, run};
use crate::pipeline::WAIT;

/// Three CRDs of the test's own group: `Site` (the rust-hook, reading a ConfigMap), and
/// `Vault` and `Open` (the hostile hook, granted Secrets; only Open's grant lets recordings
/// keep their values).
fn katalog(ns: &TestNamespace) -> String {
    let rust_hook = guests::component("rust-hook").unwrap();
    let hostile = guests::component("hostile").unwrap();
    let group = format!("{}.replay.orkestra.io", ns.name);
    let hook = |kind: &str, component: &Path, capability: &str| {
        format!(
            "    {}:
      apiTypes: {{group: {group}, version: v1, kind: {kind}}}
      operatorBox:
        reconcile:
          hooks:
            component: {}
            args: {{greeting: Hello}}
            capabilities:
              - {capability}
",
            kind.to_lowercase(),
            component.display()
        )
    };
    format!(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {{name: replay}}\nspec:\n  crds:\n{}{}{}",
        hook(
            "Site",
            &rust_hook,
            "{apiVersion: v1, kinds: [ConfigMap], verbs: [get, apply]}"
        ),
        hook(
            "Vault",
            &hostile,
            "{apiVersion: v1, kinds: [Secret], verbs: [get, list, apply]}"
        ),
        hook(
            "Open",
            &hostile,
            "{apiVersion: v1, kinds: [Secret], verbs: [get, apply], recordSecrets: true}"
        ),
    )
}

/// `ork run` on a Katalog, its Live API on a free port.
pub(crate) struct Host {
    _ork: Ork,
    pub(crate) url: String,
    _dir: tempfile::TempDir,
    /// The recording sessions' token (what `--recordings DIR` wrote to DIR/.token).
    token: String,
}

async fn start(ns: &TestNamespace, recordings: Option<&Path>) -> Host {
    start_with(ns, recordings, &[]).await
}

async fn start_with(ns: &TestNamespace, recordings: Option<&Path>, more: &[&str]) -> Host {
    let mut flags = match recordings {
        Some(dir) => vec!["--recordings".to_string(), dir.to_str().unwrap().to_string()],
        None => vec![],
    };
    flags.extend(more.iter().map(|f| f.to_string()));
    let mut host = run_katalog(ns, katalog(ns), &flags).await;
    if let Some(dir) = recordings {
        host.token = std::fs::read_to_string(dir.join(".token")).unwrap();
        let mode = std::fs::metadata(dir.join(".token")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the token is the runtime user's alone");
    }
    host
}

/// `ork run` on `text` (its CRDs installed first) with `flags`, once each component serves.
pub(crate) async fn run_katalog(ns: &TestNamespace, text: String, flags: &[String]) -> Host {
    run_katalog_in(ns, text, flags, &[]).await
}

/// As [`run_katalog`], with more environment (`ORK_CACHE_DIR`: a component cache of its own).
async fn run_katalog_in(ns: &TestNamespace, text: String, flags: &[String], env: &[(&str, &str)]) -> Host {
    let (dir, file) = crate::running::katalog_file(ns, &text).await;
    let cluster = orkestra_test_support::cluster().unwrap();
    let port = crate::replicas::free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut args = vec!["run", "-f", file.to_str().unwrap(), "--http-addr", &addr];
    args.extend(flags.iter().map(String::as_str));
    let mut vars = vec![
        ("KUBECONFIG", cluster.kubeconfig.to_str().unwrap()),
        ("ORK_API_TOKEN", ""),
    ];
    vars.extend_from_slice(env);
    let mut ork = Ork::spawn(&args, &vars);
    let url = format!("http://{addr}");
    let serving = eventually("the Live API", WAIT, || async {
        let listed: Value = reqwest::get(format!("{url}/components"))
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let serving = listed["components"].as_array()?.iter().all(|c| c["revision"] == 1);
        serving.then_some(())
    })
    .await;
    if let Err(error) = serving {
        // Panics with what the runtime printed.
        ork.wait_for(&format!("{error}; the runtime said"), std::time::Duration::from_secs(1));
    }
    Host {
        _ork: ork,
        url,
        _dir: dir,
        token: String::new(),
    }
}

async fn post(host: &Host, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/recordings", host.url))
        .bearer_auth(&host.token)
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or_default())
}

/// `GET path` of the recording sessions, with their token.
async fn get(host: &Host, path: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("{}{path}", host.url))
        .bearer_auth(&host.token)
        .send()
        .await
        .unwrap()
}

/// A CR of the test's group (`<namespace>.replay.orkestra.io`).
pub(crate) async fn create(ns: &TestNamespace, kind: &str, name: &str, spec: Value) {
    create_in(ns, &ns.name, kind, name, spec).await;
}

/// [`create`] in `namespace` (another tenant's), of `ns`'s group.
pub(crate) async fn create_in(ns: &TestNamespace, namespace: &str, kind: &str, name: &str, spec: Value) {
    let gvk = GroupVersionKind::gvk(&format!("{}.replay.orkestra.io", ns.name), "v1", kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()));
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), namespace, &resource);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": gvk.api_version(), "kind": kind, "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// The recordings `component`'s session wrote, once it wrote `count`, each fetched by its id
/// into `into` (as a user keeps them for `ork replay`).
async fn recorded(host: &Host, component: &str, count: usize, into: &Path) -> Vec<(PathBuf, Value)> {
    let entries = eventually(&format!("{count} recording(s) of {component}"), WAIT, || async {
        let listed: Value = get(host, "/recordings").await.json().await.ok()?;
        let session = listed["sessions"]
            .as_array()?
            .iter()
            .find(|s| s["component"] == component)?
            .clone();
        let entries = session["recorded"].as_array()?.clone();
        (entries.len() >= count).then_some(entries)
    })
    .await
    .unwrap();
    let mut files = Vec::new();
    for entry in entries {
        let id = entry["id"].as_str().unwrap();
        let text = get(host, &format!("/recordings/{id}")).await.text().await.unwrap();
        let file = into.join(format!("{id}.json"));
        std::fs::write(&file, &text).unwrap();
        files.push((file, serde_json::from_str(&text).unwrap()));
    }
    files
}

fn replay(args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["replay"];
    all.extend_from_slice(args);
    // No cluster at all: a replay reads only the recording.
    let output = run(&all, &[("KUBECONFIG", "/nonexistent/kubeconfig")]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), said)
}

#[tokio::test]
async fn a_recorded_call_replays_the_same_offline_and_a_changed_component_is_caught() {
    let ns = namespace("replay").await.unwrap();
    let echo = guests::component("echo-hook").unwrap();
    let recordings = tempfile::tempdir().unwrap();
    let host = start(&ns, Some(recordings.path())).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let defaults = json!({"metadata": {"name": "site-defaults"}, "data": {"footer": "Recorded in production"}});
    configmaps
        .create(&PostParams::default(), &serde_json::from_value(defaults).unwrap())
        .await
        .unwrap();

    // One call of one CR: another CR's calls and later calls of this one are not taken.
    let key = format!("{}/blog", ns.name);
    let (status, body) = post(&host, json!({"component": "site", "count": 1, "key": key})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["session"]["left"], 1);
    create(&ns, "Site", "other", json!({"title": "Not this one"})).await;
    create(&ns, "Site", "blog", json!({"title": "Replayed", "body": "offline"})).await;
    let taken = tempfile::tempdir().unwrap();
    let files = recorded(&host, "site", 1, taken.path()).await;
    let (file, recording) = &files[0];
    assert_eq!(recording["request"]["key"], key.as_str());
    assert_eq!(recording["request"]["object"]["spec"]["title"], "Replayed");
    let call = &recording["kube"][0];
    assert_eq!(call["call"]["verb"], "get");
    assert_eq!(call["call"]["name"], "site-defaults");
    assert_eq!(call["answer"]["ok"]["data"]["footer"], "Recorded in production");
    let page = recording["result"]["response"]["resources"][0]["data"]["index.html"]
        .as_str()
        .unwrap();
    assert!(page.contains("Hello: Replayed"), "{page}");
    // Written where the platform said, readable by the runtime's user only.
    let folder = std::fs::metadata(recordings.path().join("site")).unwrap();
    assert_eq!(folder.permissions().mode() & 0o777, 0o700);
    let written: Vec<_> = std::fs::read_dir(recordings.path().join("site")).unwrap().collect();
    assert_eq!(written.len(), 1);
    let mode = written[0].as_ref().unwrap().metadata().unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // The same component, offline: the same output and calls.
    let (code, said) = replay(&[file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("same: the output and all 1 kube call(s) match"), "{said}");

    // The production ConfigMap changed since: the replay still reads what was recorded.
    let changed = json!({"data": {"footer": "changed later"}});
    configmaps
        .patch(
            "site-defaults",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&changed),
        )
        .await
        .unwrap();
    assert_eq!(replay(&[file.to_str().unwrap()]).0, Some(0));

    // Another component in its place: every difference named, exit 1.
    let (code, said) = replay(&[file.to_str().unwrap(), "--component", echo.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{said}");
    for expected in [
        "kube[0]: \"get v1 ConfigMap site-defaults\" -> (none)",
        "resources[v1 ConfigMap blog-content]",
        "status.renderedBy: \"rust-hook\" -> (none)",
        "status.mode: (none) -> \"\"",
    ] {
        assert!(said.contains(expected), "{expected:?} in {said}");
    }

    // The session took its one call and stopped taking.
    create(&ns, "Site", "later", json!({"title": "Later"})).await;
    let listed: Value = get(&host, "/recordings").await.json().await.unwrap();
    assert_eq!(listed["sessions"][0]["left"], 0);
    assert_eq!(listed["sessions"][0]["recorded"].as_array().unwrap().len(), 1);

    // A folder is a regression suite: the recording, and one that is not, exit 2.
    std::fs::write(taken.path().join("broken.json"), "{\"format\": 9}").unwrap();
    let (code, said) = replay(&[taken.path().to_str().unwrap()]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("format: 9 is not a recording this ork reads"), "{said}");
    assert!(said.contains("same:"), "the good one still replays: {said}");
    drop(host);
}

/// Issue 52: a recording replays after its component's file was replaced (rebuilt): the
/// runtime kept the bytes it ran by digest, here in a component cache of this test's own.
#[tokio::test]
async fn a_recording_replays_after_its_component_file_is_replaced() {
    let ns = namespace("replay-file").await.unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cache_env = ("ORK_CACHE_DIR", cache.path().to_str().unwrap());
    let built = tempfile::tempdir().unwrap();
    let file = built.path().join("site.wasm");
    let rust_hook = guests::component("rust-hook").unwrap();
    std::fs::copy(&rust_hook, &file).unwrap();
    let text = katalog(&ns).replacen(&rust_hook.display().to_string(), &file.display().to_string(), 1);
    let recordings = tempfile::tempdir().unwrap();
    let flags = [
        "--recordings".to_string(),
        recordings.path().to_str().unwrap().to_string(),
    ];
    let mut host = run_katalog_in(&ns, text, &flags, &[cache_env]).await;
    host.token = std::fs::read_to_string(recordings.path().join(".token")).unwrap();
    let key = format!("{}/page", ns.name);
    let (status, body) = post(&host, json!({"component": "site", "count": 1, "key": key})).await;
    assert_eq!(status, 201, "{body}");
    create(&ns, "Site", "page", json!({"title": "Kept"})).await;
    let taken = tempfile::tempdir().unwrap();
    let files = recorded(&host, "site", 1, taken.path()).await;
    drop(host);
    // Rebuilt: another component's bytes in the file the Katalog names.
    std::fs::copy(guests::component("echo-hook").unwrap(), &file).unwrap();
    let recording = files[0].0.to_str().unwrap();
    let output = run(
        &["replay", recording],
        &[("KUBECONFIG", "/nonexistent/kubeconfig"), cache_env],
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{said}");
    assert!(said.contains("same: the output and all"), "{said}");
}

#[tokio::test]
async fn clocks_and_random_are_served_from_the_recording_and_secrets_are_kept_only_where_granted() {
    let ns = namespace("replay-wasi").await.unwrap();
    let recordings = tempfile::tempdir().unwrap();
    let host = start(&ns, Some(recordings.path())).await;
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    let db = json!({"metadata": {"name": "db"}, "stringData": {"password": "hunter2-in-prod"}});
    secrets
        .create(&PostParams::default(), &serde_json::from_value(db).unwrap())
        .await
        .unwrap();
    let password = "aHVudGVyMi1pbi1wcm9k";

    // One session at a time per component: the churn's call, then the copy's.
    let taken = tempfile::tempdir().unwrap();
    let mut vault = Vec::new();
    for name in ["churn", "copy"] {
        let key = format!("{}/{name}", ns.name);
        let (status, body) = post(&host, json!({"component": "vault", "count": 1, "key": key})).await;
        assert_eq!(status, 201, "{body}");
        let mode = if name == "churn" { "churn" } else { "secret" };
        create(&ns, "Vault", name, json!({"mode": mode})).await;
        vault.extend(recorded(&host, "vault", 1, taken.path()).await);
    }
    let (status, body) = post(&host, json!({"component": "open", "count": 1})).await;
    assert_eq!(status, 201, "{body}");
    create(&ns, "Open", "plain", json!({"mode": "secret"})).await;
    let open = recorded(&host, "open", 1, taken.path()).await;

    // The churn's clock and random reads were taken down; its replay is served them again,
    // so a status that differs on every live call (its time and a random nonce) replays the
    // same.
    let (churn, churned) = vault
        .iter()
        .find(|(_, r)| r["request"]["object"]["spec"]["mode"] == "churn")
        .unwrap();
    assert!(!churned["wasi"]["wall"].as_array().unwrap().is_empty(), "{churned}");
    // Its hash keys come from WASI's insecure seed (Rust's std), recorded with every call.
    assert!(
        churned["wasi"]["insecureSeed"].as_str().is_some_and(|s| s != "0"),
        "{churned}"
    );
    let at: u64 = churned["result"]["response"]["status"]["at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let walls = churned["wasi"]["wall"].as_array().unwrap();
    assert!(
        walls.contains(&json!(at)),
        "the status holds a recorded clock read: {at} in {walls:?}"
    );
    let (code, said) = replay(&[churn.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{said}");

    // A grant without recordSecrets: the Secret it read and the copy it returned are
    // redacted, and the replay (redacted the same way) still matches.
    let (copy, copied) = vault
        .iter()
        .find(|(_, r)| r["request"]["object"]["spec"]["mode"] == "secret")
        .unwrap();
    let text = std::fs::read_to_string(copy).unwrap();
    assert!(!text.contains(password), "{text}");
    assert_eq!(copied["secretsRedacted"], true);
    assert_eq!(
        copied["kube"][0]["answer"]["ok"]["data"]["password"],
        "PHJlZGFjdGVkPg=="
    );
    assert_eq!(
        copied["result"]["response"]["resources"][0]["data"]["password"],
        "PHJlZGFjdGVkPg=="
    );
    let (code, said) = replay(&[copy.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{said}");
    // ... while the call really did copy the value.
    let live = secrets.get("copy-copy").await.unwrap();
    assert_eq!(live.data.unwrap()["password"].0, b"hunter2-in-prod");

    // A grant with recordSecrets: true keeps them.
    let text = std::fs::read_to_string(&open[0].0).unwrap();
    assert!(text.contains(password), "{text}");
    assert_eq!(open[0].1["secretsRedacted"], false);
    drop(host);
}

#[tokio::test]
async fn recording_is_refused_unless_the_platform_enables_it_and_bad_asks_name_their_field() {
    let ns = namespace("replay-off").await.unwrap();
    let off = start(&ns, None).await;
    let (status, body) = post(&off, json!({"component": "site"})).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("--recordings DIR"), "{body}");
    drop(off);

    let recordings = tempfile::tempdir().unwrap();
    let on = start(&ns, Some(recordings.path())).await;
    let (status, body) = post(&on, json!({"component": "nope"})).await;
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("known: "), "{body}");
    for (ask, field) in [
        (json!({"component": "site", "count": 5000}), "count: 5000"),
        (json!({"component": "site", "bytes": 0}), "bytes: 0"),
        (json!({"component": "site", "key": "../../etc"}), "key: "),
        (json!({"component": "site", "shell": true}), "unknown field `shell`"),
    ] {
        let (status, body) = post(&on, ask).await;
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].as_str().unwrap().contains(field), "{field} in {body}");
    }
    // A form another site could post is not JSON: refused.
    let form = reqwest::Client::new()
        .post(format!("{}/recordings", on.url))
        .bearer_auth(&on.token)
        .form(&[("component", "site")])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status().as_u16(), 400);
    let gone = get(&on, "/recordings/1-1").await;
    assert_eq!(gone.status().as_u16(), 404);
    let stop = reqwest::Client::new()
        .delete(format!("{}/recordings?component=site", on.url))
        .bearer_auth(&on.token)
        .send()
        .await
        .unwrap();
    assert_eq!(stop.status().as_u16(), 404, "no session to stop");
    // Issue 49, finding 4: the sessions API asks for a token even on loopback, where the
    // rest of this Live API asks none.
    let open = reqwest::get(format!("{}/components", on.url)).await.unwrap();
    assert_eq!(open.status().as_u16(), 200);
    for (method, path) in [
        ("GET", "/recordings"),
        ("GET", "/recordings/1-1"),
        ("POST", "/recordings"),
    ] {
        let request = reqwest::Client::new().request(method.parse().unwrap(), format!("{}{path}", on.url));
        let answer = request.json(&json!({"component": "site"})).send().await.unwrap();
        assert_eq!(answer.status().as_u16(), 401, "{method} {path} without the token");
        let wrong = reqwest::Client::new()
            .request(method.parse().unwrap(), format!("{}{path}", on.url))
            .bearer_auth("guessed")
            .json(&json!({"component": "site"}))
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status().as_u16(), 401, "{method} {path} with another token");
    }
    drop(on);
}

/// Issue 49, finding 4: Secrets read by a `list` (whose items come without their kind) were
/// kept in plain text, and so was what the guest made of them; sessions had no bound
/// together; and `ork replay` fetched or read the component a crafted recording named.
#[tokio::test]
async fn every_secret_value_is_redacted_the_folder_is_bounded_and_replay_reads_nothing_a_recording_names() {
    let ns = namespace("replay-leak").await.unwrap();
    let recordings = tempfile::tempdir().unwrap();
    let host = start_with(&ns, Some(recordings.path()), &["--recordings-max-bytes", "24Ki"]).await;
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    let db = json!({"metadata": {"name": "db"}, "stringData": {"password": "hunter2-in-prod"}});
    secrets
        .create(&PostParams::default(), &serde_json::from_value(db).unwrap())
        .await
        .unwrap();
    let key = format!("{}/lister", ns.name);
    let (status, body) = post(&host, json!({"component": "vault", "count": 1, "key": key})).await;
    assert_eq!(status, 201, "{body}");
    create(&ns, "Vault", "lister", json!({"mode": "secret-list"})).await;
    let taken = tempfile::tempdir().unwrap();
    let files = recorded(&host, "vault", 1, taken.path()).await;
    let (file, recording) = &files[0];
    let text = std::fs::read_to_string(file).unwrap();
    for leaked in ["hunter2-in-prod", "aHVudGVyMi1pbi1wcm9k"] {
        assert!(!text.contains(leaked), "{leaked} in {text}");
    }
    assert_eq!(recording["kube"][0]["call"]["verb"], "list");
    assert_eq!(
        recording["kube"][0]["answer"]["ok"][0]["data"]["password"],
        "PHJlZGFjdGVkPg=="
    );
    assert_eq!(recording["result"]["response"]["status"]["first"], "PHJlZGFjdGVkPg==");
    assert!(
        recording["logs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().ends_with("value is PHJlZGFjdGVkPg==")),
        "{recording}"
    );
    // Replayed, the guest reads the redacted Secret and does the same with it.
    let (code, said) = replay(&[file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{said}");

    // The folder as a whole: a session that asks for more than it may still hold is held
    // to what is left, its calls past it dropped, and the folder stays within its bound.
    let (status, body) = post(&host, json!({"component": "vault", "count": 50})).await;
    assert_eq!(status, 201, "{body}");
    for i in 0..12 {
        create(&ns, "Vault", &format!("churn-{i}"), json!({"mode": "churn"})).await;
    }
    let session = eventually("calls dropped at the folder's bound", WAIT, || async {
        let listed: Value = get(&host, "/recordings").await.json().await.ok()?;
        let session = listed["sessions"][0].clone();
        (session["dropped"].as_u64()? > 0).then_some(session)
    })
    .await
    .unwrap();
    assert!(
        session["droppedWhy"]
            .as_str()
            .unwrap()
            .contains("the recordings folder holds"),
        "{session}"
    );
    let held: u64 = walk_size(recordings.path());
    assert!(held <= 24 << 10, "the folder holds {held} bytes, its bound 24Ki");

    // A crafted recording naming a URL and a path: neither is fetched nor read.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let mut crafted = recording.clone();
    crafted["component"]["source"] = json!(format!("http://{}/evil.wasm", listener.local_addr().unwrap()));
    crafted["component"]["digest"] = json!("ab".repeat(32));
    let crafted_file = taken.path().join("crafted.json");
    std::fs::write(&crafted_file, crafted.to_string()).unwrap();
    let (code, said) = replay(&[crafted_file.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("is not in this machine's component cache"), "{said}");
    assert!(said.contains("pass --component FILE"), "{said}");
    assert!(listener.accept().is_err(), "the URL the recording names was fetched");
    drop(host);
}

/// Bytes of the files under `dir`.
fn walk_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|entry| match entry.metadata().unwrap().is_dir() {
            true => walk_size(&entry.path()),
            false => entry.metadata().unwrap().len(),
        })
        .sum()
}
