//! `ork generate crd|bundle|dashboards`: what installing a Katalog takes, as YAML for
//! `kubectl apply`, and a Grafana dashboard over the runtime's metrics.
//! `crd`: its CustomResourceDefinitions. `bundle`: those, then everything the runtime needs in
//! its namespace (the ServiceAccount, the least RBAC `ork manifests` computes, the Katalog as
//! a ConfigMap, a Live API token, and the Deployment, Service and PodDisruptionBudget of
//! `deploy/base`), in the order they apply.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::katalog_args::KatalogArgs;
use crate::katalog_configmap::KatalogConfigMap;
use crate::manifests::{RbacArgs, rbac_documents};

/// The bundle's ConfigMap of the Katalog's files, and where the Deployment mounts them.
const KATALOG_CONFIGMAP: &str = "orkestra-katalog";
const KATALOG_DIR: &str = "/etc/orkestra/katalog";

#[derive(Debug, Subcommand)]
pub enum GenerateCommand {
    /// The CustomResourceDefinitions of the Katalog's CRDs (its `crdFile`s, or generated from
    /// `apiTypes`).
    Crd(CrdArgs),
    /// Everything to run the Katalog in a cluster: CRDs, Namespace, ServiceAccount, RBAC, the
    /// Katalog ConfigMap, a Live API token, Deployment, Service, PodDisruptionBudget.
    Bundle(BundleArgs),
    /// A Grafana dashboard (JSON) over the runtime's metrics: reconciles, queues and flows,
    /// writes, Wasm calls, tenants.
    Dashboards,
}

#[derive(Debug, Args)]
pub struct CrdArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
}

#[derive(Debug, Args)]
pub struct BundleArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    #[command(flatten)]
    rbac: RbacArgs,
    /// The runtime's image.
    #[arg(long, value_name = "IMAGE", default_value = concat!("ghcr.io/orkestra-rs/ork:", env!("CARGO_PKG_VERSION")))]
    image: String,
    /// Replicas: more than one run in leader mode (`--ha leader`).
    #[arg(long, value_name = "N", default_value_t = 2)]
    replicas: u32,
}

/// The base every bundle's runtime objects come from: the kustomize base's own files.
const DEPLOYMENT: &str = include_str!("../../../deploy/base/deployment.yaml");
const SERVICE: &str = include_str!("../../../deploy/base/service.yaml");
const PDB: &str = include_str!("../../../deploy/base/pdb.yaml");

pub fn generate(command: GenerateCommand) -> anyhow::Result<ExitCode> {
    let documents = match command {
        GenerateCommand::Crd(args) => {
            let compiled = args.katalog.load()?;
            orkestra_kube::crd_install::crd_documents(&compiled.katalog)?
        }
        GenerateCommand::Bundle(args) => bundle(&args)?,
        GenerateCommand::Dashboards => {
            crate::stdout::write(&format!("{}\n", serde_json::to_string_pretty(&dashboard())?))?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let mut text = String::new();
    for document in documents {
        text.push_str(&format!("---\n{}\n", serde_yaml_ng::to_string(&document)?.trim_end()));
    }
    crate::stdout::write(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn bundle(args: &BundleArgs) -> anyhow::Result<Vec<Value>> {
    if args.replicas == 0 {
        bail!("--replicas: at least 1");
    }
    let compiled = args.katalog.load()?;
    let namespace = args.rbac.namespace.clone();
    orkestra_expr::names::check_namespace(&namespace).map_err(|why| anyhow::anyhow!("--namespace: {why}"))?;
    let labels = json!({"app.kubernetes.io/name": "orkestra", "app.kubernetes.io/component": "runtime"});
    let in_namespace = |mut object: Value| {
        object["metadata"]["namespace"] = json!(namespace);
        object["metadata"]["labels"] = labels.clone();
        object
    };
    // The Katalog's files, each under its own key, mounted where the runtime reads them.
    let mut data = serde_json::Map::new();
    let mut files = Vec::new();
    for path in args.katalog.files() {
        let key = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .context("a Katalog file has no name")?;
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        if data.insert(key.clone(), json!(text)).is_some() {
            bail!("two Katalog files are named {key}: a ConfigMap holds one of each name");
        }
        files.push(key);
    }
    // One Katalog file is followed in its ConfigMap, so a bundle applied again with a changed
    // Katalog reaches the running replicas at once (the kubelet updates a mounted file a
    // minute or more later, and the runtime does not read it again by itself).
    let follows = match files.as_slice() {
        [file] => Some(KatalogConfigMap::new(
            &format!("{namespace}/{KATALOG_CONFIGMAP}"),
            format!("{KATALOG_DIR}/{file}").into(),
        )?),
        _ => None,
    };
    let mut documents = orkestra_kube::crd_install::crd_documents(&compiled.katalog)?;
    documents.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}));
    documents.push(in_namespace(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": args.rbac.service_account}})));
    documents.extend(rbac_documents(&compiled, &args.rbac, follows.as_ref())?);
    documents.push(in_namespace(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": KATALOG_CONFIGMAP}, "data": data})));
    documents.push(in_namespace(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "orkestra-live-api"}, "type": "Opaque", "stringData": {"token": crate::random::token()}})));
    documents.push(deployment(args, &files, follows.as_ref(), &labels, in_namespace)?);
    for (text, what) in [(SERVICE, "service"), (PDB, "pod disruption budget")] {
        let mut object: Value = serde_yaml_ng::from_str(text).with_context(|| format!("the base {what}"))?;
        object["spec"]["selector"] = match what {
            "service" => labels.clone(),
            _ => json!({"matchLabels": labels}),
        };
        let mut object = in_namespace(object);
        if what == "service" {
            // What a Control Center's discovery looks for.
            object["metadata"]["labels"][super::discover::LABEL] = json!("true");
        }
        documents.push(object);
    }
    let paths = compiled.katalog.crds.values().filter(|c| c.entry.enabled).count();
    eprintln!(
        "bundle: {} objects for {paths} CRD(s) in namespace {namespace}; the Secret holds a new random Live API token. Component files the Katalog names by path must be in the image (or use oci:// references).",
        documents.len()
    );
    Ok(documents)
}

/// The base Deployment in `namespace`, its image, replicas, selector and Katalog files set,
/// following the Katalog's ConfigMap when it `follows` one.
fn deployment(
    args: &BundleArgs,
    files: &[String],
    follows: Option<&KatalogConfigMap>,
    labels: &Value,
    in_namespace: impl Fn(Value) -> Value,
) -> anyhow::Result<Value> {
    let mut deployment: Value = serde_yaml_ng::from_str(DEPLOYMENT).context("the base deployment")?;
    deployment["spec"]["replicas"] = json!(args.replicas);
    deployment["spec"]["selector"] = json!({"matchLabels": labels});
    deployment["spec"]["template"]["metadata"] = json!({"labels": labels});
    deployment["spec"]["template"]["spec"]["serviceAccountName"] = json!(args.rbac.service_account);
    let container = &mut deployment["spec"]["template"]["spec"]["containers"][0];
    container["image"] = json!(args.image);
    let mut run = vec![json!("run")];
    for file in files {
        run.extend([json!("-f"), json!(format!("{KATALOG_DIR}/{file}"))]);
    }
    if let Some(configmap) = follows {
        run.extend([json!("--katalog-configmap"), json!(configmap.to_string())]);
    }
    if args.replicas > 1 {
        run.extend([json!("--ha"), json!("leader")]);
    }
    run.extend(["--http-addr", "0.0.0.0:8080", "--https-addr", "0.0.0.0:8443"].map(|a| json!(a)));
    container["args"] = json!(run);
    Ok(in_namespace(deployment))
}

/// Panels of the dashboard: title, unit, and the PromQL of each series.
const PANELS: [(&str, &str, &str); 14] = [
    (
        "Reconciles by result",
        "ops",
        "sum by (controller, result) (rate(controller_runtime_reconcile_total[5m]))",
    ),
    (
        "Reconcile errors",
        "ops",
        "sum by (controller) (rate(controller_runtime_reconcile_errors_total[5m]))",
    ),
    (
        "Failures by reason",
        "ops",
        "sum by (controller, reason) (rate(orkestra_reconcile_failures_total[5m]))",
    ),
    (
        "Reconcile time p99",
        "s",
        "histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket[5m])))",
    ),
    ("Queue depth", "short", "sum by (name) (workqueue_depth)"),
    (
        "Time queued p99",
        "s",
        "histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket[5m])))",
    ),
    (
        "Flow wait p99 (busiest flows)",
        "s",
        "orkestra_queue_flow_wait_seconds{quantile=\"0.99\"}",
    ),
    ("Writes", "ops", "sum by (controller) (rate(orkestra_writes_total[5m]))"),
    ("CRD health", "short", "orkestra_crd_health == 1"),
    (
        "Wasm calls by outcome",
        "ops",
        "sum by (component, outcome) (rate(orkestra_wasm_calls_total[5m]))",
    ),
    (
        "Wasm call p99",
        "s",
        "histogram_quantile(0.99, sum by (component, le) (rate(orkestra_wasm_call_duration_seconds_bucket[5m])))",
    ),
    ("Reconciles running by namespace", "short", "orkestra_tenant_reconciles"),
    (
        "API waits by namespace",
        "ops",
        "sum by (namespace) (rate(orkestra_tenant_api_waits_total[5m]))",
    ),
    ("Wasm calls running by namespace", "short", "orkestra_tenant_wasm_calls"),
];

/// The dashboard: one time-series panel per entry of [`PANELS`], two a row, on a Prometheus
/// data source picked when it is imported.
pub fn dashboard() -> Value {
    let panels: Vec<Value> = PANELS
        .iter()
        .enumerate()
        .map(|(i, (title, unit, expr))| {
            json!({
                "id": i + 1,
                "type": "timeseries",
                "title": title,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i / 2) * 8},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [{"refId": "A", "expr": expr, "legendFormat": "__auto"}],
            })
        })
        .collect();
    json!({
        "title": "Orkestra-rs runtime",
        "uid": "orkestra-runtime",
        "tags": ["orkestra"],
        "schemaVersion": 39,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]},
        "panels": panels,
    })
}
