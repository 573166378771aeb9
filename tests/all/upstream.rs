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
