//! Jobs and CronJobs: a pod that runs to completion, once or on a schedule.

use crate::error::Error;
use serde_json::{Value, json};

use super::shorthand::*;
use super::{KindSpec, Shorthand};

pub(super) const JOBS: KindSpec = KindSpec {
    key: "jobs",
    resource: "jobs",
    suffix: Some("job"),
    api_version: "batch/v1",
    kind: "Job",
    namespaced: true,
    pod: true,
    fields: &[
        "restartPolicy",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "activeDeadlineSeconds",
        "completions",
        "parallelism",
    ],
    render: render_jobs,
};

fn render_jobs(s: &Shorthand<'_>) -> Result<Value, Error> {
    let mut spec = json!({"template": {"spec": pod_spec(s.fields, s.cr, Some("Never"))?}});
    for key in [
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "activeDeadlineSeconds",
        "completions",
        "parallelism",
    ] {
        if let Some(n) = int(s.fields.get(key), key)? {
            spec[key] = json!(n);
        }
    }
    Ok(json!({"spec": spec}))
}

pub(super) const CRON_JOBS: KindSpec = KindSpec {
    key: "cronJobs",
    resource: "cronjobs",
    suffix: Some("cronjob"),
    api_version: "batch/v1",
    kind: "CronJob",
    namespaced: true,
    pod: true,
    fields: &[
        "schedule",
        "suspend",
        "concurrencyPolicy",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
        "startingDeadlineSeconds",
        "restartPolicy",
        "backoffLimit",
    ],
    render: render_cron_jobs,
};

fn render_cron_jobs(s: &Shorthand<'_>) -> Result<Value, Error> {
    let mut job = json!({"template": {"spec": pod_spec(s.fields, s.cr, Some("OnFailure"))?}});
    if let Some(n) = int(s.fields.get("backoffLimit"), "backoffLimit")? {
        job["backoffLimit"] = json!(n);
    }
    let mut spec = json!({"schedule": s.get("schedule").ok_or_else(|| Error::Render("schedule is required".into()))?, "jobTemplate": {"spec": job}});
    copy(s.fields, &mut spec, &["suspend", "concurrencyPolicy"]);
    for key in [
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
        "startingDeadlineSeconds",
    ] {
        if let Some(n) = int(s.fields.get(key), key)? {
            spec[key] = json!(n);
        }
    }
    Ok(json!({"spec": spec}))
}
