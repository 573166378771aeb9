//! Tenant isolation against the real API server: what a CR's writer or a component can make
//! the host delete, take over, spend or hold. Each test is one way in, tried as an attacker
//! would, and the limit that stops it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use orkestra_expr::labels::{COMPONENT_CHILDREN, OWNER_UID_LABEL};
use orkestra_test_support::{eventually, guests};
use serde_json::{Value, json};

use crate::pipeline::{Harness, WAIT, crd};

/// An operator box whose hook is the hostile example, with `limits` added to its limits
/// (`, key: value` pairs) and `extra` appended under `hooks`.
fn hostile_box(limits: &str, extra: &str) -> String {
    let component = guests::component("hostile").unwrap();
    format!(
        "        reconcile:
          hooks:
            component: {}
            limits: {{timeout: 2s{limits}}}
            capabilities:
              - {{apiVersion: v1, kinds: [ConfigMap], verbs: [apply, list, delete]}}
{extra}",
        component.display()
    )
}

/// An operator box whose template applies ConfigMap `<cr>-t` holding `owner: <owner>`.
fn template_box(owner: &str) -> String {
    format!(
        "        reconcile:
          onReconcile:
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}-t', data: {{owner: {owner}}}}}
"
    )
}

fn ready_condition(cr: &Value) -> &Value {
    cr["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .unwrap_or(&Value::Null)
}

/// The CR once its Ready condition satisfies `check`.
async fn cr_where(api: &Api<DynamicObject>, name: &str, check: impl Fn(&Value) -> bool) -> Value {
    let found = eventually(&format!("the Ready condition of {name}"), WAIT, || async {
        let cr = serde_json::to_value(api.get(name).await.ok()?).ok()?;
        check(ready_condition(&cr)).then_some(cr)
    })
    .await;
    match found {
        Ok(cr) => cr,
        Err(error) => panic!("{error}; the CR is {:?}", api.get(name).await.map(|cr| cr.data)),
    }
}

fn reason_is(reason: &'static str) -> impl Fn(&Value) -> bool {
    move |ready| ready["reason"] == reason
}

fn is_ready(ready: &Value) -> bool {
    ready["status"] == "True"
}

/// Creates CR `name` of `kind` carrying `annotations`.
async fn create_annotated(h: &Harness, kind: &str, name: &str, annotations: Value, spec: Value) {
    let object = json!({
        "apiVersion": format!("{}/v1", h.group), "kind": kind,
        "metadata": {"name": name, "annotations": annotations}, "spec": spec,
    });
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    h.api(kind).create(&PostParams::default(), &object).await.unwrap();
}

async fn wait_gone(api: &Api<DynamicObject>, name: &str) {
    eventually(&format!("{name} to be gone"), WAIT, || async {
        api.get_opt(name).await.ok().flatten().is_none().then_some(())
    })
    .await
    .unwrap();
}

fn legacy_labels(cr_name: &str) -> Value {
    json!({"orkestra-owner": cr_name, "orkestra.orkspace.io/managed": "true"})
}

/// Issue 10, hole 1: the remembered list of a component's children is the CR's own
/// annotation, so its writer could name anything there.
#[tokio::test]
async fn a_forged_children_list_deletes_nothing_the_cr_does_not_own() {
    let h = Harness::start("forged", &crd("forger", "Forger", &hostile_box("", "")), &[], true).await;
    let ns = h.ns.name.clone();
    let client = h.ns.client.clone();
    // Three objects labelled the way the older scheme labelled children of a CR "forger":
    // a ConfigMap next to it (the component may delete ConfigMaps there), one in kube-system
    // and a whole namespace (it may delete neither).
    let neighbour: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "victim", "labels": legacy_labels("forger")}, "data": {"keep": "me"},
    }))
    .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    configmaps.create(&PostParams::default(), &neighbour).await.unwrap();
    let system: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let important = format!("important-{ns}");
    let system_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": important, "labels": legacy_labels("forger")}, "data": {"keep": "me"},
    }))
    .unwrap();
    system.create(&PostParams::default(), &system_map).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let team = format!("team-victim-{ns}");
    let victim_ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": team, "labels": legacy_labels("forger")}})).unwrap();
    namespaces.create(&PostParams::default(), &victim_ns).await.unwrap();

    let forged = json!([
        ["v1", "ConfigMap", ns, "victim"],
        ["v1", "ConfigMap", "kube-system", important],
        ["v1", "Namespace", "", team],
    ])
    .to_string();
    let forgers = h.api("Forger");
    create_annotated(
        &h,
        "Forger",
        "forger",
        json!({COMPONENT_CHILDREN: forged}),
        json!({"mode": "ok"}),
    )
    .await;
    // The component returns nothing, so every listed entry is "no longer returned": the
    // host looks at each, then remembers the empty list.
    eventually("the remembered list to be rewritten", WAIT, || async {
        let cr = serde_json::to_value(forgers.get("forger").await.ok()?).ok()?;
        (cr["metadata"]["annotations"][COMPONENT_CHILDREN] == "[]" && is_ready(ready_condition(&cr))).then_some(())
    })
    .await
    .unwrap();
    assert!(
        configmaps.get_opt("victim").await.unwrap().is_some(),
        "a neighbour it may delete, but does not own"
    );
    assert!(
        system.get_opt(&important).await.unwrap().is_some(),
        "kube-system is out of its grants"
    );
    let team_ns = namespaces.get(&team).await.unwrap();
    assert!(
        team_ns.metadata.deletion_timestamp.is_none(),
        "a namespace is out of its grants"
    );
    // Events are recorded off the reconcile's path: they may land after the status.
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    eventually("the refusal on the CR's Events", WAIT, || async {
        let refused = events.list(&ListParams::default()).await.ok()?;
        refused
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("ChildNotPruned")
                    && e.message.as_deref().unwrap_or("").contains("kube-system")
            })
            .then_some(())
    })
    .await
    .unwrap();
    system.delete(&important, &DeleteParams::default()).await.unwrap();
    namespaces.delete(&team, &DeleteParams::default()).await.unwrap();
    h.stop().await;
}

/// Issue 10, hole 2: a CR named like another tenant's, a child named like theirs.
#[tokio::test]
async fn no_tenant_can_write_adopt_or_delete_another_tenants_child() {
    let crds = [
        crd("plain", "Plain", &template_box("plain")),
        crd("rival", "Rival", &template_box("rival")),
        crd("stealer", "Stealer", &hostile_box("", "")),
    ]
    .join("");
    let h = Harness::start("takeover", &crds, &[], true).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    h.create("Plain", "t1", json!({})).await;
    let plain = cr_where(&h.api("Plain"), "t1", is_ready).await;
    let plain_uid = plain["metadata"]["uid"].as_str().unwrap().to_string();
    let theirs = |cm: &ConfigMap| {
        let owner = &cm.metadata.owner_references.as_ref().unwrap()[0];
        cm.data.as_ref().unwrap().get("owner").map(String::as_str) == Some("plain")
            && !cm.data.as_ref().unwrap().contains_key("stolen")
            && owner.uid == plain_uid
            && cm.metadata.labels.as_ref().unwrap().get(OWNER_UID_LABEL) == Some(&plain_uid)
    };
    assert!(theirs(&configmaps.get("t1-t").await.unwrap()));

    // Another CRD's same-named CR, through templates.
    h.create("Rival", "t1", json!({})).await;
    let rival = cr_where(&h.api("Rival"), "t1", reason_is("NotOwned")).await;
    let message = ready_condition(&rival)["message"].as_str().unwrap();
    assert!(
        message.contains("is controlled by Plain t1, not this Rival t1"),
        "{message}"
    );

    // A component returning the same name; its remembered list forged to name it too.
    let stealers = h.api("Stealer");
    let forged = json!([["v1", "ConfigMap", h.ns.name, "t1-t"]]).to_string();
    create_annotated(
        &h,
        "Stealer",
        "t1",
        json!({COMPONENT_CHILDREN: forged}),
        json!({"mode": "steal"}),
    )
    .await;
    cr_where(&stealers, "t1", reason_is("NotOwned")).await;
    assert!(theirs(&configmaps.get("t1-t").await.unwrap()), "not written");
    // It stops returning the child: the host looks at the remembered entry and leaves it.
    h.patch("Stealer", "t1", json!({"spec": {"mode": "ok"}})).await;
    cr_where(&stealers, "t1", is_ready).await;
    assert!(theirs(&configmaps.get("t1-t").await.unwrap()), "not pruned");

    // Both intruders go; the child stays with its owner.
    for kind in ["Rival", "Stealer"] {
        h.api(kind).delete("t1", &DeleteParams::default()).await.unwrap();
        wait_gone(&h.api(kind), "t1").await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kept = configmaps.get("t1-t").await.unwrap();
    assert!(theirs(&kept), "not adopted, not collected: {:?}", kept.metadata);
    let managers: Vec<String> = kept
        .metadata
        .managed_fields
        .unwrap()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(
        managers,
        [format!("orkestra/plains.{}", h.group)],
        "its tenant's own field manager"
    );
    h.stop().await;
}

/// Children written by an older release (the shared `orkestra` manager, the name label only)
/// are moved to their tenant's manager and stamped with the CR's UID on the first reconcile.
#[tokio::test]
async fn children_of_the_older_scheme_migrate_on_the_first_reconcile() {
    let h = Harness::start("migrate", &crd("app", "App", &template_box("app")), &[], true).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    // As an older release left it: applied by "orkestra", with a field the Katalog no
    // longer sets.
    let old = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "m1-t", "labels": legacy_labels("m1")},
        "data": {"owner": "app", "retired": "yes"},
    });
    configmaps
        .patch("m1-t", &PatchParams::apply("orkestra"), &Patch::Apply(&old))
        .await
        .unwrap();
    h.create("App", "m1", json!({})).await;
    let app = cr_where(&h.api("App"), "m1", is_ready).await;
    let uid = app["metadata"]["uid"].as_str().unwrap();
    let migrated = configmaps.get("m1-t").await.unwrap();
    assert_eq!(migrated.metadata.labels.as_ref().unwrap()[OWNER_UID_LABEL], uid);
    let managers: Vec<String> = migrated
        .metadata
        .managed_fields
        .as_ref()
        .unwrap()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, [format!("orkestra/apps.{}", h.group)], "{managers:?}");
    assert!(
        !migrated.data.as_ref().unwrap().contains_key("retired"),
        "a field the old manager applied and the Katalog dropped is removed with the manager handed over"
    );
    assert_eq!(migrated.metadata.owner_references.unwrap()[0].uid, uid);
    h.stop().await;
}

/// Issue 10, hole 3: eight core instances, each memory under the cap, together far above it.
#[tokio::test]
async fn the_memory_limit_counts_every_memory_of_the_instance() {
    let component = guests::component("many-memories").unwrap();
    let hoard = |memory: &str| {
        format!(
            "        reconcile:\n          hooks:\n            component: {}\n            limits: {{memory: {memory}}}\n",
            component.display()
        )
    };
    let crds = [
        crd("hoard", "Hoard", &hoard("32Mi")),
        crd("roomy", "Roomy", &hoard("256Mi")),
    ]
    .join("");
    let h = Harness::start("memories", &crds, &[], true).await;
    h.create("Hoard", "h1", json!({})).await;
    h.create("Roomy", "r1", json!({})).await;
    let hoarder = cr_where(&h.api("Hoard"), "h1", reason_is("ComponentMemoryLimit")).await;
    let message = ready_condition(&hoarder)["message"].as_str().unwrap();
    assert!(
        message.contains("33554432 bytes (all its memories and tables together)"),
        "{message}"
    );
    // The same component fits when its limit holds all eight memories (8 x 30 MiB).
    cr_where(&h.api("Roomy"), "r1", is_ready).await;
    h.stop().await;
}

/// Issue 10, hole 6: a component asking to run again at once.
#[tokio::test]
async fn a_zero_requeue_is_held_to_the_floor() {
    let h = Harness::start("requeue", &crd("looper", "Looper", &hostile_box("", "")), &[], true).await;
    h.create("Looper", "spin", json!({"mode": "requeue0"})).await;
    cr_where(&h.api("Looper"), "spin", is_ready).await;
    let counters = &h.handle("looper").counters;
    let before = counters.reconciles.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let runs = counters.reconciles.load(Ordering::Relaxed) - before;
    println!("requeue-after(0): {runs} reconciles in 6 s");
    assert!(
        (3..=8).contains(&runs),
        "about one a second (the default minInterval), not a busy loop: {runs}"
    );
    h.stop().await;
}

/// Issue 10, hole 7: an on-delete that never succeeds, under each finalizer policy.
#[tokio::test]
async fn a_failing_on_delete_blocks_with_its_reason_or_releases_as_the_katalog_says() {
    let crds = [
        crd(
            "stuck",
            "Stuck",
            &hostile_box("", "            deletion: {timeout: 2s}\n"),
        ),
        crd(
            "freed",
            "Freed",
            &hostile_box("", "            deletion: {timeout: 2s, onTimeout: release}\n"),
        ),
    ]
    .join("");
    let h = Harness::start("undeletable", &crds, &[], true).await;
    for kind in ["Stuck", "Freed"] {
        h.create(kind, "vol", json!({"mode": "undeletable"})).await;
        cr_where(&h.api(kind), "vol", is_ready).await;
        h.api(kind).delete("vol", &DeleteParams::default()).await.unwrap();
    }
    let stuck = cr_where(&h.api("Stuck"), "vol", reason_is("DeletionBlocked")).await;
    let message = ready_condition(&stuck)["message"].as_str().unwrap();
    assert!(
        message.contains("StillAttached: the volume is still attached") && message.contains("onTimeout: block"),
        "{message}"
    );
    assert!(
        stuck["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
    );
    wait_gone(&h.api("Freed"), "vol").await;
    let events: Api<Event> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let released = events.list(&ListParams::default()).await.unwrap();
    assert!(
        released
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("FreedFinalizerReleased")),
        "the release is on record"
    );
    // Let the namespace go.
    h.patch("Stuck", "vol", json!({"metadata": {"finalizers": []}})).await;
    h.stop().await;
}

/// Issue 10, hole 4: what the host does after a call stops when the CR is deleted.
#[tokio::test]
async fn applying_a_components_children_stops_when_its_cr_is_deleted() {
    let h = Harness::start(
        "interrupt",
        &crd("mass", "Mass", &hostile_box(", children: 1000, resultSize: 1Mi", "")),
        &[],
        true,
    )
    .await;
    h.create("Mass", "m", json!({"mode": "children", "count": 1000})).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let mine = ListParams::default().labels("orkestra-owner=m");
    eventually("the first children", WAIT, || async {
        let applied = configmaps.list(&mine).await.ok()?.items.len();
        (applied >= 20).then_some(())
    })
    .await
    .unwrap();
    h.api("Mass").delete("m", &DeleteParams::default()).await.unwrap();
    wait_gone(&h.api("Mass"), "m").await;
    let writes = h.handle("mass").counters.writes.load(Ordering::Relaxed);
    println!("children applied before the deletion stopped them: about {writes} writes of 1000");
    assert!(
        writes < 800,
        "the deletion did not wait for all 1000 children: {writes} writes"
    );
    h.stop().await;
}

/// What a component returns is applied under its own field manager, owned by the UID, and a
/// settled CR costs no write however often it is reconciled.
#[tokio::test]
async fn a_settled_component_child_is_the_crs_and_costs_no_writes() {
    let operator_box =
        hostile_box("", "").replace("        reconcile:\n", "        reconcile:\n          resync: 1s\n");
    let h = Harness::start("settled", &crd("keeper", "Keeper", &operator_box), &[], true).await;
    // "steal" returns a ConfigMap named `<name>-t`: here nobody else has one.
    h.create("Keeper", "own", json!({"mode": "steal"})).await;
    let keeper = cr_where(&h.api("Keeper"), "own", is_ready).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    let child = configmaps.get("own-t").await.unwrap();
    assert_eq!(
        child.metadata.labels.as_ref().unwrap()[OWNER_UID_LABEL],
        keeper["metadata"]["uid"].as_str().unwrap()
    );
    let managers: Vec<String> = child
        .metadata
        .managed_fields
        .unwrap()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, [format!("orkestra-wasm/keepers.{}", h.group)]);
    h.writes_nothing_once_settled("keeper").await;
    h.stop().await;
}

/// Issue 10, hole 4: a list is read page by page and stops at the byte budget, every time.
#[tokio::test]
async fn a_list_stops_at_the_kube_byte_budget() {
    let operator_box = hostile_box(", kubeBytes: 1Mi", "");
    let h = Harness::start("listing", &crd("lister", "Lister", &operator_box), &[], true).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    for i in 0..10 {
        let bulk: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("bulk-{i}")}, "data": {"blob": "b".repeat(200_000)}}),
        )
        .unwrap();
        configmaps.create(&PostParams::default(), &bulk).await.unwrap();
    }
    h.create("Lister", "all", json!({"mode": "list"})).await;
    let listed = eventually("the lists' outcomes", WAIT, || async {
        let cr = h.api("Lister").get("all").await.ok()?;
        cr.data["status"]["listed"].as_array().cloned()
    })
    .await
    .unwrap();
    assert_eq!(listed.len(), 4, "{listed:?}");
    assert!(
        listed.iter().all(|a| a
            .as_str()
            .is_some_and(|m| m.contains("1048576 kube bytes is spent (limits.kubeBytes)"))),
        "2 MB of ConfigMaps against a 1Mi budget, four times: {listed:?}"
    );
    h.stop().await;
}

/// Writes `yaml` to a file and applies it with kubectl, as a cluster admin would.
fn kubectl_apply(yaml: &str) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), yaml).unwrap();
    orkestra_test_support::kubectl(&["apply", "-f", file.path().to_str().unwrap()]).unwrap();
}

#[tokio::test]
async fn a_component_acts_as_its_service_account_and_rbac_holds_beside_the_grants() {
    let hook = guests::component("rust-hook").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let katalog = std::fs::read_to_string(crate::running::katalogs_dir().join("site-hook/katalog.yaml"))
        .unwrap()
        .replace(
            "../../examples/target/wasm32-wasip2/release/rust_hook.wasm",
            hook.to_str().unwrap(),
        )
        .replace("name: site-hook", "name: site-identity")
        .replacen(
            "limits: {timeout: 2s, memory: 32Mi}",
            "limits: {timeout: 2s, memory: 32Mi}\n            serviceAccount: site-runner",
            1,
        );
    std::fs::write(dir.path().join("katalog.yaml"), katalog).unwrap();
    let run = crate::running::Running::start("site-identity", &[dir.path().join("katalog.yaml")], &[]).await;
    let ns = run.ns.name.clone();
    let user = format!("system:serviceaccount:{ns}:site-runner");
    kubectl_apply(&format!(
        "{{apiVersion: v1, kind: ServiceAccount, metadata: {{name: site-runner, namespace: {ns}}}}}"
    ));
    let sites = run.crs("hooks.orkestra.io", "Site");
    run.create(&sites, "Site", "shop", json!({"title": "Shop"})).await;

    // The grants allow get and apply of ConfigMaps; RBAC allows the account nothing. Its
    // read through the kube interface is refused by the API server, as that account.
    let refused = cr_where(&sites, "shop", reason_is("DefaultsUnreadable")).await;
    let message = ready_condition(&refused)["message"].as_str().unwrap().to_string();
    assert!(message.contains(&user) && message.contains("forbidden"), "{message}");

    // RBAC lets it read ConfigMaps but not write them: the child it returns is refused.
    let role = |verbs: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: site-runner, namespace: {ns}}}
rules: [{{apiGroups: [''], resources: [configmaps], verbs: [{verbs}]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: site-runner, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: site-runner}}
subjects: [{{kind: ServiceAccount, name: site-runner, namespace: {ns}}}]
"
        )
    };
    let nudge = |n: u32| {
        let sites = sites.clone();
        async move {
            let patch = json!({"metadata": {"annotations": {"test/nudge": n.to_string()}}});
            sites
                .patch("shop", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    };
    kubectl_apply(&role("get"));
    nudge(1).await;
    let refused = cr_where(&sites, "shop", reason_is("ComponentForbidden")).await;
    let message = ready_condition(&refused)["message"].as_str().unwrap().to_string();
    assert!(
        message.contains(&format!("acting as {user}"))
            && message.contains("forbidden")
            && message.contains("shop-content"),
        "{message}"
    );
    let maps: Api<ConfigMap> = Api::namespaced(run.ns.client.clone(), &ns);
    assert!(
        maps.get_opt("shop-content").await.unwrap().is_none(),
        "nothing was written as the account"
    );
    // The templates' own child is the host's: written all along.
    let deployments: Api<DynamicObject> = Api::namespaced_with(
        run.ns.client.clone(),
        &ns,
        &kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("apps", "v1", "Deployment")),
    );
    assert!(deployments.get_opt("shop").await.unwrap().is_some());

    // Once RBAC allows what the grants do, the CR converges.
    kubectl_apply(&role("get, create, patch"));
    nudge(2).await;
    cr_where(&sites, "shop", is_ready).await;
    let content = maps.get("shop-content").await.unwrap();
    assert!(content.data.unwrap()["index.html"].contains("Shop"));
    run.stop().await;
}

#[tokio::test]
async fn a_file_grant_is_one_read_only_directory_and_nothing_past_it() {
    let hostile = guests::component("hostile").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    std::fs::write(bundle.join("policy.txt"), "allow").unwrap();
    // Outside the grant: beside it, and behind a symlink inside it.
    std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
    std::fs::create_dir(dir.path().join("outside")).unwrap();
    std::fs::write(dir.path().join("outside/secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(dir.path().join("outside"), bundle.join("escape")).unwrap();
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: file-grant}}
spec:
  crds:
    bundle:
      apiTypes: {{group: files.orkestra.io, version: v1, kind: Bundle}}
      operatorBox:
        reconcile:
          hooks:
            component: {}
            files: [{{path: bundle, mountPath: /bundle}}]
",
        hostile.display()
    );
    std::fs::write(dir.path().join("katalog.yaml"), katalog).unwrap();
    let run = crate::running::Running::start("file-grant", &[dir.path().join("katalog.yaml")], &[]).await;
    let bundles = run.crs("files.orkestra.io", "Bundle");
    run.create(&bundles, "Bundle", "probe", json!({"mode": "files"})).await;
    let status = run.status(&bundles, "probe", |s| s["granted"].is_string()).await;
    assert_eq!(status["granted"], "read: allow", "{status}");
    for attempt in ["dotdot", "symlink", "absolute", "write", "create", "mkdir"] {
        let outcome = status[attempt].as_str().unwrap_or_default();
        assert!(outcome.starts_with("denied"), "{attempt}: {outcome}");
    }
    assert_eq!(std::fs::read_to_string(bundle.join("policy.txt")).unwrap(), "allow");
    assert!(!bundle.join("new.txt").exists() && !bundle.join("sub").exists());
    run.stop().await;
}

#[tokio::test]
async fn fuel_stops_a_spinning_hook_at_its_limit_and_is_counted_per_call() {
    let hostile = guests::component("hostile").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: fuel}}
spec:
  crds:
    burner:
      apiTypes: {{group: fuel.orkestra.io, version: v1, kind: Burner}}
      operatorBox:
        reconcile:
          hooks:
            component: {}
            limits: {{timeout: 20s, fuel: 50000000}}
",
        hostile.display()
    );
    std::fs::write(dir.path().join("katalog.yaml"), katalog).unwrap();
    let run = crate::running::Running::start("fuel", &[dir.path().join("katalog.yaml")], &[]).await;
    let burners = run.crs("fuel.orkestra.io", "Burner");
    // A call that finishes reports the fuel it burnt.
    run.create(&burners, "Burner", "calm", json!({"mode": "probe"})).await;
    run.status(&burners, "calm", |s| s["fs"].is_string()).await;
    let slot = run.components.get("burner").unwrap();
    let fuel = slot.stats.view().fuel.expect("fuel is metered");
    assert!(fuel.last_call > 0 && fuel.consumed >= fuel.last_call, "{fuel:?}");
    // A loop stops when its fuel does: long before its 20 s timeout, the same on any machine.
    let started = std::time::Instant::now();
    run.create(&burners, "Burner", "spinner", json!({"mode": "loop"})).await;
    let spun = cr_where(&burners, "spinner", reason_is("ComponentFuelExhausted")).await;
    let message = ready_condition(&spun)["message"].as_str().unwrap().to_string();
    assert!(message.contains("burnt its limits.fuel of 50000000"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "stopped by fuel, not by the timeout"
    );
    assert!(slot.stats.view().outcomes["fuel"] >= 1);
    run.stop().await;
}

/// Issue 33, finding 8: a component whose granted directory holds a FIFO nobody writes to
/// reads it on every call. Each call times out, but its read keeps a thread; those threads
/// are the component's own few, never the host's, so reloads, other tenants and shutdown go
/// on as before.
#[tokio::test]
async fn reads_that_never_return_pin_only_their_own_components_threads() {
    use std::os::unix::ffi::OsStrExt;
    let hostile = guests::component("hostile").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    let fifo = std::ffi::CString::new(bundle.join("fifo").as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo(3) on a NUL-terminated path of our own temporary directory.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let ns = orkestra_test_support::namespace("pinned").await.unwrap();
    let group = format!("{}.pinned.orkestra.io", ns.name);
    let katalog = format!(
        "apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: pinned}}
spec:
  crds:
    reader:
      apiTypes: {{group: {group}, version: v1, kind: Reader}}
      namespace: {ns}
      operatorBox:
        reconcile:
          workers: 20
          hooks:
            component: {component}
            limits: {{timeout: 300ms}}
            files: [{{path: bundle, mountPath: /bundle}}]
    plain:
      apiTypes: {{group: {group}, version: v1, kind: Plain}}
      namespace: {ns}
      operatorBox:
        reconcile:
          onReconcile:
            configMaps:
              - {{name: '{{{{ .metadata.name }}}}-c', data: {{a: b}}}}
",
        ns = ns.name,
        component = hostile.display()
    );
    let katalog_file = dir.path().join("katalog.yaml");
    std::fs::write(&katalog_file, &katalog).unwrap();
    let compiled = orkestra_katalog::load_sources(&[("katalog.yaml".into(), katalog)]).unwrap();
    orkestra_kube::crd_install::install_crds(&ns.client, &compiled.katalog, WAIT)
        .await
        .unwrap();
    let resource =
        |kind: &str| kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(&group, "v1", kind));
    let readers: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource("Reader"));
    let create = |api: Api<DynamicObject>, kind: &'static str, name: String, spec: Value| {
        let group = group.clone();
        async move {
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": format!("{group}/v1"), "kind": kind, "metadata": {"name": name}, "spec": spec}))
            .unwrap();
            api.create(&PostParams::default(), &object).await.unwrap();
        }
    };
    for chunk in (0..200).collect::<Vec<_>>().chunks(20) {
        let creates = chunk
            .iter()
            .map(|i| create(readers.clone(), "Reader", format!("r{i}"), json!({"mode": "fifo"})));
        futures::future::join_all(creates).await;
    }
    let port = crate::replicas::free_port();
    let cluster = orkestra_test_support::cluster().unwrap();
    let mut host = crate::ork::Ork::spawn(
        &[
            "run",
            "-f",
            katalog_file.to_str().unwrap(),
            "--http-addr",
            &format!("127.0.0.1:{port}"),
        ],
        &[
            ("KUBECONFIG", cluster.kubeconfig.to_str().unwrap()),
            ("ORK_API_TOKEN", ""),
        ],
    );
    let addr = format!("127.0.0.1:{port}");
    // Every reader's call has timed out at least once: each left a read behind.
    eventually("200 calls timed out", Duration::from_secs(120), || async {
        let listed: Value = reqwest::get(format!("http://{addr}/components"))
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let reader = listed["components"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "reader")?
            .clone();
        (reader["calls"]["outcomes"]["timeout"].as_u64()? >= 200).then_some(())
    })
    .await
    .unwrap();
    let threads = std::fs::read_dir(format!("/proc/{}/task", host.pid())).unwrap().count();
    assert!(
        threads < 80,
        "ork holds {threads} threads: the stuck reads took the host's"
    );
    // A reload answers, another tenant reconciles, and the host stops when asked.
    let started = std::time::Instant::now();
    let reload = reqwest::Client::new()
        .post(format!("http://{addr}/reload"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    assert!(reload.status().is_success(), "{}", reload.status());
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    let plains: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource("Plain"));
    create(plains, "Plain", "p".into(), json!({})).await;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    eventually("the other tenant's ConfigMap", Duration::from_secs(15), || async {
        maps.get_opt("p-c").await.ok().flatten().map(|_| ())
    })
    .await
    .unwrap();
    let status = host.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    assert!(status.success() || status.code() == Some(0), "{status:?}");
}

/// Issue 49, finding 10: a guest's `kube.apply` of an object labelled with another CR's
/// owner UID was created, and only the next write to it was refused: by then the host took
/// it for that CR's child. The claim is refused before anything is written.
#[tokio::test]
async fn a_guest_cannot_write_an_object_claiming_another_crs_ownership() {
    let crds = [
        crd("plain", "Plain", &template_box("plain")),
        crd("forger", "Forger", &hostile_box("", "")),
    ]
    .join("");
    let h = Harness::start("forge-owner", &crds, &[], true).await;
    h.create("Plain", "victim", json!({})).await;
    let victim = cr_where(&h.api("Plain"), "victim", is_ready).await;
    let uid = victim["metadata"]["uid"].as_str().unwrap().to_string();
    h.create("Forger", "attacker", json!({"mode": "forge-owner", "victim": uid}))
        .await;
    let forgers = h.api("Forger");
    // A denial it swallowed still fails its reconcile, naming the claim.
    let ready = cr_where(&forgers, "attacker", |r| r["status"] == "False").await;
    let message = ready_condition(&ready)["message"].as_str().unwrap().to_string();
    assert!(message.contains("claims another custom resource"), "{message}");
    let configmaps: Api<ConfigMap> = Api::namespaced(h.ns.client.clone(), &h.ns.name);
    assert!(
        configmaps.get_opt("attacker-forged").await.unwrap().is_none(),
        "the object claiming the victim was never written"
    );
    h.stop().await;
}
