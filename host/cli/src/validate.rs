//! `ork validate`: Katalog checks without a cluster.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use orkestra_katalog::Diagnostic;
use orkestra_wasm::Source;
use serde_json::json;

use crate::katalog_args::KatalogArgs;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    /// Output format: text for people, json for tools.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    Text,
    Json,
}

pub fn validate(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let (crds, errors, warnings): (Vec<String>, Vec<Diagnostic>, Vec<Diagnostic>) =
        match orkestra::runtime::motifs::load_cached(&args.katalog.files(), super::component::cache_dir()) {
            Ok(k) => {
                let mut warnings = k.katalog.warnings.clone();
                warnings.extend(missing_components(&k));
                (k.crds.keys().cloned().collect(), vec![], warnings)
            }
            Err(orkestra::runtime::motifs::Error::Katalog(orkestra_katalog::Error::Invalid { errors, warnings })) => {
                (vec![], errors, warnings)
            }
            // A file that cannot be read, or a motif not in the cache, has no position:
            // report it as a plain error.
            Err(other) => {
                let diagnostic = Diagnostic {
                    file: Default::default(),
                    line: 0,
                    column: 0,
                    path: String::new(),
                    message: other.to_string(),
                };
                (vec![], vec![diagnostic], vec![])
            }
        };
    let valid = errors.is_empty();
    match args.output {
        Output::Json => println!(
            "{}",
            json!({"valid": valid, "crds": crds, "errors": errors, "warnings": warnings})
        ),
        Output::Text => {
            for warning in &warnings {
                eprintln!("warning: {}", plain(warning));
            }
            for error in &errors {
                eprintln!("error: {}", plain(error));
            }
            if valid {
                println!("valid: {} CRD(s): {}", crds.len(), crds.join(", "));
            } else {
                eprintln!("{} error(s)", errors.len());
            }
        }
    }
    Ok(if valid { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Component files that do not exist yet: a warning, not an error (they are often built
/// after the Katalog is written).
fn missing_components(katalog: &orkestra_katalog::Compiled) -> Vec<Diagnostic> {
    let mut missing = Vec::new();
    for crd in katalog.crds.values() {
        for (slot, spec) in orkestra::runtime::slots::component_specs(crd) {
            if let Source::Path(path) = &spec.source
                && !path.exists()
            {
                missing.push(Diagnostic {
                    file: Default::default(),
                    line: 0,
                    column: 0,
                    path: format!("spec.crds.{}", crd.name),
                    message: format!("component of {slot}: {} does not exist (yet)", path.display()),
                });
            }
        }
    }
    missing
}

fn plain(diagnostic: &Diagnostic) -> String {
    if diagnostic.line == 0 {
        diagnostic.message.clone()
    } else {
        diagnostic.to_string()
    }
}
