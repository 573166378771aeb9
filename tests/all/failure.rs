//! The API server's real answers, as the reconcile path classifies them: a write that named
//! a stale resourceVersion runs again soon; an apply conflict with another field manager, a
//! denial, a missing object and an invalid one are reported as what they are.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use orkestra::outcome::failure::{Reason, ReconcileError, Retry};
use orkestra_test_support::{cluster, namespace};
use serde_json::json;

fn config_map(name: &str, value: &str) -> anyhow::Result<ConfigMap> {
    Ok(serde_json::from_value(
        json!({"metadata": {"name": name}, "data": {"a": value}}),
    )?)
}

#[tokio::test]
async fn api_answers_decide_the_retry() -> anyhow::Result<()> {
    let ns = namespace("failure").await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let created = api.create(&PostParams::default(), &config_map("web", "1")?).await?;
    let seen = created.metadata.resource_version.clone();
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "2"}})),
    )
    .await?;

    // A write that carried the resourceVersion we saw, after someone else wrote.
    let stale = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": seen}, "data": {"a": "3"}})),
        )
        .await
        .expect_err("a stale resourceVersion is refused");
    let stale = ReconcileError::stale(Reason::MetadataPatchFailed, "ConfigMap web", stale);
    assert_eq!(
        (stale.status_code(), stale.retry()),
        (Some(409), Retry::Soon),
        "{stale}"
    );

    // Another field manager owns data.a; applying a different value without force.
    api.patch(
        "web",
        &PatchParams::apply("someone-else").force(),
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "theirs"}})),
    )
    .await?;
    let conflict = api
        .patch(
            "web",
            &PatchParams::apply("orkestra/test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "ours"}})),
        )
        .await
        .expect_err("an apply conflict");
    let conflict = ReconcileError::api(Reason::ApplyFailed, "ConfigMap web", conflict);
    assert_eq!((conflict.status_code(), conflict.retry()), (Some(409), Retry::Report));
    assert!(
        conflict.message.starts_with("ConfigMap web: conflict: "),
        "{}",
        conflict.message
    );

    let missing = api.get("absent").await.expect_err("no such ConfigMap");
    let missing = ReconcileError::api(Reason::DeleteFailed, "ConfigMap absent", missing);
    assert_eq!((missing.status_code(), missing.retry()), (Some(404), Retry::Report));
    assert!(missing.message.contains("not found: "), "{}", missing.message);

    let invalid = api
        .create(&PostParams::default(), &config_map("Not_A_Name", "1")?)
        .await
        .expect_err("an invalid name");
    let invalid = ReconcileError::api(Reason::ApplyFailed, "ConfigMap Not_A_Name", invalid);
    assert_eq!((invalid.status_code(), invalid.retry()), (Some(422), Retry::Report));
    assert!(invalid.message.contains("invalid: "), "{}", invalid.message);

    // A user with no rights at all (impersonated by the test's admin identity).
    let kubeconfig = kube::config::Kubeconfig::read_from(&cluster()?.kubeconfig)?;
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    config.auth_info.impersonate = Some("nobody".into());
    let nobody: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(config)?, &ns.name);
    let denied = nobody.get("web").await.expect_err("nobody may read it");
    let denied = ReconcileError::api(Reason::ApplyFailed, "ConfigMap web", denied);
    assert_eq!((denied.status_code(), denied.retry()), (Some(403), Retry::Report));
    assert!(denied.message.contains("forbidden: "), "{}", denied.message);
    Ok(())
}
