//! `ork plan`: what a Katalog (or a new component) would do to each CR of the cluster, found
//! by the API server's own dry runs and printed as YAML. Nothing is written.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use kube::Resource;
use kube::api::{DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use serde::Serialize;
use serde_json::Value;

use crate::katalog_args::KatalogArgs;
use orkestra::rehearse::plan::{CrPlan, Verdict, report};
use orkestra_kube::objects::Objects;

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    /// Run this component file in slot NAME (`crd` or `crd/target`) instead of the one the
    /// Katalog declares; repeatable.
    #[arg(long = "component", value_name = "NAME=PATH")]
    components: Vec<String>,
    /// Only the CRs with these labels (a label selector, as kubectl takes it).
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    selector: Option<String>,
    #[command(flatten)]
    registry: super::component::PullArgs,
}

/// The plans of one CRD's CRs.
#[derive(Debug, Serialize)]
struct CrdPlan {
    crd: String,
    crs: Vec<CrPlan>,
}

/// What `ork plan` prints.
#[derive(Debug, Serialize)]
struct Plan {
    crds: Vec<CrdPlan>,
    summary: Summary,
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    crs: usize,
    unchanged: usize,
    changes: usize,
    gated: usize,
    failed: usize,
}

/// `--component NAME=PATH`, each as a slot name and a file.
pub fn component_overrides(given: &[String]) -> anyhow::Result<Vec<(String, PathBuf)>> {
    given
        .iter()
        .map(|given| {
            let (name, path) = given
                .split_once('=')
                .with_context(|| format!("--component {given:?}: expected NAME=PATH"))?;
            Ok((name.to_string(), PathBuf::from(path)))
        })
        .collect()
}

/// Exit 0 when no CR would change, 2 when some would (a reconcile that would fail counts),
/// 1 when the plan could not be made.
pub async fn plan(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let katalog = args.katalog.load()?;
    let overrides = component_overrides(&args.components)?;
    let config = crate::cluster::config("plan")
        .await
        .context("cannot build a Kubernetes client from KUBECONFIG or the in-cluster config")?;
    let live = kube::Client::try_from(config).context("cannot build a Kubernetes client")?;
    live.apiserver_version().await.context("cannot reach the API server")?;
    // Components act as the host here (no impersonation): every write, theirs included, is a
    // dry run through this one client.
    let (dry_run, writes) = orkestra::rehearse::dry_run::client(live.clone());
    // No external call either: each is reported, never made.
    let runtime = orkestra::Runtime::with_components(dry_run, &katalog, args.registry.store()?)?.rehearsing();
    for (name, path) in &overrides {
        runtime.replace_component(name, path)?;
    }
    let failed = runtime.load_components().await;
    anyhow::ensure!(failed.is_empty(), "{}", failed.join("; "));
    let mut plans = Vec::new();
    let mut summary = Summary::default();
    for crd in katalog.enabled() {
        let gvk = GroupVersionKind::gvk(&crd.group, &crd.version, &crd.kind);
        let (resource, _) = kube::discovery::pinned_kind(&live, &gvk)
            .await
            .with_context(|| format!("the API server does not serve {} (CRD {})", crd.gvk, crd.name))?;
        let objects = Objects::<DynamicObject>::within(live.clone(), crd.namespace.as_deref(), &resource)?;
        let mut params = ListParams::default();
        if let Some(selector) = &args.selector {
            params = params.labels(selector);
        }
        let listed = objects
            .list(&params)
            .await
            .with_context(|| format!("listing the CRs of {}", crd.name))?;
        let mut crs = Vec::new();
        for cr in listed.items {
            let namespace = cr.metadata.namespace.clone();
            let name = cr.metadata.name.clone().unwrap_or_default();
            let object: Value = serde_json::to_value(&cr)?;
            let cr_path = format!("{}/{name}", DynamicObject::url_path(&resource, namespace.as_deref()));
            writes.take();
            let rehearsed = runtime.rehearse(&crd.name, &resource, object.clone()).await?;
            writes.settle().await;
            let mut plan = report(&live, &cr_path, &object, rehearsed, writes.take()).await;
            plan.external = runtime.calls_not_made();
            summary.crs += 1;
            match plan.verdict {
                Verdict::Unchanged => summary.unchanged += 1,
                Verdict::Changes => summary.changes += 1,
                Verdict::Gated => summary.gated += 1,
                Verdict::Failed => summary.failed += 1,
            }
            crs.push(plan);
        }
        plans.push(CrdPlan {
            crd: crd.name.to_string(),
            crs,
        });
    }
    let changed = summary.changes + summary.failed;
    crate::stdout::write(&serde_yaml_ng::to_string(&Plan { crds: plans, summary })?)?;
    Ok(match changed {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::from(2),
    })
}
