//! Simulated nodes: Node objects that kwok manages (it marks them Ready, and moves the Pods
//! bound to them through their stages: Running and Ready, the Pods of Jobs Succeeded).

use std::path::Path;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use super::error::Error;

/// The annotation that hands a node to kwok (and only those: a real node is never touched).
const MANAGED: &str = "kwok.x-k8s.io/node";

/// kwok's arguments: the stages it applies come with the build, beside the binary.
pub fn kwok_args(kubeconfig: &Path, kwok: &Path) -> Vec<String> {
    let stages = kwok.with_file_name("kwok-stages.yaml");
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--config={}", stages.display()),
        "--manage-all-nodes=false".into(),
        format!("--manage-nodes-with-annotation-selector={MANAGED}=fake"),
        "--node-ip=10.0.0.1".into(),
        "--cidr=10.0.0.0/16".into(),
        // Renew each node's Lease as a kubelet would (every 10 s). Without a heartbeat the
        // node lifecycle controller finds the node silent after its 50 s grace period,
        // marks it unreachable and its Pods not Ready, and they never turn Ready again.
        "--node-lease-duration-seconds=40".into(),
        "--v=WARN".into(),
    ]
}

/// The name of simulated node `index`.
pub fn name(index: u32) -> String {
    format!("ork-node-{index}")
}

/// Creates `count` simulated nodes (those that exist already are kept, so a restarted
/// instance keeps its nodes).
pub async fn create(client: &kube::Client, count: u32) -> Result<(), Error> {
    let api: Api<Node> = Api::all(client.clone());
    for index in 0..count {
        let name = name(index);
        // Roomy enough that no test or example is ever unschedulable for resources.
        let resources = json!({"cpu": "32", "memory": "256Gi", "pods": "110"});
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {MANAGED: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                },
            },
            "status": {"allocatable": resources, "capacity": resources},
        }))
        .map_err(|e| Error::Command {
            command: format!("build Node {name}"),
            stderr: e.to_string(),
        })?;
        match api.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => {
                return Err(Error::Command {
                    command: format!("create Node {name}"),
                    stderr: error.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// How many simulated nodes are Ready.
pub async fn ready(client: &kube::Client) -> u32 {
    let api: Api<Node> = Api::all(client.clone());
    let Ok(list) = api.list(&ListParams::default()).await else {
        return 0;
    };
    let ready = list.items.iter().filter(|node| {
        let managed = node
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MANAGED));
        let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
        managed && conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    });
    u32::try_from(ready.count()).unwrap_or(u32::MAX)
}
