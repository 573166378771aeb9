//! Cluster routing across two real control planes: the shared test cluster runs the gateway
//! and holds the credentials, a second one started here is `gateway.clusters` as a
//! kubeconfig Secret (`east`) and as a token with a CA (`west`), and a third entry (`down`)
//! points at a port nothing listens on. One apply fans out and reports each cluster, reads
//! pick a cluster with `?cluster=`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_control_plane::{ControlPlane, Options};
use orkestra_test_support::namespace;
use serde_json::{Value, json};

use crate::pipeline::WAIT;

fn katalog(ns: &str, group: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {ns}}}
gateway:
  api:
    enabled: true
    auth:
      tokens:
        - {{name: admin, secretRef: {{name: gw-admin}}}}
  clusters:
    east: {{endpoint: 'https://east.invalid', secretRef: {{name: east-kubeconfig, key: kubeconfig}}}}
    west:
      endpoint: EAST_SERVER
      tokenRef: {{name: west-credentials, key: token}}
      caRef: {{name: west-credentials, key: ca.crt}}
    down: {{endpoint: 'https://127.0.0.1:1', tokenRef: {{name: west-credentials, key: token}}, insecure: true}}
spec:
  crds:
    app:
      apiTypes: {{group: {group}, version: v1, kind: App, plural: apps}}
      namespace: {ns}
      serve:
        enabled: true
        namespace: {ns}
        fields:
          image: {{required: true}}
          region: {{}}
        tokens:
          '*': {{permissions: {{global: ['*']}}}}
        target:
          app: {{primary: true, clusters: [local, east]}}
          regional: {{cluster: '{{{{ .request.region }}}}'}}
          everywhere: {{clusters: [west, down]}}
      operatorBox: {{}}
"
    )
}

async fn call(
    http: &reqwest::Client,
    token: &str,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = http.request(method, url).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

// The second control plane's processes die with the thread that spawned them: a worker
// thread of this runtime, which lives as long as the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_apply_reaches_several_clusters_and_reports_each() {
    let ns = namespace("gw-route").await.unwrap();
    let group = format!("{}.route.orkestra.io", ns.name);
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::new(dir.path().join("east"));
    options.controller_manager = false;
    options.nodes = 0;
    let east = ControlPlane::start(options).await.unwrap();
    let east_client = east.client().await.unwrap();
    let kubeconfig = std::fs::read_to_string(east.kubeconfig()).unwrap();
    let field = |key: &str| {
        kubeconfig
            .lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap()
            .trim()
            .to_string()
    };
    let token_text = field("token:");
    let ca_text = {
        use base64::Engine;
        let der = base64::engine::general_purpose::STANDARD
            .decode(field("certificate-authority-data:"))
            .unwrap();
        String::from_utf8(der).unwrap()
    };

    // The credentials live in the gateway's own cluster, as Secrets.
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    let secret = |name: &str, data: Value| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": name}, "stringData": data})).unwrap()
    };
    secrets
        .create(
            &PostParams::default(),
            &secret("east-kubeconfig", json!({"kubeconfig": kubeconfig})),
        )
        .await
        .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &secret("west-credentials", json!({"token": token_text, "ca.crt": ca_text})),
        )
        .await
        .unwrap();

    let text = katalog(&ns.name, &group).replace("EAST_SERVER", &east.server());
    let compiled = Arc::new(orkestra_katalog::load_sources(&[("k.yaml".into(), text)]).unwrap());
    for client in [&ns.client, &east_client] {
        orkestra_kube::crd_install::install_crds(client, &compiled.katalog, WAIT)
            .await
            .unwrap();
    }
    let namespaces: Api<Namespace> = Api::all(east_client.clone());
    let own: Namespace = serde_json::from_value(json!({"metadata": {"name": ns.name}})).unwrap();
    namespaces.create(&PostParams::default(), &own).await.unwrap();

    let (base, refresh) = crate::gateway::serve_api(&ns, compiled).await;
    let admin = secrets.get("gw-admin").await.unwrap();
    let admin = String::from_utf8(admin.data.unwrap()["token"].0.clone()).unwrap();
    let http = reqwest::Client::new();
    let post = |body: Value| {
        call(
            &http,
            &admin,
            reqwest::Method::POST,
            format!("{base}/apply"),
            Some(body),
        )
    };

    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "App"), "apps");
    let here: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let there: Api<DynamicObject> = Api::namespaced_with(east_client.clone(), &ns.name, &resource);

    // `app` goes to the gateway's own cluster and to east (a kubeconfig Secret).
    let (status, both) = post(json!({"target": "app", "name": "web", "image": "myorg/web"})).await;
    assert_eq!(status, 200, "{both}");
    assert_eq!(both["accepted"], true);
    assert_eq!(both["partialSuccess"], false);
    let clusters: Vec<&str> = both["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(clusters, ["local", "east"]);
    assert!(
        both["clusters"][1]["pollUrl"]
            .as_str()
            .unwrap()
            .ends_with("?cluster=east"),
        "{both}"
    );
    assert!(here.get_opt("web").await.unwrap().is_some());
    assert_eq!(there.get("web").await.unwrap().data["spec"]["image"], "myorg/web");

    // Reads pick the cluster.
    let read = |cluster: &str| {
        call(
            &http,
            &admin,
            reqwest::Method::GET,
            format!("{base}/resources/app/{}/web?cluster={cluster}", ns.name),
            None,
        )
    };
    assert_eq!(read("east").await.0, 200);
    let (status, unknown) = read("nowhere").await;
    assert_eq!(status, 404, "{unknown}");
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("unknown cluster \"nowhere\""),
        "{unknown}"
    );

    // A target's fields as the named cluster's CRD types them.
    let schema = |cluster: &str| {
        call(
            &http,
            &admin,
            reqwest::Method::GET,
            format!("{base}/schema?target=app&cluster={cluster}"),
            None,
        )
    };
    let (status, fields) = schema("east").await;
    assert_eq!(status, 200, "{fields}");
    assert!(
        fields["fields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "image"),
        "{fields}"
    );
    assert_eq!(schema("nowhere").await.0, 404);

    // A templated cluster: the intent says where.
    let (status, one) =
        post(json!({"target": "regional", "name": "api", "image": "myorg/api", "region": "east"})).await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["cluster"], "east");
    assert!(there.get_opt("api").await.unwrap().is_some());
    assert!(here.get_opt("api").await.unwrap().is_none(), "east only");
    let (status, bad) = post(json!({"target": "regional", "name": "api", "image": "x", "region": "mars"})).await;
    assert_eq!(status, 400, "{bad}");

    // west (token and CA) takes it, down cannot be reached: a partial success.
    let (status, partial) = post(json!({"target": "everywhere", "name": "wide", "image": "myorg/wide"})).await;
    assert_eq!(status, 207, "{partial}");
    assert_eq!(partial["accepted"], true);
    assert_eq!(partial["partialSuccess"], true);
    let results = partial["clusters"].as_array().unwrap();
    assert_eq!(results[0]["cluster"], "west");
    assert_eq!(results[0]["accepted"], true, "{partial}");
    assert_eq!(results[1]["cluster"], "down");
    assert_eq!(results[1]["accepted"], false);
    assert!(
        !results[1]["message"].as_str().unwrap_or_default().is_empty(),
        "{partial}"
    );
    assert!(there.get_opt("wide").await.unwrap().is_some());

    // ?cluster= narrows a fan-out; a cluster the target does not route to is refused.
    let (status, narrowed) = call(
        &http,
        &admin,
        reqwest::Method::POST,
        format!("{base}/apply?cluster=east"),
        Some(json!({"target": "app", "name": "solo", "image": "myorg/solo"})),
    )
    .await;
    assert_eq!(status, 200, "{narrowed}");
    assert!(here.get_opt("solo").await.unwrap().is_none());
    let (status, _) = call(
        &http,
        &admin,
        reqwest::Method::POST,
        format!("{base}/apply?cluster=west"),
        Some(json!({"target": "app", "name": "solo", "image": "myorg/solo"})),
    )
    .await;
    assert_eq!(status, 400);
    refresh.abort();
    drop(east);
}
