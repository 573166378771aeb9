//! `ork`: the Orkestra-rs command line. Parsing, logging set-up and dispatch to one
//! module per command.

mod answered;
mod cluster;
mod component;
mod control_center;
mod control_plane;
mod dev;
mod discover;
mod faults;
mod gateway;
mod generate;
mod ha;
mod init;
mod katalog_args;
mod katalog_configmap;
mod manifests;
mod migrate;
mod motif;
mod plan;
mod progress;
mod random;
mod reload;
mod reload_report;
mod replay;
mod run;
mod scaffold;
mod serve;
mod serve_config;
mod signal;
mod simulate;
mod startup_pages;
mod stdout;
mod telemetry;
mod token;
mod validate;
mod webhook;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Orkestra-rs: run Kubernetes operators declared in YAML Katalogs, with sandboxed
/// WebAssembly hooks and reconcilers.
#[derive(Debug, Parser)]
#[command(name = "ork", version, propagate_version = true)]
struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace). ORK_LOG=<filter> overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the runtime for a Katalog against the cluster of KUBECONFIG (or in-cluster config).
    Run(run::RunArgs),
    /// Start a local control plane, install the Katalog's CRDs and run the runtime against it.
    // `--version` picks the Kubernetes release here, not the version of ork.
    #[command(disable_version_flag = true)]
    Dev(dev::DevArgs),
    /// Write a Katalog to start from (one CRD, a Deployment and a Service per CR) and a sample
    /// CR.
    Init(init::InitArgs),
    /// Check Katalog files without a cluster; exit 0 when valid, 1 otherwise.
    Validate(validate::ValidateArgs),
    /// Rewrite a Katalog in an older schema (konductor v1Alpha, the flat operatorBox,
    /// renamed keys) in the current one.
    Migrate(migrate::MigrateArgs),
    /// What a Katalog (or a new component) would do to each CR of the cluster: children
    /// created, changed (field by field, from the API server's dry runs) or deleted, and
    /// status changes. Writes nothing; exit 0 for no change, 2 for changes.
    Plan(plan::PlanArgs),
    /// Reconcile one CR offline, with no cluster: gates, templates, hooks and constructors,
    /// against an API server in memory holding the CR and `--observed` objects. Prints the
    /// children, status, Events and requeue as YAML; exit 1 when the reconcile fails.
    Simulate(simulate::SimulateArgs),
    /// Run recorded component calls again offline (kube calls, clocks and random served
    /// from each recording), against the recorded component or `--component NEW.wasm`; report
    /// every difference in output and kube calls. Exit 0 when all match, 1 when one differs,
    /// 2 when one cannot be read or loaded.
    Replay(replay::ReplayArgs),
    /// Print what installing a Katalog takes: its CRDs, or a whole bundle (CRDs, namespace,
    /// ServiceAccount, RBAC, the Katalog ConfigMap, Deployment, Service), as YAML.
    #[command(subcommand)]
    Generate(generate::GenerateCommand),
    /// Print the RBAC a Katalog's runtime needs (Roles or ClusterRoles and their bindings to
    /// its ServiceAccount), and nothing more.
    Manifests(manifests::ManifestsArgs),
    /// A fault campaign on Katalogs (`--faults`): each on a control plane of its own, its
    /// sample CRs run once cleanly and once per fault (the runtime killed after each write,
    /// the API server restarted, 409/429/410 answers, watch events late, twice or dropped);
    /// prints Katalog × fault × invariant, exit 1 on any violation.
    // `--version` picks the Kubernetes release here, not the version of ork.
    #[command(disable_version_flag = true)]
    Test(faults::TestArgs),
    /// Ask a running runtime to re-read and apply its Katalog (CRDs added, removed or changed
    /// apply live) and reload its Wasm components.
    Reload(reload::ReloadArgs),
    /// Serve the Control Center: a web UI over the Live APIs of any number of runtimes.
    ControlCenter(control_center::ControlCenterArgs),
    /// Run the gateway on its own: the Serve API and the admission webhooks of a Katalog's CRDs, against the
    /// cluster of KUBECONFIG (or in-cluster config).
    Gateway(gateway::GatewayArgs),
    /// Talk to a gateway's Serve API (apply an intent, read the schema), or play an intent
    /// through the gateway's stages locally.
    #[command(subcommand)]
    Serve(serve::ServeCommand),
    /// The Serve API's token entries: list them with their grants, verify which accepts a
    /// token, or probe a running gateway with one.
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Webhook intake's entries (gateway.webhooks): where each is served, what proves a
    /// delivery, what it takes and what it may apply.
    #[command(subcommand)]
    Webhook(webhook::WebhookCommand),
    /// Build and run the local Kubernetes control plane (etcd, kube-apiserver,
    /// kube-controller-manager).
    #[command(subcommand)]
    ControlPlane(control_plane::ControlPlaneCommand),
    /// Distribute components: push one to an OCI registry as a Wasm artifact.
    #[command(subcommand)]
    Component(component::ComponentCommand),
    /// Distribute motifs: push one to an OCI registry, or pull one into the local cache.
    #[command(subcommand)]
    Motif(motif::MotifCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let telemetry = match init_logging(cli.verbose) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Dev(args) => dev::dev(args).await,
            Command::Test(args) => faults::test(args).await,
            Command::Validate(args) => validate::validate(args),
            Command::Init(args) => init::init(args),
            Command::Migrate(args) => migrate::migrate(args),
            Command::Manifests(args) => manifests::manifests(args),
            Command::Plan(args) => plan::plan(args).await,
            Command::Generate(command) => generate::generate(command),
            Command::Simulate(args) => simulate::simulate(args).await,
            Command::Replay(args) => replay::replay(args).await,
            Command::Reload(args) => reload::reload(args).await,
            Command::ControlCenter(args) => control_center::control_center(args).await,
            Command::Gateway(args) => gateway::gateway(args).await,
            Command::Serve(command) => serve::serve(command).await,
            Command::Token(command) => token::token(command).await,
            Command::Webhook(command) => webhook::webhook(command),
            Command::ControlPlane(command) => control_plane::control_plane(command).await,
            Command::Component(command) => component::component(command).await,
            Command::Motif(command) => motif::motif(command).await,
        }
    });
    // What is still batched goes out before the process ends.
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Log lines on stderr, quiet by default; and, when the `OTEL_*` variables ask for it, the
/// host's spans exported over OTLP (the returned handle flushes them at exit).
fn init_logging(verbose: u8) -> Result<Option<telemetry::Telemetry>, String> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // kube's client logs every failed request at ERROR; our own errors already say what
    // failed and why, so its lines only show with -v.
    let default = match verbose {
        0 => "warn,kube_client=off",
        1 => "info,orkestra=info",
        2 => "info,orkestra=debug",
        _ => "debug,orkestra=trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("ORK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let registry = tracing_subscriber::registry().with(logs);
    match telemetry::layer()? {
        Some((traces, handle)) => {
            registry.with(traces).init();
            Ok(Some(handle))
        }
        None => {
            registry.init();
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
