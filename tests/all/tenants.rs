//! The smaller ways in (issue 33, finding 9), each tried as an attacker would against the
//! real API server: a CRD that names no tokens, an excluded field read back with `?field=`,
//! an admission call that hangs, a file grant outside the Katalog, webhooks left behind by a
//! failed start, and RBAC wider than the Katalog needs.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_gateway::webhooks::Webhooks;
use orkestra_test_support::{eventually, kubectl_with, namespace};
use serde_json::json;

use crate::ork::run;
use crate::pipeline::WAIT;
use crate::policies::options;

async fn token_secret(ns: &orkestra_test_support::TestNamespace, name: &str, token: &str) {
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": name}, "stringData": {"token": token}})).unwrap();
    secrets.create(&PostParams::default(), &secret).await.unwrap();
}

#[tokio::test]
async fn a_crd_that_names_no_tokens_is_closed_and_an_excluded_field_stays_hidden() {
    let ns = namespace("closed").await.unwrap();
    let group = format!("{}.tenants.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: closed-{ns}}}
gateway:
  api:
    enabled: true
    auth:
      tokens:
        - {{name: team-a, secretRef: {{name: team-a, namespace: {ns}}}}}
spec:
  crds:
    mine:
      apiTypes: {{group: {group}, version: v1, kind: Mine, plural: mines}}
      namespace: {ns}
      serve:
        enabled: true
        namespace: {ns}
        fields:
          secret: {{path: secretRef}}
        tokens:
          team-a: {{permissions: {{global: ['*']}}}}
        config:
          response:
            exclude: [spec.secretRef]
      operatorBox: {{}}
    theirs:
      apiTypes: {{group: {group}, version: v1, kind: Theirs, plural: theirs}}
      namespace: {ns}
      serve:
        enabled: true
        namespace: {ns}
      operatorBox: {{}}
",
        ns = ns.name
    );
    let compiled = Arc::new(orkestra_katalog::load_sources(&[("k.yaml".into(), katalog)]).unwrap());
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    token_secret(&ns, "team-a", "token-a").await;
    let (base, refresh) = crate::gateway::serve_api(&ns, compiled).await;
    let http = reqwest::Client::new();
    // Another tenant's CRD, whose Katalog entry names no tokens: closed to team A's token.
    let refused = http
        .post(format!("{base}/apply"))
        .bearer_auth("token-a")
        .json(&json!({"apiVersion": format!("{group}/v1"), "kind": "Theirs",
                      "metadata": {"name": "x", "namespace": ns.name}, "spec": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    assert!(refused.text().await.unwrap().contains("names no tokens (serve.tokens)"));
    let theirs: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Theirs"), "theirs"),
    );
    assert!(theirs.list(&ListParams::default()).await.unwrap().items.is_empty());

    // Its own CR: the excluded field is not read back, whole or by `?field=`.
    let applied = http
        .post(format!("{base}/apply"))
        .bearer_auth("token-a")
        .json(&json!({"target": "mine", "name": "m", "secret": "s3cret"}))
        .send()
        .await
        .unwrap();
    assert_eq!(applied.status(), 200, "{}", applied.text().await.unwrap());
    let one = |query: &str| {
        http.get(format!("{base}/resources/Mine/{}/m{query}", ns.name))
            .bearer_auth("token-a")
            .send()
    };
    let whole: serde_json::Value = one("").await.unwrap().json().await.unwrap();
    assert!(whole["spec"].get("secretRef").is_none(), "{whole}");
    let field: serde_json::Value = one("?field=spec.secretRef").await.unwrap().json().await.unwrap();
    assert_eq!(field["value"], serde_json::Value::Null, "{field}");
    refresh.abort();
}

// kubectl blocks its thread while the webhooks, in this process, answer the API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_call_that_hangs_refuses_the_write_and_says_so() {
    // A quota service that never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hanging = axum::Router::new().route(
        "/quota",
        axum::routing::get(|| async {
            tokio::time::sleep(Duration::from_secs(600)).await;
            "late"
        }),
    );
    tokio::spawn(async move { axum::serve(listener, hanging).await });
    let ns = namespace("hang").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let group = format!("{}.tenants.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: hang-{ns}}}
security:
  webhooks:
    admission: {{enabled: true}}
    failurePolicy: Ignore
    timeoutSeconds: 3
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site, plural: sites}}
      namespace: {ns}
      admission:
        validation:
          external:
            - {{name: quota, url: 'http://127.0.0.1:{port}/quota', timeout: 30s}}
          rules:
            - {{field: spec.replicas, lessThanOrEqual: '{{{{ .external.quota.body.allowed }}}}', valueType: int, message: too many}}
      operatorBox: {{}}
",
        ns = ns.name
    );
    let compiled = orkestra_katalog::load_sources(&[("k.yaml".into(), katalog)]).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let webhooks = Webhooks::start(ns.client.clone(), Arc::new(compiled), options(&ns.name))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let apply = |name: &str| {
        let manifest = json!({"apiVersion": format!("{group}/v1"), "kind": "Site",
                              "metadata": {"name": name, "namespace": ns.name}, "spec": {"replicas": 2}});
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, manifest.to_string()).unwrap();
        kubectl_with(&cluster.kubeconfig, &["apply", "-f", file.to_str().unwrap()]).map_err(|e| e.to_string())
    };
    // Under `Ignore`, a webhook that let the API server time out would admit unchecked.
    let refused = eventually("the hanging call to refuse the write", WAIT, || async {
        apply("s").err().filter(|e| e.contains("external call"))
    })
    .await
    .unwrap();
    assert!(refused.contains("no answer within 2s"), "{refused}");
    let sites: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Site"), "sites"),
    );
    assert!(sites.get_opt("s").await.unwrap().is_none(), "nothing admitted");
    assert!(webhooks.counts.calls_failed.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(ns.client.clone(), &ns.name);
    eventually("an Event saying why", WAIT, || async {
        let listed = events.list(&ListParams::default()).await.ok()?.items;
        listed
            .iter()
            .any(|e| e.reason.as_deref() == Some("AdmissionCallFailed"))
            .then_some(())
    })
    .await
    .unwrap();
    webhooks.stop().await;
}

#[test]
fn a_file_grant_outside_the_katalogs_folder_is_refused_by_validate() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/etc", dir.path().join("escape")).unwrap();
    for (path, why) in [
        ("/etc", "is absolute"),
        ("../outside", "climbs out with '..'"),
        ("escape", "leads outside the Katalog's folder"),
    ] {
        let katalog = format!(
            "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: grants}}
spec:
  crds:
    reader:
      apiTypes: {{group: grants.orkestra.io, version: v1, kind: Reader}}
      operatorBox:
        reconcile:
          hooks:
            component: reader.wasm
            files: [{{path: '{path}', mountPath: /data}}]
"
        );
        let file = dir.path().join("katalog.yaml");
        std::fs::write(&file, katalog).unwrap();
        let output = run(&["validate", "-f", file.to_str().unwrap()], &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{path} accepted");
        assert!(
            stderr.contains("files[0].path") && stderr.contains(why),
            "{path}: {stderr}"
        );
    }
}

#[tokio::test]
async fn a_gateway_that_fails_to_start_leaves_no_webhook_behind() {
    let ns = namespace("failstart").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    // Deletion protection of a kind the API server does not serve: registering works, the
    // labelling of existing objects that follows fails.
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: failstart-{ns}}}
security:
  deletionProtection: {{enabled: true}}
spec:
  crds:
    ghost:
      apiTypes: {{group: {ns}.never-installed.orkestra.io, version: v1, kind: Ghost, plural: ghosts}}
      operatorBox: {{}}
",
        ns = ns.name
    );
    let compiled = orkestra_katalog::load_sources(&[("k.yaml".into(), katalog)]).unwrap();
    let failed = Webhooks::start(ns.client.clone(), Arc::new(compiled), options(&ns.name)).await;
    assert!(failed.is_err(), "the start failed");
    let left = kubectl_with(
        &cluster.kubeconfig,
        &[
            "get",
            "validatingwebhookconfigurations,mutatingwebhookconfigurations",
            "-o",
            "name",
            "--field-selector",
            &format!("metadata.name=orkestra-gateway-failstart-{}", ns.name),
        ],
    )
    .unwrap();
    assert!(left.trim().is_empty(), "left behind: {left}");
}

#[tokio::test]
async fn ork_manifests_grants_the_gateway_only_its_own_configurations_and_crds() {
    let ns = namespace("least").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let katalog = |account: &str| {
        format!(
            "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: least-{ns}}}
security:
  deletionProtection: {{enabled: true}}
spec:
  crds:
    site:
      apiTypes: {{group: {ns}.least.orkestra.io, version: v1, kind: Site, plural: sites}}
      namespace: {ns}
      operatorBox:
        reconcile:
          hooks:
            component: hook.wasm
            serviceAccount: {account}
            capabilities:
              - {{apiVersion: v1, kinds: [Secret], verbs: [get]}}
",
            ns = ns.name
        )
    };
    let file = dir.path().join("katalog.yaml");
    std::fs::write(&file, katalog("kube-system/clusterrole-aggregation-controller")).unwrap();
    let refused = run(&["manifests", "-f", file.to_str().unwrap(), "-n", &ns.name], &[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--allow-system-impersonation"));

    std::fs::write(&file, katalog("runner")).unwrap();
    let output = run(&["manifests", "-f", file.to_str().unwrap(), "-n", &ns.name], &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let rbac = format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: orkestra, namespace: {}}}\n{}",
        ns.name,
        String::from_utf8(output.stdout).unwrap()
    );
    std::fs::write(dir.path().join("rbac.yaml"), rbac).unwrap();
    kubectl_with(
        &cluster.kubeconfig,
        &["apply", "-f", dir.path().join("rbac.yaml").to_str().unwrap()],
    )
    .unwrap();
    let me = format!("--as=system:serviceaccount:{}:orkestra", ns.name);
    let can = |verb: &str, what: &str, namespace: Option<&str>| {
        let mut args = vec!["auth", "can-i", verb, what, me.as_str()];
        if let Some(namespace) = namespace {
            args.extend(["-n", namespace]);
        }
        kubectl_with(&cluster.kubeconfig, &args).is_ok()
    };
    let own = format!("validatingwebhookconfigurations/orkestra-gateway-least-{}", ns.name);
    assert!(can("patch", &own, None), "its own configuration");
    assert!(!can("patch", "validatingwebhookconfigurations/someone-elses", None));
    assert!(!can("delete", "mutatingwebhookconfigurations/someone-elses", None));
    let crd = format!("customresourcedefinitions/sites.{}.least.orkestra.io", ns.name);
    assert!(can("patch", &crd, None), "its own CRD");
    assert!(!can("patch", "customresourcedefinitions/other.example.io", None));
    // The component acts as `runner`: its Secret grant is runner's RBAC, not the host's.
    assert!(can("impersonate", "serviceaccounts/runner", Some(&ns.name)));
    assert!(!can("get", "secrets", Some(&ns.name)));
}
