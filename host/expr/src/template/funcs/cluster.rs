//! Notes on nodes, StatefulSet revisions and CronJob runs (`_lastJob` and
//! `_lastSuccessfulJob` come from `enrich: [cronjob]`). Nil-safe: a missing object or field
//! gives an empty answer.

use serde_json::Value;

use super::args::{Result, string};
use super::entry::Entry;
use super::kubernetes::{at, condition_true, int_at, keyed, obj, text_at};
use crate::template::env::Env;
use crate::template::value::display;

macro_rules! field {
    ($name:literal, [$($key:literal),+], $doc:literal) => {
        Entry {
            name: $name,
            func: |_: &Env<'_>, args: &[&Value]| -> Result { Ok(text_at(obj(args)?, &[$($key),+])) },
            usage: concat!($name, " OBJ"),
            doc: $doc,
        }
    };
}

pub const FUNCS: &[Entry] = &[
    field!(
        "nodeAllocatableCPU",
        ["status", "allocatable", "cpu"],
        "the node's status.allocatable.cpu"
    ),
    field!(
        "nodeAllocatableMemory",
        ["status", "allocatable", "memory"],
        "the node's status.allocatable.memory"
    ),
    Entry {
        name: "nodeReady",
        func: node_ready,
        usage: "nodeReady NODE",
        doc: "the node's Ready condition is True",
    },
    Entry {
        name: "nodeCondition",
        func: node_condition,
        usage: "nodeCondition TYPE NODE",
        doc: "the status (True, False, Unknown) of the node's condition TYPE; \"\" when absent",
    },
    Entry {
        name: "nodeTaints",
        func: node_taints,
        usage: "nodeTaints NODE",
        doc: "the keys of the node's taints",
    },
    field!(
        "statefulSetCurrentRevision",
        ["status", "currentRevision"],
        "status.currentRevision: the revision its pods run"
    ),
    field!(
        "statefulSetUpdateRevision",
        ["status", "updateRevision"],
        "status.updateRevision: the revision being rolled out"
    ),
    Entry {
        name: "cronJobActiveCount",
        func: cron_job_active_count,
        usage: "cronJobActiveCount CRONJOB",
        doc: "the number of its Jobs running now (status.active)",
    },
    field!(
        "cronJobNextScheduleTime",
        ["status", "nextScheduleTime"],
        "status.nextScheduleTime, where the cluster sets it"
    ),
    field!(
        "cronJobLastJobName",
        ["_lastJob", "metadata", "name"],
        "the name of its newest Job (enrich: cronjob)"
    ),
    Entry {
        name: "cronJobLastJobSucceeded",
        func: cron_job_last_job_succeeded,
        usage: "cronJobLastJobSucceeded CRONJOB",
        doc: "its newest Job has a succeeded pod (enrich: cronjob)",
    },
    field!(
        "cronJobLastSuccessfulJobName",
        ["_lastSuccessfulJob", "metadata", "name"],
        "the name of its newest successful Job (enrich: cronjob)"
    ),
];

fn node_ready(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(condition_true(obj(args)?, "Ready")))
}

fn node_condition(_: &Env<'_>, args: &[&Value]) -> Result {
    let (kind, node) = keyed(args)?;
    let status = at(node, &["status", "conditions"])
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"].as_str() == Some(kind.as_str())))
        .map(|c| display(&c["status"]).into_owned());
    Ok(string(status.unwrap_or_default()))
}

fn node_taints(_: &Env<'_>, args: &[&Value]) -> Result {
    let taints = at(obj(args)?, &["spec", "taints"])
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(Value::Array(taints.iter().map(|t| text_at(t, &["key"])).collect()))
}

fn cron_job_active_count(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(
        at(obj(args)?, &["status", "active"]).as_array().map_or(0, Vec::len),
    ))
}

fn cron_job_last_job_succeeded(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(
        int_at(obj(args)?, &["_lastJob", "status", "succeeded"]) > 0,
    ))
}
