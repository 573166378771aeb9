//! The `ork` command line as a user meets it: help everywhere, validate, the `dev` main job,
//! and a failed control plane build that leaves nothing half-written.

use std::path::PathBuf;
use std::time::Duration;

use orkestra_test_support::kubectl_with;

use crate::ork::{Ork, run, wait_no_processes};

fn website_katalog() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../katalogs/website/katalog.yaml")
}

#[test]
fn every_command_has_help() {
    for command in [
        &["--help"][..],
        &["run", "--help"],
        &["dev", "--help"],
        &["validate", "--help"],
        &["migrate", "--help"],
        &["control-plane", "--help"],
        &["control-plane", "install", "--help"],
        &["control-plane", "up", "--help"],
        &["manifests", "--help"],
        &["gateway", "--help"],
        &["serve", "--help"],
        &["reload", "--help"],
        &["test", "--help"],
        &["control-center", "--help"],
        &["component", "--help"],
        &["component", "push", "--help"],
        &["component", "new", "--help"],
        &["component", "init", "--help"],
        &["motif", "--help"],
        &["motif", "push", "--help"],
        &["motif", "pull", "--help"],
        &["simulate", "--help"],
        &["replay", "--help"],
        &["token", "--help"],
        &["token", "list", "--help"],
        &["token", "verify", "--help"],
        &["token", "probe", "--help"],
        &["webhook", "--help"],
        &["webhook", "list", "--help"],
        &["serve", "validate", "--help"],
        &["serve", "targets", "--help"],
        &["serve", "can-i", "--help"],
        &["init", "--help"],
        &["plan", "--help"],
        &["generate", "--help"],
        &["generate", "crd", "--help"],
        &["generate", "bundle", "--help"],
        &["generate", "dashboards", "--help"],
    ] {
        let output = run(command, &[]);
        assert!(output.status.success(), "ork {command:?}");
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("Usage: ork"),
            "ork {command:?}"
        );
    }
}

#[test]
fn validate_accepts_the_example_and_names_a_missing_file() {
    let katalog = website_katalog();
    let output = run(&["validate", "-f", katalog.to_str().unwrap()], &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("valid: 1 CRD(s): website"));

    let output = run(
        &["validate", "-f", "/nonexistent/katalog.yaml", "--output", "json"],
        &[],
    );
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["valid"], false);
    assert_eq!(
        report["errors"][0]["message"],
        "cannot read Katalog file /nonexistent/katalog.yaml"
    );
}

#[test]
fn migrate_rewrites_a_konductor_katalog_that_validate_refuses_into_one_it_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.yaml");
    std::fs::write(
        &old,
        "apiVersion: orkestra.konductor.io/v1Alpha
kind: Katalog
spec:
  crds:
    - name: website
      apiTypes: {group: demo.orkestra.io, version: v1, kind: Website}
      validation:
        - {field: spec.image, operator: exists, action: deny, message: an image is required}
      reconciler:
        onCreate:
          deployments:
            - image: '{{ .spec.image }}'
",
    )
    .unwrap();
    let refused = run(&["validate", "-f", old.to_str().unwrap()], &[]);
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("old.yaml:5:5: spec.crds:") && said.contains("ork migrate"),
        "{said}"
    );

    let migrated = run(&["migrate", "-f", old.to_str().unwrap()], &[]);
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    assert!(String::from_utf8_lossy(&migrated.stderr).contains("a map keyed by name"));
    let new = dir.path().join("new.yaml");
    std::fs::write(&new, &migrated.stdout).unwrap();
    let accepted = run(&["validate", "-f", new.to_str().unwrap()], &[]);
    assert!(
        accepted.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&accepted.stderr),
        String::from_utf8_lossy(&migrated.stdout)
    );
    assert!(String::from_utf8_lossy(&accepted.stdout).contains("valid: 1 CRD(s): website"));
}

#[test]
fn validate_lists_every_error_with_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("katalog.yaml");
    std::fs::write(
        &path,
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    web:\n      apiTypes: {group: a.io, version: v1, kind: Web}\n      operatorBox:\n        reconcile:\n          workers: 99\n          onCreate:\n            deployments:\n              - {image: '{{ .spec.image | nosuch }}', replica: 2}\n            external:\n              - {name: ping, url: 'http://x', expectedStatus: 700}\n    db:\n      apiTypes: {group: a.io, version: v1, kind: Db}\n      operatorBox: {reconcile: {resync: soon}}\n",
    )
    .unwrap();
    let output = run(&["validate", "-f", path.to_str().unwrap(), "-o", "json"], &[]);
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let errors = report["errors"].as_array().unwrap();
    // Five mistakes, all at once: a range, a template, a key, a status code only the compile
    // pass checks, and a duration in a second CRD.
    let places: Vec<(u64, &str)> = errors
        .iter()
        .map(|e| (e["line"].as_u64().unwrap(), e["path"].as_str().unwrap()))
        .collect();
    assert_eq!(
        places,
        [
            (9, "spec.crds.web.operatorBox.reconcile.workers"),
            (12, "spec.crds.web.operatorBox.reconcile.onCreate.deployments[0].image"),
            (
                12,
                "spec.crds.web.operatorBox.reconcile.onCreate.deployments[0].replica"
            ),
            (
                14,
                "spec.crds.web.operatorBox.reconcile.onCreate.external[0].expectedStatus"
            ),
            (17, "spec.crds.db.operatorBox.reconcile.resync"),
        ],
        "{report}"
    );
    assert_eq!(
        (errors[0]["line"].as_u64(), errors[0]["column"].as_u64()),
        (Some(9), Some(20))
    );
    assert_eq!(errors[0]["path"], "spec.crds.web.operatorBox.reconcile.workers");
    let output = run(&["validate", "-f", path.to_str().unwrap()], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("{}:12:", path.display())), "{stderr}");
    assert!(stderr.contains("function \"nosuch\" not defined"), "{stderr}");
    assert!(stderr.contains("the closest valid key is `replicas`"), "{stderr}");
}

#[test]
fn dev_with_a_missing_katalog_fails_before_starting_anything() {
    let output = run(&["dev", "-f", "/nonexistent/katalog.yaml"], &[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read Katalog file /nonexistent/katalog.yaml"),
        "{stderr}"
    );
}

#[test]
fn a_standalone_gateway_katalog_is_sent_to_ork_gateway() {
    let (_dir, file) = crate::running::written(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {name: guard}\ngateway: {standalone: true}\nsecurity:\n  deletionProtection: {enabled: true}\nspec: {}\n",
    );
    for command in ["run", "dev"] {
        let output = run(&[command, "-f", file.to_str().unwrap()], &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{command}: {stderr}");
        assert!(
            stderr.contains(
                "gateway.standalone: true: this Katalog is a gateway of its own, run it with `ork gateway -f FILE`"
            ),
            "{command}: {stderr}"
        );
    }
}

#[test]
fn dev_installs_the_crds_applies_the_setup_then_the_sample_crs() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("dev");
    // The website example with a prerequisite: its setup goes in before its samples.
    let example = website_katalog();
    let text = std::fs::read_to_string(&example).unwrap();
    let katalog = temp.path().join("katalog.yaml");
    std::fs::write(
        &katalog,
        text.replace(
            "      crFiles:",
            "      setup: {apply: [setup.yaml], wait: [{kind: ConfigMap, name: website-defaults, timeout: 30s}]}\n      crFiles:",
        ),
    )
    .unwrap();
    std::fs::create_dir(temp.path().join("samples")).unwrap();
    let sample = example.parent().unwrap().join("samples/website.yaml");
    std::fs::copy(sample, temp.path().join("samples/website.yaml")).unwrap();
    std::fs::write(
        temp.path().join("setup.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: website-defaults}\ndata: {theme: plain}\n",
    )
    .unwrap();
    // The default port held by something else that answers HTTP: `ork dev` takes a free
    // port and says which; `ork reload` finds out what answers on the default one.
    let squatter = Squatter::start(DEFAULT_LIVE_API);
    let dev = || {
        Ork::spawn(
            &[
                "dev",
                "-f",
                katalog.to_str().unwrap(),
                "--apply-cr",
                "--dir",
                dir.to_str().unwrap(),
            ],
            &[],
        )
    };
    let mut ork = dev();
    let moved = ork.wait_for("is taken; the Live API listens on", Duration::from_secs(180));
    let live = moved
        .split("listens on ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .to_string();
    assert_ne!(live, DEFAULT_LIVE_API, "{moved}");
    ork.wait_for("installed CRD websites.demo.orkestra.io", Duration::from_secs(180));
    let setup = ork.wait_for("applied ConfigMap/website-defaults", Duration::from_secs(30));
    assert!(setup.ends_with("(setup)"), "{setup}");
    let waited = ork.wait_for(
        "ready: ConfigMap default/website-defaults after",
        Duration::from_secs(30),
    );
    assert!(waited.ends_with("(setup.wait)"), "{waited}");
    ork.wait_for("applied Website/hello", Duration::from_secs(30));
    let hint = ork.wait_for("try: kubectl --kubeconfig", Duration::from_secs(30));
    assert!(hint.contains(&dir.join("kubeconfig").display().to_string()), "{hint}");

    let websites = kubectl_with(
        &dir.join("kubeconfig"),
        &["get", "websites", "-o", "jsonpath={.items[*].spec.replicas}"],
    )
    .unwrap();
    assert_eq!(websites, "2");
    // Its runtime is registered where a Control Center's discovery looks.
    let registered = kubectl_with(
        &dir.join("kubeconfig"),
        &[
            "get",
            "service",
            "ork-dev",
            "-n",
            "default",
            "-o",
            "jsonpath={.metadata.labels.orkestra\\.io/live-api} {.metadata.annotations.orkestra\\.io/live-api-url}",
        ],
    )
    .unwrap();
    assert_eq!(registered, format!("true http://{live}"));
    ork.wait_for(&format!("runtime: Live API on http://{live}"), Duration::from_secs(30));

    // `ork reload` checks who answers before it asks anything.
    let other = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../katalogs/notes/katalog.yaml");
    let wrong = run(&["reload", "--http-addr", &live, "-f", other.to_str().unwrap()], &[]);
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the runtime at {live} runs Katalog \"website\", not \"notes\""
        )),
        "{stderr}"
    );
    let mistaken = run(&["reload"], &[]);
    let stderr = String::from_utf8_lossy(&mistaken.stderr);
    assert!(!mistaken.status.success(), "{stderr}");
    if squatter.is_some() {
        assert!(
            stderr.contains(&format!(
                "the process at {DEFAULT_LIVE_API} is not an Orkestra runtime (GET /katalog answered 404"
            )),
            "{stderr}"
        );
    }
    let right = run(&["reload", "--http-addr", &live, "-f", katalog.to_str().unwrap()], &[]);
    let stdout = String::from_utf8_lossy(&right.stdout);
    assert!(
        right.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&right.stderr)
    );
    assert!(
        stdout.contains(&format!("Katalog \"website\" at {live}: nothing changed")),
        "{stdout}"
    );
    // The runtime runs in the same process: the sample gets reconciled status.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        let url = kubectl_with(
            &dir.join("kubeconfig"),
            &[
                "get",
                "website",
                "hello",
                "-o",
                "jsonpath={.status.url} {.status.conditions[0].status}",
            ],
        )
        .unwrap();
        if !url.trim().is_empty() || std::time::Instant::now() > deadline {
            break url;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(status, "http://hello.default.svc True");
    // As the README's tour says: `kubectl describe` shows the health stamped on the CR (by
    // a write right after the status's).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let health = loop {
        let health = kubectl_with(
            &dir.join("kubeconfig"),
            &[
                "get",
                "website",
                "hello",
                "-o",
                "jsonpath={.metadata.annotations.orkestra\\.orkspace\\.io/health}",
            ],
        )
        .unwrap();
        let health: serde_json::Value = serde_json::from_str(&health).unwrap_or_default();
        if health["state"] == "healthy" || std::time::Instant::now() > deadline {
            break health;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(health["state"], "healthy", "{health}");

    // Ready means the garbage collector knows the CRDs: a sample deleted at once has its
    // children collected in seconds, not at the collector's next discovery (~30 s).
    let kubeconfig = dir.join("kubeconfig");
    let started = std::time::Instant::now();
    kubectl_with(&kubeconfig, &["delete", "website", "hello", "--wait=false"]).unwrap();
    let collected = loop {
        let left = kubectl_with(
            &kubeconfig,
            &[
                "get",
                "deployment/hello",
                "service/hello",
                "--ignore-not-found",
                "-o",
                "name",
            ],
        )
        .unwrap();
        if left.trim().is_empty() || started.elapsed() > Duration::from_secs(60) {
            break started.elapsed();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        collected < Duration::from_secs(10),
        "the children were collected {collected:?} after the delete"
    );
    let probes = kubectl_with(&kubeconfig, &["get", "configmaps", "-n", "default", "-o", "name"]).unwrap();
    assert!(!probes.contains("ork-gc-probe"), "the probes are gone: {probes}");

    // A CRD added to the file: installed and started without a restart.
    let added = "  crds:\n    memo:\n      apiTypes: {group: demo.orkestra.io, version: v1, kind: Memo, plural: memos}\n      operatorBox:\n        reconcile:\n          onReconcile:\n            configMaps: [{name: '{{ .metadata.name }}-memo', data: {text: '{{ .spec.text }}'}}]\n";
    let text = std::fs::read_to_string(&katalog).unwrap();
    std::fs::write(&katalog, text.replacen("  crds:\n", added, 1)).unwrap();
    let memo = temp.path().join("memo.yaml");
    std::fs::write(
        &memo,
        "apiVersion: demo.orkestra.io/v1\nkind: Memo\nmetadata: {name: first, namespace: default}\nspec: {text: hi}\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let text = loop {
        // Refused until the reload installed the CRD.
        let _ = kubectl_with(&kubeconfig, &["apply", "-f", memo.to_str().unwrap()]);
        let text = kubectl_with(
            &kubeconfig,
            &[
                "get",
                "configmap",
                "first-memo",
                "--ignore-not-found",
                "-o",
                "jsonpath={.data.text}",
            ],
        )
        .unwrap_or_default();
        if !text.is_empty() || started.elapsed() > Duration::from_secs(60) {
            break text;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(text, "hi", "the added CRD runs in the same process, not restarted");
    // Said where the user looks, though logs are quiet.
    ork.wait_for("CRD memo: started (added to the Katalog)", Duration::from_secs(10));
    ork.wait_for(
        "Katalog \"website\" (changed on disk): reloaded",
        Duration::from_secs(10),
    );

    // The sample made again by hand, changed: a restart over the kept directory leaves it be.
    let changed = temp.path().join("changed.yaml");
    std::fs::write(
        &changed,
        std::fs::read_to_string(temp.path().join("samples/website.yaml"))
            .unwrap()
            .replace("replicas: 2", "replicas: 5"),
    )
    .unwrap();
    kubectl_with(&kubeconfig, &["create", "-f", changed.to_str().unwrap()]).unwrap();
    assert!(ork.signal_and_wait(libc::SIGINT, Duration::from_secs(30)).success());
    assert_eq!(wait_no_processes(&dir, Duration::from_secs(5)), Vec::<u32>::new());
    let mut again = dev();
    again.wait_for(
        "kept Website/hello: it exists already (samples are created, never put back)",
        Duration::from_secs(180),
    );
    again.wait_for("control plane ready", Duration::from_secs(30));
    let replicas = kubectl_with(
        &kubeconfig,
        &["get", "website", "hello", "-o", "jsonpath={.spec.replicas}"],
    )
    .unwrap();
    assert_eq!(replicas, "5", "the user's change stays");
    assert!(again.signal_and_wait(libc::SIGINT, Duration::from_secs(30)).success());
    assert_eq!(wait_no_processes(&dir, Duration::from_secs(5)), Vec::<u32>::new());
}

/// The Live API's default address, which `ork dev` and `ork reload` reach for.
const DEFAULT_LIVE_API: &str = "127.0.0.1:8080";

/// Another process's HTTP server on an address, answering 404 to everything, for as long
/// as it is kept. `None` when the address is already held (by whatever holds it).
struct Squatter(std::net::SocketAddr);

impl Squatter {
    fn start(addr: &str) -> Option<Self> {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind(addr).ok()?;
        let local = listener.local_addr().ok()?;
        std::thread::spawn(move || {
            for mut stream in listener.incoming().map_while(Result::ok) {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buffer = [0u8; 4096];
                let _ = stream.read(&mut buffer);
                let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            }
        });
        Some(Self(local))
    }

    fn addr(&self) -> String {
        self.0.to_string()
    }
}

#[test]
fn run_refuses_a_taken_port_naming_it_and_the_flag() {
    let cluster = orkestra_test_support::cluster().unwrap();
    let kubeconfig = cluster.kubeconfig.to_str().unwrap();
    let squatter = Squatter::start("127.0.0.1:0").unwrap();
    let katalog = website_katalog();
    let started = std::time::Instant::now();
    let output = run(
        &["run", "-f", katalog.to_str().unwrap(), "--http-addr", &squatter.addr()],
        &[("KUBECONFIG", kubeconfig)],
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "cannot listen on {} for the Live API: Address already in use (os error 98) (another process holds it); --http-addr ADDR picks another address, --no-http runs without the Live API",
            squatter.addr()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("reconciling"), "nothing started: {stderr}");
    assert!(started.elapsed() < Duration::from_secs(30), "refused at once");
}

#[test]
fn a_failed_build_step_is_named_and_leaves_no_cache_entry() {
    let temp = tempfile::tempdir().unwrap();
    let cache = temp.path().join("cache");
    // Stand-ins: no Go (so the Debian fallback is chosen), and a first step that fails the
    // way a broken mirror would.
    let fake = temp.path().join("bin");
    std::fs::create_dir_all(&fake).unwrap();
    for (name, body) in [
        ("go", "exit 127"),
        ("dpkg-query", "exit 1"),
        (
            "apt-get",
            "echo 'E: simulated: the package mirror is unreachable' >&2; exit 100",
        ),
    ] {
        let path = fake.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", fake.display(), std::env::var("PATH").unwrap_or_default());
    let output = run(
        &["control-plane", "install"],
        &[("ORK_CACHE_DIR", cache.to_str().unwrap()), ("PATH", &path)],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Go was not found on PATH: using the v1.20.2 fallback"),
        "the fallback is said: {stderr}"
    );
    assert!(
        stderr.contains("building the control plane failed at step \"installing Debian build dependencies\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("simulated: the package mirror is unreachable"),
        "the log tail is shown: {stderr}"
    );
    let entries: Vec<String> = std::fs::read_dir(cache.join("control-plane"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(".lock") && name != "build.log")
        .collect();
    assert_eq!(
        entries,
        Vec::<String>::new(),
        "no cache entry and no build directory are left"
    );
}

#[test]
fn run_refuses_a_live_api_beyond_loopback_without_a_token() {
    let cluster = orkestra_test_support::cluster().unwrap();
    let kubeconfig = cluster.kubeconfig.to_str().unwrap();
    let katalog = website_katalog();
    let output = run(
        &["run", "-f", katalog.to_str().unwrap(), "--http-addr", "0.0.0.0:0"],
        &[("KUBECONFIG", kubeconfig), ("ORK_API_TOKEN", "")],
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the Live API would listen on 0.0.0.0:0 without a token: set ORK_API_TOKEN (or --token-secret), or pass --insecure-no-auth"),
        "{stderr}"
    );
}

/// Stand-ins for the control plane binaries in a cache entry, each reporting a version.
fn stub_cache(root: &std::path::Path, kwok_says: &str) {
    use orkestra_control_plane::{KUBERNETES_VERSION, Release, cache_root};
    let entry = Release::pick(None).cache_dir();
    let relative = entry.strip_prefix(cache_root()).unwrap();
    let dir = root.join(relative);
    std::fs::create_dir_all(&dir).unwrap();
    let version = KUBERNETES_VERSION;
    for (name, says) in [
        ("kube-apiserver", format!("echo 'Kubernetes {version}'")),
        ("kube-controller-manager", format!("echo 'Kubernetes {version}'")),
        ("kube-scheduler", format!("echo 'Kubernetes {version}'")),
        ("kubectl", format!("echo 'Client Version: {version}'")),
        // Line by line, as etcd writes: a reader that stops after one line kills it.
        (
            "etcd",
            "for l in 'etcd Version: 3.7.0' 'Git SHA: x' 'Go Version: y'; do echo \"$l\"; sleep 0.05; done".into(),
        ),
        ("kwok", format!("echo '{kwok_says}'")),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{says}\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
}

#[test]
fn a_cached_control_plane_is_checked_again_on_every_install() {
    let good = tempfile::tempdir().unwrap();
    stub_cache(good.path(), "kwok version v0.8.0 go1.26.8 (linux/amd64)");
    let output = run(
        &["control-plane", "install"],
        &[("ORK_CACHE_DIR", good.path().to_str().unwrap())],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "a cached build that passes: {stderr}");

    let bad = tempfile::tempdir().unwrap();
    stub_cache(bad.path(), "kwok version v0.1.0");
    let output = run(
        &["control-plane", "install"],
        &[("ORK_CACHE_DIR", bad.path().to_str().unwrap())],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a cached build that fails its check");
    assert!(
        stderr.contains("fails its check: kwok reports \"kwok version v0.1.0\", expected v0.8.0"),
        "{stderr}"
    );
}
