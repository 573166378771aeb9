//! Notes on the pods `enrich: [pods]` embeds on a workload or Job (`_pods`) and the warning
//! Events it gathers (`_warnings`): one pod by ordinal, a container's state, which failure a
//! container shows, where the pods run, a Job's pods by outcome. Nil-safe: a child without
//! the data gives an empty answer.

use serde_json::{Value, json};

use super::args::{Result, exactly, int, string, text};
use super::entry::Entry;
use super::kubernetes::{at, condition_true, container_statuses, int_at, obj, pods, text_at, warnings};
use crate::template::env::Env;
use crate::template::value::truthy;

/// A container waiting or terminated with `reason` in any pod.
macro_rules! detected {
    ($name:literal, $reason:literal) => {
        Entry {
            name: $name,
            func: |_: &Env<'_>, args: &[&Value]| -> Result { Ok(Value::Bool(any_reason(obj(args)?, $reason))) },
            usage: concat!($name, " OBJ"),
            doc: concat!("a container of its pods is waiting or terminated with reason ", $reason),
        }
    };
}

/// Names of the pods in `phase`, or not yet done when `phase` is empty.
macro_rules! job_pods {
    ($name:literal, $phase:literal, $doc:literal) => {
        Entry {
            name: $name,
            func: |_: &Env<'_>, args: &[&Value]| -> Result { Ok(pod_names_in(obj(args)?, $phase)) },
            usage: concat!($name, " OBJ"),
            doc: $doc,
        }
    };
}

pub const FUNCS: &[Entry] = &[
    detected!("podCrashLoopDetected", "CrashLoopBackOff"),
    detected!("podImagePullBackOffDetected", "ImagePullBackOff"),
    detected!("podErrImagePullDetected", "ErrImagePull"),
    detected!("podInvalidImageNameDetected", "InvalidImageName"),
    detected!("podCreateContainerErrorDetected", "CreateContainerError"),
    detected!("podRunContainerErrorDetected", "RunContainerError"),
    detected!("podPostStartHookErrorDetected", "PostStartHookError"),
    detected!("podPreStartHookErrorDetected", "PreStartHookError"),
    detected!("podOOMKilledDetected", "OOMKilled"),
    detected!("podErrorDetected", "Error"),
    Entry {
        name: "podByOrdinal",
        func: pod_by_ordinal,
        usage: "podByOrdinal N OBJ",
        doc: "the pod `<name>-N` as {name, ip, phase, ready, node, restartCount, ordinal}; nil when absent",
    },
    Entry {
        name: "podContainerState",
        func: pod_container_state,
        usage: "podContainerState OBJ N CONTAINER",
        doc: "Running, Waiting or Terminated for that container of pod N; \"\" when absent",
    },
    Entry {
        name: "podPhases",
        func: pod_phases,
        usage: "podPhases OBJ",
        doc: "the pods' phases, in order",
    },
    Entry {
        name: "podNodes",
        func: pod_nodes,
        usage: "podNodes OBJ",
        doc: "the nodes the pods are scheduled on (none while pending)",
    },
    Entry {
        name: "podNodeName",
        func: super::enriched::pod_node,
        usage: "podNodeName POD",
        doc: "the node the pod runs on (enrich: node), else spec.nodeName",
    },
    job_pods!(
        "jobActivePodNames",
        "",
        "names of the Job's pods not yet Succeeded or Failed"
    ),
    job_pods!(
        "jobSucceededPodNames",
        "Succeeded",
        "names of the Job's pods that Succeeded"
    ),
    job_pods!("jobFailedPodNames", "Failed", "names of the Job's pods that Failed"),
    Entry {
        name: "jobFirstExitCode",
        func: job_first_exit_code,
        usage: "jobFirstExitCode OBJ",
        doc: "exit code of the first terminated container of its pods; -1 while none has",
    },
    Entry {
        name: "warningMessages",
        func: warning_messages,
        usage: "warningMessages OBJ",
        doc: "the messages of its warning Events",
    },
    Entry {
        name: "warningReasons",
        func: warning_reasons,
        usage: "warningReasons OBJ",
        doc: "the reasons of its warning Events, each once",
    },
];

fn any_reason(object: &Value, reason: &str) -> bool {
    pods(object).iter().flat_map(container_statuses).any(|status| {
        ["waiting", "terminated"]
            .iter()
            .any(|state| at(&status, &["state", state, "reason"]).as_str() == Some(reason))
    })
}

/// The pod whose name ends in `-N`.
fn by_ordinal(object: &Value, ordinal: i64) -> Option<Value> {
    let suffix = format!("-{ordinal}");
    pods(object).into_iter().find(|pod| {
        at(pod, &["metadata", "name"])
            .as_str()
            .is_some_and(|n| n.ends_with(&suffix))
    })
}

fn pod_by_ordinal(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let (n, object) = match args[0].is_object() {
        true => (1, args[0]),
        false => (0, args[1]),
    };
    let ordinal = int(args, n)?;
    Ok(by_ordinal(object, ordinal).map_or(Value::Null, |pod| {
        let restarts: i64 = container_statuses(&pod)
            .iter()
            .map(|s| int_at(s, &["restartCount"]))
            .sum();
        json!({
            "name": at(&pod, &["metadata", "name"]),
            "ip": at(&pod, &["status", "podIP"]),
            "phase": at(&pod, &["status", "phase"]),
            "ready": condition_true(&pod, "Ready"),
            "node": at(&pod, &["spec", "nodeName"]),
            "restartCount": restarts,
            "ordinal": ordinal,
        })
    }))
}

fn pod_container_state(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 3)?;
    let Some(pod) = by_ordinal(args[0], int(args, 1)?) else {
        return Ok(string(""));
    };
    let container = text(args, 2);
    let state = container_statuses(&pod)
        .into_iter()
        .find(|s| s["name"].as_str() == Some(container.as_ref()))
        .and_then(|s| {
            [
                ("running", "Running"),
                ("waiting", "Waiting"),
                ("terminated", "Terminated"),
            ]
            .into_iter()
            .find(|(key, _)| !s["state"][key].is_null())
            .map(|(_, label)| label)
        });
    Ok(string(state.unwrap_or_default()))
}

fn pod_phases(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Array(
        pods(obj(args)?)
            .iter()
            .map(|p| text_at(p, &["status", "phase"]))
            .collect(),
    ))
}

fn pod_nodes(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Array(
        pods(obj(args)?)
            .iter()
            .map(|p| text_at(p, &["spec", "nodeName"]))
            .filter(truthy)
            .collect(),
    ))
}

fn pod_names_in(object: &Value, phase: &str) -> Value {
    let done = |p: &str| p == "Succeeded" || p == "Failed";
    Value::Array(
        pods(object)
            .iter()
            .filter(|pod| {
                let now = at(pod, &["status", "phase"]).as_str().unwrap_or_default();
                match phase {
                    "" => !done(now),
                    wanted => now == wanted,
                }
            })
            .map(|pod| text_at(pod, &["metadata", "name"]))
            .collect(),
    )
}

fn job_first_exit_code(_: &Env<'_>, args: &[&Value]) -> Result {
    let code = pods(obj(args)?)
        .iter()
        .flat_map(container_statuses)
        .find_map(|s| s["state"]["terminated"]["exitCode"].as_i64());
    Ok(Value::from(code.unwrap_or(-1)))
}

fn warning_messages(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Array(
        warnings(obj(args)?).iter().map(|w| text_at(w, &["message"])).collect(),
    ))
}

fn warning_reasons(_: &Env<'_>, args: &[&Value]) -> Result {
    let mut reasons: Vec<Value> = Vec::new();
    for warning in warnings(obj(args)?) {
        let reason = text_at(&warning, &["reason"]);
        if truthy(&reason) && !reasons.contains(&reason) {
            reasons.push(reason);
        }
    }
    Ok(Value::Array(reasons))
}
