//! Upstream's Katalog forms, run against the real API server: a Komposer composing two
//! Katalog files with an override and a note of its own, a motif giving an `onCreate` Secret
//! whose rotation comes from the import's inputs and an admission rule, a cross read naming
//! its CRD by kind, and notes from upstream's catalogue (`domainHost`, `joinList`,
//! `getLabel` with the object first).

use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, PostParams};
use orkestra_test_support::eventually;
use serde_json::{Value, json};

use crate::pipeline::WAIT;
use crate::running::Running;

const GROUP: &str = "upstream.orkestra.io";

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

async fn data(maps: &Api<ConfigMap>, name: &str) -> Option<Value> {
    let map = maps.get_opt(name).await.ok()??;
    serde_json::to_value(map.data?).ok()
}

#[tokio::test]
async fn a_komposer_of_upstream_forms_runs_as_upstream_describes() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "keys.yaml",
        "apiVersion: orkestra.orkspace.io/v1
kind: Motif
metadata: {name: keys, tags: [secret]}
inputs:
  - {name: rotateAfter, default: 90d}
resources:
  onCreate:
    secrets:
      - name: '{{ .metadata.name }}-keys'
        once: true
        rotateAfter: '{{ index .inputs \"rotateAfter\" }}'
        data: {key: '{{ randomHex 16 }}'}
admission:
  validation:
    - {field: spec.url, operator: exists, message: spec.url is required, action: deny}
",
    );
    write(
        dir.path(),
        "shop.yaml",
        &format!(
            "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: shop}}
spec:
  crds:
    shop:
      apiTypes: {{group: {GROUP}, version: v1, kind: Shop}}
      imports:
        - motif: ./keys.yaml
          with: {{rotateAfter: 30d}}
      operatorBox:
        reconcile:
          workers: 1
          onReconcile:
            configMaps:
              - name: '{{{{ .metadata.name }}}}-info'
                data:
                  host: '{{{{ domainHost .spec.url }}}}'
                  regions: '{{{{ joinList .spec.regions \",\" }}}}'
                  team: '{{{{ getLabel . \"team\" }}}}'
                  served: '{{{{ serviceHost }}}}'
notes:
  serviceHost: '{{{{ .metadata.name }}}}.local'
"
        ),
    );
    write(
        dir.path(),
        "memo.yaml",
        &format!(
            "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
spec:
  crds:
    memo:
      apiTypes: {{group: {GROUP}, version: v1, kind: Memo}}
      operatorBox:
        cross:
          - {{kind: Shop, selector: {{name: '{{{{ .metadata.name }}}}'}}, as: shop}}
        onReconcile:
          configMaps:
            - name: '{{{{ .metadata.name }}}}-memo'
              data: {{shopUrl: '{{{{ .cross.shop.spec.url }}}}'}}
"
        ),
    );
    write(
        dir.path(),
        "komposer.yaml",
        "apiVersion: orkestra.orkspace.io/v1
kind: Komposer
metadata: {name: platform}
imports:
  files: [./shop.yaml, ./memo.yaml]
spec:
  crds:
    shop:
      workers: 2
notes:
  - {name: serviceHost, expression: '{{ .metadata.name }}.prod.example'}
",
    );
    let run = Running::start("upstream", &[dir.path().join("komposer.yaml")], &[]).await;
    assert_eq!(run.katalog.name, "platform");
    let shop = run.inspect.roster.get("shop").unwrap();
    assert_eq!(shop.crd.workers, 2, "the Komposer's override");
    let maps: Api<ConfigMap> = run.api();
    let secrets: Api<Secret> = run.api();

    let shops = run.crs(GROUP, "Shop");
    let mut cr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Shop",
        "metadata": {"name": "s1", "labels": {"team": "blue"}},
        "spec": {"url": " https://www.acme.com/ ", "regions": ["eu", "us"]},
    }))
    .unwrap();
    cr.metadata.namespace = Some(run.ns.name.clone());
    shops.create(&PostParams::default(), &cr).await.unwrap();
    let info = eventually("s1-info", WAIT, || async { data(&maps, "s1-info").await })
        .await
        .unwrap();
    assert_eq!(
        info,
        json!({"host": "www.acme.com", "regions": "eu,us", "team": "blue", "served": "s1.prod.example"})
    );
    let keys = eventually("s1-keys", WAIT, || async { secrets.get_opt("s1-keys").await.ok()? })
        .await
        .unwrap();
    assert_eq!(keys.data.unwrap()["key"].0.len(), 16, "the motif's onCreate Secret");

    // The memo finds its shop by kind, from the shop's own cache.
    run.create(&run.crs(GROUP, "Memo"), "Memo", "s1", json!({})).await;
    let memo = eventually("s1-memo", WAIT, || async { data(&maps, "s1-memo").await })
        .await
        .unwrap();
    assert_eq!(memo["shopUrl"], " https://www.acme.com/ ");

    // The motif's admission rule runs at reconcile: a shop without a url makes nothing.
    run.create(&shops, "Shop", "s2", json!({"regions": []})).await;
    let status = run
        .status(&shops, "s2", |s| s["conditions"][0]["status"] == "False")
        .await;
    assert!(
        status["conditions"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.url is required")),
        "{status}"
    );
    assert!(maps.get_opt("s2-info").await.unwrap().is_none());
    run.stop().await;
}

/// Upstream's `intermediate/08-state-machine` in its own shape: the build Job gated on
/// `status.phase` not existing (so no later run renders it again), each step's phase moved on
/// by `children.job.status.succeeded` in the status fields, terminal states declared last, a
/// `crdFile`, and its two CRs applied with kubectl.
const STATE_MACHINE: &str = r#"apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: pipeline-operator, version: 0.1.0}
spec:
  crds:
    pipeline:
      crdFile: ./crd.yaml
      admission:
        validation:
          rules:
            - {field: spec.image, operator: exists, message: "spec.image is required", action: deny}
            - {field: spec.steps, operator: exists, message: "spec.steps is required", action: deny}
      operatorBox:
        reconcile:
          workers: 4
          resync: 10s
          queue: {maxDepth: 1000}
          onReconcile:
            jobs:
              - name: "{{ .metadata.name }}-build"
                image: "{{ .spec.image }}"
                command: ["sh", "-c", "{{ index (index .spec.steps 0) \"command\" }}"]
                when: [{field: status.phase, operator: notExists}]
                reconcile: false
              - name: "{{ .metadata.name }}-test"
                image: "{{ .spec.image }}"
                command: ["sh", "-c", "{{ index (index .spec.steps 1) \"command\" }}"]
                when: [{field: status.phase, equals: "Running/test"}]
              - name: "{{ .metadata.name }}-notify"
                image: "{{ .spec.image }}"
                command: ["sh", "-c", "{{ index (index .spec.steps 2) \"command\" }}"]
                when: [{field: status.phase, equals: "Running/notify"}]
        emit:
          status:
            fields:
              - {path: phase, value: Pending, when: [{field: status.phase, operator: notExists}]}
              - {path: phase, value: Running/build, when: [{field: status.phase, operator: in, value: "Pending,"}]}
              - path: currentStep
                value: build
                when: [{field: status.phase, operator: in, value: "Pending,Running/build,"}]
              - path: phase
                value: Running/test
                when:
                  - {field: status.phase, equals: Running/build}
                  - {field: children.job.status.succeeded, greaterThan: "0"}
              - {path: currentStep, value: test, when: [{field: status.phase, equals: Running/test}]}
              - path: phase
                value: Running/notify
                when:
                  - {field: status.phase, equals: Running/test}
                  - {field: children.job.status.succeeded, greaterThan: "0"}
              - {path: currentStep, value: notify, when: [{field: status.phase, equals: Running/notify}]}
              - path: phase
                value: Succeeded
                when:
                  - {field: status.phase, equals: Running/notify}
                  - {field: children.job.status.succeeded, greaterThan: "0"}
              - {path: currentStep, value: "", when: [{field: status.phase, equals: Succeeded}]}
              - {path: phase, value: Failed, when: [{field: children.job.status.failed, greaterThan: "0"}]}
              - {path: currentStep, value: "", when: [{field: status.phase, equals: Failed}]}
              - {path: image, value: "{{ .spec.image }}"}
"#;

const PIPELINE_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: pipelines.demo.orkestra.io}
spec:
  group: demo.orkestra.io
  scope: Namespaced
  names: {kind: Pipeline, plural: pipelines, singular: pipeline, listKind: PipelineList}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                image: {type: string}
                steps:
                  type: array
                  items:
                    type: object
                    properties: {name: {type: string}, command: {type: string}}
            status: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

const PIPELINE_CRS: &str = "apiVersion: demo.orkestra.io/v1alpha1
kind: Pipeline
metadata: {name: build-and-test, namespace: default}
spec:
  image: alpine:3.19
  steps:
    - {name: build, command: 'echo building'}
    - {name: test, command: 'echo testing'}
    - {name: notify, command: 'echo done'}
---
apiVersion: demo.orkestra.io/v1alpha1
kind: Pipeline
metadata: {name: failing-pipeline, namespace: default}
spec:
  image: alpine:3.19
  steps:
    - {name: build, command: 'exit 1'}
    - {name: test, command: 'echo never'}
    - {name: notify, command: 'echo never'}
";

#[test]
fn upstreams_state_machine_steps_through_its_jobs_under_ork_dev() {
    use orkestra_test_support::kubectl_with;
    use std::time::{Duration, Instant};

    let temp = tempfile::tempdir().unwrap();
    write(temp.path(), "katalog.yaml", STATE_MACHINE);
    write(temp.path(), "crd.yaml", PIPELINE_CRD);
    write(temp.path(), "cr.yaml", PIPELINE_CRS);
    let dir = temp.path().join("dev");
    let katalog = temp.path().join("katalog.yaml");
    let mut ork = crate::ork::Ork::spawn(
        &["dev", "-f", katalog.to_str().unwrap(), "--dir", dir.to_str().unwrap()],
        &[],
    );
    ork.wait_for("installed CRD pipelines.demo.orkestra.io", Duration::from_secs(240));
    let kubeconfig = dir.join("kubeconfig");
    ork.wait_for("try: kubectl --kubeconfig", Duration::from_secs(60));
    kubectl_with(
        &kubeconfig,
        &["apply", "-f", temp.path().join("cr.yaml").to_str().unwrap()],
    )
    .unwrap();

    // The simulated node runs every Job's Pod to success, so the build-and-test pipeline
    // must walk build, test and notify in turn. (Its Pods run no command: the failing
    // pipeline's `exit 1` cannot fail here, which is the one expectation left out.)
    let get = |what: &[&str]| kubectl_with(&kubeconfig, what).unwrap_or_default();
    let started = Instant::now();
    let status = loop {
        let status = get(&[
            "get",
            "pipeline",
            "build-and-test",
            "-o",
            "jsonpath={.status.phase}|{.status.currentStep}|{.status.image}|{.status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        // currentStep is cleared by the run after the one that wrote Succeeded (it reads the
        // phase as it was), which follows at once since the Katalog reads what it wrote.
        if status == "Succeeded||alpine:3.19|True" || started.elapsed() > Duration::from_secs(180) {
            break status;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(
        status,
        "Succeeded||alpine:3.19|True",
        "phase|currentStep|image|Ready; output:\n{}",
        ork.seen.join("\n")
    );
    // One after the other: each step's Job was created only once the one before it had
    // finished (creation and completion times, to the second).
    let job = |name: &str| {
        get(&[
            "get",
            "job",
            &format!("build-and-test-{name}"),
            "-o",
            "jsonpath={.metadata.creationTimestamp} {.status.completionTime} {.status.succeeded}",
        ])
    };
    let [build, test, notify] = ["build", "test", "notify"].map(job);
    let field = |line: &str, i: usize| line.split(' ').nth(i).unwrap_or_default().to_string();
    for (before, after, step) in [(&build, &test, "test"), (&test, &notify, "notify")] {
        assert_eq!(field(before, 2), "1", "the step before {step} succeeded: {before}");
        assert!(
            field(after, 0) >= field(before, 1),
            "{step}'s Job was created after the step before it completed: {before} / {after}"
        );
    }
    assert_eq!(field(&notify, 2), "1", "{notify}");
    assert!(ork.signal_and_wait(libc::SIGINT, Duration::from_secs(30)).success());
    let left = crate::ork::wait_no_processes(&dir, Duration::from_secs(5));
    assert_eq!(left, Vec::<u32>::new());
}
