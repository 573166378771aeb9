//! `ork dev`: a local control plane, the Katalog's CRDs (and sample CRs), and the runtime in
//! one process.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use orkestra_kube::{crd_install, manifests};

use crate::katalog_args::KatalogArgs;
use orkestra_control_plane::ControlPlane;

use super::control_plane::{install, instance_dir, options, watch};
use super::progress::Progress;

#[derive(Debug, Args)]
pub struct DevArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    /// Apply each CRD's sample CRs (crFiles) after installing the CRDs.
    #[arg(long)]
    apply_cr: bool,
    /// Control plane directory, kept after exit. Default: a temporary directory.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// kube-apiserver port on 127.0.0.1. Default: a free port.
    #[arg(long, value_name = "PORT")]
    port: Option<u16>,
    #[command(flatten)]
    plane: super::control_plane::PlaneArgs,
    #[command(flatten)]
    http: super::run::HttpArgs,
    #[command(flatten)]
    webhooks: super::gateway::WebhookArgs,
    #[command(flatten)]
    registry: super::component::PullArgs,
    #[command(flatten)]
    record: super::component::RecordArgs,
    #[command(flatten)]
    state: super::run::StateArgs,
}

pub async fn dev(args: DevArgs) -> anyhow::Result<ExitCode> {
    // Load first: a wrong Katalog should fail before a minute of start-up.
    let katalog = args.katalog.load_pulling(&args.registry, None).await?;
    super::run::hosts_crds(&katalog)?;
    // The Live API's port next, for the same reason: `register` and every line after name
    // the port it got.
    let listener = args.http.listen(true).await?;
    // A newcomer's first run builds the control plane; later runs find it in the cache.
    let binaries = install(&args.plane.version.release()).await?;
    let (dir, _temp) = instance_dir(args.dir, "ork-dev-")?;
    // The CRDs go in before kube-controller-manager starts, so its garbage collector knows
    // their kinds from its first discovery instead of its next one (about 30 s later).
    let options = options(dir, args.port, true, binaries, args.plane.nodes);
    let progress = Progress::start("starting etcd and kube-apiserver");
    let mut plane = ControlPlane::start_api_server(&options).await?;
    let config = crate::cluster::named(orkestra_control_plane::config_for(&plane.kubeconfig()).await?, "dev");
    let client = kube::Client::try_from(config.clone()).context("cannot build a Kubernetes client")?;
    progress.set("installing the Katalog's CRDs");
    let crds = crd_install::install_crds(&client, &katalog.katalog, Duration::from_secs(60))
        .await
        .context("installing the Katalog's CRDs")?;
    progress.set(match options.binaries.simulates_nodes() && args.plane.nodes > 0 {
        true => "starting kube-controller-manager, kube-scheduler and kwok",
        false => "starting kube-controller-manager",
    });
    plane.start_controllers(&options).await?;
    // Ready means a deleted CR's children are collected: the collector knows every kind.
    progress.set("waiting for the garbage collector to know the CRDs");
    crd_install::wait_collected(&client, &crds, Duration::from_secs(60))
        .await
        .context("waiting for the garbage collector")?;
    progress.finish();
    for crd in &crds {
        println!("installed CRD {crd}");
    }
    // Prerequisites first (each CRD's `setup`, in order), then the samples.
    apply_setup(&client, &katalog).await?;
    if args.apply_cr {
        create_samples(&client, &katalog).await?;
    }
    if let Some(listener) = &listener {
        register(&client, listener.local_addr()?).await?;
    }
    println!("control plane ready: server {}", plane.server());
    println!("try: kubectl --kubeconfig {} get crds", plane.kubeconfig().display());
    // The runtime and the control plane supervisor end together on the first signal.
    let files = args.katalog.files();
    // One replica: no Leases.
    let ha = super::ha::HaArgs::default();
    let mut webhooks = args.webhooks.clone();
    webhooks.free_port_if_taken();
    let hosting = super::run::Hosting {
        http: &args.http,
        listener,
        state: &args.state,
        webhooks: &webhooks,
        ha: &ha,
        components: args.registry.store()?,
        pull_secrets: args.registry.pull_secrets(),
        katalog_configmap: None,
        recording: args.record.folder()?,
        dev: true,
        gateway: true,
    };
    let result = tokio::select! {
        result = super::run::serve(client, config, &katalog, &files, hosting) => result,
        result = watch(&mut plane) => result,
    };
    plane.stop();
    result.map(|()| ExitCode::SUCCESS)
}

/// Applies each enabled CRD's setup files, saying what each made, then waits for the objects
/// its `setup.wait` names.
async fn apply_setup(client: &kube::Client, katalog: &orkestra_katalog::Compiled) -> anyhow::Result<()> {
    for crd in katalog.katalog.crds.values().filter(|c| c.entry.enabled) {
        for file in crd.entry.setup_files() {
            let path = crd.resolve(file);
            let applied = manifests::apply_file(client, &path, "default")
                .await
                .with_context(|| format!("applying the setup of CRD \"{}\"", crd.name))?;
            for object in applied {
                println!("applied {object} from {} (setup)", path.display());
            }
        }
        let waits = crd.entry.setup_waits();
        if waits.is_empty() {
            continue;
        }
        let progress = Progress::start(format!("waiting for the setup of CRD \"{}\"", crd.name));
        let waited = orkestra_kube::setup_wait::wait_for(client, &waits, "default")
            .await
            .with_context(|| format!("the setup of CRD \"{}\"", crd.name));
        progress.finish();
        for (object, took) in waited? {
            println!("ready: {object} after {:.1} s (setup.wait)", took.as_secs_f64());
        }
    }
    Ok(())
}

/// Creates each CRD's sample CRs that do not exist yet: over a kept `--dir`, a sample a user
/// has changed since stays as it is, and is said to.
async fn create_samples(client: &kube::Client, katalog: &orkestra_katalog::Compiled) -> anyhow::Result<()> {
    for crd in katalog.katalog.crds.values().filter(|c| c.entry.enabled) {
        for file in &crd.entry.cr_files {
            let path = crd.resolve(file);
            let made = manifests::create_missing(client, &path, "default")
                .await
                .with_context(|| format!("creating the sample CRs of CRD \"{}\"", crd.name))?;
            for (object, created) in made {
                match created {
                    true => println!("applied {object} from {}", path.display()),
                    false => println!("kept {object}: it exists already (samples are created, never put back)"),
                }
            }
        }
    }
    Ok(())
}

/// Registers this runtime's Live API in the control plane, as the Helm chart's Service is
/// labelled: `ork control-center --discover default` (with this KUBECONFIG) then finds it.
async fn register(client: &kube::Client, addr: std::net::SocketAddr) -> anyhow::Result<()> {
    use kube::api::{Patch, PatchParams};
    let service = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "ork-dev",
            "labels": {super::discover::LABEL: "true"},
            "annotations": {super::discover::URL_ANNOTATION: format!("http://{addr}")},
        },
        // No selector: nothing in the cluster serves it; the annotation says where it is.
        "spec": {"ports": [{"name": "http", "port": addr.port()}]},
    });
    let services =
        orkestra_kube::objects::namespaced::<k8s_openapi::api::core::v1::Service>(client.clone(), "default")?;
    services
        .patch(
            "ork-dev",
            &PatchParams::apply("ork-dev").force(),
            &Patch::Apply(&service),
        )
        .await
        .context("registering the runtime's Live API (Service default/ork-dev)")?;
    Ok(())
}
