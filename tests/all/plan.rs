//! `ork plan` against the real API server: a Katalog changed after its CRs settled shows,
//! CR by CR, the children it would create, change (field by field) and delete, and the
//! status it would write, from the API server's dry runs; nothing is written, and an
//! unchanged Katalog plans no change.

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::Api;
use orkestra_test_support::eventually;
use serde_json::{Value, json};

use crate::ork::run;
use crate::pipeline::{Harness, WAIT, crd};

/// The box of version `version`: a ConfigMap of `.spec.x`, a Service while `exposed` is
/// `when`, and (`extra`) one more ConfigMap.
fn app_box(suffix: &str, when: &str, extra: bool, version: &str) -> String {
    let extra = match extra {
        true => "              - {name: '{{ .metadata.name }}-new', data: {z: '1'}}\n",
        false => "",
    };
    format!(
        "        reconcile:
          onReconcile:
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}-kept', data: {{x: '{{{{ .spec.x }}}}{suffix}'}}}}
{extra}            services:
              - {{name: '{{{{ .metadata.name }}}}', port: 80, when: [{{field: spec.exposed, equals: '{when}'}}]}}
        emit:
          status:
            fields:
              - {{path: version, value: '{version}'}}
"
    )
}

/// The Katalog file `h` runs, with `operator_box` for its CRD.
fn katalog_file(h: &Harness, dir: &std::path::Path, file: &str, operator_box: &str) -> String {
    let text = format!(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {{name: plan}}\nspec:\n  crds:\n{}",
        crd("app", "App", operator_box)
            .replace("GROUP", &h.group)
            .replace("NS", &h.ns.name)
    );
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn plan(file: &str, more: &[&str]) -> (Option<i32>, Value, String) {
    let cluster = orkestra_test_support::cluster().unwrap();
    let mut args = vec!["plan", "-f", file];
    args.extend_from_slice(more);
    let output = run(&args, &[("KUBECONFIG", cluster.kubeconfig.to_str().unwrap())]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let plan: Value = serde_yaml_ng::from_str(&stdout).unwrap_or(Value::Null);
    (output.status.code(), plan, format!("{stdout}\n{stderr}"))
}

#[tokio::test]
async fn a_changed_katalog_plans_its_children_and_status_field_by_field_and_writes_nothing() {
    let v1 = app_box("", "true", false, "v1");
    let h = Harness::start("plan", &crd("app", "App", &v1), &[], true).await;
    h.create("App", "a", json!({"x": "1", "exposed": true})).await;
    let services: Api<Service> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    eventually("Ready with its Service", WAIT, || async {
        let app = h.api("App").get("a").await.ok()?;
        let ready = app.data["status"]["conditions"][0]["status"] == "True" && app.data["status"]["version"] == "v1";
        (ready && services.get_opt("a").await.ok()??.metadata.name.is_some()).then_some(())
    })
    .await
    .unwrap();
    let version = |app: kube::api::DynamicObject| app.metadata.resource_version;
    let (apps, namespace) = (h.api("App"), h.ns.name.clone());
    let dir = tempfile::tempdir().unwrap();
    let same = katalog_file(&h, dir.path(), "v1.yaml", &v1);
    let changed = katalog_file(&h, dir.path(), "v2.yaml", &app_box("-v2", "never", true, "v2"));
    // Stopped: nothing would put back what a plan deleted by mistake. The version is read
    // after the stop, as the runtime's stamp patch may follow the Ready status.
    h.stop().await;
    let before = version(apps.get("a").await.unwrap());

    // The Katalog it ran: nothing would change.
    let (code, unchanged, output) = plan(&same, &[]);
    assert_eq!(code, Some(0), "{output}");
    assert_eq!(unchanged["crds"][0]["crs"][0]["verdict"], "unchanged", "{output}");
    assert_eq!(unchanged["summary"]["crs"], 1);

    // A new version: a changed value, a Service whose condition no longer holds, a new
    // ConfigMap, a new status.
    let (code, planned, output) = plan(&changed, &[]);
    assert_eq!(code, Some(2), "{output}");
    let cr = &planned["crds"][0]["crs"][0];
    assert_eq!(cr["cr"], format!("{namespace}/a"));
    assert_eq!(cr["verdict"], "changes");
    let child = |action: &str, kind: &str, name: &str| {
        let wanted = format!("{namespace}/{name}");
        cr["children"]
            .as_array()
            .and_then(|c| {
                c.iter()
                    .find(|c| c["action"] == action && c["kind"] == kind && c["name"] == wanted)
            })
            .cloned()
            .unwrap_or_else(|| panic!("{action} {kind} {name} in {output}"))
    };
    let kept = child("change", "ConfigMap", "a-kept");
    assert_eq!(
        kept["fields"],
        json!([{"path": "data.x", "before": "1", "after": "1-v2"}])
    );
    child("create", "ConfigMap", "a-new");
    child("delete", "Service", "a");
    assert_eq!(
        cr["status"],
        json!([{"path": "status.version", "before": "v1", "after": "v2"}]),
        "{output}"
    );
    assert_eq!(
        cr["children"].as_array().map(Vec::len),
        Some(3),
        "nothing else: {output}"
    );

    // Nothing was written.
    assert_eq!(version(apps.get("a").await.unwrap()), before);
    let data = configmaps.get("a-kept").await.unwrap().data.unwrap();
    assert_eq!(data["x"], "1");
    assert!(configmaps.get_opt("a-new").await.unwrap().is_none());
    assert!(services.get_opt("a").await.unwrap().is_some());

    // A selector that matches no CR plans nothing.
    let (code, none, output) = plan(&changed, &["-l", "tier=none"]);
    assert_eq!((code, &none["summary"]["crs"]), (Some(0), &json!(0)), "{output}");
}

/// `--component`: another build in the CRD's slot. The echo hook runs; the plan of the Rust
/// hook in its place shows the ConfigMap that hook would apply through the kube interface
/// (a dry run too) and the status it would report, and nothing is written.
#[tokio::test]
async fn a_component_in_the_slots_place_plans_what_it_would_apply_and_report() {
    let echo = orkestra_test_support::guests::component("echo-hook").unwrap();
    let rust = orkestra_test_support::guests::component("rust-hook").unwrap();
    let operator_box = format!(
        "        reconcile:
          hooks:
            component: {}
            capabilities:
              - {{apiVersion: v1, kinds: [ConfigMap], verbs: [get, apply]}}
",
        echo.display()
    );
    let h = Harness::start("plancomp", &crd("app", "App", &operator_box), &[], true).await;
    h.create("App", "a", json!({"mode": "m", "title": "T"})).await;
    eventually("the echo hook's status", WAIT, || async {
        let app = h.api("App").get("a").await.ok()?;
        (app.data["status"]["mode"] == "m").then_some(())
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = katalog_file(&h, dir.path(), "katalog.yaml", &operator_box);
    let (code, same, output) = plan(&file, &[]);
    assert_eq!(
        (code, &same["crds"][0]["crs"][0]["verdict"]),
        (Some(0), &json!("unchanged")),
        "{output}"
    );
    let slot = format!("app={}", rust.display());
    let (code, planned, output) = plan(&file, &["--component", &slot]);
    assert_eq!(code, Some(2), "{output}");
    let cr = &planned["crds"][0]["crs"][0];
    let children = cr["children"].as_array().cloned().unwrap_or_default();
    let content = format!("{}/a-content", h.ns.name);
    assert!(
        children
            .iter()
            .any(|c| c["action"] == "create" && c["kind"] == "ConfigMap" && c["name"] == content),
        "the hook's ConfigMap: {output}"
    );
    let status = cr["status"].as_array().cloned().unwrap_or_default();
    assert!(
        status
            .iter()
            .any(|c| c["path"] == "status.renderedBy" && c["after"] == "rust-hook"),
        "the hook's status: {output}"
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    assert!(
        configmaps.get_opt("a-content").await.unwrap().is_none(),
        "nothing written"
    );
    let (code, _, output) = plan(&file, &["--component", "nosuch=/x.wasm"]);
    assert_eq!(code, Some(1), "{output}");
    assert!(
        output.contains("no component slot \"nosuch\" in this Katalog; known: app"),
        "{output}"
    );
    h.stop().await;
}

/// Issue 49, finding 5: a plan made a Katalog's external calls for real, two `POST`s to an
/// endpoint that provisions a paid resource. A plan (and a simulation) makes none: each call
/// it would have made is listed per CR instead.
#[tokio::test]
async fn a_plan_makes_no_external_call_and_lists_each_it_would_have_made() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = received.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let _ = stream.read(&mut buffer).await;
                let body = "{\"id\": \"paid-1\"}";
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    let operator_box = format!(
        "        reconcile:
          onReconcile:
            external:
              - {{name: provision, method: POST, url: 'http://127.0.0.1:{port}/provision/{{{{ .metadata.name }}}}', body: {{plan: paid}}}}
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}-bill', data: {{id: '{{{{ .external.provision.body.id }}}}'}}}}
"
    );
    let h = Harness::start(
        "plan-external",
        &crd("app", "App", "        reconcile: {}\n"),
        &[],
        true,
    )
    .await;
    h.create("App", "a", json!({})).await;
    h.create("App", "b", json!({})).await;
    let dir = tempfile::tempdir().unwrap();
    let file = katalog_file(&h, dir.path(), "paid.yaml", &operator_box);
    h.stop().await;
    let before = received.load(std::sync::atomic::Ordering::SeqCst);
    let (code, planned, output) = plan(&file, &[]);
    assert_eq!(code, Some(2), "{output}");
    assert_eq!(
        received.load(std::sync::atomic::Ordering::SeqCst),
        before,
        "the plan called the endpoint: {output}"
    );
    let crs = planned["crds"][0]["crs"].as_array().unwrap();
    assert_eq!(crs.len(), 2, "{output}");
    for cr in crs {
        let name = cr["cr"].as_str().unwrap().rsplit('/').next().unwrap();
        assert_eq!(
            cr["externalCallsNotMade"],
            json!([{"name": "provision", "method": "POST", "url": format!("http://127.0.0.1:{port}/provision/{name}")}]),
            "{output}"
        );
    }
    // The same Katalog, run: the calls are made, one per CR.
    let running = Harness::start("plan-external-run", &crd("app", "App", &operator_box), &[], true).await;
    running.create("App", "c", json!({})).await;
    eventually("the runtime's call", WAIT, || async {
        (received.load(std::sync::atomic::Ordering::SeqCst) > before).then_some(())
    })
    .await
    .unwrap();
    running.stop().await;
}
