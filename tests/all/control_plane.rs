//! `ork control-plane up`: a real control plane that kubectl and kube-rs accept, side by side
//! with others, gone without a trace when stopped, with clear errors for bad input.

use std::time::Duration;

use orkestra_test_support::kubectl_with;

use crate::ork::{Ork, processes_mentioning, run, wait_no_processes};

const READY: Duration = Duration::from_secs(120);

fn up(dir: &std::path::Path) -> Ork {
    let dir = dir.to_str().expect("utf-8 path");
    Ork::spawn(&["control-plane", "up", "--dir", dir], &[])
}

#[test]
fn up_serves_kubectl_and_sigterm_leaves_no_process() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cp");
    let mut ork = up(&dir);
    let ready = ork.wait_for("control plane ready", READY);
    assert!(ready.contains(&dir.join("kubeconfig").display().to_string()), "{ready}");

    let namespaces = kubectl_with(&dir.join("kubeconfig"), &["get", "ns", "-o", "name"]).unwrap();
    assert!(namespaces.contains("namespace/default"), "{namespaces}");
    assert!(namespaces.contains("namespace/kube-system"), "{namespaces}");
    let release = orkestra_control_plane::Release::pick(None);
    if orkestra_control_plane::Binaries::resolve(&release).simulates_nodes() {
        assert_eq!(
            processes_mentioning(&dir).len(),
            6,
            "ork, etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok"
        );
        let nodes = kubectl_with(&dir.join("kubeconfig"), &["get", "nodes", "-o", "name"]).unwrap();
        assert_eq!(nodes.trim(), "node/ork-node-0", "one simulated node by default");
    } else {
        assert_eq!(
            processes_mentioning(&dir).len(),
            4,
            "ork, etcd, kube-apiserver, kube-controller-manager"
        );
    }

    let status = ork.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    assert!(status.success(), "ork exits 0 on SIGTERM: {status}");
    assert_eq!(wait_no_processes(&dir, Duration::from_secs(5)), Vec::<u32>::new());
}

#[test]
fn up_with_audit_logs_each_request_with_its_user_agent() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cp");
    let dir_text = dir.to_str().expect("utf-8 path");
    let mut ork = Ork::spawn(
        &[
            "control-plane",
            "up",
            "--audit",
            "--no-controller-manager",
            "--dir",
            dir_text,
        ],
        &[],
    );
    ork.wait_for("control plane ready", READY);
    let log = dir.join("logs/audit.log");
    let said = ork.wait_for("audit log:", Duration::from_secs(5));
    assert!(said.contains(&log.display().to_string()), "{said}");

    kubectl_with(&dir.join("kubeconfig"), &["get", "ns", "-o", "name"]).unwrap();
    // Written in batches of at most a second.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let listed = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let found = text
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find(|event| {
                event["verb"] == "list"
                    && event["objectRef"]["resource"] == "namespaces"
                    && event["userAgent"].as_str().is_some_and(|a| a.starts_with("kubectl/"))
            });
        match found {
            Some(event) => break event,
            None if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(250)),
            None => panic!("no list of namespaces by kubectl in {}:\n{text}", log.display()),
        }
    };
    assert_eq!(listed["stage"], "ResponseComplete", "{listed}");
    assert!(
        listed.get("requestObject").is_none(),
        "metadata only, no bodies: {listed}"
    );

    let status = ork.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    assert!(status.success(), "ork exits 0 on SIGTERM: {status}");
}

#[test]
fn two_instances_run_side_by_side_and_sigkill_of_one_leaves_no_orphan() {
    let temp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (temp.path().join("a"), temp.path().join("b"));
    let mut a = up(&dir_a);
    let mut b = up(&dir_b);
    let ready_a = a.wait_for("control plane ready", READY);
    let ready_b = b.wait_for("control plane ready", READY);
    assert_ne!(
        server_of(&ready_a),
        server_of(&ready_b),
        "each instance has its own port"
    );

    for dir in [&dir_a, &dir_b] {
        let kubeconfig = dir.join("kubeconfig");
        kubectl_with(&kubeconfig, &["create", "namespace", "side-by-side"]).unwrap();
        let namespaces = kubectl_with(&kubeconfig, &["get", "ns", "side-by-side", "-o", "name"]).unwrap();
        assert_eq!(namespaces.trim(), "namespace/side-by-side");
    }

    // Killing `ork` outright must take its control plane with it (parent-death signal).
    a.signal_and_wait(libc::SIGKILL, Duration::from_secs(10));
    assert_eq!(
        wait_no_processes(&dir_a, Duration::from_secs(10)),
        Vec::<u32>::new(),
        "orphans of a"
    );
    // The other instance is untouched.
    let still = kubectl_with(&dir_b.join("kubeconfig"), &["get", "ns", "side-by-side", "-o", "name"]).unwrap();
    assert_eq!(still.trim(), "namespace/side-by-side");
    assert!(b.signal_and_wait(libc::SIGINT, Duration::from_secs(30)).success());
    assert_eq!(wait_no_processes(&dir_b, Duration::from_secs(5)), Vec::<u32>::new());
}

fn server_of(line: &str) -> String {
    line.split_whitespace()
        .find(|w| w.starts_with("https://"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let temp = tempfile::tempdir().unwrap();
    let output = run(
        &[
            "control-plane",
            "up",
            "--dir",
            temp.path().to_str().unwrap(),
            "--port",
            &port,
        ],
        &[],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("port {port} on 127.0.0.1 is already in use")),
        "{stderr}"
    );
    assert!(stderr.contains("--port"), "names the fix: {stderr}");
}

#[test]
fn an_unwritable_dir_is_a_clear_error() {
    let temp = tempfile::tempdir().unwrap();
    let file = temp.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let dir = file.join("cp");
    let output = run(&["control-plane", "up", "--dir", dir.to_str().unwrap()], &[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot write to {}", dir.display())),
        "{stderr}"
    );
    assert!(stderr.contains("choose a writable directory with --dir"), "{stderr}");
}

#[test]
fn a_missing_binary_names_the_binary_and_the_install_command() {
    let temp = tempfile::tempdir().unwrap();
    let output = run(
        &["control-plane", "up", "--dir", temp.path().to_str().unwrap()],
        &[("ORK_KUBE_APISERVER_BIN", "/nonexistent/kube-apiserver")],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("kube-apiserver not found at /nonexistent/kube-apiserver"),
        "{stderr}"
    );
    assert!(stderr.contains("run `ork control-plane install`"), "{stderr}");
    assert!(stderr.contains("ORK_KUBE_APISERVER_BIN"), "{stderr}");
}

#[test]
fn a_second_instance_in_the_same_dir_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cp");
    let mut first = up(&dir);
    first.wait_for("control plane ready", READY);
    let output = run(&["control-plane", "up", "--dir", dir.to_str().unwrap()], &[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("is in use by another running control plane"),
        "{stderr}"
    );
    // The first instance kept serving.
    kubectl_with(&dir.join("kubeconfig"), &["get", "ns", "default"]).unwrap();
    assert!(first.signal_and_wait(libc::SIGTERM, Duration::from_secs(30)).success());
}

#[test]
fn install_of_a_release_that_does_not_exist_fails_clearly_and_caches_nothing() {
    if orkestra_control_plane::Release::pick(None).recipe != orkestra_control_plane::Recipe::Modules {
        return; // Without Go there is only the v1.20.2 fallback, whatever is asked.
    }
    let cache = tempfile::tempdir().unwrap();
    let env = [("ORK_CACHE_DIR", cache.path().to_str().unwrap())];
    let output = run(&["control-plane", "install", "--version", "1.37"], &env);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("\"1.37\" is not a Kubernetes release such as v1.37.2"),
        "{stderr}"
    );
    let output = run(&["control-plane", "install", "--version", "v1.99.0"], &env);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("k8s.io/kubernetes@v1.99.0 is not on the Go module proxy"),
        "{stderr}"
    );
    let entries: Vec<_> = std::fs::read_dir(cache.path().join("control-plane"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("kubernetes-") || name.starts_with(".build-"))
        .collect();
    assert!(entries.is_empty(), "a failed build leaves no cache entry: {entries:?}");
}
