//! `ork validate`: Katalog checks without a cluster.

use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::KatalogArgs;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    katalog: KatalogArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    Text,
    Json,
}

pub fn validate(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let result = orkestra::katalog::load(&args.katalog.files());
    let (valid, errors, crds) = match &result {
        Ok(katalog) => (true, vec![], katalog.crds.keys().cloned().collect::<Vec<_>>()),
        Err(err) => (false, vec![err.to_string()], vec![]),
    };
    match args.output {
        Output::Json => {
            println!(
                "{}",
                serde_json::json!({"valid": valid, "errors": errors, "crds": crds})
            );
        }
        Output::Text if valid => println!("valid: {} CRD(s): {}", crds.len(), crds.join(", ")),
        Output::Text => errors.iter().for_each(|e| eprintln!("error: {e}")),
    }
    Ok(if valid { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
