//! `ork generate crd|bundle`: what installing a Katalog takes, as YAML for `kubectl apply`.
//! `crd`: its CustomResourceDefinitions. `bundle`: those, then everything the runtime needs in
//! its namespace (the ServiceAccount, the least RBAC `ork manifests` computes, the Katalog as
//! a ConfigMap, a Live API token, and the Deployment, Service and PodDisruptionBudget of
//! `deploy/base`), in the order they apply.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::katalog_args::KatalogArgs;
use crate::manifests::{RbacArgs, rbac_documents};

#[derive(Debug, Subcommand)]
pub enum GenerateCommand {
    /// The CustomResourceDefinitions of the Katalog's CRDs (its `crdFile`s, or generated from
    /// `apiTypes`).
    Crd(CrdArgs),
    /// Everything to run the Katalog in a cluster: CRDs, Namespace, ServiceAccount, RBAC, the
    /// Katalog ConfigMap, a Live API token, Deployment, Service, PodDisruptionBudget.
    Bundle(BundleArgs),
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
    let mut documents = orkestra_kube::crd_install::crd_documents(&compiled.katalog)?;
    documents.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}));
    documents.push(in_namespace(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": args.rbac.service_account}})));
    documents.extend(rbac_documents(&compiled, &args.rbac)?);
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
    documents.push(in_namespace(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "orkestra-katalog"}, "data": data})));
    documents.push(in_namespace(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "orkestra-live-api"}, "type": "Opaque", "stringData": {"token": token()}})));
    documents.push(deployment(args, &files, &labels, in_namespace)?);
    for (text, what) in [(SERVICE, "service"), (PDB, "pod disruption budget")] {
        let mut object: Value = serde_yaml_ng::from_str(text).with_context(|| format!("the base {what}"))?;
        object["spec"]["selector"] = match what {
            "service" => labels.clone(),
            _ => json!({"matchLabels": labels}),
        };
        documents.push(in_namespace(object));
    }
    let paths = compiled.katalog.crds.values().filter(|c| c.entry.enabled).count();
    eprintln!(
        "bundle: {} objects for {paths} CRD(s) in namespace {namespace}; the Secret holds a new random Live API token. Component files the Katalog names by path must be in the image (or use oci:// references).",
        documents.len()
    );
    Ok(documents)
}

/// The base Deployment in `namespace`, its image, replicas, selector and Katalog files set.
fn deployment(
    args: &BundleArgs,
    files: &[String],
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
        run.extend([json!("-f"), json!(format!("/etc/orkestra/katalog/{file}"))]);
    }
    if args.replicas > 1 {
        run.extend([json!("--ha"), json!("leader")]);
    }
    run.extend(["--http-addr", "0.0.0.0:8080", "--https-addr", "0.0.0.0:8443"].map(|a| json!(a)));
    container["args"] = json!(run);
    Ok(in_namespace(deployment))
}

/// A Live API token: 32 random bytes, hex.
fn token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
