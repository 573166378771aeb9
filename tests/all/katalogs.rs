//! Every example Katalog under katalogs/, run as a user would: its CRDs installed, the
//! runtime started on it, its sample CRs applied, then the objects and status it promises
//! checked against the real API server.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_test_support::eventually;
use serde_json::{Value, json};

use crate::pipeline::WAIT;
use crate::running::{Running, katalogs_dir};

/// An example Katalog running, its sample CRs applied.
async fn example(name: &str) -> Running {
    let running = Running::start(name, &[katalogs_dir().join(name).join("katalog.yaml")], &[]).await;
    running.apply_samples().await;
    running
}

fn ready(status: &Value) -> bool {
    status["conditions"][0]["status"] == "True"
}

#[tokio::test]
async fn website_gets_a_deployment_a_service_and_its_url() {
    let example = example("website").await;
    let status = example
        .status(&example.crs("demo.orkestra.io", "Website"), "hello", ready)
        .await;
    assert_eq!(status["url"], format!("http://hello.{}.svc", example.ns.name));
    let deployment = example.api::<Deployment>().get("hello").await.unwrap();
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(
        spec.template.spec.unwrap().containers[0].image.as_deref(),
        Some("nginx:1.27")
    );
    assert!(example.api::<Service>().get_opt("hello").await.unwrap().is_some());
    example.stop().await;
}

#[tokio::test]
async fn tiers_scale_what_each_app_gets_and_admission_guards_the_tier() {
    let example = example("tiers").await;
    let apps = example.crs("tiers.orkestra.io", "App");
    for name in ["hobby", "shop", "bank"] {
        example.status(&apps, name, ready).await;
    }
    let hpas = Api::<DynamicObject>::namespaced_with(
        example.ns.client.clone(),
        &example.ns.name,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("autoscaling", "v2", "HorizontalPodAutoscaler"),
            "horizontalpodautoscalers",
        ),
    );
    let pdbs = Api::<DynamicObject>::namespaced_with(
        example.ns.client.clone(),
        &example.ns.name,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("policy", "v1", "PodDisruptionBudget"),
            "poddisruptionbudgets",
        ),
    );
    let replicas = |d: Deployment| d.spec.and_then(|s| s.replicas);
    let deployments = example.api::<Deployment>();
    assert_eq!(
        replicas(deployments.get("hobby").await.unwrap()),
        Some(1),
        "free is pinned to one"
    );
    assert_eq!(replicas(deployments.get("shop").await.unwrap()), Some(3));
    assert!(hpas.get_opt("hobby").await.unwrap().is_none());
    assert_eq!(hpas.get("shop").await.unwrap().data["spec"]["maxReplicas"], 5);
    assert_eq!(hpas.get("bank").await.unwrap().data["spec"]["maxReplicas"], 20);
    assert!(pdbs.get_opt("shop").await.unwrap().is_none());
    assert!(pdbs.get_opt("bank").await.unwrap().is_some());
    let service_type = |s: Service| s.spec.and_then(|s| s.type_);
    let services = example.api::<Service>();
    assert_eq!(
        service_type(services.get("bank").await.unwrap()).as_deref(),
        Some("LoadBalancer")
    );
    assert_eq!(
        service_type(services.get("shop").await.unwrap()).as_deref(),
        Some("ClusterIP")
    );
    let limits = example
        .api::<ConfigMap>()
        .get("hobby-limits")
        .await
        .unwrap()
        .data
        .unwrap();
    assert_eq!(limits["maxRequestsPerMinute"], "600");
    assert_eq!(apps.get("bank").await.unwrap().data["status"]["autoscaled"], true);

    // Admission: a missing tier defaults to free; an unknown one is denied by name.
    let create = |name: &str, spec: Value| {
        serde_json::from_value::<DynamicObject>(json!({
            "apiVersion": "tiers.orkestra.io/v1", "kind": "App", "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap()
    };
    apps.create(&Default::default(), &create("plain", json!({"image": "nginx:1.27"})))
        .await
        .unwrap();
    let status = example.status(&apps, "plain", ready).await;
    assert_eq!(status["tier"], "free");
    apps.create(
        &Default::default(),
        &create("odd", json!({"image": "nginx:1.27", "tier": "gold"})),
    )
    .await
    .unwrap();
    let status = example
        .status(&apps, "odd", |s| s["conditions"][0]["status"] == "False")
        .await;
    let message = status["conditions"][0]["message"].as_str().unwrap();
    assert!(
        message.contains(r#"spec.tier must be free, pro or enterprise, not "gold""#),
        "{message}"
    );
    assert!(deployments.get_opt("odd").await.unwrap().is_none());
    example.stop().await;
}

#[tokio::test]
async fn gated_reports_build_on_spec_changes_and_never_while_paused() {
    let example = example("gated").await;
    let reports = example.crs("gated.orkestra.io", "Report");
    let status = example
        .status(&reports, "weekly", |s| s["lastBuiltGeneration"] == 1)
        .await;
    assert!(ready(&status));
    let jobs = example.api::<Job>();
    assert!(jobs.get_opt("weekly-1").await.unwrap().is_some());
    // A label edit does not bump the generation: no rebuild. A spec edit does.
    reports
        .patch(
            "weekly",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "x"}}})),
        )
        .await
        .unwrap();
    reports
        .patch(
            "weekly",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"title": "Weekly v2"}})),
        )
        .await
        .unwrap();
    example
        .status(&reports, "weekly", |s| s["lastBuiltGeneration"] == 2)
        .await;
    assert!(jobs.get_opt("weekly-2").await.unwrap().is_some());
    assert!(
        jobs.get_opt("weekly-3").await.unwrap().is_none(),
        "the label edit built nothing"
    );
    let frozen = reports.get("frozen").await.unwrap();
    assert!(frozen.data["status"].is_null(), "a paused report is never reconciled");
    assert!(jobs.get_opt("frozen-1").await.unwrap().is_none());
    example.stop().await;
}

#[tokio::test]
async fn config_watch_sites_read_their_settings_and_react_to_edits() {
    let example = example("config-watch").await;
    let sites = example.crs("watch.orkestra.io", "Site");
    let status = example.status(&sites, "blog", ready).await;
    assert_eq!(status["phase"], "Configured");
    let deployment = example.api::<Deployment>().get("blog").await.unwrap();
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    let env_from = container.env_from.clone().unwrap();
    assert_eq!(env_from[0].config_map_ref.as_ref().unwrap().name, "blog-settings");
    // Deleting the Deployment by hand and then editing the settings: the watch reconciles
    // the Site named by the label, which brings its Deployment back.
    let deployments = example.api::<Deployment>();
    deployments.delete("blog", &Default::default()).await.unwrap();
    example
        .api::<ConfigMap>()
        .patch(
            "blog-settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"THEME": "light"}})),
        )
        .await
        .unwrap();
    eventually("the Deployment back", WAIT, || async {
        deployments.get_opt("blog").await.ok().flatten()
    })
    .await
    .unwrap();
    example.stop().await;
}

#[tokio::test]
async fn pipeline_runs_build_then_test_as_jobs_finish() {
    let example = example("pipeline").await;
    let pipelines = example.crs("ci.orkestra.io", "Pipeline");
    // The Jobs' Pods run on a simulated node and succeed: nothing is finished by hand. The
    // phase moves to Running/test only once build's Job succeeded, and to Succeeded only
    // once test's did, so reaching it means both ran, one after the other.
    let status = example
        .status(&pipelines, "release", |s| {
            s["phase"] == "Succeeded" && s["currentStep"] == ""
        })
        .await;
    assert_eq!(status["image"], "busybox:1.36", "{status}");
    example.stop().await;
}

#[tokio::test]
async fn config_copy_copies_the_watched_configmap_and_copies_it_again_when_it_changes() {
    let example = example("config-copy").await;
    assert_eq!(
        example.katalog.crds["sharedConfig"].entry.api_types.plural, "sharedconfigs",
        "apiTypes came from crd.yaml"
    );
    let shared = example.crs("copy.orkestra.io", "SharedConfig");
    // No status subresource: the status is written through the object, without
    // observedGeneration (each write moves the generation).
    let status = example.status(&shared, "shared", ready).await;
    assert_eq!(status["copiedFrom"], "settings");
    assert!(status["conditions"][0].get("observedGeneration").is_none(), "{status}");
    let configs = example.api::<ConfigMap>();
    let copy = configs.get("shared-copy").await.unwrap();
    let data = copy.data.clone().unwrap();
    assert_eq!(
        (
            data["logLevel"].as_str(),
            data["region"].as_str(),
            data["copiedBy"].as_str()
        ),
        ("info", "eu-west-1", "orkestra")
    );
    assert_eq!(
        copy.metadata.labels.unwrap()["copy.orkestra.io/of"],
        "settings",
        "a label written as {{key, value}}"
    );
    for item in ["alpha", "beta"] {
        let extra = configs.get(&format!("shared-{item}")).await.unwrap();
        assert_eq!(extra.data.unwrap()["extra"], item, "forEach with as: item");
    }

    // Settled: resyncs and the status written through the object cost no write.
    let counters = example.counters("sharedConfig");
    let writes = || counters.writes.load(std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let settled = writes();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(writes(), settled, "a settled SharedConfig writes nothing");

    // An edit to the source reaches the copy through the watch.
    configs
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"logLevel": "debug"}})),
        )
        .await
        .unwrap();
    eventually("the copy to follow its source", WAIT, || async {
        let copy = configs.get("shared-copy").await.ok()?;
        (copy.data?.get("logLevel")?.as_str() == "debug").then_some(())
    })
    .await
    .unwrap();

    // A CR may not send the copy to read another namespace.
    example
        .create(
            &shared,
            "SharedConfig",
            "thief",
            json!({"source": "kube-root-ca.crt", "sourceNamespace": "kube-system"}),
        )
        .await;
    let refused = example
        .status(&shared, "thief", |s| s["conditions"][0]["status"] == "False")
        .await;
    assert_eq!(refused["conditions"][0]["reason"], "CopySourceFailed", "{refused}");
    assert!(
        refused["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .contains("kube-system"),
        "{refused}"
    );
    assert!(configs.get_opt("thief-copy").await.unwrap().is_none());
    example.stop().await;
}

#[tokio::test]
async fn secret_spread_copies_into_the_allowed_namespaces_it_names_and_cleans_up_after_itself() {
    let client = orkestra_test_support::client().await.unwrap();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("spread.orkestra.io", "v1", "SecretSpread"),
        "secretspreads",
    );
    let spreads = Api::<DynamicObject>::all_with(client.clone(), &resource);
    // Cluster-scoped objects outlive a test's namespace: start from none left by a past run
    // (whose runtime is gone, so its finalizer is taken off by hand).
    for name in ["db-credentials", "greedy"] {
        let unfinalized = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        let _ = spreads.patch(name, &PatchParams::default(), &unfinalized).await;
        let _ = spreads.delete(name, &Default::default()).await;
    }
    eventually("old spreads to go", WAIT, || async {
        // Before the first run the kind is not even served.
        spreads
            .list(&Default::default())
            .await
            .map_or(true, |list| list.items.is_empty())
            .then_some(())
    })
    .await
    .unwrap();
    let example = example("secret-spread").await;
    let secrets = |ns: &str| Api::<Secret>::namespaced(client.clone(), ns);
    let password = |secret: Secret| String::from_utf8(secret.data.unwrap()["password"].0.clone()).unwrap();
    for ns in ["team-alpha", "team-beta"] {
        let copy = eventually("the copy", WAIT, || async {
            secrets(ns).get_opt("db-credentials").await.ok()?
        })
        .await
        .unwrap();
        assert_eq!(password(copy), "first-password", "{ns}");
    }
    let spread = eventually("Ready", WAIT, || async {
        let spread = spreads.get("db-credentials").await.ok()?;
        ready(&spread.data["status"]).then_some(spread)
    })
    .await
    .unwrap();
    assert_eq!(spread.data["status"]["copiedTo"], "team-alpha,team-beta");

    // An edit to the source reaches every copy through the watch.
    secrets("platform")
        .patch(
            "db-credentials",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"password": "second-password"}})),
        )
        .await
        .unwrap();
    for ns in ["team-alpha", "team-beta"] {
        eventually("the copy to follow its source", WAIT, || async {
            (password(secrets(ns).get("db-credentials").await.ok()?) == "second-password").then_some(())
        })
        .await
        .unwrap();
    }

    // A shorter list takes the copy out of the namespace it no longer names.
    spreads
        .patch(
            "db-credentials",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"targetNamespaces": ["team-alpha"]}})),
        )
        .await
        .unwrap();
    eventually("the dropped copy to go", WAIT, || async {
        secrets("team-beta")
            .get_opt("db-credentials")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await
    .unwrap();

    // A spread may not send a copy where the Katalog does not allow, and writes nothing.
    let greedy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "spread.orkestra.io/v1", "kind": "SecretSpread", "metadata": {"name": "greedy"},
        "spec": {"secretName": "db-credentials", "sourceNamespace": "platform",
                 "targetNamespaces": ["team-alpha", example.ns.name]},
    }))
    .unwrap();
    spreads.create(&Default::default(), &greedy).await.unwrap();
    let refused = eventually("the refusal", WAIT, || async {
        let status = spreads.get("greedy").await.ok()?.data["status"].clone();
        (status["conditions"][0]["status"] == "False").then_some(status)
    })
    .await
    .unwrap();
    assert_eq!(refused["conditions"][0]["reason"], "NamespaceRefused", "{refused}");
    assert!(
        refused["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .contains(&example.ns.name),
        "{refused}"
    );
    assert!(
        secrets(&example.ns.name)
            .get_opt("db-credentials")
            .await
            .unwrap()
            .is_none()
    );

    // Deleting the spread deletes its copies (no owner reference can reach across
    // namespaces), and leaves the source alone.
    for name in ["greedy", "db-credentials"] {
        spreads.delete(name, &Default::default()).await.unwrap();
    }
    eventually("the copies to go", WAIT, || async {
        secrets("team-alpha")
            .get_opt("db-credentials")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await
    .unwrap();
    assert!(secrets("platform").get_opt("db-credentials").await.unwrap().is_some());
    example.stop().await;
}

#[tokio::test]
async fn wait_for_database_connects_an_app_only_once_an_event_says_its_database_is_ready() {
    let example = example("wait-for-database").await;
    let apps = example.crs("events.orkestra.io", "App");
    let maps = example.api::<ConfigMap>();
    // The gate holds both Apps: no child, no status.
    eventually("the CRD gated", WAIT, || async {
        let state = example.inspect.health.get("app")?.state;
        (state == orkestra::outcome::health::State::Gated).then_some(())
    })
    .await
    .unwrap();
    for app in ["shop", "blog"] {
        let cr = apps.get(app).await.unwrap();
        assert!(cr.data["status"]["phase"].is_null(), "{app}: {}", cr.data["status"]);
        assert!(maps.get_opt(&format!("{app}-database")).await.unwrap().is_none());
    }
    // The sample Event, in the Apps' namespace: the orders database is up.
    let text = std::fs::read_to_string(katalogs_dir().join("wait-for-database/samples/orders-ready.yaml"))
        .unwrap()
        .replace("namespace: default", &format!("namespace: {}", example.ns.name));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("event.yaml"), text).unwrap();
    example.apply(&dir.path().join("event.yaml")).await;
    let status = example.status(&apps, "shop", |s| s["phase"] == "Connected").await;
    assert_eq!(status["database"], "orders");
    assert_eq!(
        status["readyNote"], "the orders database accepts connections",
        "the status fields see the Event that brought the run"
    );
    let url = eventually("the shop's database ConfigMap", WAIT, || async {
        maps.get_opt("shop-database").await.ok()??.data?.get("url").cloned()
    })
    .await
    .unwrap();
    assert_eq!(url, format!("postgres://orders.{}.svc:5432/shop", example.ns.name));
    // The blog's database is another: it still waits.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(apps.get("blog").await.unwrap().data["status"]["phase"].is_null());
    assert!(maps.get_opt("blog-database").await.unwrap().is_none());
    // Connected, the shop follows its spec without another Event.
    apps.patch(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"databaseRef": "orders-v2"}})),
    )
    .await
    .unwrap();
    let status = example.status(&apps, "shop", |s| s["database"] == "orders-v2").await;
    assert_eq!(status["phase"], "Connected");
    assert_eq!(
        status["readyNote"], "the orders database accepts connections",
        "a run with no Event leaves what the Event said"
    );
    example.stop().await;
}
