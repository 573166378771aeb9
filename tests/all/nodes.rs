//! What a current control plane with a scheduler and simulated nodes makes testable: Pods
//! that run, workloads that become ready, Jobs that finish, and CRD validation rules (CEL)
//! enforced by the API server itself.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra::outcome::health::State;
use serde_json::{Value, json};

use crate::pipeline::{Harness, WAIT, crd};
use orkestra_test_support::eventually;

/// Pods are scheduled and turn Ready in seconds, but a loaded machine may take longer.
const READY: Duration = Duration::from_secs(120);

/// The name of the control plane's first simulated node.
async fn first_node(client: &kube::Client) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes.list(&Default::default()).await.unwrap();
    list.items[0].metadata.name.clone().unwrap()
}

#[tokio::test]
async fn a_status_field_reads_the_ready_replicas_of_its_deployment() {
    let operator_box = "        reconcile:
          onReconcile:
            deployments:
              - {image: nginx, replicas: '{{ .spec.replicas }}'}
        emit:
          status:
            fields:
              - {path: readyReplicas, type: integer, value: '{{ .children.deployment.status.readyReplicas | default 0 }}'}
";
    let h = Harness::start("ready-replicas", &crd("app", "App", operator_box), &[], true).await;
    h.create("App", "web", json!({"replicas": 2})).await;
    let status = eventually("readyReplicas to reach 2", READY, || async {
        let app = h.api("App").get("web").await.ok()?;
        (app.data["status"]["readyReplicas"] == 2).then_some(app.data["status"].clone())
    })
    .await
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let deployment = deployments.get("web-deployment").await.unwrap();
    assert_eq!(
        deployment.status.and_then(|s| s.ready_replicas),
        Some(2),
        "the CR says what the Deployment says: {status}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_simulated_node_renews_its_lease_so_it_never_goes_silent() {
    // The node lifecycle controller marks a node unreachable, and its Pods not Ready for
    // good, once neither its status nor its Lease has been renewed for 50 s: every Pod of a
    // control plane that runs longer than that would fall out of its Deployment.
    let ns = orkestra_test_support::namespace("lease").await.unwrap();
    let node = first_node(&ns.client).await;
    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), "kube-node-lease");
    let renewed = || async {
        let lease = leases.get_opt(&node).await.ok().flatten()?;
        lease.spec?.renew_time
    };
    let first = eventually("the node's Lease", WAIT, renewed).await.unwrap();
    // Renewed every 10 s, as a kubelet renews a 40 s lease.
    let later = eventually("the node's Lease to be renewed", Duration::from_secs(30), || async {
        renewed().await.filter(|time| *time != first)
    })
    .await
    .unwrap();
    assert!(later.0 > first.0, "{later:?} follows {first:?}");
    let lease = leases.get(&node).await.unwrap().spec.unwrap();
    assert_eq!(lease.lease_duration_seconds, Some(40));
}

#[tokio::test]
async fn a_crd_validation_rule_rejects_a_bad_cr_at_apply_time() {
    let dir = tempfile::tempdir().unwrap();
    let ns = orkestra_test_support::namespace("cel").await.unwrap();
    let group = format!("{}.cel.orkestra.io", ns.name);
    let crd_file = dir.path().join("crd.yaml");
    std::fs::write(
        &crd_file,
        format!(
            "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: pools.{group}}}
spec:
  group: {group}
  names: {{kind: Pool, plural: pools, singular: pool}}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                min: {{type: integer}}
                max: {{type: integer}}
              x-kubernetes-validations:
                - rule: self.min <= self.max
                  message: min must not exceed max
"
        ),
    )
    .unwrap();
    let katalog_file = dir.path().join("katalog.yaml");
    std::fs::write(
        &katalog_file,
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nspec:\n  crds:\n    pool:\n      crdFile: crd.yaml\n      apiTypes: {group: GROUP, version: v1, kind: Pool}\n"
            .replace("GROUP", &group),
    )
    .unwrap();
    let katalog = orkestra_katalog::load(&[katalog_file]).unwrap().katalog;
    orkestra_kube::crd_install::install_crds(&ns.client, &katalog, WAIT)
        .await
        .unwrap();
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Pool"), "pools");
    let pools: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let pool = |name: &str, min: i64, max: i64| {
        serde_json::from_value::<DynamicObject>(json!({
            "apiVersion": format!("{group}/v1"), "kind": "Pool",
            "metadata": {"name": name}, "spec": {"min": min, "max": max},
        }))
        .unwrap()
    };
    pools.create(&PostParams::default(), &pool("fine", 1, 3)).await.unwrap();
    let refused = pools
        .create(&PostParams::default(), &pool("bad", 5, 3))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("expected the API server's refusal, got {refused}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(status.message.contains("min must not exceed max"), "{}", status.message);
    assert!(pools.get_opt("bad").await.unwrap().is_none());
}

#[tokio::test]
async fn a_dependent_waits_until_its_dependency_s_deployment_is_available() {
    // The Db's Deployment asks for a node pool that does not exist yet: it reconciles fine,
    // but its children are not ready, so `healthyWhen: childrenReady` keeps it unhealthy.
    // The pool's label is the test's own (NS is its namespace), so no other test's Pods go there.
    let db = crd(
        "db",
        "Db",
        "        reconcile:
          onReconcile:
            deployments:
              - {image: postgres, nodeSelector: {'NS.test.orkestra.io/pool': ready}}
",
    )
    .replace(
        "      namespace: NS\n",
        "      namespace: NS\n      healthyWhen: childrenReady\n",
    );
    let app = crd(
        "app",
        "App",
        "        reconcile:\n          onReconcile:\n            configMaps:\n              - {data: {db: main}}\n",
    )
    .replace(
        "      namespace: NS\n",
        "      namespace: NS\n      dependsOn: {db: healthy}\n",
    );
    let h = Harness::start("depends-ready", &(db + &app), &[], true).await;
    let pool = format!("{}.test.orkestra.io/pool", h.ns.name);
    h.create("Db", "main", json!({})).await;
    h.create("App", "web", json!({})).await;

    let waiting = eventually("the Db to reconcile and wait for its Deployment", WAIT, || async {
        let health = h.health.get("db")?;
        (health.total_reconciles > 0).then_some(health)?.waiting_for()
    })
    .await
    .unwrap();
    assert!(
        waiting.contains("Deployment main-deployment: 0 of 1 replicas updated")
            || waiting.contains("Deployment main-deployment: 0 of 1 replicas available"),
        "{waiting}"
    );
    assert_eq!(h.health.get("db").unwrap().state, State::Started);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.health.get("app").unwrap().state,
        State::Pending,
        "a dependency that reconciles but whose Deployment is not Available is not healthy"
    );
    let configs: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    assert!(
        configs.get_opt("web-config").await.unwrap().is_none(),
        "the App was not reconciled"
    );

    // The pool appears: the Pod is scheduled and turns Ready, the Deployment Available, the
    // Db healthy, and only then does the App start.
    let nodes: Api<Node> = Api::all(h.ns.client.clone());
    let node = first_node(&h.ns.client).await;
    let label = |value: Value| json!({"metadata": {"labels": {&pool: value}}});
    nodes
        .patch(&node, &PatchParams::default(), &Patch::Merge(label(json!("ready"))))
        .await
        .unwrap();
    let started = eventually("the App's ConfigMap", READY, || async {
        configs.get_opt("web-config").await.ok().flatten()
    })
    .await;
    nodes
        .patch(&node, &PatchParams::default(), &Patch::Merge(label(Value::Null)))
        .await
        .unwrap();
    started.unwrap();
    let db = h.health.get("db").unwrap();
    assert!(db.is_healthy(), "{db:?}");
    let deployments: Api<Deployment> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let available = deployments.get("main-deployment").await.unwrap().status.unwrap();
    assert_eq!(available.available_replicas, Some(1), "{available:?}");
    h.stop().await;
}

#[tokio::test]
async fn enrich_embeds_pods_endpoints_and_gated_replica_sets_for_status_fields() {
    let operator_box = "        reconcile:
          resync: 1s
          onReconcile:
            deployments:
              - {image: nginx, replicas: 2, port: 80}
            services:
              - {port: 80}
        emit:
          status:
            fields:
              - {path: pods, type: integer, value: '{{ podCount .children.deployment }}'}
              - {path: readyPods, type: integer, value: '{{ readyPodCount .children.deployment }}'}
              - {path: backing, type: integer, value: '{{ backingPodCount .children.service }}'}
              - {path: endpoints, type: integer, value: '{{ serviceEndpointCount .children.service }}'}
              - {path: replicaSets, type: integer, value: '{{ deploymentReplicaSetCount .children.deployment }}'}
      enrich:
        - pods
        - backingpods
        - endpoints
        - replicasets:
            when: [{field: spec.debug, equals: 'true'}]
";
    let h = Harness::start("enrich", &crd("app", "App", operator_box), &[], true).await;
    h.create("App", "web", json!({"debug": false})).await;
    let status = eventually("two ready pods behind the service", READY, || async {
        let status = h.api("App").get("web").await.ok()?.data["status"].clone();
        (status["readyPods"] == 2 && status["endpoints"] == 2).then_some(status)
    })
    .await
    .unwrap();
    assert_eq!(
        (status["pods"].clone(), status["backing"].clone()),
        (json!(2), json!(2)),
        "{status}"
    );
    assert_eq!(status["replicaSets"], 0, "its gate holds replica sets back: {status}");
    // Enrichment reads; it never writes: a settled CR costs reads and no write.
    h.writes_nothing_once_settled("app").await;

    h.patch("App", "web", json!({"spec": {"debug": true}})).await;
    eventually("the gated target to be read", READY, || async {
        let status = h.api("App").get("web").await.ok()?.data["status"].clone();
        (status["replicaSets"] == 1).then_some(())
    })
    .await
    .unwrap();
    h.stop().await;
}
