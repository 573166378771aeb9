//! Every resource key of a HookTemplates block renders to an object the real API server
//! accepts (at their GA versions: batch/v1 CronJob, autoscaling/v2 HPA and policy/v1 PDB,
//! which the current control plane serves), and a resync over all of them writes nothing.

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use orkestra_test_support::eventually;
use serde_json::{Value, json};

use crate::pipeline::{Harness, WAIT, crd};

const BOX: &str = "        reconcile:
          resync: 1s
          onReconcile:
            cronJobs:
              - {schedule: '*/5 * * * *', image: busybox, command: [date]}
            ingresses:
              - {host: '{{ .metadata.name }}.example.com', servicePort: 8080}
            persistentVolumes:
              - {name: '{{ .metadata.namespace }}-pv', storage: 1Gi, hostPath: /tmp/data}
            persistentVolumeClaims:
              - {storage: 1Gi}
            hpa:
              - {maxReplicas: 5, targetCPUUtilization: 70}
            pdb:
              - {maxUnavailable: 1}
            namespaces:
              - {name: '{{ .metadata.namespace }}-team'}
            roles:
              - rules: [{apiGroups: [''], resources: [configmaps], verbs: [get]}]
            roleBindings:
              - {role: '{{ .metadata.name }}-role', serviceAccount: default}
            clusterRoles:
              - {name: '{{ .metadata.namespace }}-reader', rules: [{apiGroups: [''], resources: [pods], verbs: [list]}]}
            clusterRoleBindings:
              - {name: '{{ .metadata.namespace }}-reader', clusterRole: '{{ .metadata.namespace }}-reader', serviceAccount: default}
            limitRanges:
              - limits: [{type: Container, default: {cpu: 500m}}]
            resourceQuotas:
              - hard: {pods: '10'}
            networkPolicies:
              - {policyTypes: [Ingress]}
";

fn api(h: &Harness, api_version: &str, kind: &str, plural: &str, namespaced: bool) -> Api<DynamicObject> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    if namespaced {
        Api::namespaced_with(h.ns.client.clone(), &h.ns.name, &resource)
    } else {
        Api::all_with(h.ns.client.clone(), &resource)
    }
}

#[tokio::test]
async fn every_kind_is_applied_as_the_server_serves_it_and_then_left_alone() {
    let h = Harness::start("kinds", &crd("app", "App", BOX), &[], true).await;
    h.create("App", "k", json!({})).await;
    let ns = h.ns.name.clone();
    eventually("Ready", WAIT, || async {
        let app = h.api("App").get("k").await.ok()?;
        (app.data["status"]["conditions"][0]["status"] == "True").then_some(())
    })
    .await
    .unwrap();

    #[rustfmt::skip]
    let expect = [
        ("batch/v1", "CronJob", "cronjobs", true, "k-cronjob".to_string(), "/spec/schedule", json!("*/5 * * * *")),
        ("networking.k8s.io/v1", "Ingress", "ingresses", true, "k-ingress".into(), "/spec/rules/0/http/paths/0/backend/service/name", json!("k-svc")),
        ("v1", "PersistentVolume", "persistentvolumes", false, format!("{ns}-pv"), "/spec/hostPath/path", json!("/tmp/data")),
        ("v1", "PersistentVolumeClaim", "persistentvolumeclaims", true, "k-pvc".into(), "/spec/resources/requests/storage", json!("1Gi")),
        ("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true, "k-hpa".into(), "/spec/scaleTargetRef/name", json!("k-deployment")),
        ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", true, "k-pdb".into(), "/spec/selector/matchLabels/app", json!("k")),
        ("v1", "Namespace", "namespaces", false, format!("{ns}-team"), "/metadata/labels/orkestra-owner", json!("k")),
        ("rbac.authorization.k8s.io/v1", "Role", "roles", true, "k-role".into(), "/rules/0/verbs/0", json!("get")),
        ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", true, "k-binding".into(), "/subjects/0/namespace", json!(ns)),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", false, format!("{ns}-reader"), "/rules/0/resources/0", json!("pods")),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", false, format!("{ns}-reader"), "/roleRef/kind", json!("ClusterRole")),
        ("v1", "LimitRange", "limitranges", true, "k-limits".into(), "/spec/limits/0/default/cpu", json!("500m")),
        ("v1", "ResourceQuota", "resourcequotas", true, "k-quota".into(), "/spec/hard/pods", json!("10")),
        ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", true, "k-netpol".into(), "/spec/podSelector/matchLabels/app", json!("k")),
    ];
    for (api_version, kind, plural, namespaced, name, pointer, value) in &expect {
        let object = api(&h, api_version, kind, plural, *namespaced)
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{kind} {name}: {e}"));
        let object: Value = serde_json::to_value(object).unwrap();
        assert_eq!(object.pointer(pointer), Some(value), "{kind} {name} at {pointer}");
        let owners = object["metadata"]["ownerReferences"].as_array().map_or(0, Vec::len);
        assert_eq!(
            owners,
            usize::from(*namespaced),
            "{kind}: owner reference only when namespaced"
        );
    }

    // Server defaults on every kind must not read as drift.
    h.writes_nothing_once_settled("app").await;
    h.stop().await;
}
