//! The Control Center in a real browser (headless Chromium through chromedriver) over two
//! real runtimes on the real API server: sign in, dashboard, Katalog panel with its
//! dependsOn graph, CRD, CR list and detail, components, a page that updates itself, a
//! runtime stopped mid-test, and runtimes added and removed from the UI. Every page is
//! saved as a screenshot under target/control-center/.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use orkestra_test_support::eventually;
use serde_json::json;

use crate::pipeline::{Harness, WAIT, crd};
use crate::replicas::free_port;
use crate::running::{Running, katalogs_dir};

/// chromedriver on a free loopback port, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
    profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn driver() -> Driver {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver is needed (Debian: apt-get install chromium chromium-driver)");
    let url = format!("http://127.0.0.1:{port}");
    eventually("chromedriver to listen", WAIT, || async {
        reqwest::get(format!("{url}/status")).await.ok().map(|_| ())
    })
    .await
    .unwrap();
    Driver {
        child,
        url,
        profile: tempfile::tempdir().unwrap(),
    }
}

async fn browser(driver: &Driver) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1300,1100", format!("--user-data-dir={}", driver.profile.path().display()),
            ],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("a Chromium session")
}

fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/control-center");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shoot(browser: &Client, name: &str) {
    let png = browser.screenshot().await.unwrap();
    std::fs::write(shots().join(format!("{name}.png")), png).unwrap();
}

/// Waits until the page shows `text`.
async fn shows(browser: &Client, text: &str) {
    eventually(&format!("the page to show {text:?}"), WAIT, || async {
        browser.source().await.ok()?.contains(text).then_some(())
    })
    .await
    .unwrap();
}

async fn click(browser: &Client, css: &str) {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap();
}

/// A Control Center with `options`, serving until the test ends: its `/controlcenter` URL.
pub(crate) async fn serve(options: orkestra_control_center::Options) -> String {
    let bound = orkestra_control_center::server::bind(options).await.unwrap();
    let url = format!("http://{}/controlcenter", bound.local_addr().unwrap());
    tokio::spawn(bound.serve(std::future::pending()));
    url
}

/// A runtime's Live API on a loopback port.
async fn live(inspect: orkestra::live::Inspect) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = orkestra::live::router(inspect, None, orkestra::live::Auth::open());
    let hosts = Some(orkestra_net::Hosts::loopback());
    let server = tokio::spawn(async move {
        let _ = orkestra::live::serve(listener, router, hosts).await;
    });
    (url, server)
}

const DEPENDS: &str = "        reconcile:
          resync: 1s
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-config', data: {x: '{{ .spec.x }}'}}
";

#[tokio::test]
async fn the_control_center_shows_every_runtime_down_to_each_cr_and_component_in_a_browser() {
    // Runtime one: a Wasm hook. Runtime two: two CRDs, one depending on the other.
    let hooked = Running::start(
        "cc-hook",
        &[katalogs_dir().join("site-hook/katalog.yaml")],
        &["rust-hook"],
    )
    .await;
    hooked.apply_samples().await;
    let crds = crd("db", "Db", DEPENDS) + &crd("app", "App", DEPENDS) + "      dependsOn: {db: healthy}\n";
    let plain = Harness::start("cc-plain", &crds, &[], true).await;
    plain.create("Db", "main", json!({"x": "1"})).await;
    plain.create("App", "shop", json!({"x": "2"})).await;
    let (hooked_url, _hooked_server) = live(hooked.inspect.clone()).await;
    let (plain_url, plain_server) = live(plain.inspect.clone()).await;

    let config = tempfile::tempdir().unwrap();
    let config_file = config.path().join("control-center.yaml");
    let options = orkestra_control_center::Options {
        addr: "127.0.0.1:0".parse().unwrap(),
        runtimes: vec![
            orkestra_control_center::config::RuntimeConfig::new(&hooked_url, Some("hooks"), None).unwrap(),
            orkestra_control_center::config::RuntimeConfig::new(&plain_url, Some("plain"), None).unwrap(),
        ],
        config_file: Some(config_file.clone()),
        tokens: Default::default(),
        login: orkestra_control_center::login::Login::password("open-sesame".into()),
        hosts: Vec::new(),
        poll: Duration::from_secs(1),
        discovered: None,
        gateways: Vec::new(),
    };
    let cc = crate::control_center::serve(options).await;

    let driver = driver().await;
    let browser = browser(&driver).await;

    // Signing in first: the dashboard sends a stranger to the form, a wrong password stays.
    browser.goto(&format!("{cc}/")).await.unwrap();
    shows(&browser, "Sign in").await;
    let form = browser.form(Locator::Css("form[action$='/login']")).await.unwrap();
    form.set_by_name("password", "wrong").await.unwrap();
    form.submit().await.unwrap();
    shows(&browser, "That is not the admin password.").await;
    let form = browser.form(Locator::Css("form[action$='/login']")).await.unwrap();
    form.set_by_name("password", "open-sesame").await.unwrap();
    form.submit().await.unwrap();

    // Dashboard: both runtimes, healthy, with their Katalogs and charts.
    eventually("both runtimes healthy on the dashboard", WAIT, || async {
        let cards = browser.find_all(Locator::Css(".card.runtime .badge")).await.ok()?;
        let mut states = Vec::new();
        for card in cards {
            states.push(card.text().await.ok()?);
        }
        (states == ["healthy", "healthy"]).then_some(())
    })
    .await
    .unwrap();
    shows(&browser, "Katalog <strong>site-hook</strong>").await;
    shows(&browser, "the last hour").await;
    shoot(&browser, "1-dashboard").await;

    // Katalog panel: CRD cards and the dependsOn graph.
    click(&browser, ".card.runtime[data-runtime='plain'] h3 a").await;
    shows(&browser, "dependsOn graph").await;
    eventually("both CRDs healthy", WAIT, || async {
        let source = browser.source().await.ok()?;
        (source.contains("card crd state-healthy\" data-crd=\"db\"")
            && source.contains("card crd state-healthy\" data-crd=\"app\""))
        .then_some(())
    })
    .await
    .unwrap();
    shoot(&browser, "2-katalog").await;

    // CRD detail.
    click(&browser, ".card.crd[data-crd='app'] h3 a").await;
    shows(&browser, "RBAC").await;
    shows(&browser, "by namespace, background work ages after 10 s").await;
    shows(&browser, "configmaps").await;
    shows(&browser, "healthy").await;
    shoot(&browser, "3-crd").await;

    // CR list, then one CR with its children and events.
    click(&browser, "a[href$='/crd/app/cr']").await;
    shows(&browser, "shop").await;
    shoot(&browser, "4-cr-list").await;
    click(&browser, "table.crs a").await;
    shows(&browser, "Children").await;
    shows(&browser, "shop-config").await;
    shows(&browser, "AppReconciled").await;
    shoot(&browser, "5-cr").await;

    // Components of the hooked runtime: the hook, serving, its calls counted.
    browser.goto(&format!("{cc}/r/hooks/components")).await.unwrap();
    shows(&browser, "data-component=\"site\"").await;
    shows(&browser, "Hot-swap history").await;
    shows(&browser, "get, apply v1 ConfigMap in self").await;
    shows(&browser, "p50 by phase: instantiate").await;
    shows(&browser, "instances: a fresh one per call").await;
    shoot(&browser, "6-components").await;

    // The dashboard keeps itself current: a new CR shows without a reload, and a runtime
    // that stops is marked unreachable, also without a reload.
    browser.goto(&format!("{cc}/")).await.unwrap();
    browser.execute("window.__stayed = true;", vec![]).await.unwrap();
    plain.create("App", "cart", json!({"x": "3"})).await;
    let figure = ".card.runtime[data-runtime='plain'] .figure:nth-child(3) .value";
    eventually("three custom resources, live", WAIT, || async {
        let text = browser.find(Locator::Css(figure)).await.ok()?.text().await.ok()?;
        (text == "3").then_some(())
    })
    .await
    .unwrap();
    plain_server.abort();
    plain.stop().await;
    eventually("the stopped runtime marked unreachable, live", WAIT, || async {
        let badge = browser
            .find(Locator::Css(".card.runtime[data-runtime='plain'] .badge"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        (badge == "unreachable").then_some(())
    })
    .await
    .unwrap();
    let stayed = browser
        .execute("return window.__stayed === true;", vec![])
        .await
        .unwrap();
    assert_eq!(stayed, json!(true), "the page updated in place, never reloaded");
    shows(&browser, "Connection refused").await;
    shoot(&browser, "7-runtime-down").await;

    // Runtimes added and removed from the UI, and kept in the config file.
    browser.goto(&format!("{cc}/runtimes")).await.unwrap();
    let form = browser.form(Locator::Css("form.add")).await.unwrap();
    form.set_by_name("url", "http://127.0.0.1:9").await.unwrap();
    form.set_by_name("name", "spare").await.unwrap();
    form.submit().await.unwrap();
    shows(&browser, "http://127.0.0.1:9").await;
    let written = std::fs::read_to_string(&config_file).unwrap();
    assert!(
        written.contains("name: spare") && written.contains("name: plain"),
        "{written}"
    );
    let form = browser.form(Locator::Css("form.add")).await.unwrap();
    form.set_by_name("url", "not a url").await.unwrap();
    form.submit().await.unwrap();
    shows(&browser, "is not an http(s) URL").await;
    shoot(&browser, "8-runtimes").await;
    click(&browser, "form[action$='/runtimes/spare/remove'] button").await;
    eventually("spare removed", WAIT, || async {
        (!browser.source().await.ok()?.contains("http://127.0.0.1:9<")).then_some(())
    })
    .await
    .unwrap();
    assert!(!std::fs::read_to_string(&config_file).unwrap().contains("spare"));

    browser.close().await.unwrap();
    hooked.stop().await;
}

/// `ork control-center --discover NS`: a runtime whose Live API Service in NS is labelled is
/// watched (at the URL its annotation gives, where `--discover-allow` allows it), an
/// unlabelled Service or one in another namespace is not, and a runtime whose Service goes
/// is no longer watched. Issue 49, finding 7: a labelled Service annotated with a URL the
/// operator did not allow (a catcher's) is never called, so it never receives a token.
#[tokio::test]
async fn the_control_center_watches_the_runtimes_its_discovery_finds_in_the_namespaces_it_is_given() {
    use k8s_openapi::api::core::v1::Service;
    use kube::Api;
    use kube::api::{DeleteParams, PostParams};
    use serde_json::Value;

    let plain = Harness::start("cc-discover", &crd("db", "Db", DEPENDS), &[], true).await;
    let (url, _server) = live(plain.inspect.clone()).await;
    let elsewhere = orkestra_test_support::namespace("cc-elsewhere").await.unwrap();
    let service = |name: &str, labelled: bool, url: &str| -> Service {
        let labels = match labelled {
            true => json!({"orkestra.io/live-api": "true"}),
            false => json!({}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels, "annotations": {"orkestra.io/live-api-url": url}},
            "spec": {"ports": [{"name": "http", "port": 8080}]},
        }))
        .unwrap()
    };
    let here: Api<Service> = Api::namespaced(plain.ns.client.clone(), &plain.ns.name);
    let there: Api<Service> = Api::namespaced(elsewhere.client.clone(), &elsewhere.name);
    let post = PostParams::default();
    here.create(&post, &service("rt", true, &url)).await.unwrap();
    let other = url.replace("127.0.0.1", "localhost");
    here.create(&post, &service("unlabelled", false, &other)).await.unwrap();
    there.create(&post, &service("far", true, &other)).await.unwrap();
    // A catcher of whatever it is sent, at a URL nobody allowed.
    let catcher = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let caught = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = caught.clone();
    let catcher_url = format!("http://{}", catcher.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok(_connection) = catcher.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    here.create(&post, &service("catcher", true, &catcher_url))
        .await
        .unwrap();

    let cluster = orkestra_test_support::cluster().unwrap();
    let port = crate::replicas::free_port();
    let addr = format!("127.0.0.1:{port}");
    let _cc = crate::ork::Ork::spawn(
        &[
            "control-center",
            "--no-login",
            "--addr",
            &addr,
            "--discover",
            &plain.ns.name,
            "--discover-allow",
            "http://127.0.0.1:*",
            "--poll",
            "300ms",
        ],
        &[
            ("KUBECONFIG", cluster.kubeconfig.to_str().unwrap()),
            ("ORK_API_TOKEN", "cc-live-token"),
        ],
    );
    let listed = |name: String| {
        let addr = addr.clone();
        async move {
            let answer: Value = reqwest::get(format!("http://{addr}/controlcenter/api/runtimes"))
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let runtimes = answer["runtimes"].as_array()?.clone();
            Some((
                runtimes.iter().find(|r| r["name"] == name.as_str()).cloned(),
                runtimes.len(),
            ))
        }
    };
    let name = format!("{}-rt", plain.ns.name);
    let found = eventually("the labelled runtime, up", WAIT, || async {
        let (found, count) = listed(name.clone()).await?;
        found.filter(|r| r["up"] == true).map(|r| (r, count))
    })
    .await
    .unwrap();
    assert_eq!(found.0["url"], url.as_str());
    assert_eq!(
        found.1, 1,
        "neither the unlabelled Service, another namespace's, nor one outside the allowed URLs: {found:?}"
    );
    // Several polls later the catcher has still not been called.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(
        caught.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the catcher was called"
    );

    here.delete("rt", &DeleteParams::default()).await.unwrap();
    eventually("the runtime gone with its Service", WAIT, || async {
        let (found, count) = listed(name.clone()).await?;
        (found.is_none() && count == 0).then_some(())
    })
    .await
    .unwrap();
}

/// The create form in a browser: a runtime whose Katalog opens the Serve API (`ork run`), a
/// Control Center with a Serve API token, the form built from the gateway's schema for the
/// target, a CR created through it, and a refusal shown with the gateway's reason.
#[tokio::test]
async fn a_cr_is_created_from_the_form_the_gateways_schema_builds_in_a_browser() {
    let ns = orkestra_test_support::namespace("cc-create").await.unwrap();
    let group = format!("{}.create.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {ns}}}
gateway:
  api:
    enabled: true
    auth:
      tokens:
        - {{name: console, token: '${{ORK_SERVE_TOKEN}}'}}
spec:
  crds:
    site:
      apiTypes: {{group: {group}, version: v1, kind: Site}}
      serve:
        enabled: true
        category: Web
        namespace: {ns}
        fields:
          image: {{label: Image, required: true, order: 1}}
          size: {{label: Size, type: enum, enum: [small, large], order: 2}}
        tokens:
          console: {{permissions: {{global: ['*']}}}}
      operatorBox:
        reconcile:
          onReconcile:
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}-site', data: {{image: '{{{{ .spec.image }}}}'}}}}
",
        ns = ns.name
    );
    let (_dir, file) = crate::running::katalog_file(&ns, &katalog).await;
    let (_ork, addr) = crate::running::ork_run(
        &file,
        &ns,
        &[],
        &[("ORK_API_TOKEN", ""), ("ORK_SERVE_TOKEN", "console-token")],
    );
    let options = orkestra_control_center::Options {
        addr: "127.0.0.1:0".parse().unwrap(),
        runtimes: vec![
            orkestra_control_center::config::RuntimeConfig::new(&format!("http://{addr}"), Some("rt"), None).unwrap(),
        ],
        config_file: None,
        tokens: orkestra_control_center::runtimes::Tokens {
            serve: Some("console-token".into()),
            ..Default::default()
        },
        login: orkestra_control_center::login::Login::none(),
        hosts: Vec::new(),
        poll: Duration::from_millis(300),
        discovered: None,
        gateways: Vec::new(),
    };
    let cc = crate::control_center::serve(options).await;

    let driver = driver().await;
    let browser = browser(&driver).await;
    browser.goto(&format!("{cc}/r/rt")).await.unwrap();
    eventually("the create link", WAIT, || async {
        browser.goto(&format!("{cc}/r/rt")).await.ok()?;
        browser
            .source()
            .await
            .ok()?
            .contains("+ Create a custom resource")
            .then_some(())
    })
    .await
    .unwrap();
    click(&browser, "a.create").await;
    shows(&browser, "Create a custom resource on rt").await;
    click(&browser, "table.targets a").await;
    shows(&browser, "New Site through site").await;
    shoot(&browser, "7-create-form").await;

    // A name the API server refuses: the gateway's reason, the values kept.
    let form = browser.form(Locator::Css("form.create")).await.unwrap();
    form.set_by_name("image", "nginx:1.27").await.unwrap();
    form.set_by_name("name", "Not_A_Name").await.unwrap();
    form.submit().await.unwrap();
    shows(&browser, "the Serve API answered").await;
    assert!(browser.source().await.unwrap().contains("value=\"nginx:1.27\""));

    let form = browser.form(Locator::Css("form.create")).await.unwrap();
    form.set_by_name("name", "blog").await.unwrap();
    form.set_by_name("size", "large").await.unwrap();
    form.submit().await.unwrap();
    shows(&browser, &format!("Created Site {}/blog", ns.name)).await;
    shoot(&browser, "8-created").await;
    let site = orkestra_test_support::kubectl(&[
        "get",
        &format!("sites.{group}"),
        "-n",
        &ns.name,
        "blog",
        "-o",
        "jsonpath={.spec.image} {.spec.size} {.metadata.annotations.orkestra\\.orkspace\\.io/serve-target}",
    ])
    .unwrap();
    assert_eq!(site, "nginx:1.27 large site");
    // The runtime's page shows the gateway it serves: its CRD's target and its webhooks'
    // counts (serve's required fields are checked at admission too).
    browser.goto(&format!("{cc}/r/rt")).await.unwrap();
    shows(&browser, "(served by this runtime)").await;
    shows(&browser, "<td>site</td><td>site</td>").await;
    shows(&browser, "<div class=\"label\">allowed</div>").await;
}
