//! Workload notes: replicas and rollouts, Services, containers and their ports, Jobs.

use serde_json::Value;

use super::args::{Result, string};
use super::entry::Entry;
use super::kubernetes::{at, condition_true, int_at, keyed, obj, text_at};
use crate::template::env::Env;
use crate::template::value::{as_i64, truthy};

pub const WORKLOADS: &[Entry] = &[
    Entry {
        name: "replicasReady",
        func: replicas_ready,
        usage: "replicasReady OBJ",
        doc: "status.readyReplicas reached spec.replicas",
    },
    Entry {
        name: "allReplicasReady",
        func: all_replicas_ready,
        usage: "allReplicasReady OBJ",
        doc: "ready, updated and available replicas all reached spec.replicas (at least 1)",
    },
    Entry {
        name: "rolloutComplete",
        func: rollout_complete,
        usage: "rolloutComplete OBJ",
        doc: "the latest generation is observed and fully updated and available",
    },
    Entry {
        name: "desiredReplicas",
        func: desired_replicas,
        usage: "desiredReplicas OBJ",
        doc: "spec.replicas (1 when unset)",
    },
    Entry {
        name: "readyReplicas",
        func: ready_replicas,
        usage: "readyReplicas OBJ",
        doc: "status.readyReplicas",
    },
    Entry {
        name: "availableReplicas",
        func: available_replicas,
        usage: "availableReplicas OBJ",
        doc: "status.availableReplicas",
    },
    Entry {
        name: "updatedReplicas",
        func: updated_replicas,
        usage: "updatedReplicas OBJ",
        doc: "status.updatedReplicas",
    },
    Entry {
        name: "serviceClusterIP",
        func: service_cluster_ip,
        usage: "serviceClusterIP SVC",
        doc: "spec.clusterIP",
    },
    Entry {
        name: "serviceNodePort",
        func: service_node_port,
        usage: "serviceNodePort SVC",
        doc: "nodePort of the first port (0 when none)",
    },
    Entry {
        name: "serviceLoadBalancerIP",
        func: service_lb_ip,
        usage: "serviceLoadBalancerIP SVC",
        doc: "the first load-balancer ingress IP",
    },
    Entry {
        name: "serviceLoadBalancerHost",
        func: service_lb_host,
        usage: "serviceLoadBalancerHost SVC",
        doc: "the first load-balancer ingress hostname",
    },
    Entry {
        name: "endpointsReady",
        func: endpoints_ready,
        usage: "endpointsReady ENDPOINTS",
        doc: "some subset has a ready address",
    },
    Entry {
        name: "containerImage",
        func: container_image,
        usage: "containerImage OBJ",
        doc: "image of the first container (pods, workloads, jobs, cronjobs)",
    },
    Entry {
        name: "containerEnv",
        func: container_env,
        usage: "containerEnv NAME OBJ",
        doc: "value of env var NAME in the first container",
    },
    Entry {
        name: "containerPort",
        func: container_port,
        usage: "containerPort OBJ",
        doc: "the first container's first port (0 when none)",
    },
    Entry {
        name: "containerPortByName",
        func: container_port_by_name,
        usage: "containerPortByName NAME OBJ",
        doc: "the port named NAME in any container",
    },
    Entry {
        name: "containerPorts",
        func: container_ports,
        usage: "containerPorts OBJ",
        doc: "every container port number",
    },
    Entry {
        name: "containerCount",
        func: container_count,
        usage: "containerCount OBJ",
        doc: "number of containers",
    },
    Entry {
        name: "cronJobLastScheduleTime",
        func: cron_job_last_schedule_time,
        usage: "cronJobLastScheduleTime CRONJOB",
        doc: "status.lastScheduleTime (empty before the first run)",
    },
    Entry {
        name: "jobSucceeded",
        func: job_succeeded,
        usage: "jobSucceeded JOB",
        doc: "the Job completed (condition Complete or status.succeeded > 0)",
    },
    Entry {
        name: "jobFailed",
        func: job_failed,
        usage: "jobFailed JOB",
        doc: "the Job failed (condition Failed)",
    },
    Entry {
        name: "jobActive",
        func: job_active,
        usage: "jobActive JOB",
        doc: "the Job has active pods",
    },
];

fn desired(value: &Value) -> i64 {
    as_i64(at(value, &["spec", "replicas"])).unwrap_or(1)
}
fn replicas_ready(_: &Env<'_>, args: &[&Value]) -> Result {
    let value = obj(args)?;
    Ok(Value::Bool(
        truthy(value) && int_at(value, &["status", "readyReplicas"]) >= desired(value),
    ))
}
fn all_replicas_ready(_: &Env<'_>, args: &[&Value]) -> Result {
    let value = obj(args)?;
    let want = desired(value);
    let all = ["readyReplicas", "updatedReplicas", "availableReplicas"]
        .iter()
        .all(|f| int_at(value, &["status", f]) >= want);
    Ok(Value::Bool(truthy(value) && want > 0 && all))
}
fn rollout_complete(_: &Env<'_>, args: &[&Value]) -> Result {
    let value = obj(args)?;
    let want = desired(value);
    let observed = int_at(value, &["status", "observedGeneration"]) >= int_at(value, &["metadata", "generation"]);
    let updated = int_at(value, &["status", "updatedReplicas"]) >= want;
    let available = int_at(value, &["status", "availableReplicas"]) >= want;
    let total = int_at(value, &["status", "replicas"]);
    Ok(Value::Bool(
        truthy(value) && observed && updated && available && total <= want,
    ))
}
fn desired_replicas(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(desired(obj(args)?)))
}
fn cron_job_last_schedule_time(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["status", "lastScheduleTime"]))
}
fn ready_replicas(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["status", "readyReplicas"])))
}
fn available_replicas(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["status", "availableReplicas"])))
}
fn updated_replicas(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(int_at(obj(args)?, &["status", "updatedReplicas"])))
}
fn service_cluster_ip(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["spec", "clusterIP"]))
}
fn service_node_port(_: &Env<'_>, args: &[&Value]) -> Result {
    let port = at(obj(args)?, &["spec", "ports"])
        .get(0)
        .map_or(0, |p| int_at(p, &["nodePort"]));
    Ok(Value::from(port))
}
fn lb_ingress(value: &Value, field: &str) -> Value {
    at(value, &["status", "loadBalancer", "ingress"])
        .get(0)
        .map_or(string(""), |i| text_at(i, &[field]))
}
fn service_lb_ip(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(lb_ingress(obj(args)?, "ip"))
}
fn service_lb_host(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(lb_ingress(obj(args)?, "hostname"))
}
fn endpoints_ready(_: &Env<'_>, args: &[&Value]) -> Result {
    let subsets = at(obj(args)?, &["subsets"]).as_array().cloned().unwrap_or_default();
    Ok(Value::Bool(subsets.iter().any(|s| {
        s.get("addresses")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    })))
}

/// The container list of a pod, a workload's pod template, or a CronJob's job template.
fn containers(value: &Value) -> Vec<Value> {
    [
        &["spec", "containers"][..],
        &["spec", "template", "spec", "containers"],
        &["spec", "jobTemplate", "spec", "template", "spec", "containers"],
    ]
    .iter()
    .find_map(|path| at(value, path).as_array().cloned())
    .unwrap_or_default()
}
fn container_image(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(containers(obj(args)?)
        .first()
        .map_or(string(""), |c| text_at(c, &["image"])))
}
fn container_env(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    let first = containers(value).into_iter().next().unwrap_or(Value::Null);
    let env = at(&first, &["env"]).as_array().cloned().unwrap_or_default();
    Ok(env
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(&key))
        .map_or(string(""), |e| text_at(e, &["value"])))
}
fn ports(value: &Value) -> Vec<Value> {
    containers(value)
        .iter()
        .flat_map(|c| at(c, &["ports"]).as_array().cloned().unwrap_or_default())
        .collect()
}
fn container_port(_: &Env<'_>, args: &[&Value]) -> Result {
    let first = containers(obj(args)?).into_iter().next().unwrap_or(Value::Null);
    Ok(Value::from(
        at(&first, &["ports"])
            .get(0)
            .map_or(0, |p| int_at(p, &["containerPort"])),
    ))
}
fn container_port_by_name(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    let port = ports(value)
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(&key))
        .map_or(0, |p| int_at(p, &["containerPort"]));
    Ok(Value::from(port))
}
fn container_ports(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Array(
        ports(obj(args)?)
            .iter()
            .map(|p| Value::from(int_at(p, &["containerPort"])))
            .collect(),
    ))
}
fn container_count(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(containers(obj(args)?).len()))
}
fn job_succeeded(_: &Env<'_>, args: &[&Value]) -> Result {
    let value = obj(args)?;
    Ok(Value::Bool(
        condition_true(value, "Complete") || int_at(value, &["status", "succeeded"]) > 0,
    ))
}
fn job_failed(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(condition_true(obj(args)?, "Failed")))
}
fn job_active(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(int_at(obj(args)?, &["status", "active"]) > 0))
}
