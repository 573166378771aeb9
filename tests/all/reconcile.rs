//! The declarative reconciler against the real API server: children created with owner
//! references and our labels, onCreate left alone and onReconcile drift-corrected, deleted
//! children recreated, other owners' objects never touched, DeleteIfOwned when a condition
//! stops holding, status from `.children`, and no writes in a steady state.

use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use orkestra_test_support::eventually;
use serde_json::{Value, json};

use crate::pipeline::{Harness, WAIT, crd};

const BOX: &str = "        reconcile:
          resync: 1s
          onCreate:
            configMaps:
              - {name: '{{ .metadata.name }}-once', data: {x: '1'}}
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-kept', data: {x: '{{ .spec.x }}'}}
            services:
              - {name: '{{ .metadata.name }}', port: 80, when: [{field: spec.exposed, equals: 'true'}]}
        emit:
          status:
            fields:
              - {path: kept, value: '{{ .children.configmap.data.x }}'}
";

async fn data(configmaps: &Api<ConfigMap>, name: &str) -> Option<String> {
    configmaps
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|c| c.data)
        .and_then(|d| d.get("x").cloned())
}

/// The Ready condition of App `name` once it is False.
async fn not_ready(h: &Harness, name: &str) -> serde_json::Value {
    eventually("Ready=False", WAIT, || async {
        let app = h.api("App").get(name).await.ok()?;
        let ready = app.data["status"]["conditions"][0].clone();
        (ready["status"] == "False").then_some(ready)
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn children_are_owned_drift_corrected_recreated_and_status_reads_them() {
    let h = Harness::start("children", &crd("app", "App", BOX), &[], true).await;
    h.create("App", "a", json!({"x": "1", "exposed": true})).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let services: Api<Service> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    // Children are applied one kind after another (Services before ConfigMaps): wait for both.
    let kept = eventually("the children", WAIT, || async {
        services.get_opt("a").await.ok().flatten()?;
        configmaps.get_opt("a-kept").await.ok().flatten()
    })
    .await
    .unwrap();
    let owner = &kept.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("App", "a", Some(true))
    );
    let labels = kept.metadata.labels.clone().unwrap();
    assert_eq!(
        (
            labels["orkestra-owner"].as_str(),
            labels["orkestra.orkspace.io/managed"].as_str()
        ),
        ("a", "true")
    );
    eventually("status from .children", WAIT, || async {
        let app = h.api("App").get("a").await.ok()?;
        (app.data["status"]["kept"] == "1" && app.data["status"]["conditions"][0]["status"] == "True").then_some(())
    })
    .await
    .unwrap();

    // Hand edits: the onCreate child keeps them, the onReconcile child is corrected.
    for name in ["a-once", "a-kept"] {
        configmaps
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"x": "by-hand"}})),
            )
            .await
            .unwrap();
    }
    eventually("drift correction", WAIT, || async {
        (data(&configmaps, "a-kept").await.as_deref() == Some("1")).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(
        data(&configmaps, "a-once").await.as_deref(),
        Some("by-hand"),
        "onCreate children are never updated"
    );

    // A deleted onReconcile child comes back.
    configmaps.delete("a-kept", &DeleteParams::default()).await.unwrap();
    eventually("recreation", WAIT, || async { data(&configmaps, "a-kept").await })
        .await
        .unwrap();

    // The condition of the Service stops holding: the Service we own goes.
    h.patch("App", "a", json!({"spec": {"exposed": false}})).await;
    eventually("DeleteIfOwned", WAIT, || async {
        matches!(services.get_opt("a").await, Ok(None)).then_some(())
    })
    .await
    .unwrap();
    h.stop().await;
}

#[tokio::test]
async fn an_object_we_did_not_create_is_never_touched_and_the_cr_says_why() {
    let h = Harness::start("not-owned", &crd("app", "App", BOX), &[], true).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let theirs: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "b-kept"}, "data": {"x": "theirs"}})).unwrap();
    configmaps.create(&PostParams::default(), &theirs).await.unwrap();
    h.create("App", "b", json!({"x": "1", "exposed": false})).await;
    let condition = not_ready(&h, "b").await;
    assert_eq!(condition["reason"], "NotOwned");
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("ConfigMap b-kept already exists and was not created for this App"),
        "{condition}"
    );
    assert_eq!(data(&configmaps, "b-kept").await.as_deref(), Some("theirs"));
    h.stop().await;
}

#[tokio::test]
async fn a_new_child_costs_one_write_and_no_read_while_a_name_taken_by_another_is_read_and_left_alone() {
    let (h, tally) = Harness::start_counted("no-read", &crd("app", "App", BOX)).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let theirs: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "taken-kept"}, "data": {"x": "theirs"}})).unwrap();
    configmaps.create(&PostParams::default(), &theirs).await.unwrap();
    // Until the watch of ConfigMaps has listed, a child it does not hold is read first.
    eventually("the children's watch listed", WAIT, || async {
        h.handle("app").children.holds_all("v1", "ConfigMap").then_some(())
    })
    .await
    .unwrap();
    let fresh = ["a", "b", "c"];
    for name in fresh.iter().chain(&["taken"]) {
        h.create("App", name, json!({"x": "1", "exposed": false})).await;
    }
    for name in fresh {
        eventually("Ready", WAIT, || async {
            let app = h.api("App").get(name).await.ok()?;
            (app.data["status"]["conditions"][0]["status"] == "True").then_some(())
        })
        .await
        .unwrap();
    }
    assert_eq!(not_ready(&h, "taken").await["reason"], "NotOwned");

    let (get, patch) = (http::Method::GET, http::Method::PATCH);
    for name in fresh {
        for child in [format!("/configmaps/{name}-once"), format!("/configmaps/{name}-kept")] {
            assert_eq!(tally.count(&get, &child), 0, "no read before creating {child}");
            assert_eq!(tally.count(&patch, &child), 1, "one apply made {child}");
        }
    }
    assert_eq!(tally.count(&get, "/configmaps/taken-once"), 0);
    assert!(
        tally.count(&get, "/configmaps/taken-kept") >= 1,
        "a name someone else holds is read, to say whose it is"
    );
    let kept = configmaps.get("taken-kept").await.unwrap();
    assert_eq!(kept.data.unwrap()["x"], "theirs");
    assert!(kept.metadata.owner_references.is_none(), "not adopted");
    assert!(kept.metadata.labels.is_none(), "not labelled");
    let managers: Vec<_> = kept
        .metadata
        .managed_fields
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.manager)
        .collect();
    assert!(
        managers.iter().all(|m| !m.starts_with("orkestra")),
        "no field of it is ours: {managers:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_steady_state_resync_writes_nothing() {
    let h = Harness::start("steady", &crd("app", "App", BOX), &[], true).await;
    h.create("App", "c", json!({"x": "1", "exposed": true})).await;
    let writes = &h.handle("app").counters.writes;
    eventually("the first reconcile's writes", WAIT, || async {
        let app = h.api("App").get("c").await.ok()?;
        (app.data["status"]["kept"] == "1").then_some(())
    })
    .await
    .unwrap();
    // Let the status write's own watch event come back and settle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (before, reconciles) = (
        writes.load(Ordering::Relaxed),
        h.handle("app").counters.reconciles.load(Ordering::Relaxed),
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after_reconciles = h.handle("app").counters.reconciles.load(Ordering::Relaxed);
    assert!(
        after_reconciles >= reconciles + 3,
        "resyncs reconciled ({reconciles} → {after_reconciles})"
    );
    assert_eq!(writes.load(Ordering::Relaxed), before, "no write in a steady state");
    h.stop().await;
}

#[tokio::test]
async fn a_deny_rule_creates_no_children_and_says_which_rule_while_defaults_are_persisted() {
    let crds = format!(
        "{}      admission:
        validation:
          rules:
            - {{field: spec.x, notEquals: forbidden, message: 'x may not be {{{{ .spec.x }}}}'}}
            - {{field: spec.exposed, equals: 'false', action: warn, message: exposing is discouraged}}
        mutation:
          rules:
            - {{field: spec.owner, default: platform}}
",
        crd("app", "App", BOX)
    );
    let h = Harness::start("deny", &crds, &[], true).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    h.create("App", "d", json!({"x": "forbidden", "exposed": true})).await;
    let status = eventually("Ready=False", WAIT, || async {
        let app = h.api("App").get("d").await.ok()?;
        (app.data["status"]["conditions"][0]["status"] == "False").then(|| app.data["status"].clone())
    })
    .await
    .unwrap();
    let condition = |kind: &str| {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} condition in {status}"))
    };
    assert!(
        condition("Ready")["message"]
            .as_str()
            .unwrap()
            .contains("field \"spec.x\": x may not be forbidden"),
        "{status}"
    );
    assert_eq!(condition("ValidationFailed")["status"], "True");
    assert_eq!(condition("ValidationFailed")["reason"], "DenyRuleViolation");
    assert_eq!(condition("ValidationWarning")["reason"], "WarnRuleViolation");
    assert!(
        configmaps
            .list(&kube::api::ListParams::default().labels("orkestra-owner=d"))
            .await
            .unwrap()
            .items
            .is_empty(),
        "a denied CR gets no children"
    );
    let app = h.api("App").get("d").await.unwrap();
    assert_eq!(
        app.data["spec"]["owner"], "platform",
        "the default is written to the CR"
    );

    // Fixing the field lets the reconcile through and clears the deny.
    h.patch("App", "d", json!({"spec": {"x": "fine", "exposed": false}}))
        .await;
    eventually("the children after the fix", WAIT, || async {
        data(&configmaps, "d-kept").await
    })
    .await
    .unwrap();
    let status = eventually("Ready=True", WAIT, || async {
        let app = h.api("App").get("d").await.ok()?;
        (app.data["status"]["conditions"][0]["status"] == "True").then(|| app.data["status"].clone())
    })
    .await
    .unwrap();
    let failed = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ValidationFailed")
        .cloned()
        .unwrap();
    assert_eq!(
        (failed["status"].as_str(), failed["reason"].as_str()),
        (Some("False"), Some("ValidationPassed"))
    );
    h.stop().await;
}

#[tokio::test]
async fn a_sentinel_reaches_every_stage_of_the_run_its_event_brought() {
    // Declared once in preReconcile, asked in a status field's `when` (the function) and in
    // a template (`.sentinels`): true in the run a label change brought, false in others.
    let operator_box = "        preReconcile:
          sentinels: [labelsChanged]
        reconcile:
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-c', data: {x: '{{ .spec.x }}'}}
        emit:
          status:
            fields:
              - path: relabelled
                value: '{{ .metadata.labels.tier }}'
                when: [{field: '{{ labelsChanged }}', equals: 'true'}]
              - path: cause
                value: '{{ if .sentinels.labelsChanged }}labels{{ else }}other{{ end }}'
";
    let h = Harness::start("sentinel-stages", &crd("app", "App", operator_box), &[], true).await;
    h.create("App", "s", json!({"x": "1"})).await;
    let status = |check: fn(&Value) -> bool| {
        let api = h.api("App");
        async move {
            eventually("the status", WAIT, || async {
                let status = api.get("s").await.ok()?.data["status"].clone();
                check(&status).then_some(status)
            })
            .await
            .unwrap()
        }
    };
    let first = status(|s| s["conditions"][0]["status"] == "True").await;
    assert!(first["relabelled"].is_null(), "{first}");
    h.patch("App", "s", json!({"metadata": {"labels": {"tier": "gold"}}}))
        .await;
    let relabelled = status(|s| s["relabelled"] == "gold").await;
    assert_eq!(relabelled["cause"], "labels", "{relabelled}");
    h.patch("App", "s", json!({"spec": {"x": "2"}})).await;
    let changed = status(|s| s["observedGeneration"] == 2).await;
    assert_eq!(changed["cause"], "other", "{changed}");
    assert_eq!(changed["relabelled"], "gold", "kept: its when did not hold");
    h.stop().await;
}

/// The stamp annotations of `name`, parsed (`health`, `metrics`), where it has them.
async fn stamps_of(api: &Api<DynamicObject>, name: &str) -> (Option<Value>, Option<Value>) {
    let cr = api.get(name).await.unwrap();
    let notes = cr.metadata.annotations.unwrap_or_default();
    let parsed = |key: &str| notes.get(key).and_then(|text| serde_json::from_str(text).ok());
    (
        parsed("orkestra.orkspace.io/health"),
        parsed("orkestra.orkspace.io/cross-metrics"),
    )
}

#[tokio::test]
async fn every_cr_shows_health_and_metrics_stamped_with_its_writes_and_a_settled_one_costs_none() {
    // Neither box reads `.health` or `.metrics`: the stamps are there for people to see.
    let shown = "        reconcile:
          resync: 100ms
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-c', data: {x: '{{ .spec.x }}'}}
";
    let quiet = format!("        runtime: {{stamps: false}}\n{shown}");
    let crds = crd("app", "App", shown) + &crd("quiet", "Quiet", &quiet);
    let h = Harness::start("stamps", &crds, &[], true).await;
    h.create("App", "a", json!({"x": "1"})).await;
    h.create("Quiet", "q", json!({"x": "1"})).await;
    let apps = h.api("App");
    let (health, metrics) = eventually("a's stamps", WAIT, || async {
        match stamps_of(&apps, "a").await {
            (Some(health), Some(metrics)) => Some((health, metrics)),
            _ => None,
        }
    })
    .await
    .unwrap();
    assert_eq!(
        (&health["state"], &health["healthy"], &health["consecutiveFails"]),
        (&json!("healthy"), &json!(true), &json!(0)),
        "{health}"
    );
    assert_eq!(metrics["errorRatePercent"], 0, "{metrics}");
    assert!(metrics["workers"].as_u64().is_some_and(|w| w > 0), "{metrics}");

    // Settled, resynced ten times a second: not one write, stamps included.
    h.writes_nothing_once_settled("app").await;

    // A change writes the ConfigMap and the status; the stamps, unchanged, cost nothing more.
    // Nor does a resync that comes as the change is written, before the watch brings the
    // write back: it reads what was written (three changes, for a resync to fall in one;
    // before the runtime read its writes back, about one run in three wrote a status twice).
    let counters = &h.handle("app").counters;
    for generation in 2..=4 {
        let before = counters.writes.load(Ordering::Relaxed);
        h.patch("App", "a", json!({"spec": {"x": generation.to_string()}}))
            .await;
        let apps = apps.clone();
        eventually("the change's status", WAIT, || async {
            let status = apps.get("a").await.ok()?.data["status"].clone();
            (status["observedGeneration"] == generation).then_some(())
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let written = counters.writes.load(Ordering::Relaxed) - before;
        assert_eq!(
            written, 2,
            "generation {generation}: the ConfigMap and the status, nothing more"
        );
    }

    // Switched off: the other CRD's CR is reconciled and carries none.
    let quiets = h.api("Quiet");
    eventually("q's status", WAIT, || async {
        let status = quiets.get("q").await.ok()?.data["status"].clone();
        (status["conditions"][0]["status"] == "True").then_some(())
    })
    .await
    .unwrap();
    assert_eq!(stamps_of(&quiets, "q").await, (None, None), "runtime.stamps: false");
    h.stop().await;
}

#[tokio::test]
async fn stamped_health_feeds_the_next_gate_a_circuit_breaker() {
    // Every reconcile of this CR fails (its ConfigMap name is taken); the gate reads the
    // failures stamped on the CR and stops the retries once three are stamped (a retry
    // already dequeued when the stamp lands may still run).
    // Stamps off: only what the Katalog reads is stamped.
    let operator_box = format!(
        "        runtime: {{stamps: false}}
        preReconcile:
          reconcileGate:
            when: [{{field: health.consecutiveFails, lessThan: '3', valueType: int}}]
{BOX}"
    );
    let h = Harness::start("feedback", &crd("app", "App", &operator_box), &[], true).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let taken: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "f-kept"}})).unwrap();
    configmaps.create(&PostParams::default(), &taken).await.unwrap();
    h.create("App", "f", json!({"x": "1", "exposed": false})).await;
    let stamp = eventually("the breaker open", WAIT, || async {
        let app = h.api("App").get("f").await.ok()?;
        let health = app
            .metadata
            .annotations
            .as_ref()?
            .get("orkestra.orkspace.io/health")?
            .clone();
        let health: serde_json::Value = serde_json::from_str(&health).ok()?;
        (health["consecutiveFails"].as_u64()? >= 3).then_some(health)
    })
    .await
    .unwrap();
    assert_eq!(stamp["healthy"], false);
    let app = h.api("App").get("f").await.unwrap();
    assert!(
        !app.metadata
            .annotations
            .unwrap()
            .contains_key("orkestra.orkspace.io/cross-metrics"),
        "with stamps off, metrics are stamped only where the Katalog reads them"
    );
    // With the gate closed, resyncs (every second) no longer reach the reconciler.
    let counters = &h.handle("app").counters;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let failures = counters.failures.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        counters.failures.load(Ordering::Relaxed),
        failures,
        "no reconcile past the breaker"
    );
    assert!(counters.gated.load(Ordering::Relaxed) > 0, "the gate held items back");
    h.stop().await;
}

#[tokio::test]
async fn a_drifted_pod_is_recreated_and_a_once_secret_is_kept_until_it_rotates() {
    let operator_box = "        reconcile:
          resync: 1s
          onReconcile:
            pods:
              - {image: 'busybox:1.36', command: [sleep, '3600']}
            secrets:
              - {once: true, rotateAfter: 4s, data: {password: '{{ randomAlphanumeric 16 }}'}}
";
    let h = Harness::start("replace", &crd("app", "App", operator_box), &[], true).await;
    h.create("App", "r", json!({})).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let first_pod = eventually("the pod", WAIT, || async { pods.get_opt("r-pod").await.ok().flatten() })
        .await
        .unwrap();
    let first_secret = eventually("the secret", WAIT, || async {
        secrets.get_opt("r-secret").await.ok().flatten()
    })
    .await
    .unwrap();
    let generated = |s: &k8s_openapi::api::core::v1::Secret| {
        s.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("orkestra.orkspace.io/generated-at").cloned())
    };
    assert!(
        generated(&first_secret).is_some(),
        "a rotating secret records when it was generated"
    );

    // A hand edit of the image: a Pod cannot take most spec changes in place, so it is replaced.
    pods.patch(
        "r-pod",
        &PatchParams::default(),
        &Patch::Strategic(json!({"spec": {"containers": [{"name": "r", "image": "busybox:1.35"}]}})),
    )
    .await
    .unwrap();
    let replaced = eventually("a new pod", WAIT, || async {
        let pod = pods.get_opt("r-pod").await.ok().flatten()?;
        (pod.metadata.uid != first_pod.metadata.uid).then_some(pod)
    })
    .await
    .unwrap();
    let image = replaced.spec.unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("busybox:1.36"));

    // The secret is the same object (same password) until it is four seconds old, then new.
    let same = secrets.get("r-secret").await.unwrap();
    if same.metadata.uid == first_secret.metadata.uid {
        assert_eq!(same.data, first_secret.data, "once: never overwritten");
    }
    let rotated = eventually("the rotated secret", WAIT, || async {
        let secret = secrets.get_opt("r-secret").await.ok().flatten()?;
        (secret.metadata.uid != first_secret.metadata.uid).then_some(secret)
    })
    .await
    .unwrap();
    assert_ne!(rotated.data, first_secret.data, "a new password");
    assert_ne!(generated(&rotated), None);
    h.stop().await;
}

#[tokio::test]
async fn cross_reads_see_another_crds_cr_unless_it_denies_access() {
    let crds = format!(
        "    database:
      apiTypes: {{group: GROUP, version: v1, kind: Database}}
      namespace: NS
      labelSelector: {{tier: data}}
      operatorBox: {{}}
    vault:
      apiTypes: {{group: GROUP, version: v1, kind: Vault}}
      namespace: NS
      crossAccess: false
      operatorBox: {{}}
{}",
        crd(
            "app",
            "App",
            "        observe:
          cross:
            - {crd: database, as: db, selector: {name: '{{ .spec.db }}'}}
            - {crd: vault, selector: {name: '{{ .spec.db }}'}}
            - {labelSelector: {tier: data}, as: picked, selector: {name: '{{ .spec.db }}'}}
        reconcile:
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-conn', data: {host: '{{ .cross.db.spec.host }}'}, when: [{field: cross.db.found, equals: 'true'}]}
        emit:
          status:
            fields:
              - {path: dbFound, type: bool, value: '{{ .cross.db.found }}'}
              - {path: vaultFound, type: bool, value: '{{ .cross.vault.found }}'}
              - {path: pickedHost, value: '{{ .cross.picked.spec.host }}', when: [{field: cross.picked.found, equals: 'true'}]}
"
        )
    );
    let h = Harness::start("cross", &crds, &[], true).await;
    h.create("Database", "main", json!({"host": "db.internal"})).await;
    // The database CRD's informer sees only what its labelSelector picks.
    h.patch("Database", "main", json!({"metadata": {"labels": {"tier": "data"}}}))
        .await;
    h.create("Vault", "main", json!({})).await;
    h.create("App", "c", json!({"db": "main"})).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let status = eventually("the read", WAIT, || async {
        let app = h.api("App").get("c").await.ok()?;
        (app.data["status"]["dbFound"] == true).then(|| app.data["status"].clone())
    })
    .await
    .unwrap();
    assert_eq!(status["vaultFound"], false, "crossAccess: false hides the CRD");
    assert_eq!(
        status["pickedHost"], "db.internal",
        "a read picking its CRD by labelSelector"
    );
    let conn = configmaps.get("c-conn").await.unwrap().data.unwrap();
    assert_eq!(conn["host"], "db.internal");
    h.create("App", "lonely", json!({"db": "missing"})).await;
    eventually("a read that finds nothing", WAIT, || async {
        let app = h.api("App").get("lonely").await.ok()?;
        (app.data["status"]["dbFound"] == false).then_some(())
    })
    .await
    .unwrap();
    assert!(configmaps.get_opt("lonely-conn").await.unwrap().is_none());
    h.stop().await;
}

/// A tiny HTTP server: `/price/<name>` answers `{"amount": <len(name)>}`, `/flag/<x>`
/// `{"open": <x == "on">}`, anything else 500.
async fn price_server() -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 4096];
                let n = stream.read(&mut buffer).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buffer[..n]);
                let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                let (status, body) = match (path.strip_prefix("/price/"), path.strip_prefix("/flag/")) {
                    (Some(name), _) => ("200 OK", format!("{{\"amount\": {}}}", name.len())),
                    (_, Some(flag)) => ("200 OK", format!("{{\"open\": {}}}", flag == "on")),
                    _ => ("500 Internal Server Error", "down".to_string()),
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    port
}

#[tokio::test]
async fn external_calls_feed_templates_and_a_failing_one_fails_the_reconcile_unless_allowed() {
    let port = price_server().await;
    let operator_box = format!(
        "        reconcile:
          onReconcile:
            external:
              - {{name: price, url: 'http://127.0.0.1:{port}/{{{{ .spec.path }}}}/{{{{ .metadata.name }}}}', timeout: 5s}}
              - {{name: status, url: 'http://127.0.0.1:{port}/broken', continueOnError: true}}
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}-quote', data: {{amount: '{{{{ .external.price.body.amount }}}}', statusError: '{{{{ .external.status.error }}}}'}}}}
"
    );
    let h = Harness::start("external", &crd("app", "App", &operator_box), &[], true).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    h.create("App", "abcd", json!({"path": "price"})).await;
    let quote = eventually("the quote", WAIT, || async {
        configmaps.get_opt("abcd-quote").await.ok().flatten()?.data
    })
    .await
    .unwrap();
    assert_eq!(quote["amount"], "4", "the JSON body is readable field by field");
    assert!(
        quote["statusError"].contains("answered 500"),
        "continueOnError keeps the error visible: {quote:?}"
    );

    h.create("App", "gone", json!({"path": "nowhere"})).await;
    let condition = not_ready(&h, "gone").await;
    let message = condition["message"].as_str().unwrap();
    assert_eq!(condition["reason"], "ExternalCallFailed");
    assert!(message.contains("external call price"), "{message}");
    assert!(configmaps.get_opt("gone-quote").await.unwrap().is_none());
    h.stop().await;
}

#[tokio::test]
async fn a_tls_secret_is_generated_once_and_kept() {
    let operator_box = "        reconcile:
          resync: 1s
          onReconcile:
            secrets:
              - tls: {commonName: '{{ .metadata.name }}.{{ .metadata.namespace }}.svc', dnsNames: ['{{ .metadata.name }}']}
";
    let h = Harness::start("tls", &crd("app", "App", operator_box), &[], true).await;
    h.create("App", "t", json!({})).await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let secret = eventually("the certificate", WAIT, || async {
        secrets.get_opt("t-tls").await.ok().flatten()
    })
    .await
    .unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let data = secret.data.clone().unwrap();
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        let pem = String::from_utf8(data[key].0.clone()).unwrap();
        assert!(pem.starts_with("-----BEGIN"), "{key}: {pem}");
    }
    // Resyncs render a fresh certificate each time, but the stored one is never replaced.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(secrets.get("t-tls").await.unwrap().data, secret.data);
    h.stop().await;
}

#[tokio::test]
async fn a_reconcile_gate_asks_an_external_service_and_its_fail_policy_decides_on_errors() {
    let port = price_server().await;
    let gate = |policy: &str| {
        format!(
            "        preReconcile:
          reconcileGate:
            external:
              - {{name: flag, url: 'http://127.0.0.1:{port}/{{{{ .spec.path }}}}', timeout: 2s}}
            when: [{{field: external.flag.body.open, equals: 'true'}}]
            failPolicy: {policy}
"
        )
    };
    let crds = format!(
        "{}{}",
        crd("app", "App", &gate("closed")),
        crd("web", "Web", &gate("open"))
    );
    let h = Harness::start("gate-external", &crds, &[], true).await;
    for (kind, name, path) in [
        ("App", "on", "flag/on"),
        ("App", "off", "flag/off"),
        ("App", "down", "broken"),
        ("Web", "down", "broken"),
    ] {
        h.create(kind, name, json!({"path": path})).await;
    }
    let reconciled = |kind: &'static str, name: &'static str| {
        let api = h.api(kind);
        async move {
            let object = api.get(name).await.ok()?;
            object.data["status"]["conditions"][0]["status"]
                .as_str()
                .map(String::from)
        }
    };
    eventually("the open flag reconciled", WAIT, || reconciled("App", "on"))
        .await
        .unwrap();
    eventually("an open fail policy passes a failed call", WAIT, || {
        reconciled("Web", "down")
    })
    .await
    .unwrap();
    // Give the others the same time: the gate must keep them out.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(reconciled("App", "off").await, None, "the service said no");
    assert_eq!(
        reconciled("App", "down").await,
        None,
        "a closed fail policy blocks a failed call"
    );
    assert!(h.handle("app").counters.gated.load(Ordering::Relaxed) >= 2);
    h.stop().await;
}

#[tokio::test]
async fn normalize_rewrites_spec_for_the_reconcile_only_while_mutations_are_persisted() {
    let operator_box = "        reconcile:
          resync: 1s
          normalize:
            audit: true
            spec:
              tier: '{{ lower .spec.tier }}'
          onReconcile:
            configMaps:
              - {name: '{{ .metadata.name }}-tier', data: {x: '{{ .spec.tier }}', owner: '{{ .spec.owner }}'}}
";
    let crds = format!(
        "{}      admission:
        mutation:
          rules:
            - {{field: spec.owner, default: '{{{{ .spec.tier }}}}-team'}}
",
        crd("app", "App", operator_box)
    );
    let h = Harness::start("normalize", &crds, &[], true).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    h.create("App", "n", json!({"tier": "GOLD"})).await;
    let config = eventually("the ConfigMap", WAIT, || async {
        configmaps.get_opt("n-tier").await.ok().flatten()?.data
    })
    .await
    .unwrap();
    assert_eq!(config["x"], "gold", "templates see the normalized value");
    assert_eq!(config["owner"], "gold-team", "so do mutation rules");
    let app = h.api("App").get("n").await.unwrap();
    assert_eq!(app.data["spec"]["tier"], "GOLD", "normalization is never written back");
    assert_eq!(app.data["spec"]["owner"], "gold-team", "the mutation is");
    h.writes_nothing_once_settled("app").await;
    h.stop().await;
}

#[tokio::test]
async fn a_cross_read_with_source_reads_another_runtime_through_its_live_api() {
    // Runtime one: Producers, with their Live API on a loopback port.
    let producer_box = "        reconcile: {resync: 1s}
        emit:
          status:
            fields:
              - {path: endpoint, value: '{{ .spec.host }}:8080'}
";
    let producer_crds = crd("producer", "Producer", producer_box)
        + "    secret:\n      apiTypes: {group: GROUP, version: v1, kind: Secret}\n      namespace: NS\n      crossAccess: false\n      operatorBox: {}\n";
    let producers = Harness::start("producer", &producer_crds, &[], true).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let live = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(
        axum::serve(
            listener,
            orkestra::live::router(producers.inspect.clone(), None, orkestra::live::Auth::open()),
        )
        .into_future(),
    );
    producers.create("Producer", "p", json!({"host": "10.0.0.7"})).await;
    producers.create("Secret", "s", json!({})).await;

    // Runtime two: Consumers read it over HTTP, by endpoint and by host.
    let consumer_box = format!(
        "        reconcile: {{resync: 1s}}
        observe:
          cross:
            - crd: producer
              as: producer
              source: {{endpoint: '{live}/katalog/producer/cr/{ns}/{{{{ .spec.producer }}}}', cacheFor: 1s}}
            - crd: producer
              as: health
              source: {{host: '{live}', protocol: health}}
            - crd: secret
              as: secret
              selector: {{name: s, namespace: {ns}}}
              source: {{host: '{live}'}}
            - crd: producer
              as: info
              source: {{host: '{live}', protocol: info}}
            - crd: producer
              as: events
              selector: {{name: p, namespace: {ns}}}
              source: {{host: '{live}', protocol: events, cacheFor: 1s}}
        emit:
          status:
            fields:
              - {{path: producerEndpoint, value: '{{{{ .cross.producer.status.endpoint }}}}'}}
              - {{path: found, type: bool, value: '{{{{ .cross.producer.found }}}}'}}
              - {{path: producerState, value: '{{{{ .cross.health.health.state }}}}'}}
              - {{path: secretFound, type: bool, value: '{{{{ .cross.secret.found }}}}'}}
              - {{path: producerWorkers, value: '{{{{ .cross.info.info.workers.current }}}} ({{{{ .cross.info.info.workers.source }}}})'}}
              - {{path: producerEvents, value: '{{{{ range .cross.events.events }}}}{{{{ .reason }}}},{{{{ end }}}}'}}
",
        ns = producers.ns.name
    );
    let consumers = Harness::start("consumer", &crd("consumer", "Consumer", &consumer_box), &[], true).await;
    consumers.create("Consumer", "c", json!({"producer": "p"})).await;
    let status = eventually("the producer's endpoint, read from the other runtime", WAIT, || async {
        let c = consumers.api("Consumer").get("c").await.ok()?;
        (c.data["status"]["producerEndpoint"] == "10.0.0.7:8080").then(|| c.data["status"].clone())
    })
    .await
    .unwrap();
    assert_eq!(status["found"], true);
    assert_eq!(status["producerState"], "healthy", "{status}");
    assert_eq!(status["secretFound"], false, "crossAccess: false holds over HTTP too");
    assert_eq!(status["producerWorkers"], "1 (default)", "the info protocol: {status}");
    eventually("the producer's events, read from the other runtime", WAIT, || async {
        let c = consumers.api("Consumer").get("c").await.ok()?;
        let events = c.data["status"]["producerEvents"].as_str()?.to_string();
        events.contains("ProducerReconciled").then_some(())
    })
    .await
    .unwrap();

    // A change on the producer's side arrives once the answer's cacheFor runs out.
    producers
        .patch("Producer", "p", json!({"spec": {"host": "10.0.0.8"}}))
        .await;
    eventually("the new endpoint", WAIT, || async {
        let c = consumers.api("Consumer").get("c").await.ok()?;
        (c.data["status"]["producerEndpoint"] == "10.0.0.8:8080").then_some(())
    })
    .await
    .unwrap();
    // A CR the other runtime does not have is not found, and says nothing else.
    consumers
        .create("Consumer", "lonely", json!({"producer": "missing"}))
        .await;
    eventually("a read that finds nothing", WAIT, || async {
        let c = consumers.api("Consumer").get("lonely").await.ok()?;
        (c.data["status"]["found"] == false).then_some(())
    })
    .await
    .unwrap();
    server.abort();
    consumers.stop().await;
    producers.stop().await;
}

#[tokio::test]
async fn a_condition_with_source_tests_another_runtime_s_metrics() {
    // Runtime one: Producers, with their Live API on a loopback port.
    let producers = Harness::start(
        "cond-producer",
        &crd("producer", "Producer", "        reconcile: {workers: 3}\n"),
        &[],
        true,
    )
    .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let live = format!("http://{}", listener.local_addr().unwrap());
    let router = orkestra::live::router(producers.inspect.clone(), None, orkestra::live::Auth::open());
    let server = tokio::spawn(axum::serve(listener, router).into_future());

    // Runtime two: upstream's condition `source`, no observe.cross written.
    let consumer_box = format!(
        "        emit:
          status:
            fields:
              - path: producerStaffed
                value: 'yes'
                when:
                  - {{field: cross.producer.metrics.workers, greaterThanOrEqual: 3, source: {{host: '{live}', crd: producer}}}}
              - path: producerOverloaded
                value: 'yes'
                when:
                  - {{field: cross.producer.metrics.workers, greaterThan: 50, source: {{host: '{live}', crd: producer}}}}
"
    );
    let consumers = Harness::start("cond-consumer", &crd("consumer", "Consumer", &consumer_box), &[], true).await;
    consumers.create("Consumer", "c", json!({})).await;
    let status = eventually("the other runtime's workers, tested", WAIT, || async {
        let c = consumers.api("Consumer").get("c").await.ok()?;
        (c.data["status"]["producerStaffed"] == "yes").then(|| c.data["status"].clone())
    })
    .await
    .unwrap();
    assert!(
        status["producerOverloaded"].is_null(),
        "the other condition holds not: {status}"
    );
    server.abort();
    consumers.stop().await;
    producers.stop().await;
}

#[tokio::test]
async fn an_enqueue_gate_asks_an_external_service_before_a_cr_becomes_work() {
    let port = price_server().await;
    let operator_box = format!(
        "        preReconcile:
          enqueueGate:
            external:
              - {{name: flag, url: 'http://127.0.0.1:{port}/{{{{ .spec.path }}}}', timeout: 2s}}
            when: [{{field: external.flag.body.open, equals: 'true'}}]
            failPolicy: closed
"
    );
    let h = Harness::start("enqueue-external", &crd("app", "App", &operator_box), &[], true).await;
    for (name, path) in [("on", "flag/on"), ("off", "flag/off"), ("down", "broken")] {
        h.create("App", name, json!({"path": path})).await;
    }
    let reconciled = |name: &'static str| {
        let api = h.api("App");
        async move {
            let object = api.get(name).await.ok()?;
            object.data["status"]["conditions"][0]["status"]
                .as_str()
                .map(String::from)
        }
    };
    eventually("the open flag reconciled", WAIT, || reconciled("on"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(reconciled("off").await, None, "the service said no: never queued");
    assert_eq!(
        reconciled("down").await,
        None,
        "a closed fail policy keeps a failed call out"
    );
    let stats = h.handle("app").stats.snapshot();
    assert!(stats["dropped"]["enqueueGate"].as_u64().unwrap() >= 2, "{stats}");
    // Opening the flag lets the next event in.
    h.patch("App", "off", json!({"spec": {"path": "flag/on"}})).await;
    eventually("the reopened CR reconciled", WAIT, || reconciled("off"))
        .await
        .unwrap();
    h.stop().await;
}

#[tokio::test]
async fn admission_rules_read_their_external_calls() {
    let port = price_server().await;
    let operator_box = "        reconcile:
          onReconcile:
            configMaps:
              - data: {quota: '{{ .external.quota.body.amount }}'}
";
    let admission = format!(
        "      admission:
        validation:
          external:
            - {{name: quota, url: 'http://127.0.0.1:{port}/price/{{{{ .metadata.name }}}}', timeout: 2s}}
          rules:
            - {{field: '{{{{ .external.quota.body.amount }}}}', lessThanOrEqual: '5', valueType: int, message: 'the quota service allows at most 5, {{{{ .metadata.name }}}} asks {{{{ .external.quota.body.amount }}}}'}}
"
    );
    let h = Harness::start(
        "rule-external",
        &format!("{}{admission}", crd("app", "App", operator_box)),
        &[],
        true,
    )
    .await;
    h.create("App", "tiny", json!({})).await;
    h.create("App", "enormous", json!({})).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let quota = eventually("the allowed CR's child", WAIT, || async {
        configmaps.get_opt("tiny-config").await.ok().flatten()?.data
    })
    .await
    .unwrap();
    assert_eq!(quota["quota"], "4", "the call's result reaches the templates too");
    let condition = not_ready(&h, "enormous").await;
    assert_eq!(condition["reason"], "ValidationFailed", "{condition}");
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("at most 5, enormous asks 8"),
        "{condition}"
    );
    assert!(configmaps.get_opt("enormous-config").await.unwrap().is_none());
    h.stop().await;
}

#[tokio::test]
async fn a_cr_moved_to_another_surface_loses_what_only_the_previous_one_made_unless_it_keeps_it() {
    // Each target's box makes a ConfigMap of its own and one they share by name.
    let target = |name: &str, extra: &str| {
        format!(
            "          {name}:\n{extra}            operatorBox:\n              reconcile:\n                onReconcile:\n                  configMaps:\n                    - {{name: '{{{{ .metadata.name }}}}-{name}', data: {{by: {name}}}}}\n                    - {{name: '{{{{ .metadata.name }}}}-shared', data: {{by: {name}}}}}\n"
        )
    };
    let crds = crd("app", "App", "        reconcile: {resync: 1s}\n")
        + "      serve:\n        enabled: true\n        namespace: NS\n        target:\n"
        + &target("a", "            primary: true\n")
        + &target("b", "")
        + &target("c", "            apply: {overrides: {keepPreviousSurface: true}}\n");
    let h = Harness::start("surface", &crds, &[], true).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let routed = |to: &str| json!({"metadata": {"annotations": {"orkestra.orkspace.io/serve-target": to}}});
    let exists = |name: &'static str| {
        let configmaps = configmaps.clone();
        async move { configmaps.get_opt(name).await.unwrap().is_some() }
    };
    let by = |name: &'static str| {
        let configmaps = configmaps.clone();
        async move { data_by(&configmaps, name).await }
    };
    h.create("App", "x", json!({})).await;
    h.patch("App", "x", routed("a")).await;
    eventually("x-a made by a", WAIT, || async {
        (by("x-a").await.as_deref() == Some("a")).then_some(())
    })
    .await
    .unwrap();

    // Moved to b: b's own and the shared one (now b's) are there, a's own is gone.
    h.patch("App", "x", routed("b")).await;
    eventually("x-a deleted, x-b made", WAIT, || async {
        (!exists("x-a").await && exists("x-b").await).then_some(())
    })
    .await
    .unwrap();
    assert_eq!(
        by("x-shared").await.as_deref(),
        Some("b"),
        "the shared child stays, rewritten"
    );

    // Moved to c, which keeps what the previous surface made.
    h.patch("App", "x", routed("c")).await;
    eventually("x-c made", WAIT, || async { exists("x-c").await.then_some(()) })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(exists("x-b").await, "keepPreviousSurface: b's child is kept");
    h.stop().await;
}

/// The `by` value of a ConfigMap's data.
async fn data_by(configmaps: &Api<ConfigMap>, name: &str) -> Option<String> {
    configmaps.get_opt(name).await.ok()??.data?.get("by").cloned()
}
