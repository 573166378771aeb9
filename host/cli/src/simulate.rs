//! `ork simulate`: one CR's reconcile offline, with no cluster: gates, templates, hooks and
//! constructors as Wasm, against an API server in memory holding the CR and the objects given
//! to read. Prints what it would write, as YAML.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use crate::katalog_args::KatalogArgs;
use orkestra::rehearse::stand_in::{Cluster, Kind, built_in_kinds};

#[derive(Debug, Args)]
pub struct SimulateArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    /// The custom resource to reconcile: a YAML file. Its other documents (a sample file's
    /// ConfigMaps, say) are objects the reconcile may read.
    #[arg(long, value_name = "CR.yaml")]
    cr: PathBuf,
    /// Which custom resource of the file, when it holds several.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Objects the reconcile may read (YAML files in this folder, any number of documents
    /// each): what a kube read, a cross read or a component's kube call finds.
    #[arg(long, value_name = "DIR")]
    observed: Option<PathBuf>,
    /// Run this component file in slot NAME (`crd` or `crd/target`) instead of the one the
    /// Katalog declares; repeatable.
    #[arg(long = "component", value_name = "NAME=PATH")]
    components: Vec<String>,
    #[command(flatten)]
    registry: super::component::PullArgs,
}

/// YAML documents of `path`, each an object.
fn documents(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut objects = Vec::new();
    for (i, document) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
        let value: Value = serde::Deserialize::deserialize(document)
            .with_context(|| format!("{}: document {} is not YAML", path.display(), i + 1))?;
        match value {
            Value::Null => continue,
            Value::Object(_) => objects.push(value),
            _ => bail!("{}: document {} is not an object", path.display(), i + 1),
        }
    }
    Ok(objects)
}

/// Exit 0 when the reconcile succeeds (or its gate is closed), 1 when it fails or the input
/// is wrong.
pub async fn simulate(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let katalog = args.katalog.load()?;
    let overrides = super::plan::component_overrides(&args.components)?;
    // The file's custom resources of the Katalog's kinds; the rest is observed.
    let is_cr = |object: &Value| {
        katalog
            .enabled()
            .any(|c| object["apiVersion"] == c.api_version().as_str() && object["kind"] == c.kind.as_str())
    };
    let (crs, others): (Vec<Value>, Vec<Value>) = documents(&args.cr)?.into_iter().partition(is_cr);
    let name_of = |cr: &Value| cr["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let picked: Vec<Value> = crs
        .iter()
        .filter(|cr| args.name.as_ref().is_none_or(|name| name_of(cr) == *name))
        .cloned()
        .collect();
    let mut cr = match (picked.len(), &args.name) {
        (1, _) => picked.into_iter().next().unwrap_or_default(),
        (0, None) => {
            let known: Vec<String> = katalog
                .enabled()
                .map(|c| format!("{} {}", c.api_version(), c.kind))
                .collect();
            bail!(
                "{}: no custom resource of the Katalog's kinds ({})",
                args.cr.display(),
                known.join(", ")
            );
        }
        (0, Some(name)) => bail!("{}: no custom resource named {name:?}", args.cr.display()),
        _ => {
            let names: Vec<String> = crs.iter().map(name_of).collect();
            bail!(
                "{}: it holds {} custom resources ({}); pick one with --name",
                args.cr.display(),
                names.len(),
                names.join(", ")
            );
        }
    };
    let (api_version, kind) = (
        cr["apiVersion"].as_str().unwrap_or_default().to_string(),
        cr["kind"].as_str().unwrap_or_default().to_string(),
    );
    let Some(crd) = katalog
        .enabled()
        .find(|c| c.api_version() == api_version && c.kind == kind)
        .cloned()
    else {
        bail!("{api_version} {kind} is no CRD of the Katalog");
    };
    let name = cr["metadata"]["name"].as_str().unwrap_or_default().to_string();
    orkestra_expr::names::check_name(&name)
        .map_err(|why| anyhow::anyhow!("{}: metadata.name: {why}", args.cr.display()))?;
    if crd.namespaced && cr["metadata"]["namespace"].as_str().is_none_or(str::is_empty) {
        cr["metadata"]["namespace"] = Value::from(crd.namespace.clone().unwrap_or_else(|| "default".into()));
    }
    let mut kinds = built_in_kinds();
    kinds.extend(katalog.enabled().map(|c| Kind {
        api_version: c.api_version(),
        kind: c.kind.clone(),
        plural: c.plural.clone(),
        namespaced: c.namespaced,
    }));
    let default_namespace = cr["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
    let mut observed: Vec<(PathBuf, Value)> = Vec::new();
    for mut object in others {
        // As `kubectl apply -f` would put them: in the CR's namespace unless they say.
        let namespaced = kinds
            .iter()
            .find(|k| object["apiVersion"] == k.api_version.as_str() && object["kind"] == k.kind.as_str())
            .is_none_or(|k| k.namespaced);
        if object["metadata"]["namespace"].is_null() && namespaced {
            object["metadata"]["namespace"] = Value::from(default_namespace.clone());
        }
        observed.push((args.cr.clone(), object));
    }
    if let Some(dir) = &args.observed {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json"))
            .collect();
        files.sort();
        for file in files {
            for object in documents(&file)? {
                observed.push((file.clone(), object));
            }
        }
    }
    // Kinds of other operators an observed object is of: served under the usual plural.
    for (_, object) in &observed {
        let (api_version, kind) = (object["apiVersion"].as_str(), object["kind"].as_str());
        if let (Some(api_version), Some(kind)) = (api_version, kind)
            && !kinds.iter().any(|k| k.api_version == api_version && k.kind == kind)
        {
            kinds.push(Kind {
                api_version: api_version.into(),
                kind: kind.into(),
                plural: format!("{}s", kind.to_lowercase()),
                namespaced: object["metadata"]["namespace"].is_string(),
            });
        }
    }
    let cluster = Cluster::new(kinds);
    for (file, object) in observed {
        cluster
            .put(object)
            .map_err(|why| anyhow::anyhow!("{}: {why}", file.display()))?;
    }
    let cr = cluster
        .put(cr)
        .map_err(|why| anyhow::anyhow!("{}: {why}", args.cr.display()))?;
    let runtime = orkestra::Runtime::with_components(
        orkestra::rehearse::stand_in::client(cluster.clone()),
        &katalog,
        args.registry.store()?,
    )?
    // Offline means no external call either: each is reported, never made.
    .rehearsing();
    for (name, path) in &overrides {
        runtime.replace_component(name, path)?;
    }
    let failed = runtime.load_components().await;
    anyhow::ensure!(failed.is_empty(), "{}", failed.join("; "));
    let gvk = GroupVersionKind::gvk(&crd.group, &crd.version, &crd.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.plural);
    let namespace = cr["metadata"]["namespace"].as_str();
    let cr_path = format!(
        "{}/{name}",
        <kube::api::DynamicObject as kube::Resource>::url_path(&resource, namespace)
    );
    let key = orkestra::runtime::key_of(&cr);
    let rehearsed = runtime.rehearse(&crd.name, &resource, cr).await?;
    let mut report = orkestra::rehearse::simulate::report(&cluster, &cr_path, key, rehearsed).await;
    report.external = runtime.calls_not_made();
    crate::stdout::write(&serde_yaml_ng::to_string(&report)?)?;
    Ok(match report.outcome {
        "failed" => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}
