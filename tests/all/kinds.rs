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

const PROFILED: &str = "        reconcile:
          resync: 1s
          onReconcile:
            deployments:
              - image: nginx
                port: 8080
                resources: {profile: burst}
                probes:
                  readiness: {path: /ready, profile: fast}
                  liveness: {type: tcp, profile: standard}
                securityContext: {profile: '{{ .spec.security }}'}
                podSecurity: {profile: restricted}
                rollingUpdate: {profile: safe}
            statefulSets:
              - image: postgres
                volumeClaimTemplates: [{name: data, storage: 1Gi}]
                rollingUpdate: {profile: safe}
            hpa:
              - {maxReplicas: 5, behavior: {profile: api}}
            pdb:
              - {behavior: {profile: relaxed}}
            resourceQuotas:
              - {profile: '{{ .spec.size }}'}
            networkPolicies:
              - {name: '{{ .metadata.name }}-deny', podSelector: {}, profile: deny-all}
              - {name: '{{ .metadata.name }}-dns', podSelector: {}, profile: allow-dns-egress}
              - {name: '{{ .metadata.name }}-monitoring', podSelector: {}, profile: allow-monitoring}
";

#[tokio::test]
async fn profiles_expand_into_objects_the_server_keeps_as_they_are() {
    let profiles = "profiles:\n  networkPolicies:\n    - name: allow-monitoring\n      policyTypes: [Ingress]\n      ingress: [{from: [{namespaceSelector: {team: platform}}]}]\n";
    let h = Harness::start_with("profiles", profiles, &crd("sized", "Sized", PROFILED), &[], true).await;
    h.create("Sized", "p", json!({"security": "hardened", "size": "medium"}))
        .await;
    eventually("Ready", WAIT, || async {
        let sized = h.api("Sized").get("p").await.ok()?;
        (sized.data["status"]["conditions"][0]["status"] == "True").then_some(())
    })
    .await
    .unwrap();
    let get = |api_version: &'static str, kind: &'static str, plural: &'static str, name: &'static str| {
        let api = api(&h, api_version, kind, plural, true);
        async move { serde_json::to_value(api.get(name).await.unwrap()).unwrap() }
    };
    let deployment = get("apps/v1", "Deployment", "deployments", "p-deployment").await;
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["resources"]["limits"], json!({"cpu": "2", "memory": "2Gi"}));
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/ready");
    assert_eq!(container["readinessProbe"]["failureThreshold"], 2);
    assert_eq!(container["livenessProbe"]["tcpSocket"]["port"], 8080);
    assert_eq!(
        container["securityContext"]["readOnlyRootFilesystem"], true,
        "chosen by the CR"
    );
    assert_eq!(
        deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"],
        1000
    );
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"],
        json!({"maxSurge": 1, "maxUnavailable": 0})
    );
    let set = get("apps/v1", "StatefulSet", "statefulsets", "p-statefulset").await;
    assert_eq!(
        set["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
        "1Gi"
    );
    assert_eq!(set["spec"]["updateStrategy"]["type"], "RollingUpdate");
    let hpa = get(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        "p-hpa",
    )
    .await;
    assert_eq!(hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 600);
    assert_eq!(
        hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        60
    );
    let pdb = get("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", "p-pdb").await;
    assert_eq!(pdb["spec"]["maxUnavailable"], "25%");
    let quota = get("v1", "ResourceQuota", "resourcequotas", "p-quota").await;
    assert_eq!(quota["spec"]["hard"]["pods"], "20", "medium, chosen by the CR");
    let deny = get("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", "p-deny").await;
    assert_eq!(deny["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    let dns = get("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", "p-dns").await;
    assert_eq!(dns["spec"]["egress"][0]["ports"][0]["port"], 53);
    let monitoring = get(
        "networking.k8s.io/v1",
        "NetworkPolicy",
        "networkpolicies",
        "p-monitoring",
    )
    .await;
    assert_eq!(
        monitoring["spec"]["ingress"][0]["from"][0]["namespaceSelector"],
        json!({"matchLabels": {"team": "platform"}}),
        "the user's profile, its selector read as matchLabels"
    );
    // What the presets set is stored as written: resyncs find nothing to correct.
    h.writes_nothing_once_settled("sized").await;

    // A size no profile has fails this CR's reconcile, by name.
    h.create("Sized", "odd", json!({"security": "baseline", "size": "huge"}))
        .await;
    let condition = eventually("the refusal", WAIT, || async {
        let odd = h.api("Sized").get("odd").await.ok()?;
        let condition = odd.data["status"]["conditions"][0].clone();
        (condition["status"] == "False").then_some(condition)
    })
    .await
    .unwrap();
    assert_eq!(condition["reason"], "RenderFailed", "{condition}");
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("unknown resourceQuotas profile \"huge\""),
        "{condition}"
    );
    h.stop().await;
}

#[tokio::test]
async fn workload_autoscale_steps_replicas_within_bounds_and_rests_between_steps() {
    let scale = "autoscale:
                  min: 1
                  max: 3
                  cooldown: 1s
                  scaleUp: {conditions: {when: [{field: spec.load, equals: high}]}}
                  scaleDown: {conditions: {when: [{field: spec.load, equals: low}]}}";
    let operator_box = format!(
        "        reconcile:
          resync: 1s
          onCreate:
            deployments:
              - image: nginx
                {scale}
          onReconcile:
            statefulSets:
              - image: postgres
                replicas: 2
                {scale}
"
    );
    let h = Harness::start("autoscale-workload", &crd("app", "App", &operator_box), &[], true).await;
    h.create("App", "w", json!({"load": "high"})).await;
    let deployments = api(&h, "apps/v1", "Deployment", "deployments", true);
    let sets = api(&h, "apps/v1", "StatefulSet", "statefulsets", true);
    let replicas = |api: Api<DynamicObject>, name: &'static str| async move {
        api.get(name).await.ok()?.data["spec"]["replicas"].as_i64()
    };
    for (what, api, name) in [
        ("deployment", &deployments, "w-deployment"),
        ("statefulset", &sets, "w-statefulset"),
    ] {
        eventually(&format!("the {what} at its max"), WAIT, || async {
            (replicas(api.clone(), name).await? == 3).then_some(())
        })
        .await
        .unwrap();
    }
    let scaled_at = deployments
        .get("w-deployment")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap()["orkestra.orkspace.io/autoscaled-at"]
        .clone();
    assert!(scaled_at.ends_with('Z'), "{scaled_at}");
    // At its max, nothing more to do: resyncs write nothing.
    h.writes_nothing_once_settled("app").await;
    assert_eq!(
        replicas(deployments.clone(), "w-deployment").await,
        Some(3),
        "never past max"
    );

    h.patch("App", "w", json!({"spec": {"load": "low"}})).await;
    for (what, api, name) in [
        ("deployment", &deployments, "w-deployment"),
        ("statefulset", &sets, "w-statefulset"),
    ] {
        eventually(&format!("the {what} back at its min"), WAIT, || async {
            (replicas(api.clone(), name).await? == 1).then_some(())
        })
        .await
        .unwrap();
    }
    h.patch("App", "w", json!({"spec": {"load": "steady"}})).await;
    h.writes_nothing_once_settled("app").await;
    h.stop().await;
}
