//! `ork simulate`, as an operator author runs it: one CR's reconcile with no cluster at all
//! (KUBECONFIG points nowhere), templates and Wasm hooks against an API server in memory
//! holding the CR and the objects given to read; the output as YAML, exit 1 when it fails.

use std::path::PathBuf;

use orkestra_test_support::guests;
use serde_json::Value;

use crate::ork::run;

fn katalogs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../katalogs")
}

/// `ork simulate ARGS` with no cluster: exit code, the YAML printed, and everything said.
fn simulate(args: &[&str]) -> (Option<i32>, Value, String) {
    let mut all = vec!["simulate"];
    all.extend_from_slice(args);
    let output = run(&all, &[("KUBECONFIG", "/nonexistent/kubeconfig")]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let said = format!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let printed = serde_yaml_ng::from_str(&stdout).unwrap_or(Value::Null);
    (output.status.code(), printed, said)
}

fn child<'v>(printed: &'v Value, kind: &str, name: &str) -> Option<&'v Value> {
    printed["children"]
        .as_array()?
        .iter()
        .find(|c| c["kind"] == kind && c["metadata"]["name"] == name)
}

#[test]
fn a_sample_reconciles_offline_into_its_children_status_and_events() {
    let website = katalogs().join("website");
    let (katalog, sample) = (website.join("katalog.yaml"), website.join("samples/website.yaml"));
    let (code, printed, said) = simulate(&["-f", katalog.to_str().unwrap(), "--cr", sample.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(printed["cr"], "default/hello");
    assert_eq!(printed["outcome"], "reconciled");
    let deployment = child(&printed, "Deployment", "hello").unwrap_or_else(|| panic!("{said}"));
    assert_eq!(deployment["spec"]["replicas"], 2, "from the sample's spec");
    assert_eq!(deployment["metadata"]["ownerReferences"][0]["kind"], "Website");
    assert!(child(&printed, "Service", "hello").is_some(), "{said}");
    assert_eq!(printed["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(printed["status"]["conditions"][0]["status"], "True");
    assert_eq!(printed["status"]["url"], "http://hello.default.svc");
    let events = printed["events"].as_array().cloned().unwrap_or_default();
    assert!(
        events
            .iter()
            .any(|e| e.as_str().is_some_and(|e| e.starts_with("Normal WebsiteReconciled:"))),
        "{said}"
    );
}

#[test]
fn a_hook_reads_the_observed_objects_and_another_component_in_its_slot_changes_the_output() {
    guests::component("rust-hook").unwrap();
    let echo = guests::component("echo-hook").unwrap();
    let site = katalogs().join("site-hook");
    let (katalog, samples) = (site.join("katalog.yaml"), site.join("samples/site.yaml"));
    let observed = tempfile::tempdir().unwrap();
    std::fs::write(
        observed.path().join("defaults.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site-defaults, namespace: default}\ndata: {footer: read offline}\n",
    )
    .unwrap();
    let base = [
        "-f",
        katalog.to_str().unwrap(),
        "--cr",
        samples.to_str().unwrap(),
        "--name",
        "blog",
        "--observed",
        observed.path().to_str().unwrap(),
    ];
    let (code, printed, said) = simulate(&base);
    assert_eq!(code, Some(0), "{said}");
    let content = child(&printed, "ConfigMap", "blog-content").unwrap_or_else(|| panic!("{said}"));
    let page = content["data"]["index.html"].as_str().unwrap_or_default();
    assert!(page.contains("<h1>Hello: Field notes</h1>"), "{page}");
    assert!(
        page.contains("<footer>read offline</footer>"),
        "the hook's kube read: {page}"
    );
    assert_eq!(printed["status"]["renderedBy"], "rust-hook");

    let slot = format!("site={}", echo.display());
    let mut swapped = base.to_vec();
    swapped.extend(["--component", &slot]);
    let (code, printed, said) = simulate(&swapped);
    assert_eq!(code, Some(0), "{said}");
    assert!(child(&printed, "ConfigMap", "blog-content").is_none(), "{said}");
    assert_eq!(printed["status"]["mode"], "", "the echo hook's status: {said}");

    // A file of several custom resources asks which one.
    let (code, _, said) = simulate(&base[..4]);
    assert_eq!(code, Some(1));
    assert!(
        said.contains("it holds 2 custom resources (blog, beta); pick one with --name"),
        "{said}"
    );
}

#[test]
fn a_failing_reconcile_exits_1_with_its_reason_and_bad_input_names_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let katalog = dir.path().join("katalog.yaml");
    std::fs::write(
        &katalog,
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: broken}
spec:
  crds:
    app:
      apiTypes: {group: sim.orkestra.io, version: v1, kind: App}
      operatorBox:
        reconcile:
          onReconcile:
            configMaps:
              - {name: Not_A_Name, data: {x: '1'}}
",
    )
    .unwrap();
    let cr = dir.path().join("cr.yaml");
    std::fs::write(
        &cr,
        "apiVersion: sim.orkestra.io/v1\nkind: App\nmetadata: {name: a, namespace: team-a}\n",
    )
    .unwrap();
    let (code, printed, said) = simulate(&["-f", katalog.to_str().unwrap(), "--cr", cr.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{said}");
    assert_eq!(printed["outcome"], "failed");
    assert!(
        printed["error"].as_str().is_some_and(|e| e.contains("Not_A_Name")),
        "{said}"
    );
    assert_eq!(printed["status"]["conditions"][0]["reason"], "ApplyFailed");
    assert!(printed["children"].is_null(), "a refused write made nothing: {said}");

    let other = dir.path().join("other.yaml");
    std::fs::write(&other, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n").unwrap();
    let (code, _, said) = simulate(&["-f", katalog.to_str().unwrap(), "--cr", other.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(
        said.contains("other.yaml: no custom resource of the Katalog's kinds (sim.orkestra.io/v1 App)"),
        "{said}"
    );
    std::fs::write(
        &other,
        "apiVersion: sim.orkestra.io/v1\nkind: App\nmetadata: {name: [not, a, name]}\n",
    )
    .unwrap();
    let (code, _, said) = simulate(&["-f", katalog.to_str().unwrap(), "--cr", other.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(said.contains("other.yaml: metadata.name"), "{said}");
}

/// `ork init`: a Katalog to start from validates, and its sample reconciles offline into a
/// Deployment and a Service; a second init writes nothing over it.
#[test]
fn a_katalog_from_init_validates_and_its_sample_reconciles() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let made = run(&["init", "shop", "--group", "shops.example.com", "--dir", path], &[]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let katalog = dir.path().join("katalog.yaml");
    let katalog = katalog.to_str().unwrap();
    let valid = run(&["validate", "-f", katalog], &[]);
    assert!(valid.status.success(), "{}", String::from_utf8_lossy(&valid.stdout));
    let sample = dir.path().join("samples/shop.yaml");
    let (code, printed, said) = simulate(&["-f", katalog, "--cr", sample.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(
        child(&printed, "Deployment", "sample").map(|d| &d["spec"]["replicas"]),
        Some(&2.into())
    );
    assert!(child(&printed, "Service", "sample").is_some(), "{said}");
    assert_eq!(printed["status"]["url"], "http://sample.default.svc");
    let again = run(&["init", "shop", "--dir", path], &[]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists already; nothing was written"));
}
