//! The gateway against the real API server: the Katalog's rules enforced at admission (a
//! bad CR refused by `kubectl apply` with the rule's message, a default landing in the same
//! write, a warning printed), the webhook certificate renewed while it runs, and `ork
//! gateway` registering its webhooks and removing them when it stops.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_gateway::webhooks::{Options, Webhooks};
use orkestra_test_support::{eventually, kubectl_output, kubectl_with, namespace};

use crate::ork::Ork;
use crate::pipeline::WAIT;

/// A Katalog of one CRD whose admission rules the webhooks enforce.
fn katalog(name: &str, group: &str, ns: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {name}}}
security:
  webhooks:
    admission: {{enabled: true}}
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site, plural: sites}}
      namespace: {ns}
      admission:
        validation:
          rules:
            - {{field: spec.image, prefix: 'myorg/', message: 'images come from the myorg/ registry, not {{{{ .spec.image }}}}'}}
            - {{field: spec.owner, exists: true, action: warn, message: name an owner}}
        mutation:
          rules:
            - {{field: spec.replicas, default: 2}}
      operatorBox: {{}}
"
    )
}

/// The Katalog `text` compiled, its CRDs installed, and webhook options on a free loopback
/// port that make certificates valid for `valid_for`.
async fn prepared(
    ns: &orkestra_test_support::TestNamespace,
    text: String,
    valid_for: Duration,
) -> (orkestra_katalog::Compiled, Options) {
    let compiled = orkestra_katalog::load_sources(&[("katalog.yaml".into(), text)]).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let options = Options {
        https_addr: "127.0.0.1:0".parse().unwrap(),
        url: None,
        namespace: ns.name.clone(),
        cert: None,
        valid_for,
    };
    (compiled, options)
}

fn site(ns: &str, group: &str, name: &str, spec: &str) -> String {
    format!("apiVersion: {group}/v1\nkind: Site\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n")
}

/// The error of `kubectl apply` of a Site with an image the rules refuse, once the API
/// server has taken in the webhook configuration (within a few seconds).
async fn first_refusal(kubeconfig: &std::path::Path, dir: &std::path::Path, ns: &str, group: &str) -> String {
    eventually("the webhook to refuse a bad image", WAIT, || {
        let manifest = site(ns, group, "bad", "{image: nginx}");
        async move { apply(kubeconfig, dir, &manifest).err() }
    })
    .await
    .unwrap()
}

/// `kubectl apply` of `manifest`: its stdout and stderr, or its error.
fn apply(kubeconfig: &std::path::Path, dir: &std::path::Path, manifest: &str) -> Result<String, String> {
    let file = dir.join("site.yaml");
    std::fs::write(&file, manifest).unwrap();
    kubectl_with(kubeconfig, &["apply", "-f", file.to_str().unwrap()]).map_err(|e| e.to_string())
}

fn webhook_configs(kubeconfig: &std::path::Path, name: &str) -> String {
    kubectl_with(
        kubeconfig,
        &[
            "get",
            "validatingwebhookconfigurations,mutatingwebhookconfigurations",
            "-o",
            "name",
            "--field-selector",
            &format!("metadata.name={name}"),
        ],
    )
    .unwrap()
}

// kubectl blocks its thread while the webhooks, in this process, answer the API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_katalogs_rules_run_at_admission_and_survive_a_certificate_renewal() {
    let ns = namespace("gw-admit").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let group = format!("{}.gateway.orkestra.io", ns.name);
    let text = katalog(&ns.name, &group, &ns.name);
    // Renewed at 20 s, within the test.
    let (compiled, options) = prepared(&ns, text, Duration::from_secs(30)).await;
    let webhooks = Webhooks::start(ns.client.clone(), Arc::new(compiled), options)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = cluster.kubeconfig.clone();

    let refused = first_refusal(&kubeconfig, dir.path(), &ns.name, &group).await;
    assert!(
        refused.contains("images come from the myorg/ registry, not nginx"),
        "kubectl shows the rule's message: {refused}"
    );
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Site"), "sites");
    let sites: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    assert!(sites.get_opt("bad").await.unwrap().is_none(), "nothing was stored");

    apply(
        &kubeconfig,
        dir.path(),
        &site(&ns.name, &group, "good", "{image: myorg/web}"),
    )
    .unwrap();
    let stored = sites.get("good").await.unwrap();
    assert_eq!(stored.data["spec"]["replicas"], 2, "the default landed");
    assert_eq!(stored.metadata.generation, Some(1), "in the same write");

    // The renewal moves the caBundle to a new CA; the webhooks keep answering throughout.
    let name = orkestra_gateway::registration::name_for(&ns.name);
    let bundle = || {
        kubectl_with(
            &kubeconfig,
            &[
                "get",
                "validatingwebhookconfiguration",
                &name,
                "-o",
                "jsonpath={.webhooks[0].clientConfig.caBundle}",
            ],
        )
        .unwrap()
    };
    let first = bundle();
    eventually("the certificate to be renewed", Duration::from_secs(90), || {
        let now = bundle();
        let (first, renewed) = (first.clone(), now.clone());
        async move { (renewed != first && !renewed.is_empty()).then_some(()) }
    })
    .await
    .unwrap();
    let mut refusals = 0;
    for attempt in 0..20 {
        let manifest = site(&ns.name, &group, &format!("bad-{attempt}"), "{image: nginx}");
        match apply(&kubeconfig, dir.path(), &manifest) {
            Err(why) if why.contains("myorg/ registry") => refusals += 1,
            other => panic!("after the renewal the webhook must still answer: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(refusals, 20);
    webhooks.stop().await;
    assert_eq!(webhook_configs(&kubeconfig, &name).trim(), "", "removed at shutdown");
}

#[tokio::test]
async fn ork_gateway_warns_through_kubectl_and_removes_its_webhooks_when_it_stops() {
    let ns = namespace("gw-cli").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let group = format!("{}.gateway.orkestra.io", ns.name);
    let compiled = orkestra_katalog::load_sources(&[("k.yaml".into(), katalog(&ns.name, &group, &ns.name))]).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("katalog.yaml");
    std::fs::write(&file, katalog(&ns.name, &group, &ns.name)).unwrap();
    let kubeconfig = cluster.kubeconfig.to_str().unwrap();
    let mut ork = Ork::spawn(
        &[
            "gateway",
            "-f",
            file.to_str().unwrap(),
            "--https-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
        ],
        &[("KUBECONFIG", kubeconfig)],
    );
    ork.wait_for("webhooks on https://127.0.0.1:", WAIT);
    let line = ork.wait_for("statistics on http://", WAIT);
    let stats_url = line.split_whitespace().last().unwrap().to_string();
    let name = orkestra_gateway::registration::name_for(&ns.name);
    let registered = webhook_configs(&cluster.kubeconfig, &name);
    assert!(registered.contains("validatingwebhookconfiguration"), "{registered}");
    assert!(registered.contains("mutatingwebhookconfiguration"), "{registered}");

    // kubectl prints a warn rule's message and the write goes through.
    let manifest = site(&ns.name, &group, "unowned", "{image: myorg/web}");
    let path = dir.path().join("site.yaml");
    std::fs::write(&path, &manifest).unwrap();
    let output = eventually("kubectl to show the warning", WAIT, || {
        let path = path.clone();
        async move {
            let output = kubectl_output(&cluster.kubeconfig, &["apply", "-f", path.to_str().unwrap()]).unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            stderr
                .contains("name an owner")
                .then_some((output.status.success(), stderr))
        }
    })
    .await
    .unwrap();
    assert!(output.0, "a warning does not refuse: {}", output.1);
    let stats: serde_json::Value = reqwest::get(&stats_url).await.unwrap().json().await.unwrap();
    assert_eq!(stats["source"], "gateway");
    assert_eq!(stats["crds"][0]["gvr"], format!("{group}/v1/sites"));
    assert_eq!(stats["crds"][0]["admission"]["validation"], true);
    assert!(stats["webhooks"]["warned"].as_u64().unwrap() >= 1, "{stats}");

    let status = ork.signal_and_wait(libc::SIGINT, WAIT);
    assert!(status.success(), "{status:?}");
    assert_eq!(
        webhook_configs(&cluster.kubeconfig, &name).trim(),
        "",
        "removed when ork gateway stops"
    );
}

/// A Katalog whose one CRD is served through two surfaces, with an admin token the gateway
/// makes and a reader token the test writes.
fn serve_katalog(name: &str, group: &str, ns: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {name}}}
gateway:
  api:
    enabled: true
    auth:
      tokens:
        - {{name: admin, secretRef: {{name: gw-admin, namespace: {ns}}}}}
        - {{name: reader, secretRef: {{name: gw-reader, namespace: {ns}}}}}
security:
  webhooks:
    admission: {{enabled: true}}
spec:
  crds:
    app:
      apiTypes: {{group: {group}, version: v1, kind: App, plural: apps}}
      namespace: {ns}
      admission:
        validation:
          rules:
            - {{field: spec.image, prefix: 'myorg/', message: 'images come from myorg/'}}
      serve:
        enabled: true
        namespace: {ns}
        fields:
          image: {{required: true, order: 1}}
          size: {{values: {{spec.replicas: '{{{{ if eq .value \"large\" }}}}3{{{{ else }}}}1{{{{ end }}}}'}}}}
        tokens:
          admin: {{permissions: {{global: ['*']}}}}
          reader: {{permissions: {{resources: [get, list], schema: [get, list]}}}}
        config:
          response:
            payload: {{image: '{{{{ .spec.image }}}}'}}
        target:
          app: {{primary: true}}
          preview: {{apply: {{overrides: {{targetConflict: true}}}}}}
      operatorBox: {{}}
"
    )
}

/// The Serve API of `compiled` on a free loopback port: its `/api/v1` URL, and the task
/// that keeps its tokens fresh.
pub async fn serve_api(
    ns: &orkestra_test_support::TestNamespace,
    compiled: Arc<orkestra_katalog::Compiled>,
) -> (String, tokio::task::JoinHandle<()>) {
    let (router, refresh) = orkestra_gateway::api::start(ns.client.clone(), compiled, &ns.name)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, axum::Router::new().nest("/api/v1", router)).await });
    (base, refresh)
}

struct Caller {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Caller {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        )
    }

    async fn apply(&self, query: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        self.call(reqwest::Method::POST, &format!("/apply{query}"), Some(body))
            .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serve_api_applies_intents_with_provenance_and_holds_tokens_to_their_grants() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::PostParams;
    use serde_json::json;

    let ns = namespace("gw-serve").await.unwrap();
    let group = format!("{}.gateway.orkestra.io", ns.name);
    let compiled = Arc::new(
        orkestra_katalog::load_sources(&[("k.yaml".into(), serve_katalog(&ns.name, &group, &ns.name))]).unwrap(),
    );
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    let reader_secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "gw-reader"}, "stringData": {"token": "reader-token"}}))
    .unwrap();
    secrets.create(&PostParams::default(), &reader_secret).await.unwrap();

    let webhooks = Webhooks::start(
        ns.client.clone(),
        compiled.clone(),
        Options {
            https_addr: "127.0.0.1:0".parse().unwrap(),
            url: None,
            namespace: ns.name.clone(),
            cert: None,
            valid_for: Duration::from_secs(3600),
        },
    )
    .await
    .unwrap();
    let (base, refresh) = serve_api(&ns, compiled.clone()).await;

    // The gateway made the admin token's Secret.
    let admin = secrets.get("gw-admin").await.unwrap();
    let admin_token = String::from_utf8(admin.data.unwrap()["token"].0.clone()).unwrap();
    assert_eq!(admin_token.len(), 64, "a random token");
    let http = reqwest::Client::new();
    let as_admin = Caller {
        base: base.clone(),
        token: admin_token,
        http: http.clone(),
    };
    let as_reader = Caller {
        base: base.clone(),
        token: "reader-token".into(),
        http: http.clone(),
    };
    let stranger = Caller {
        base: base.clone(),
        token: "guess".into(),
        http: http.clone(),
    };

    let (status, _) = stranger.call(reqwest::Method::GET, "/schema", None).await;
    assert_eq!(status, 401, "an unknown token");
    let (status, catalog) = as_reader.call(reqwest::Method::GET, "/schema", None).await;
    assert_eq!(status, 200, "{catalog}");
    let targets: Vec<&str> = catalog["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["app", "preview"]);
    let (_, fields) = as_reader.call(reqwest::Method::GET, "/schema?target=app", None).await;
    assert_eq!(fields["fields"][0]["name"], "image", "{fields}");
    assert_eq!(fields["fields"][0]["required"], true);

    let intent = json!({"target": "app", "name": "shop", "image": "myorg/web", "size": "large"});
    let (status, refused) = as_reader.apply("", intent.clone()).await;
    assert_eq!(status, 403, "a reader may not create: {refused}");
    let (status, dry) = as_admin.apply("?dryRun=true", intent.clone()).await;
    assert_eq!((status, dry["dryRun"].clone()), (200, json!(true)), "{dry}");
    let sites = {
        let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "App"), "apps");
        Api::<DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &resource)
    };
    assert!(
        sites.get_opt("shop").await.unwrap().is_none(),
        "a dry run writes nothing"
    );

    let (status, applied) = as_admin.apply("", intent.clone()).await;
    assert_eq!(status, 200, "{applied}");
    assert_eq!(applied["payload"]["image"], "myorg/web");
    assert_eq!(applied["pollUrl"], format!("/api/v1/resources/App/{}/shop", ns.name));
    let stored = sites.get("shop").await.unwrap();
    let annotations = stored.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["orkestra.orkspace.io/serve-target"], "app");
    assert_eq!(annotations["orkestra.orkspace.io/serve-alias"], "");
    assert_eq!(stored.data["spec"]["replicas"], "3", "the fan-out wrote spec.replicas");
    let managers: Vec<String> = stored
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.contains(&"orkestra-gateway".to_string()), "{managers:?}");

    // Another surface may not take the CR over unless asked (and allowed).
    let via_preview = json!({"target": "preview", "name": "shop", "image": "myorg/web"});
    let (status, conflict) = as_admin.apply("", via_preview.clone()).await;
    assert_eq!(status, 409, "{conflict}");
    assert!(
        conflict["message"]
            .as_str()
            .unwrap()
            .contains("routing surface conflict")
    );
    let (status, moved) = as_admin.apply("?override=true", via_preview).await;
    assert_eq!(status, 200, "{moved}");
    let stored = sites.get("shop").await.unwrap();
    assert_eq!(
        stored.metadata.annotations.unwrap()["orkestra.orkspace.io/serve-alias"],
        "preview"
    );

    // Refusals: the admission webhook's rule, a missing required field, an unknown target,
    // a body past 1 MiB.
    let (status, denied) = eventually("the webhook to deny through the Serve API", WAIT, || {
        let as_admin = &as_admin;
        async move {
            let answer = as_admin
                .apply("", json!({"target": "app", "name": "bad", "image": "nginx"}))
                .await;
            (answer.0 == 422).then_some(answer)
        }
    })
    .await
    .unwrap();
    assert_eq!(status, 422);
    assert!(
        denied["message"].as_str().unwrap().contains("images come from myorg/"),
        "{denied}"
    );
    let (status, missing) = as_admin.apply("", json!({"target": "app", "name": "empty"})).await;
    assert_eq!(status, 422);
    assert_eq!(missing["violations"][0]["field"], "image", "{missing}");
    let (status, unknown) = as_admin.apply("", json!({"target": "nope", "name": "x"})).await;
    assert_eq!(status, 400);
    assert!(
        unknown["message"].as_str().unwrap().contains("available: app, preview"),
        "{unknown}"
    );
    let huge = json!({"target": "app", "name": "big", "image": "myorg/x", "blob": "x".repeat(1 << 20)});
    let (status, _) = as_admin.apply("", huge).await;
    assert_eq!(status, 413);

    // A whole CR cannot bring its own provenance.
    let forged = json!({"apiVersion": format!("{group}/v1"), "kind": "App",
        "metadata": {"name": "whole", "annotations": {"orkestra.orkspace.io/serve-source": "someone-else"}},
        "spec": {"image": "myorg/whole"}});
    let (status, whole) = as_admin.apply("", forged).await;
    assert_eq!(status, 200, "{whole}");
    let stored = sites.get("whole").await.unwrap();
    assert_eq!(
        stored.metadata.annotations.unwrap()["orkestra.orkspace.io/serve-source"],
        ""
    );

    // Reads, shaped by the CR's surface; a delete needs the grant.
    let path = format!("/resources/App/{}/shop", ns.name);
    let (status, read) = as_reader.call(reqwest::Method::GET, &path, None).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["payload"]["image"], "myorg/web");
    assert!(read["metadata"].get("managedFields").is_none());
    let (_, field) = as_reader
        .call(reqwest::Method::GET, &format!("{path}?field=spec.image"), None)
        .await;
    assert_eq!(field["value"], "myorg/web");
    let (_, listed) = as_reader
        .call(reqwest::Method::GET, &format!("/resources/App/{}", ns.name), None)
        .await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 2, "{listed}");
    let (status, _) = as_reader.call(reqwest::Method::DELETE, &path, None).await;
    assert_eq!(status, 403);
    let (status, _) = as_admin.call(reqwest::Method::DELETE, &path, None).await;
    assert_eq!(status, 200);
    let (status, _) = as_admin.call(reqwest::Method::GET, "/resources/Nope/x/y", None).await;
    assert_eq!(status, 404);

    refresh.abort();
    webhooks.stop().await;
}

#[tokio::test]
async fn the_self_service_example_through_ork_gateway_and_ork_serve() {
    use k8s_openapi::api::core::v1::Secret;

    let ns = namespace("gw-example").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let file = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../katalogs/self-service/katalog.yaml");
    let compiled = orkestra_katalog::load(std::slice::from_ref(&file)).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let ci_token = format!("ci-{}", ns.name);
    let (mut ork, url) = spawn_gateway(&file, &ns.name, &[("ORK_CI_TOKEN", &ci_token)]);
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    let platform = secrets.get("self-service-platform-token").await.unwrap();
    let platform_token = String::from_utf8(platform.data.unwrap()["token"].0.clone()).unwrap();

    // The Serve API describes itself without a token; every endpoint of it needs one.
    let http = reqwest::Client::new();
    let document = http.get(format!("{url}/openapi.json")).send().await.unwrap();
    assert_eq!(document.status(), 200);
    let document: serde_json::Value = document.json().await.unwrap();
    assert_eq!(document["servers"][0]["url"], "/api/v1");
    for path in [
        "/apply",
        "/resources/{kind}/{namespace}/{name}",
        "/schema",
        "/raw-schema",
    ] {
        assert!(
            document["paths"][path].is_object(),
            "{path} is not documented: {document}"
        );
    }
    assert!(document["components"]["securitySchemes"]["bearer"].is_object());
    let bare = http.get(format!("{url}/schema")).send().await.unwrap();
    assert_eq!(bare.status(), 401, "the schema needs a token");

    let schema = crate::ork::run(
        &["serve", "schema", "--gateway", &url],
        &[("ORK_GATEWAY_TOKEN", &ci_token)],
    );
    let listed = String::from_utf8_lossy(&schema.stdout);
    // preview narrows ci to create, update and get: it may not list it.
    assert!(
        schema.status.success() && listed.contains("site") && !listed.contains("preview"),
        "{listed}"
    );
    // Which gateway answered is said.
    let said = String::from_utf8_lossy(&schema.stderr);
    assert!(said.contains(&format!("Katalog \"self-service\" at {url}")), "{said}");

    let dir = tempfile::tempdir().unwrap();
    let intent = dir.path().join("shop.yaml");
    std::fs::write(
        &intent,
        format!("name: shop\nimage: 'nginx:1.27'\nsize: large\nteam: {}\n", ns.name),
    )
    .unwrap();
    // `ork serve apply` of the intent, as the token's holder.
    let serve_apply = |token: &str| {
        crate::ork::run(
            &[
                "serve",
                "apply",
                "-f",
                intent.to_str().unwrap(),
                "--target",
                "site",
                "--gateway",
                &url,
            ],
            &[("ORK_GATEWAY_TOKEN", token)],
        )
    };
    let applied = serve_apply(&platform_token);
    let answer = String::from_utf8_lossy(&applied.stdout);
    assert!(applied.status.success(), "{answer}");
    assert!(answer.contains("\"accepted\": true"), "{answer}");
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("selfservice.orkestra.io", "v1", "Website"),
        "websites",
    );
    let sites: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let shop = sites.get("shop").await.unwrap();
    assert_eq!(shop.data["spec"]["replicas"], "3");
    assert_eq!(shop.metadata.labels.unwrap()["team"], ns.name);

    // Meant for another Katalog's gateway: this one is named and nothing is applied.
    let stray = dir.path().join("stray.yaml");
    std::fs::write(&stray, format!("name: stray\nimage: 'nginx:1.27'\nteam: {}\n", ns.name)).unwrap();
    let elsewhere = crate::ork::run(
        &[
            "serve",
            "apply",
            "-f",
            stray.to_str().unwrap(),
            "--target",
            "site",
            "--gateway",
            &url,
            "--katalog",
            "shop-front",
        ],
        &[("ORK_GATEWAY_TOKEN", &platform_token)],
    );
    let said = String::from_utf8_lossy(&elsewhere.stderr);
    assert!(!elsewhere.status.success(), "{said}");
    assert!(
        said.contains("serves Katalog \"self-service\", not \"shop-front\"") && said.contains("nothing was sent"),
        "{said}"
    );
    assert!(sites.get_opt("stray").await.unwrap().is_none(), "nothing is applied");

    // The ci token is held to its namespace.
    let denied = serve_apply(&ci_token);
    let answer = String::from_utf8_lossy(&denied.stdout);
    assert!(
        !denied.status.success() && answer.contains("may not use namespace"),
        "{answer}"
    );

    // kubectl meets the same rules.
    let rogue = dir.path().join("rogue.yaml");
    std::fs::write(&rogue, format!("apiVersion: selfservice.orkestra.io/v1\nkind: Website\nmetadata: {{name: rogue, namespace: {}}}\nspec: {{image: 'httpd:2'}}\n", ns.name)).unwrap();
    let refused = eventually("kubectl to be refused", WAIT, || {
        let rogue = rogue.clone();
        // Until the webhook answers: a refusal of the API server's own (the webhook not yet
        // reachable) is not the one this is about.
        async move {
            kubectl_with(&cluster.kubeconfig, &["apply", "-f", rogue.to_str().unwrap()])
                .err()
                .filter(|e| e.to_string().contains("denied the request"))
        }
    })
    .await
    .unwrap();
    assert!(
        refused.to_string().contains("sites run nginx, not httpd:2"),
        "{refused}"
    );

    let status = ork.signal_and_wait(libc::SIGINT, WAIT);
    assert!(status.success(), "{status:?}");
    let name = orkestra_gateway::registration::name_for("self-service");
    assert_eq!(webhook_configs(&cluster.kubeconfig, &name).trim(), "");
}

/// OIDC tokens from an issuer served on loopback: a good one applies, and the CR says who
/// (`serve-source` is the verified `sub`); a missing, expired, wrong-issuer, wrong-audience,
/// unsigned (`alg: none`) or tampered one is a 401 that names why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_tokens_apply_as_their_subject_and_bad_ones_are_401() {
    use base64::Engine;
    use orkestra_test_support::oidc::TestIssuer;
    use serde_json::json;

    let ns = namespace("gw-oidc").await.unwrap();
    let group = format!("{}.oidc.orkestra.io", ns.name);
    let issuer = TestIssuer::start().await;
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {name}}}
gateway:
  api:
    enabled: true
    auth:
      tokens:
        - {{name: ci, oidc: {{issuer: '{iss}', audience: orkestra, allow: {{repository: shop/web}}}}}}
spec:
  crds:
    app:
      apiTypes: {{group: {group}, version: v1, kind: App, plural: apps}}
      namespace: {name}
      serve:
        enabled: true
        namespace: {name}
        fields:
          image: {{required: true}}
        tokens:
          ci: {{permissions: {{resources: [get, create, update]}}, namespaces: [{name}]}}
      operatorBox: {{}}
",
        name = ns.name,
        iss = issuer.url()
    );
    let compiled = Arc::new(orkestra_katalog::load_sources(&[("k.yaml".into(), katalog)]).unwrap());
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let (base, refresh) = serve_api(&ns, compiled).await;

    let now = jiff::Timestamp::now().as_second();
    let claims = json!({"iss": issuer.url(), "sub": "repo:shop/web:ref:refs/heads/main", "aud": "orkestra",
                        "exp": now + 300, "repository": "shop/web"});
    let with = |key: &str, value: serde_json::Value| {
        let mut c = claims.clone();
        c[key] = value;
        issuer.sign(&c)
    };
    let as_token = |token: String| Caller {
        base: base.clone(),
        token,
        http: reqwest::Client::new(),
    };
    let intent = json!({"target": "app", "name": "web", "image": "myorg/web"});
    let (status, applied) = as_token(issuer.sign(&claims)).apply("", intent.clone()).await;
    assert_eq!(status, 200, "{applied}");
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "App"), "apps");
    let apps: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let stored = apps.get("web").await.unwrap();
    assert_eq!(
        stored.metadata.annotations.unwrap()["orkestra.orkspace.io/serve-source"],
        "repo:shop/web:ref:refs/heads/main",
        "the verified sub, not anything the caller wrote"
    );

    // The ci entry may act in the test namespace only.
    let good = as_token(issuer.sign(&claims));
    let (status, elsewhere) = good
        .call(reqwest::Method::GET, "/resources/app/default/web", None)
        .await;
    assert_eq!(status, 403, "another namespace: {elsewhere}");
    let (status, _) = good
        .call(reqwest::Method::GET, &format!("/resources/app/{}/web", ns.name), None)
        .await;
    assert_eq!(status, 200);

    let b64 = |v: &serde_json::Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let unsigned = format!("{}.{}.", b64(&json!({"alg": "none", "typ": "JWT"})), b64(&claims));
    let tampered = {
        let good = issuer.sign(&claims);
        let mut parts: Vec<String> = good.split('.').map(str::to_string).collect();
        parts[1] = b64(&json!({"iss": issuer.url(), "sub": "someone-else", "aud": "orkestra",
                               "exp": now + 300, "repository": "shop/web"}));
        parts.join(".")
    };
    let cases = [
        ("expired", with("exp", json!(now - 600)), "expired"),
        ("wrong issuer", with("iss", json!("https://issuer.invalid")), "issuer"),
        ("wrong audience", with("aud", json!("somebody")), "audience"),
        ("claims not allowed", with("repository", json!("shop/other")), "claims"),
        ("alg none", unsigned, "JWT"),
        ("tampered", tampered, "signature"),
        (
            "static-looking garbage",
            "not-a-token".to_string(),
            "valid bearer token",
        ),
    ];
    for (case, token, says) in cases {
        let (status, refused) = as_token(token).apply("", intent.clone()).await;
        assert_eq!(status, 401, "{case}: {refused}");
        let message = refused["message"].as_str().unwrap();
        assert!(message.contains(says), "{case}: {message}");
    }
    let (status, _) = reqwest::Client::new()
        .post(format!("{base}/apply"))
        .json(&intent)
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(status, 401, "no token at all");
    refresh.abort();
}

/// `ork run --no-gateway` (the Helm chart's runtime beside a gateway of its own) serves no
/// Serve API and makes none of its token Secrets, though the Katalog enables it; without the
/// flag the same runtime serves the Serve API on its Live API.
#[tokio::test]
async fn a_runtime_with_no_gateway_leaves_the_serve_api_to_the_gateway() {
    use k8s_openapi::api::core::v1::Secret;

    let ns = namespace("no-gateway").await.unwrap();
    let group = format!("{}.nogw.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {ns}}}
gateway:
  api:
    enabled: true
    auth:
      tokens:
        - {{name: platform, secretRef: {{name: {ns}-platform-token}}}}
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site}}
      serve:
        enabled: true
        namespace: {ns}
        fields:
          image: {{label: Image, required: true}}
        tokens:
          platform: {{permissions: {{global: [\"*\"]}}}}
",
        ns = ns.name
    );
    let (_dir, file) = crate::running::katalog_file(&ns, &katalog).await;
    let serve_api = |flags: &[&str]| {
        let (ork, addr) = crate::running::ork_run(&file, &ns, flags, &[("ORK_API_TOKEN", "")]);
        (ork, format!("http://{addr}"))
    };
    let openapi = |url: String| async move {
        eventually("the Live API", WAIT, || async {
            let probe = reqwest::get(format!("{url}/health")).await.ok()?;
            let response = reqwest::get(format!("{url}/api/v1/openapi.json")).await.ok()?;
            probe.status().is_success().then_some(response.status().as_u16())
        })
        .await
        .unwrap()
    };
    let token = format!("{}-platform-token", ns.name);
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    let (ork, url) = serve_api(&["--no-gateway"]);
    assert_eq!(openapi(url.clone()).await, 404, "no Serve API on the runtime");
    assert!(secrets.get_opt(&token).await.unwrap().is_none());
    let (status, said) = crate::live::get(&format!("{url}/gateway")).await;
    assert_eq!(status, 404, "{said}");

    // The gateway on its own beside it: the Control Center shows its statistics with the
    // runtime of its Katalog.
    let (gateway, serve_url) = spawn_gateway(&file, &ns.name, &[]);
    let gateway_url = serve_url.trim_end_matches("/api/v1").to_string();
    let options = orkestra_control_center::Options {
        addr: "127.0.0.1:0".parse().unwrap(),
        runtimes: vec![orkestra_control_center::config::RuntimeConfig::new(&url, Some("rt"), None).unwrap()],
        config_file: None,
        tokens: Default::default(),
        login: orkestra_control_center::login::Login::none(),
        hosts: Vec::new(),
        poll: Duration::from_millis(200),
        discovered: None,
        gateways: vec![gateway_url.clone()],
    };
    let cc = crate::control_center::serve(options).await;
    let page = eventually("the gateway's statistics on the runtime's page", WAIT, || async {
        let page = reqwest::get(format!("{cc}/r/rt")).await.ok()?.text().await.ok()?;
        page.contains(&format!("the gateway at {gateway_url}")).then_some(page)
    })
    .await
    .unwrap();
    assert!(
        page.contains("<td>site</td><td>site</td>"),
        "its CRD and target: {page}"
    );
    drop(gateway);
    drop(ork);

    let (_ork, url) = serve_api(&[]);
    assert_eq!(openapi(url.clone()).await, 200, "the runtime serves it itself");
    assert!(secrets.get_opt(&token).await.unwrap().is_some());
    let (status, stats) = crate::live::get(&format!("{url}/gateway")).await;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["source"], "gateway");
    assert_eq!(stats["crds"][0]["serve"]["targets"], serde_json::json!(["site"]));
}

/// `ork gateway` on the Katalog `file` in `namespace` (with `env` besides KUBECONFIG), once
/// its Serve API answers: the process and the Serve API's URL (`.../api/v1`).
pub(crate) fn spawn_gateway(file: &std::path::Path, namespace: &str, env: &[(&str, &str)]) -> (Ork, String) {
    let cluster = orkestra_test_support::cluster().unwrap();
    let mut all = vec![("KUBECONFIG", cluster.kubeconfig.to_str().unwrap())];
    all.extend_from_slice(env);
    let args = [
        "gateway",
        "-f",
        file.to_str().unwrap(),
        "--http-addr",
        "127.0.0.1:0",
        "--https-addr",
        "127.0.0.1:0",
        "--gateway-namespace",
        namespace,
    ];
    let mut ork = Ork::spawn(&args, &all);
    let line = ork.wait_for("Serve API on http://", WAIT);
    let url = line.split("Serve API on ").nth(1).unwrap().trim().to_string();
    (ork, url)
}

/// cert-manager's `Certificate` kind, as its CRD serves it (the schema kept open): what the
/// gateway asks for. No cert-manager controller runs here: the test writes the Secret as
/// cert-manager writes it.
async fn serve_certificates(client: &kube::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let definition: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "certificates.cert-manager.io"},
        "spec": {
            "group": "cert-manager.io", "scope": "Namespaced",
            "names": {"kind": "Certificate", "plural": "certificates", "singular": "certificate", "listKind": "CertificateList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true,
            }}}],
        },
    }))
    .unwrap();
    let definitions: Api<CustomResourceDefinition> = Api::all(client.clone());
    // Another test may have made it already.
    let _ = definitions.create(&Default::default(), &definition).await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
        "certificates",
    );
    eventually("the Certificate kind served", WAIT, || async {
        Api::<DynamicObject>::all_with(client.clone(), &resource)
            .list(&Default::default())
            .await
            .ok()
    })
    .await
    .unwrap();
}

/// Writes `identity` into Secret `name` as cert-manager does (a `kubernetes.io/tls` Secret
/// with `tls.crt`, `tls.key` and `ca.crt`).
async fn write_tls_secret(client: &kube::Client, ns: &str, name: &str, identity: &orkestra_gateway::tls::Identity) {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Patch, PatchParams};
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": ns, "annotations": {"cert-manager.io/certificate-name": name}},
        "stringData": {"tls.crt": identity.cert_pem, "tls.key": identity.key_pem, "ca.crt": identity.ca_pem},
    });
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let params = PatchParams::apply("cert-manager").force();
    secrets.patch(name, &params, &Patch::Apply(&secret)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_cert_manager_the_gateway_asks_for_a_certificate_and_serves_each_one_written() {
    use base64::Engine;
    use orkestra_gateway::tls::Identity;
    let ns = namespace("gw-certs").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    serve_certificates(&ns.client).await;
    let group = format!("{}.gateway.orkestra.io", ns.name);
    let text = katalog(&ns.name, &group, &ns.name).replace(
        "security:\n",
        "security:\n  certManager:\n    issuerRef: {name: webhook-ca, kind: ClusterIssuer}\n    secretName: gw-tls\n    duration: 90d\n",
    );
    let (compiled, options) = prepared(&ns, text, Duration::from_secs(3600)).await;
    let starting = tokio::spawn(Webhooks::start(ns.client.clone(), Arc::new(compiled), options));

    // It asks cert-manager for a certificate of the names it is called by, and waits.
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate"),
        "certificates",
    );
    let certificates: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let asked = eventually("the Certificate", WAIT, || async {
        certificates.get_opt("gw-tls").await.ok()?
    })
    .await
    .unwrap();
    let spec = &asked.data["spec"];
    assert_eq!(spec["secretName"], "gw-tls");
    assert_eq!(spec["issuerRef"]["name"], "webhook-ca");
    assert_eq!(spec["issuerRef"]["kind"], "ClusterIssuer");
    assert_eq!(spec["duration"], "7776000s", "as Go parses durations");
    assert!(
        spec["ipAddresses"]
            .as_array()
            .unwrap()
            .iter()
            .any(|ip| ip == "127.0.0.1"),
        "{spec}"
    );
    assert!(
        !starting.is_finished(),
        "nothing is served before the certificate is issued"
    );

    let first = Identity::generate(&["127.0.0.1".into(), "localhost".into()], Duration::from_secs(3600)).unwrap();
    write_tls_secret(&ns.client, &ns.name, "gw-tls", &first).await;
    let webhooks = tokio::time::timeout(WAIT, starting).await.unwrap().unwrap().unwrap();
    let name = orkestra_gateway::registration::name_for(&ns.name);
    let kubeconfig = cluster.kubeconfig.clone();
    let bundle = || {
        let encoded = kubectl_with(
            &kubeconfig,
            &[
                "get",
                "validatingwebhookconfiguration",
                &name,
                "-o",
                "jsonpath={.webhooks[0].clientConfig.caBundle}",
            ],
        )
        .unwrap();
        let pem = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .unwrap_or_default();
        String::from_utf8(pem).unwrap_or_default()
    };
    assert_eq!(
        bundle(),
        first.ca_pem,
        "the API server trusts the CA cert-manager wrote"
    );
    let dir = tempfile::tempdir().unwrap();
    let refused = first_refusal(&kubeconfig, dir.path(), &ns.name, &group).await;
    assert!(
        refused.contains("myorg/ registry"),
        "served over the issued certificate: {refused}"
    );

    // cert-manager renews into the same Secret: the new certificate is served, its CA trusted.
    let second = Identity::generate(&["127.0.0.1".into(), "localhost".into()], Duration::from_secs(3600)).unwrap();
    write_tls_secret(&ns.client, &ns.name, "gw-tls", &second).await;
    eventually("the renewed CA trusted alone", Duration::from_secs(90), || {
        let now = bundle();
        let wanted = second.ca_pem.clone();
        async move { (now == wanted).then_some(()) }
    })
    .await
    .unwrap();
    let manifest = site(&ns.name, &group, "bad-again", "{image: nginx}");
    let refused = apply(&kubeconfig, dir.path(), &manifest).unwrap_err();
    assert!(refused.contains("myorg/ registry"), "after the renewal: {refused}");
    webhooks.stop().await;
}
