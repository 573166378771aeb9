//! What a current control plane with a scheduler and simulated nodes makes testable: Pods
//! that run, workloads that become ready, Jobs that finish, and CRD validation rules (CEL)
//! enforced by the API server itself.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::pipeline::{Harness, WAIT, crd};
use orkestra_test_support::eventually;

/// Pods are scheduled and turn Ready in seconds, but a loaded machine may take longer.
const READY: Duration = Duration::from_secs(120);

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
