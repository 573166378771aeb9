//! `ork migrate`: a Katalog in an older schema, rewritten in the current one.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The Katalog file to migrate.
    #[arg(short = 'f', long = "file", value_name = "KATALOG")]
    file: PathBuf,
    /// Write the result here instead of to standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Prints (or writes) the migrated Katalog; what changed goes to standard error, so
/// `ork migrate -f old.yaml > new.yaml` keeps the two apart.
pub fn migrate(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let migrated =
        orkestra_katalog::migrate::migrate(&text).map_err(|e| anyhow::anyhow!("{}:{e}", args.file.display()))?;
    match &args.output {
        Some(path) => std::fs::write(path, &migrated.yaml).with_context(|| format!("writing {}", path.display()))?,
        None => print!("{}", migrated.yaml),
    }
    if migrated.changes.is_empty() {
        eprintln!("{}: already in the current schema", args.file.display());
    } else {
        eprintln!(
            "{}: {} change(s); comments are not kept:",
            args.file.display(),
            migrated.changes.len()
        );
        for change in &migrated.changes {
            eprintln!("  {change}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
