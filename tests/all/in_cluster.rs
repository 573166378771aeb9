//! The runtime as the Helm chart deploys it, against the real API server: the chart
//! installed with a Katalog and its `ork manifests` RBAC, then `ork run` started with the
//! chart's arguments, environment and mounted Katalog, as the chart's ServiceAccount through
//! the in-cluster configuration (host, port, token and CA files where the test puts them).
//! Reconciles, leader election, the webhooks' registration and the Live API work with
//! exactly that RBAC; what the chart grants is what the Katalog needs; a permission taken
//! away is named by the runtime; a `helm upgrade` with a changed Katalog applies live, and
//! one with a new image rolls to a replica that takes the Lease at once.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_test_support::{TestNamespace, eventually, kubectl_output, kubectl_with, namespace};
use serde_json::{Value, json};

use crate::helm::{release, said};
use crate::ork::Ork;
use crate::pipeline::WAIT;
use crate::replicas::free_port;

/// A Katalog of one CRD whose CRs each get a ConfigMap, with an admission rule the webhooks
/// enforce; `suffix` goes into every ConfigMap's value.
fn katalog(ns: &str, suffix: &str) -> String {
    format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: chart-{ns}}}
security:
  webhooks:
    admission: {{enabled: true}}
spec:
  crds:
    shop:
      apiTypes: {{group: {ns}.chart.orkestra.io, version: v1, kind: Shop, plural: shops}}
      namespace: {ns}
      admission:
        validation:
          rules:
            - {{field: spec.value, prefix: 'ok-', message: 'values start with ok-'}}
      operatorBox:
        reconcile:
          onReconcile:
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}-c', data: {{value: '{{{{ .spec.value }}}}{suffix}'}}}}
"
    )
}

/// The chart installed as release `ops` with `katalog(ns, "")` and its RBAC, the CRD
/// installed as a platform admin would; returns the folder with the inputs.
async fn install(ns: &TestNamespace) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let text = katalog(&ns.name, "");
    std::fs::write(dir.path().join("katalog.yaml"), &text).unwrap();
    let compiled = orkestra_katalog::load_sources(&[("katalog.yaml".into(), text)]).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    release("install", &ns.name, dir.path(), &[]);
    dir
}

fn kubectl(args: &[&str]) -> String {
    let cluster = orkestra_test_support::cluster().unwrap();
    kubectl_with(&cluster.kubeconfig, args).unwrap()
}

fn json_of(args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&kubectl(&args)).unwrap()
}

/// What a pod of the chart's runtime Deployment would have: its ServiceAccount's files
/// (a token `kubectl create token` makes, the cluster's CA, the namespace), its Katalog
/// mount (the ConfigMap's file, written once: a kubelet that never updates it), and the
/// command line and environment of its container, with the listen addresses on free
/// loopback ports.
struct Pod {
    /// The ServiceAccount's files, as the kubelet mounts them.
    secrets: std::path::PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    http: u16,
}

impl Pod {
    fn of_chart(ns: &str, dir: &Path, name: &str) -> Self {
        let secrets = crate::deploy::service_account_mount(dir, ns, &format!("{name}-serviceaccount"));
        let mount = dir.join(format!("{name}-katalog"));
        std::fs::create_dir_all(&mount).unwrap();
        let configmap = json_of(&["get", "configmap", "ops-orkestra-katalog", "-n", ns]);
        std::fs::write(
            mount.join("katalog.yaml"),
            configmap["data"]["katalog.yaml"].as_str().unwrap(),
        )
        .unwrap();

        let deployment = json_of(&["get", "deployment", "ops-orkestra", "-n", ns]);
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], "orkestra");
        let container = &pod["containers"][0];
        let (http, https) = (free_port(), free_port());
        let cache = dir.join(format!("{name}-cache"));
        let args = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let arg = a.as_str().unwrap();
                match arg {
                    "/etc/orkestra/katalog/katalog.yaml" => mount.join("katalog.yaml").display().to_string(),
                    "0.0.0.0:8080" => format!("127.0.0.1:{http}"),
                    "0.0.0.0:8443" => format!("127.0.0.1:{https}"),
                    other => other.to_string(),
                }
            })
            .collect();
        let mut env = Vec::new();
        for variable in container["env"].as_array().unwrap() {
            let key = variable["name"].as_str().unwrap().to_string();
            let value = match (&variable["value"], &variable["valueFrom"]) {
                (Value::String(value), _) if key == "ORK_CACHE_DIR" => {
                    assert_eq!(value, "/var/cache/orkestra");
                    cache.display().to_string()
                }
                (Value::String(value), _) => value.clone(),
                (_, from) if from["fieldRef"]["fieldPath"] == "metadata.name" => name.to_string(),
                (_, from) if from["fieldRef"]["fieldPath"] == "metadata.namespace" => ns.to_string(),
                (_, from) if from["secretKeyRef"].is_object() => {
                    let reference = &from["secretKeyRef"];
                    let secret = json_of(&["get", "secret", reference["name"].as_str().unwrap(), "-n", ns]);
                    let data = secret["data"][reference["key"].as_str().unwrap()].as_str().unwrap();
                    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data).unwrap()).unwrap()
                }
                (_, from) => panic!("an environment variable the test cannot give: {key} from {from}"),
            };
            env.push((key, value));
        }
        Self {
            secrets,
            args,
            env,
            http,
        }
    }

    /// `ork` with the pod's command line and environment, in-cluster configuration only.
    fn start(&self) -> Ork {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let mut command = crate::deploy::in_cluster(&self.secrets, &args);
        command
            .env("HOME", std::env::temp_dir())
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        let mut ork = Ork::spawn_command(command);
        ork.wait_for("Live API on", WAIT);
        ork
    }

    fn token(&self) -> &str {
        &self.env.iter().find(|(k, _)| k == "ORK_API_TOKEN").unwrap().1
    }

    /// `method path` on the Live API with the chart's token: the status and the body.
    async fn request(&self, method: reqwest::Method, path: &str) -> (u16, String) {
        let url = format!("http://127.0.0.1:{}{path}", self.http);
        let answer = reqwest::Client::new()
            .request(method, url)
            .bearer_auth(self.token())
            .send()
            .await
            .unwrap();
        (answer.status().as_u16(), answer.text().await.unwrap())
    }

    async fn get(&self, path: &str) -> (u16, String) {
        self.request(reqwest::Method::GET, path).await
    }

    async fn reload(&self) {
        let (status, body) = self.request(reqwest::Method::POST, "/reload").await;
        assert!((200..300).contains(&status), "{status}: {body}");
    }
}

/// The Shop CRs of `ns`.
fn shops(ns: &TestNamespace) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(&format!("{}.chart.orkestra.io", ns.name), "v1", "Shop");
    Api::namespaced_with(ns.client.clone(), &ns.name, &ApiResource::from_gvk(&gvk))
}

async fn create(ns: &TestNamespace, name: &str, value: &str) {
    let cr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}.chart.orkestra.io/v1", ns.name),
        "kind": "Shop",
        "metadata": {"name": name},
        "spec": {"value": value},
    }))
    .unwrap();
    shops(ns).create(&Default::default(), &cr).await.unwrap();
}

/// The value of the ConfigMap `name`, once it is `wanted`.
async fn configmap_holds(ns: &TestNamespace, name: &str, wanted: &str) {
    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    eventually(&format!("ConfigMap {name} holding {wanted}"), WAIT, || async {
        let data = configmaps.get_opt(name).await.ok()??.data?;
        (data.get("value").map(String::as_str) == Some(wanted)).then_some(())
    })
    .await
    .unwrap();
}

/// The condition `kind` of the CR `name`.
async fn condition(ns: &TestNamespace, name: &str, kind: &str) -> Option<Value> {
    let cr = shops(ns).get_opt(name).await.ok()??;
    let conditions = cr.data["status"]["conditions"].as_array()?.clone();
    conditions.into_iter().find(|c| c["type"] == kind)
}

#[tokio::test]
async fn the_runtime_runs_as_the_charts_service_account_and_names_a_permission_taken_away() {
    let ns = namespace("chart-run").await.unwrap();
    let dir = install(&ns).await;
    let pod = Pod::of_chart(&ns.name, dir.path(), "ops-orkestra-0");
    assert!(
        pod.args
            .windows(2)
            .any(|a| a[0] == "--katalog-configmap" && a[1] == format!("{}/ops-orkestra-katalog", ns.name)),
        "the chart has the runtime follow its Katalog's ConfigMap: {:?}",
        pod.args
    );
    let mut first = pod.start();

    // Reconciles, with exactly the chart's RBAC.
    create(&ns, "a", "ok-1").await;
    configmap_holds(&ns, "a-c", "ok-1").await;
    eventually("a Ready", WAIT, || async {
        (condition(&ns, "a", "Ready").await?["status"] == "True").then_some(())
    })
    .await
    .unwrap();
    // Leader election: the replica holds the Katalog's Lease.
    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), &ns.name);
    let lease = format!("orkestra-konductor-chart-{}", ns.name);
    let holder = leases.get(&lease).await.unwrap().spec.unwrap().holder_identity;
    assert_eq!(holder.as_deref(), Some("ops-orkestra-0"));
    // The webhooks registered themselves: kubectl is refused with the rule's message.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        format!(
            "apiVersion: {}.chart.orkestra.io/v1\nkind: Shop\nmetadata: {{name: bad, namespace: {}}}\nspec: {{value: nope}}\n",
            ns.name, ns.name
        ),
    )
    .unwrap();
    let cluster = orkestra_test_support::cluster().unwrap();
    let refused = kubectl_output(&cluster.kubeconfig, &["apply", "-f", bad.to_str().unwrap()]).unwrap();
    assert!(!refused.status.success(), "refused at admission");
    assert!(said(&refused).contains("values start with ok-"), "{}", said(&refused));
    // The Live API answers with the chart's token, and the check found nothing missing.
    let (code, health) = pod.get("/katalog/shop/health").await;
    assert_eq!(code, 200, "{health}");
    let health: Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["permissions"]["checked"], true, "{health}");
    assert_eq!(health["permissions"]["missing"], json!([]), "{health}");
    let (_, summary) = pod.get("/katalog").await;
    let summary: Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(
        summary["permissions"]["missing"],
        json!([]),
        "the runtime's own: {summary}"
    );
    assert!(
        !first.seen.iter().any(|l| l.contains("lacks a permission")),
        "{:?}",
        first.seen
    );

    // A helm upgrade with a changed Katalog applies live: the ConfigMap is followed, the
    // mounted file (never updated here) is not waited for, and the process stays.
    std::fs::write(dir.path().join("katalog.yaml"), katalog(&ns.name, "-v2")).unwrap();
    release("upgrade", &ns.name, dir.path(), &[]);
    configmap_holds(&ns, "a-c", "ok-1-v2").await;

    // A permission taken away: the runtime names it after the next reload, with the rule.
    let role = format!("orkestra:chart-{}", ns.name);
    let granted = json_of(&["get", "role", &role, "-n", &ns.name]);
    let mut narrowed = granted.clone();
    let mut rules = Vec::new();
    for rule in narrowed["rules"].as_array().unwrap() {
        let configmaps = rule["resources"].as_array().unwrap().contains(&json!("configmaps"));
        let creates = rule["verbs"].as_array().unwrap().contains(&json!("create"));
        if !(configmaps && creates && rule.get("resourceNames").is_none()) {
            rules.push(rule.clone());
            continue;
        }
        let mut others = rule.clone();
        others["resources"] = json!(
            rule["resources"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| *r != "configmaps")
                .collect::<Vec<_>>()
        );
        if !others["resources"].as_array().unwrap().is_empty() {
            rules.push(others);
        }
        let mut without = rule.clone();
        without["resources"] = json!(["configmaps"]);
        without["verbs"] = json!(
            rule["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| *v != "create")
                .collect::<Vec<_>>()
        );
        rules.push(without);
    }
    narrowed["rules"] = json!(rules);
    let replace = |role: &Value| {
        let file = dir.path().join("role.json");
        std::fs::write(&file, role.to_string()).unwrap();
        kubectl(&["replace", "-f", file.to_str().unwrap()]);
    };
    replace(&narrowed);
    pod.reload().await;
    let line = first.said("lacks a permission", WAIT);
    assert!(
        line.contains(&format!("create configmaps in namespace {}", ns.name)),
        "the log names the verb, resource and namespace: {line}"
    );
    let rule = format!(
        r#"Role in namespace {}: {{apiGroups: [""], resources: [configmaps], verbs: [create]}}"#,
        ns.name
    );
    let (_, health) = pod.get("/katalog/shop/health").await;
    let health: Value = serde_json::from_str(&health).unwrap();
    assert_eq!(
        health["permissions"]["missing"],
        json!([{"verb": "create", "group": "", "resource": "configmaps", "namespace": ns.name, "name": null, "rule": rule}]),
        "{health}"
    );
    let (_, metrics) = pod.get("/metrics").await;
    let series = format!(
        r#"orkestra_permission_missing{{controller="shop",verb="create",resource="configmaps",namespace="{}",name=""}} 1"#,
        ns.name
    );
    assert!(metrics.contains(&series), "{series} in:\n{metrics}");
    // A CR whose ConfigMap it may not create says why, and an Event names the rule.
    create(&ns, "b", "ok-2").await;
    let missing = eventually("b's PermissionMissing", WAIT, || async {
        condition(&ns, "b", "PermissionMissing")
            .await
            .filter(|c| c["status"] == "True")
    })
    .await
    .unwrap();
    assert_eq!(missing["reason"], "RBACMissing");
    assert_eq!(
        missing["message"],
        format!("the runtime may not create configmaps in namespace {}", ns.name)
    );
    let events = eventually("the PermissionMissing Event", WAIT, || async {
        let events = kubectl(&[
            "get",
            "events",
            "-n",
            &ns.name,
            "--field-selector",
            "reason=PermissionMissing",
            "-o",
            "jsonpath={.items[*].message}",
        ]);
        (!events.is_empty()).then_some(events)
    })
    .await
    .unwrap();
    assert!(events.contains(&rule), "the Event names the rule to add: {events}");

    // Granted again: the next reload finds nothing missing, and b gets its ConfigMap.
    let mut restored = granted.clone();
    restored["metadata"]["resourceVersion"] =
        json_of(&["get", "role", &role, "-n", &ns.name])["metadata"]["resourceVersion"].clone();
    replace(&restored);
    pod.reload().await;
    configmap_holds(&ns, "b-c", "ok-2-v2").await;
    eventually("b's PermissionMissing cleared", WAIT, || async {
        condition(&ns, "b", "PermissionMissing")
            .await
            .filter(|c| c["status"] == "False")
    })
    .await
    .unwrap();
    let (_, health) = pod.get("/katalog/shop/health").await;
    let health: Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["permissions"]["missing"], json!([]), "{health}");

    // A helm upgrade with a new image rolls the replicas one at a time (a new one first),
    // and the old one hands its Lease over on SIGTERM.
    release("upgrade", &ns.name, dir.path(), &["--set", "image.tag=next"]);
    let deployment = json_of(&["get", "deployment", "ops-orkestra", "-n", &ns.name]);
    let image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap();
    assert!(image.ends_with(":next"), "{image}");
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"],
        json!({"maxSurge": 1, "maxUnavailable": 0})
    );
    let next = Pod::of_chart(&ns.name, dir.path(), "ops-orkestra-1");
    let mut second = next.start();
    let status = first.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    eventually("the new replica holding the Lease", WAIT, || async {
        let holder = leases.get(&lease).await.ok()?.spec?.holder_identity;
        (holder.as_deref() == Some("ops-orkestra-1")).then_some(())
    })
    .await
    .unwrap();
    create(&ns, "c", "ok-3").await;
    configmap_holds(&ns, "c-c", "ok-3-v2").await;
    second.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
}

/// One row of `kubectl auth can-i --list`: resource, resource names, verbs.
type Grant = (String, String, String);

/// The rows of `kubectl auth can-i --list` for resources (non-resource URLs apart).
fn grants(listing: &str) -> Vec<Grant> {
    let row = regex::Regex::new(r"^(\S+)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]\s*$").unwrap();
    let mut rows: Vec<Grant> = listing
        .lines()
        .skip(1)
        .filter_map(|line| row.captures(line))
        .filter(|c| c[2].is_empty())
        .map(|c| (c[1].to_string(), c[3].to_string(), c[4].to_string()))
        .collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn what_the_chart_grants_is_what_the_katalog_needs_and_nothing_more() {
    let ns = namespace("chart-least").await.unwrap();
    let _dir = install(&ns).await;
    let me = format!("--as=system:serviceaccount:{}:orkestra", ns.name);
    let listing = kubectl(&["auth", "can-i", "--list", "-n", &ns.name, &me]);
    let group = format!("{}.chart.orkestra.io", ns.name);
    let katalog = format!("chart-{}", ns.name);
    let row = |resource: &str, names: &str, verbs: &str| (resource.to_string(), names.to_string(), verbs.to_string());
    let webhooks = format!("orkestra-gateway-{katalog}");
    let mut expected = vec![
        // The CRs: read, watched, their finalizers and status written.
        row(&format!("shops.{group}"), "", "get list patch update watch"),
        row(&format!("shops.{group}/status"), "", "get patch update"),
        row(&format!("shops.{group}/finalizers"), "", "update"),
        // The children the Katalog templates: applied, adopted, pruned, watched.
        row("configmaps", "", "create delete get list patch update watch"),
        // The Katalog's own ConfigMap, followed for helm upgrades (the chart's one Role).
        row("configmaps", "ops-orkestra-katalog", "get list watch"),
        // Events about the CRs written, and read back for the Live API.
        row("events.events.k8s.io", "", "create patch"),
        row("events", "", "list watch"),
        // Leader election.
        row(
            "leases.coordination.k8s.io",
            "",
            "create delete get list patch update watch",
        ),
        // The webhooks register their own two configurations, by name (a create cannot be).
        row(
            "mutatingwebhookconfigurations.admissionregistration.k8s.io",
            "",
            "create",
        ),
        row(
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
            "",
            "create",
        ),
        // Deletion protection and conversion settings on the Katalog's own CRD, by name.
        row(
            "customresourcedefinitions.apiextensions.k8s.io",
            &format!("shops.{group}"),
            "get patch",
        ),
        row(
            "mutatingwebhookconfigurations.admissionregistration.k8s.io",
            &webhooks,
            "delete get patch update",
        ),
        row(
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
            &webhooks,
            "delete get patch update",
        ),
        // What every authenticated user may (the runtime's permission check asks through
        // selfsubjectaccessreviews).
        row("selfsubjectreviews.authentication.k8s.io", "", "create"),
        row("selfsubjectaccessreviews.authorization.k8s.io", "", "create"),
        row("selfsubjectrulesreviews.authorization.k8s.io", "", "create"),
        row("clustertrustbundles.certificates.k8s.io", "", "get list watch"),
    ];
    expected.sort();
    assert_eq!(grants(&listing), expected, "kubectl auth can-i --list:\n{listing}");

    // No Secrets anywhere, and no kind the Katalog does not name.
    let cluster = orkestra_test_support::cluster().unwrap();
    for (verb, what, namespace) in [
        ("list", "secrets", None),
        ("get", "secrets", Some(ns.name.as_str())),
        ("list", "pods", Some(ns.name.as_str())),
        ("create", "deployments", Some(ns.name.as_str())),
        ("list", "configmaps", Some("default")),
        ("patch", "customresourcedefinitions", None),
    ] {
        let mut args = vec!["auth", "can-i", verb, what, me.as_str()];
        match namespace {
            Some(namespace) => args.extend(["-n", namespace]),
            None => args.push("--all-namespaces"),
        }
        let answer = kubectl_output(&cluster.kubeconfig, &args).unwrap();
        assert!(
            !answer.status.success(),
            "{verb} {what} in {namespace:?} is not granted"
        );
    }
}
