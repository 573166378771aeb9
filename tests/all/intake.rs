//! Webhook intake, as a platform team wires it up: `ork run` with `gateway.webhooks` entries
//! for GitHub, GitLab, Slack and a generic sender, their secrets in Secrets, and local
//! stand-ins of GitHub's contents API, GitLab's repository files API and Slack's
//! `response_url` on loopback. Each delivery is signed as its provider signs it; the CRs it
//! asks for are checked in the real API server, with the entry's name as `serve-source`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use ring::hmac;
use serde_json::{Value, json};

use crate::ork::Ork;
use crate::pipeline::WAIT;
use orkestra_test_support::{eventually, kubectl, namespace};

/// What the stand-ins were asked, and the files they serve.
#[derive(Clone, Default)]
struct Provider {
    files: Arc<Mutex<BTreeMap<String, String>>>,
    /// `(path, ref, credential header)` per file read.
    reads: Arc<Mutex<Vec<(String, String, String)>>>,
    /// Every result posted to a `response_url`.
    responses: Arc<Mutex<Vec<Value>>>,
}

impl Provider {
    async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = Router::new()
            .route("/github/repos/{owner}/{repo}/contents/{*path}", get(github_file))
            .route(
                "/gitlab/api/v4/projects/{id}/repository/files/{path}/raw",
                get(gitlab_file),
            )
            .route("/respond/{id}", post(respond))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    fn file(&self, path: &str, text: &str) {
        self.files.lock().unwrap().insert(path.into(), text.into());
    }

    fn read(&self, path: &str, reference: &str, credential: &str) -> (StatusCode, String) {
        self.reads
            .lock()
            .unwrap()
            .push((path.into(), reference.into(), credential.into()));
        match self.files.lock().unwrap().get(path) {
            Some(text) => (StatusCode::OK, text.clone()),
            None => (StatusCode::NOT_FOUND, String::new()),
        }
    }
}

async fn github_file(
    State(provider): State<Provider>,
    Path((owner, repo, path)): Path<(String, String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> (StatusCode, String) {
    assert_eq!((owner.as_str(), repo.as_str()), ("org", "sites"));
    assert_eq!(headers["accept"], "application/vnd.github.raw+json");
    let credential = headers
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    provider.read(&path, &query["ref"], &credential)
}

async fn gitlab_file(
    State(provider): State<Provider>,
    Path((id, path)): Path<(u64, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> (StatusCode, String) {
    assert_eq!(id, 42);
    let credential = headers
        .get("private-token")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    provider.read(&path, &query["ref"], &credential)
}

async fn respond(State(provider): State<Provider>, Json(body): Json<Value>) -> StatusCode {
    provider.responses.lock().unwrap().push(body);
    StatusCode::OK
}

fn hex_mac(secret: &str, message: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    hmac::sign(&key, message)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A Secret holding `value` under `key`, as a platform team makes it with kubectl.
fn secret(namespace: &str, name: &str, key: &str, value: &str) {
    let literal = format!("--from-literal={key}={value}");
    kubectl(&["create", "secret", "generic", name, "-n", namespace, &literal]).unwrap();
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn github_gitlab_slack_and_signed_json_deliveries_apply_intents_as_their_entry() {
    let ns = namespace("intake").await.unwrap();
    let provider = Provider::default();
    let stand_in = provider.start().await;
    let stand_in_host = stand_in.trim_start_matches("http://").to_string();
    for (name, key, value) in [
        ("gh-hook", "secret", "gh-s3cret"),
        ("gh-read", "token", "gh-content-token"),
        ("gl-hook", "token", "gl-t0ken"),
        ("gl-read", "token", "gl-content-token"),
        ("slack-signing", "secret", "slack-s3cret"),
        ("pager-hook", "secret", "pager-s3cret"),
    ] {
        secret(&ns.name, name, key, value);
    }
    let group = format!("{}.intake.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {ns}}}
gateway:
  webhooks:
    github:
      - name: repo
        enabled: true
        path: /webhooks/github/sites
        repository: org/sites
        watch: ['intents/*.yaml']
        secretRef: {{name: gh-hook, key: secret}}
        contentTokenRef: {{name: gh-read, key: token}}
        apiUrl: {stand_in}/github
    gitlab:
      - name: lab
        enabled: true
        branch: release
        repository: '42'
        watch: ['intents/**']
        secretRef: {{name: gl-hook, key: token}}
        contentTokenRef: {{name: gl-read, key: token}}
        apiUrl: {stand_in}/gitlab
    slack:
      - name: chat
        enabled: true
        path: /webhooks/slack
        signingSecretRef: {{name: slack-signing, key: secret}}
        commands: [/site]
        responseHosts: ['{stand_in_host}']
    generic:
      - name: pager
        enabled: true
        secretRef: {{name: pager-hook, key: secret}}
      - name: outsider
        enabled: true
        secretRef: {{name: pager-hook, key: secret}}
      - name: dormant
        secretRef: {{name: pager-hook, key: secret}}
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site}}
      serve:
        enabled: true
        namespace: {ns}
        fields:
          title: {{required: true}}
          replicas: {{}}
        tokens:
          repo: {{permissions: {{global: ['*']}}}}
          lab: {{permissions: {{global: ['*']}}}}
          chat: {{permissions: {{global: ['*']}}}}
          pager: {{permissions: {{global: ['*']}}}}
",
        ns = ns.name,
    );
    let (_dir, file) = crate::running::katalog_file(&ns, &katalog).await;
    // The Live API asks for its token; deliveries prove themselves instead.
    let (mut ork, addr) = crate::running::ork_run(&file, &ns, &[], &[("ORK_API_TOKEN", "live-token")]);
    ork.wait_for(&format!("webhook intake on http://{addr}/webhooks/"), WAIT);
    let http = reqwest::Client::new();
    let url = |path: &str| format!("http://{addr}{path}");
    let site = |name: &str| -> Option<Value> {
        let out = kubectl(&["get", &format!("sites.{group}"), "-n", &ns.name, name, "-o", "json"]).ok()?;
        serde_json::from_str(&out).ok()
    };
    let annotation = |cr: &Value, key: &str| {
        cr["metadata"]["annotations"][format!("orkestra.orkspace.io/{key}")]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };

    // GitHub: a push to main touching a watched file and a README.
    provider.file(
        "intents/blog.yaml",
        "target: site\nname: blog\ntitle: From GitHub\nreplicas: 2\n",
    );
    let push = json!({
        "ref": "refs/heads/main",
        "repository": {"full_name": "org/sites"},
        "commits": [{"added": ["intents/blog.yaml", "README.md"], "modified": [], "removed": []}],
    })
    .to_string();
    let github = |signature: String, body: String, event: &'static str| {
        http.post(url("/webhooks/github/sites"))
            .header("X-GitHub-Event", event)
            .header("X-Hub-Signature-256", signature)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let forged = github(
        format!("sha256={}", hex_mac("guess", push.as_bytes())),
        push.clone(),
        "push",
    )
    .await
    .unwrap();
    assert_eq!(forged.status(), 401);
    assert!(
        forged
            .text()
            .await
            .unwrap()
            .contains("does not match the webhook's secret")
    );
    let signed = |body: &str| format!("sha256={}", hex_mac("gh-s3cret", body.as_bytes()));
    let accepted = github(signed(&push), push.clone(), "push").await.unwrap();
    assert_eq!(accepted.status(), 202);
    let answer: Value = accepted.json().await.unwrap();
    assert_eq!(answer["files"], json!(["intents/blog.yaml"]), "{answer}");
    let blog = eventually("the Site GitHub's push asked for", WAIT, || async { site("blog") })
        .await
        .unwrap();
    assert_eq!(blog["spec"]["title"], "From GitHub");
    assert_eq!(blog["spec"]["replicas"], 2, "typed by the CRD's schema");
    assert_eq!(annotation(&blog, "serve-source"), "repo", "the entry's name");
    assert_eq!(annotation(&blog, "serve-target"), "site");
    let reads = provider.reads.lock().unwrap().clone();
    assert_eq!(
        reads,
        [(
            "intents/blog.yaml".to_string(),
            "main".to_string(),
            "Bearer gh-content-token".to_string()
        )],
        "one read, of the watched file only, at the branch, with the content token"
    );
    // A push to another branch, and an event that is no push: genuine, nothing done.
    let elsewhere = push.replace("refs/heads/main", "refs/heads/feature");
    let other = github(signed(&elsewhere), elsewhere, "push").await.unwrap();
    assert_eq!(other.status(), 200);
    let said: Value = other.json().await.unwrap();
    assert_eq!(said["ignored"], true);
    assert!(
        said["message"].as_str().unwrap().contains("not to refs/heads/main"),
        "{said}"
    );
    let ping = github(signed("{}"), "{}".into(), "ping").await.unwrap();
    assert_eq!(ping.status(), 200);
    assert_eq!(provider.reads.lock().unwrap().len(), 1, "nothing more was read");

    // GitLab: its token, its files API (the path as one encoded segment), its branch.
    provider.file(
        "intents/shop/site.yaml",
        "{target: site, name: shop, title: From GitLab}",
    );
    let gitlab_push = json!({
        "object_kind": "push",
        "ref": "refs/heads/release",
        "project_id": 42,
        "commits": [{"added": [], "modified": ["intents/shop/site.yaml"], "removed": []}],
    })
    .to_string();
    let gitlab = |token: &'static str| {
        http.post(url("/webhooks/gitlab/lab"))
            .header("X-Gitlab-Event", "Push Hook")
            .header("X-Gitlab-Token", token)
            .body(gitlab_push.clone())
            .send()
    };
    assert_eq!(gitlab("gl-wrong").await.unwrap().status(), 401);
    assert_eq!(gitlab("gl-t0ken").await.unwrap().status(), 202);
    let shop = eventually("the Site GitLab's push asked for", WAIT, || async { site("shop") })
        .await
        .unwrap();
    assert_eq!(shop["spec"]["title"], "From GitLab");
    assert_eq!(annotation(&shop, "serve-source"), "lab");
    let last_read = provider.reads.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        last_read,
        (
            "intents/shop/site.yaml".to_string(),
            "release".to_string(),
            "gl-content-token".to_string()
        )
    );

    // Slack: answered at once, applied in the pool, the result posted to response_url.
    let slack = |text: &str, response_url: String, ts: i64| {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("command", "/site")
            .append_pair("text", text)
            .append_pair("response_url", &response_url)
            .append_pair("user_name", "ana")
            .finish();
        let signature = format!("v0={}", hex_mac("slack-s3cret", format!("v0:{ts}:{body}").as_bytes()));
        http.post(url("/webhooks/slack"))
            .header("X-Slack-Request-Timestamp", ts.to_string())
            .header("X-Slack-Signature", signature)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let asked = Instant::now();
    let ack = slack(
        r#"site name=chat title="From Slack""#,
        format!("{stand_in}/respond/1"),
        now(),
    )
    .await
    .unwrap();
    let took = asked.elapsed();
    assert_eq!(ack.status(), 200);
    let ack: Value = ack.json().await.unwrap();
    assert_eq!(ack["text"], "applying site…");
    assert!(
        took < Duration::from_secs(3),
        "Slack waits three seconds for the ack; it took {took:?}"
    );
    let posted = eventually("the slash command's result at its response_url", WAIT, || async {
        provider.responses.lock().unwrap().first().cloned()
    })
    .await
    .unwrap();
    let text = posted["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("applied Site {}/chat through target site", ns.name)) && text.contains("@ana"),
        "{text}"
    );
    let chat = site("chat").unwrap();
    assert_eq!(chat["spec"]["title"], "From Slack");
    assert_eq!(annotation(&chat, "serve-source"), "chat");
    // An old signature, and a response_url the entry does not list.
    let stale = slack("site name=late title=x", format!("{stand_in}/respond/2"), now() - 600)
        .await
        .unwrap();
    assert_eq!(stale.status(), 401);
    assert!(stale.text().await.unwrap().contains("from the gateway's clock"));
    let elsewhere = slack("site name=away title=x", "https://attacker.example/steal".into(), now())
        .await
        .unwrap();
    let said: Value = elsewhere.json().await.unwrap();
    assert!(
        said["text"]
            .as_str()
            .unwrap()
            .contains("is not one of the entry's responseHosts"),
        "{said}"
    );
    let bad = slack("site title", format!("{stand_in}/respond/3"), now())
        .await
        .unwrap();
    let said: Value = bad.json().await.unwrap();
    assert!(
        said["text"]
            .as_str()
            .unwrap()
            .starts_with("\"title\" is not key=value\nusage: /site <target>"),
        "{said}"
    );

    // Generic: the signed body is the intent, applied before the answer.
    let generic = |path: &str, body: Value, ts: i64| {
        let body = body.to_string();
        let signature = orkestra_gateway::intake::sign_generic("pager-s3cret", ts, body.as_bytes());
        http.post(url(path))
            .header("X-Orkestra-Timestamp", ts.to_string())
            .header("X-Orkestra-Signature", signature)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let intent = json!({"target": "site", "name": "paged", "title": "From a pager"});
    let applied = generic("/webhooks/generic/pager", intent.clone(), now()).await.unwrap();
    assert_eq!(applied.status(), 200);
    let answer: Value = applied.json().await.unwrap();
    assert_eq!(answer["accepted"], true, "{answer}");
    assert_eq!(annotation(&site("paged").unwrap(), "serve-source"), "pager");
    let replayed = generic("/webhooks/generic/pager", intent.clone(), now() - 301)
        .await
        .unwrap();
    assert_eq!(replayed.status(), 401);
    // A genuine sender serve.tokens does not list may apply nothing.
    let outsider = generic(
        "/webhooks/generic/outsider",
        json!({"target": "site", "name": "sneaky", "title": "x"}),
        now(),
    )
    .await
    .unwrap();
    assert_eq!(outsider.status(), 403);
    let said: Value = outsider.json().await.unwrap();
    assert!(
        said["message"]
            .as_str()
            .unwrap()
            .contains("token \"outsider\" may not use target \"site\""),
        "{said}"
    );
    assert!(site("sneaky").is_none());
    // An entry not enabled is not served.
    let dormant = generic("/webhooks/generic/dormant", intent, now()).await.unwrap();
    assert_eq!(dormant.status(), 404);

    // The gateway's statistics count each entry.
    assert_eq!(http.get(url("/gateway")).send().await.unwrap().status(), 401);
    let stats: Value = http
        .get(url("/gateway"))
        .bearer_auth("live-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let entry = |name: &str| {
        stats["intake"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {stats:#}"))
    };
    let repo = entry("repo");
    assert_eq!(
        [
            &repo["received"],
            &repo["refused"],
            &repo["ignored"],
            &repo["applied"],
            &repo["failed"]
        ],
        [&json!(4), &json!(1), &json!(1), &json!(1), &json!(0)],
        "{repo}"
    );
    assert_eq!(repo["path"], "/webhooks/github/sites");
    assert_eq!(entry("lab")["refused"], 1);
    assert_eq!(entry("chat")["applied"], 1);
    assert_eq!(entry("outsider")["failed"], 1);
    assert!(
        entry("outsider")["last"]["outcome"]
            .as_str()
            .unwrap()
            .starts_with("refused (403)")
    );
    assert!(
        stats["intake"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["name"] != "dormant")
    );
}

#[tokio::test]
async fn a_gateway_on_its_own_serves_intake_with_no_serve_api_open() {
    let ns = namespace("intake-alone").await.unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    secret(&ns.name, "hook", "secret", "alone-s3cret");
    let group = format!("{}.alone.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {ns}}}
gateway:
  admission:
    webhooks:
      generic: [{{name: alerts, enabled: true, secretRef: {{name: hook, key: secret}}}}]
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site}}
      serve:
        enabled: true
        namespace: {ns}
        fields: {{title: {{required: true}}}}
        tokens: {{alerts: {{permissions: {{global: [create, update]}}}}}}
",
        ns = ns.name,
    );
    let (_dir, file) = crate::running::katalog_file(&ns, &katalog).await;
    let mut gateway = Ork::spawn(
        &[
            "gateway",
            "-f",
            file.to_str().unwrap(),
            "--http-addr",
            "127.0.0.1:0",
            "--https-addr",
            "127.0.0.1:0",
            "--gateway-namespace",
            &ns.name,
        ],
        &[("KUBECONFIG", cluster.kubeconfig.to_str().unwrap())],
    );
    let line = gateway.wait_for("webhook intake on http://", WAIT);
    let base = line
        .split("webhook intake on ")
        .nth(1)
        .unwrap()
        .split("/webhooks/")
        .next()
        .unwrap()
        .to_string();
    let http = reqwest::Client::new();
    let body = json!({"target": "site", "name": "alerted", "title": "From an alert"}).to_string();
    let ts = now();
    let applied = http
        .post(format!("{base}/webhooks/generic/alerts"))
        .header("X-Orkestra-Timestamp", ts.to_string())
        .header(
            "X-Orkestra-Signature",
            orkestra_gateway::intake::sign_generic("alone-s3cret", ts, body.as_bytes()),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(applied.status(), 200, "{}", applied.text().await.unwrap());
    let out = kubectl(&[
        "get",
        &format!("sites.{group}"),
        "-n",
        &ns.name,
        "alerted",
        "-o",
        "jsonpath={.spec.title}/{.metadata.annotations.orkestra\\.orkspace\\.io/serve-source}",
    ])
    .unwrap();
    assert_eq!(out, "From an alert/alerts");
    // No Serve API: the bearer-token door stays shut.
    let api = http.get(format!("{base}/api/v1/schema")).send().await.unwrap();
    assert_eq!(api.status(), 404);
    let stats: Value = http
        .get(format!("{base}/katalog"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["intake"][0]["applied"], 1, "{stats}");
}

#[test]
fn webhook_list_says_where_each_entry_is_served_what_proves_it_and_what_it_may_apply() {
    let (_dir, file) = crate::running::written(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
gateway:
  webhooks:
    github:
      - {name: repo, enabled: true, repository: org/sites, watch: ['intents/*.yaml'], secretRef: {name: gh, key: secret}}
    slack:
      - {name: chat, path: /webhooks/slack, signingSecretRef: {name: sl, key: s, namespace: ops}, commands: [/site]}
spec:
  crds:
    site:
      apiTypes: {group: list.orkestra.io, version: v1, kind: Site}
      serve: {enabled: true, namespace: web, tokens: {repo: {permissions: {global: [create, update]}}}}
",
    );
    let output = crate::ork::run(&["webhook", "list", "-f", file.to_str().unwrap()], &[]);
    assert!(output.status.success());
    let said = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        said,
        "repo (github)
  path: POST /webhooks/github/repo
  checked with: X-Hub-Signature-256 with Secret <gateway namespace>/gh key secret
  takes: pushes of org/sites to main touching intents/*.yaml (read without a token)
  grants: site (CRD list): global create,update
chat (slack, off: set enabled: true)
  path: POST /webhooks/slack
  checked with: X-Slack-Signature with Secret ops/sl key s
  takes: /site; results to hooks.slack.com
  grants: site (CRD list): not listed, so refused
"
    );
    // A webhook is an identity as a token is: `ork token list` and `ork serve can-i` know it.
    let output = crate::ork::run(&["token", "list", "-f", file.to_str().unwrap()], &[]);
    assert!(output.status.success());
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.contains(
            "repo\n  from: webhook github at POST /webhooks/github/repo (a signed delivery; ork webhook list shows how it is checked)\n  grants: site (CRD list): global create,update\n"
        ),
        "{said}"
    );
    let can = |operation: &str| {
        crate::ork::run(
            &[
                "serve",
                "can-i",
                "-o",
                operation,
                "--token",
                "repo",
                "-f",
                file.to_str().unwrap(),
            ],
            &[],
        )
    };
    let output = can("create");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(said, "site: yes\n");
    let output = can("delete");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("site: no: "));
}

#[test]
fn the_rbac_of_a_katalog_with_intake_reads_each_webhooks_secrets_and_creates_its_crs() {
    let (_dir, file) = crate::running::written(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
gateway:
  webhooks:
    gitlab:
      - {name: lab, enabled: true, repository: group/site, watch: ['*.yaml'], secretRef: {name: gl, key: t, namespace: hooks}, contentTokenRef: {name: gl-read, key: t}}
    generic:
      - {name: off, secretRef: {name: unused, key: k, namespace: elsewhere}}
spec:
  crds:
    site:
      apiTypes: {group: rbac.orkestra.io, version: v1, kind: Site}
      serve: {enabled: true, namespace: web, tokens: {lab: {permissions: {global: [create]}}}}
",
    );
    let output = crate::ork::run(&["manifests", "-f", file.to_str().unwrap(), "-n", "ops"], &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("the gateway reads Secrets hooks/gl, ops/gl-read;"),
        "{said}"
    );
    let documents: Vec<Value> = serde_yaml_ng::Deserializer::from_slice(&output.stdout)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    // A namespace's Role, or the ClusterRole for "*".
    let rules_in = |namespace: &str| -> Vec<Value> {
        documents
            .iter()
            .filter(|d| match namespace {
                "*" => d["kind"] == "ClusterRole",
                _ => d["kind"] == "Role" && d["metadata"]["namespace"] == namespace,
            })
            .flat_map(|d| d["rules"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let grants = |namespace: &str, resource: &str, verb: &str| {
        rules_in(namespace).iter().any(|r| {
            r["resources"].as_array().unwrap().iter().any(|x| x == resource)
                && r["verbs"].as_array().unwrap().iter().any(|x| x == verb)
        })
    };
    assert!(grants("hooks", "secrets", "get"), "{documents:#?}");
    assert!(grants("ops", "secrets", "get"));
    assert!(
        !grants("elsewhere", "secrets", "get"),
        "a webhook not enabled reads nothing"
    );
    assert!(grants("*", "sites", "create"), "intake creates the served CRs");
}

/// Issue 49, finding 8: a signed push named another repository (one the content token can
/// read) and the gateway read it; a `**` glob let `..` segments out of the watched folder; a
/// Slack or generic delivery played again within its window was applied again (reverting a
/// newer intent); and one entry whose provider was slow held every worker.
#[tokio::test]
async fn a_delivery_reads_only_its_entrys_repository_in_its_folder_once_and_a_slow_provider_stalls_only_its_entry() {
    let ns = namespace("intake-hostile").await.unwrap();
    let provider = Provider::default();
    let stand_in = provider.start().await;
    // A provider that never answers.
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hang_url = format!("http://{}", hang.local_addr().unwrap());
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = asked.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = hang.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    for (name, key, value) in [
        ("gh-hook", "secret", "gh-s3cret"),
        ("slow-hook", "secret", "slow-s3cret"),
        ("pager-hook", "secret", "pager-s3cret"),
    ] {
        secret(&ns.name, name, key, value);
    }
    let group = format!("{}.hostile.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {ns}}}
gateway:
  webhooks:
    github:
      - {{name: repo, enabled: true, repository: org/sites, watch: ['intents/**'], secretRef: {{name: gh-hook, key: secret}}, apiUrl: {stand_in}/github}}
      - {{name: slow, enabled: true, repository: org/slow, watch: ['*.yaml'], secretRef: {{name: slow-hook, key: secret}}, apiUrl: {hang_url}}}
    generic:
      - {{name: pager, enabled: true, secretRef: {{name: pager-hook, key: secret}}}}
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site}}
      serve:
        enabled: true
        namespace: {ns}
        fields: {{title: {{required: true}}}}
        tokens:
          repo: {{permissions: {{global: ['*']}}}}
          slow: {{permissions: {{global: ['*']}}}}
          pager: {{permissions: {{global: ['*']}}}}
",
        ns = ns.name,
    );
    let (_dir, file) = crate::running::katalog_file(&ns, &katalog).await;
    let (mut ork, addr) = crate::running::ork_run(&file, &ns, &[], &[("ORK_API_TOKEN", "")]);
    ork.wait_for(&format!("webhook intake on http://{addr}/webhooks/"), WAIT);
    let http = reqwest::Client::new();
    let url = |path: &str| format!("http://{addr}{path}");
    let push_to = |path: &str, secret: &str, body: String, delivery: &str| {
        http.post(url(path))
            .header("X-GitHub-Event", "push")
            .header("X-GitHub-Delivery", delivery.to_string())
            .header(
                "X-Hub-Signature-256",
                format!("sha256={}", hex_mac(secret, body.as_bytes())),
            )
            .body(body)
            .send()
    };
    let push = |repository: &str, files: &[&str]| {
        json!({"ref": "refs/heads/main", "repository": {"full_name": repository},
               "commits": [{"added": files, "modified": [], "removed": []}]})
        .to_string()
    };

    // A signed push of another repository: refused, nothing read.
    let stolen = push_to(
        "/webhooks/github/repo",
        "gh-s3cret",
        push("victim-org/private-repo", &["intents/secret.yaml"]),
        "d-1",
    )
    .await
    .unwrap();
    assert_eq!(stolen.status(), 403);
    assert!(
        stolen
            .text()
            .await
            .unwrap()
            .contains("this webhook takes pushes of org/sites only"),
        "names what it takes"
    );
    // A path that leaves the watched folder: refused, nothing read.
    let escaped = push_to(
        "/webhooks/github/repo",
        "gh-s3cret",
        push("org/sites", &["intents/../../../../user/x.yaml"]),
        "d-2",
    )
    .await
    .unwrap();
    assert_eq!(escaped.status(), 422);
    let said: Value = escaped.json().await.unwrap();
    assert_eq!(said["refused"][0]["file"], "intents/../../../../user/x.yaml", "{said}");
    assert!(provider.reads.lock().unwrap().is_empty(), "nothing was read");
    // Its own repository, once; the same delivery again is refused.
    provider.file("intents/blog.yaml", "{target: site, name: blog, title: From GitHub}");
    let genuine = push("org/sites", &["intents/blog.yaml"]);
    assert_eq!(
        push_to("/webhooks/github/repo", "gh-s3cret", genuine.clone(), "d-3")
            .await
            .unwrap()
            .status(),
        202
    );
    assert_eq!(
        push_to("/webhooks/github/repo", "gh-s3cret", genuine, "d-3")
            .await
            .unwrap()
            .status(),
        409
    );

    // A generic delivery played again within its window does not revert a newer intent.
    let generic = |body: Value, ts: i64| {
        let body = body.to_string();
        let signature = orkestra_gateway::intake::sign_generic("pager-s3cret", ts, body.as_bytes());
        http.post(url("/webhooks/generic/pager"))
            .header("X-Orkestra-Timestamp", ts.to_string())
            .header("X-Orkestra-Signature", signature)
            .body(body)
            .send()
    };
    let (older, ts) = (json!({"target": "site", "name": "paged", "title": "older"}), now());
    assert_eq!(generic(older.clone(), ts).await.unwrap().status(), 200);
    let newer = json!({"target": "site", "name": "paged", "title": "newer"});
    assert_eq!(generic(newer, now()).await.unwrap().status(), 200);
    let replayed = generic(older, ts).await.unwrap();
    assert_eq!(replayed.status(), 409);
    let title = kubectl(&[
        "get",
        &format!("sites.{group}"),
        "-n",
        &ns.name,
        "paged",
        "-o",
        "jsonpath={.spec.title}",
    ])
    .unwrap();
    assert_eq!(title, "newer");

    // The slow entry's provider never answers: its deliveries hold its own workers only.
    for i in 0..4 {
        let body = push("org/slow", &[&format!("f{i}.yaml")]);
        let answer = push_to("/webhooks/github/slow", "slow-s3cret", body, &format!("s-{i}"))
            .await
            .unwrap();
        assert_eq!(answer.status(), 202);
    }
    eventually("the slow provider asked", WAIT, || async {
        (asked.load(std::sync::atomic::Ordering::SeqCst) >= 2).then_some(())
    })
    .await
    .unwrap();
    let started = Instant::now();
    let other = generic(json!({"target": "site", "name": "meanwhile", "title": "x"}), now())
        .await
        .unwrap();
    assert_eq!(other.status(), 200, "{}", other.text().await.unwrap());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "another entry's delivery waited {:?}",
        started.elapsed()
    );
}

/// Issue 49, finding 6: a thousand connections sending a body a byte at a time held every
/// slot of the runtime's port (its probes failed) and of the webhook port (the API server's
/// admission calls failed). Bodies are held to a pace now, and a new connection cuts one
/// whose body is still arriving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_cost_only_their_own_connections_on_the_runtime_and_webhook_ports() {
    let ns = namespace("intake-slow").await.unwrap();
    secret(&ns.name, "pager-hook", "secret", "pager-s3cret");
    let group = format!("{}.slow.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {ns}}}
security:
  webhooks:
    admission: {{enabled: true}}
gateway:
  webhooks:
    generic:
      - {{name: pager, enabled: true, secretRef: {{name: pager-hook, key: secret}}}}
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site, plural: sites}}
      namespace: {ns}
      admission:
        validation:
          rules:
            - {{field: spec.image, prefix: 'myorg/', message: 'images come from myorg/'}}
      serve:
        enabled: true
        namespace: {ns}
        fields: {{image: {{required: true}}}}
        tokens: {{pager: {{permissions: {{global: ['*']}}}}}}
      operatorBox: {{}}
",
        ns = ns.name,
    );
    let (dir, file) = crate::running::katalog_file(&ns, &katalog).await;
    let (mut ork, addr) = crate::running::ork_run(&file, &ns, &[], &[("ORK_API_TOKEN", "")]);
    let line = ork.said("gateway: webhooks on https://", WAIT);
    let webhook: std::net::SocketAddr = line
        .split("https://")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let live: std::net::SocketAddr = addr.parse().unwrap();
    let apply = |name: &str, image: &str| {
        let manifest = json!({"apiVersion": format!("{group}/v1"), "kind": "Site",
                              "metadata": {"name": name, "namespace": ns.name}, "spec": {"image": image}});
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, manifest.to_string()).unwrap();
        kubectl(&["apply", "-f", path.to_str().unwrap()]).map_err(|e| e.to_string())
    };
    eventually("the webhook to answer", WAIT, || async {
        apply("first", "nginx").err()
    })
    .await
    .unwrap();

    // Intake's door: headers that pass every check before the body, then one byte of it.
    let ts = now();
    let head = format!(
        "POST /webhooks/generic/pager HTTP/1.1\r\nhost: {addr}\r\nx-orkestra-timestamp: {ts}\r\nx-orkestra-signature: sha256={}\r\ncontent-length: 100000\r\n\r\n",
        "0".repeat(64)
    );
    let held = orkestra_test_support::idle::stalled(live, 1100, 230, &head, false).await;
    assert!(held.len() >= 1000, "{} stalled connections", held.len());
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    for _ in 0..15 {
        let started = Instant::now();
        let probe = http.get(format!("http://{live}/healthz")).send().await.unwrap();
        assert_eq!(probe.status(), 200);
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    }
    drop(held);

    // The webhook door: the same over TLS, an admission review's worth of headers.
    let head = format!(
        "POST /validate HTTP/1.1\r\nhost: {webhook}\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n"
    );
    let held = orkestra_test_support::idle::stalled(webhook, 1100, 230, &head, true).await;
    assert!(held.len() >= 1000, "{} stalled TLS connections", held.len());
    let started = Instant::now();
    let refused = apply("bad", "nginx").unwrap_err();
    assert!(
        refused.contains("images come from myorg/"),
        "the rule answered, not a failed call: {refused}"
    );
    apply("good", "myorg/web").unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    drop(held);
}
