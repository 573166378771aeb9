//! `ork serve validate|targets|can-i`: the Katalog's self-service (`serve`) settings read
//! offline, as the gateway would serve them: what is wrong or unusable in them, which targets
//! callers may name, and whether a token may do an operation through a target.

use std::collections::BTreeSet;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use orkestra_katalog::Compiled;
use orkestra_katalog::model::Verb;
use orkestra_katalog::serve::access::{self, Class};

use crate::katalog_args::KatalogArgs;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
}

#[derive(Debug, Args)]
pub struct TargetsArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
}

#[derive(Debug, Args)]
pub struct CanIArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    /// The identity: a token entry of gateway.api.auth.tokens, or a webhook of
    /// gateway.webhooks.
    #[arg(long, value_name = "NAME")]
    token: String,
    /// The operation.
    #[arg(short = 'o', long = "operation", value_enum)]
    operation: Operation,
    /// The namespace of the CR (for a namespaced CRD).
    #[arg(short = 'N', long = "namespace", value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// Which endpoints: `resources` (apply, read, delete) or `schema`.
    #[arg(short = 'c', long = "class", value_enum, default_value_t = ClassArg::Resources)]
    class: ClassArg,
    /// Only this target (default: every target).
    #[arg(long, value_name = "TARGET")]
    target: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Operation {
    Get,
    List,
    Create,
    Update,
    Delete,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ClassArg {
    Resources,
    Schema,
}

impl Operation {
    fn verb(self) -> Verb {
        match self {
            Operation::Get => Verb::Get,
            Operation::List => Verb::List,
            Operation::Create => Verb::Create,
            Operation::Update => Verb::Update,
            Operation::Delete => Verb::Delete,
        }
    }
}

/// What the gateway would find wrong or unusable; exit 1 when the Katalog does not load or
/// a problem would refuse calls, warnings only on 0.
pub fn validate(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let compiled = args.katalog.load()?;
    let (problems, warnings) = check(&compiled);
    let served = compiled.served_crds().count();
    let targets: usize = compiled
        .served_crds()
        .filter_map(|c| c.serve.as_deref())
        .map(|s| s.surfaces.values().filter(|s| s.enabled).count())
        .sum();
    let tokens = crate::token::sources(&compiled).len();
    let mut out = format!("serve: {served} served CRD(s), {targets} target(s), {tokens} token(s)\n");
    for problem in &problems {
        out.push_str(&format!("error: {problem}\n"));
    }
    for warning in &warnings {
        out.push_str(&format!("warning: {warning}\n"));
    }
    if problems.is_empty() {
        out.push_str("ok\n");
    }
    crate::stdout::write(&out)?;
    Ok(match problems.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    })
}

/// Problems (calls would be refused, or a name leads nowhere) and warnings.
fn check(compiled: &Compiled) -> (Vec<String>, Vec<String>) {
    let (mut problems, mut warnings) = (Vec::new(), Vec::new());
    let open = orkestra_gateway::api::enabled(compiled);
    // (A target naming an undeclared token does not load at all.)
    let declared = crate::token::sources(compiled);
    let intake = compiled
        .katalog
        .gateway
        .as_ref()
        .and_then(|g| g.intake_enabled())
        .is_some();
    if compiled.served_crds().next().is_some() && !open && !intake {
        problems.push(
            "CRDs are served (serve.enabled) but neither the Serve API (gateway.api.enabled) nor webhook intake (gateway.webhooks) is open"
                .into(),
        );
    }
    if open && declared.is_empty() {
        problems.push("the Serve API declares no token (gateway.api.auth.tokens): every call is refused".into());
    }
    for crd in compiled.served_crds() {
        let Some(serve) = crd.serve.as_deref() else { continue };
        for (name, surface) in serve.surfaces.iter().filter(|(_, s)| s.enabled) {
            let at = format!("spec.crds.{}.serve target \"{name}\"", crd.name);
            if surface.tokens.is_none() && surface.crd_tokens.is_none() {
                warnings.push(format!("{at}: names no tokens, so nobody may use it"));
            }
            if !surface.target_mode && !surface.cr_mode {
                warnings.push(format!("{at}: both modes are off, so no call can reach it"));
            }
        }
    }
    (problems, warnings)
}

/// The targets callers may name, offline.
pub fn targets(args: TargetsArgs) -> anyhow::Result<ExitCode> {
    let compiled = args.katalog.load()?;
    let mut out = format!(
        "{:<20} {:<8} {:<16} {:<20} {:<12} {:<12} TOKENS\n",
        "TARGET", "PRIMARY", "CRD", "KIND", "MODES", "CATEGORY"
    );
    for crd in compiled.served_crds() {
        let Some(serve) = crd.serve.as_deref() else { continue };
        for (name, surface) in serve.surfaces.iter().filter(|(_, s)| s.enabled) {
            let modes: Vec<&str> = [("target", surface.target_mode), ("cr", surface.cr_mode)]
                .into_iter()
                .filter_map(|(mode, on)| on.then_some(mode))
                .collect();
            let tokens: BTreeSet<&str> = [&surface.tokens, &surface.crd_tokens]
                .into_iter()
                .flatten()
                .flat_map(|l| l.keys().map(String::as_str))
                .collect();
            out.push_str(&format!(
                "{:<20} {:<8} {:<16} {:<20} {:<12} {:<12} {}\n",
                name,
                surface.primary,
                crd.name,
                crd.kind,
                if modes.is_empty() {
                    "none".into()
                } else {
                    modes.join(",")
                },
                serve.category.as_deref().unwrap_or("-"),
                if tokens.is_empty() {
                    "-".into()
                } else {
                    tokens.into_iter().collect::<Vec<_>>().join(",")
                },
            ));
        }
    }
    crate::stdout::write(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Whether the token may do the operation, target by target; exit 0 when it may through
/// at least one (the one asked for, with --target), 1 when not.
pub fn can_i(args: CanIArgs) -> anyhow::Result<ExitCode> {
    let compiled = args.katalog.load()?;
    let declared = crate::token::sources(&compiled).iter().any(|s| s.name == args.token)
        || crate::token::webhook_identities(&compiled)
            .iter()
            .any(|w| w.name == args.token);
    if !declared {
        anyhow::bail!(
            "--token {:?}: no such entry in gateway.api.auth.tokens or gateway.webhooks (ork token list shows them)",
            args.token
        );
    }
    let class = match args.class {
        ClassArg::Resources => Class::Resources,
        ClassArg::Schema => Class::Schema,
    };
    let mut out = String::new();
    let mut allowed = false;
    let mut seen = false;
    for crd in compiled.served_crds() {
        let Some(serve) = crd.serve.as_deref() else { continue };
        for (name, surface) in serve.surfaces.iter().filter(|(_, s)| s.enabled) {
            if args.target.as_ref().is_some_and(|t| t != name) {
                continue;
            }
            seen = true;
            let namespace = args.namespace.as_deref().filter(|_| crd.namespaced);
            match access::permits(surface, &args.token, class, args.operation.verb(), namespace) {
                Ok(()) => {
                    allowed = true;
                    out.push_str(&format!("{name}: yes\n"));
                }
                Err(why) => out.push_str(&format!("{name}: no: {why}\n")),
            }
        }
    }
    if !seen {
        anyhow::bail!(
            "no served target{}; ork serve targets lists them",
            args.target
                .as_ref()
                .map(|t| format!(" named {t:?}"))
                .unwrap_or_default()
        );
    }
    crate::stdout::write(&out)?;
    Ok(match allowed {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    })
}
