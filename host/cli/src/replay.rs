//! `ork replay`: recorded component calls run again offline, deterministically (every kube
//! call, clock and random value served from the recording), against the recorded component
//! or a changed one; every difference in output and kube calls reported. A folder of
//! recordings is a regression suite: exit 0 when all replay the same, 1 when one differs, 2
//! when one cannot be read or loaded.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use orkestra::rehearse::replay::{Comparison, compare};
use orkestra_wasm::record::{FORMAT, Recording};
use orkestra_wasm::{HostOptions, WasmHost};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Recordings (as `GET /recordings/{id}` serves them), or folders of them (`*.json`, read
    /// recursively).
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Replay against this component file instead of the recorded one (which is found by its
    /// digest in this machine's component cache; the source a recording names is never read).
    #[arg(long, value_name = "NEW.wasm")]
    component: Option<PathBuf>,
    /// How to print the report.
    #[arg(long, short, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

/// What became of one recording.
enum Outcome {
    Compared {
        recording: Box<Recording>,
        digest: String,
        comparison: Comparison,
    },
    Unreadable(String),
}

pub async fn replay(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let files = recordings_in(&args.files)?;
    if files.is_empty() {
        anyhow::bail!("no recordings (*.json) in {}", show(&args.files));
    }
    let read: Vec<(PathBuf, Result<Recording, String>)> = files.into_iter().map(|f| (f.clone(), read(&f))).collect();
    // Fuel is metered engine-wide: on when any recording ran under a fuel limit.
    let fuel = read
        .iter()
        .any(|(_, r)| r.as_ref().is_ok_and(|r| r.component.limits.fuel.is_some()));
    let options = HostOptions {
        cache_dir: orkestra_control_plane::cache_root().join("wasm"),
        fuel,
        ..HostOptions::default()
    };
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .context("cannot build an HTTP client")?;
    let host = WasmHost::with_options(None, http, options).map_err(anyhow::Error::msg)?;
    let mut outcomes = Vec::with_capacity(read.len());
    for (file, recording) in read {
        let outcome = match recording {
            Err(why) => Outcome::Unreadable(why),
            Ok(recording) => match host.replay(&recording, args.component.as_deref()).await {
                Ok(replayed) => Outcome::Compared {
                    comparison: compare(&recording, &replayed),
                    digest: replayed.digest,
                    recording: Box::new(recording),
                },
                Err(why) => Outcome::Unreadable(why.to_string()),
            },
        };
        outcomes.push((file, outcome));
    }
    let text = match args.output {
        Output::Text => outcomes.iter().map(|(f, o)| text(f, o)).collect::<String>(),
        Output::Json => {
            let all: Vec<Value> = outcomes.iter().map(|(f, o)| as_json(f, o)).collect();
            serde_json::to_string_pretty(&all)? + "\n"
        }
    };
    crate::stdout::write(&text)?;
    let unreadable = outcomes.iter().any(|(_, o)| matches!(o, Outcome::Unreadable(_)));
    let differs = outcomes
        .iter()
        .any(|(_, o)| matches!(o, Outcome::Compared { comparison, .. } if !comparison.same()));
    Ok(match (unreadable, differs) {
        (true, _) => ExitCode::from(2),
        (false, true) => ExitCode::from(1),
        (false, false) => ExitCode::SUCCESS,
    })
}

/// The files given, folders walked for `*.json`, each folder's in name order.
fn recordings_in(given: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in given {
        if path.is_dir() {
            let mut found = Vec::new();
            walk(path, &mut found).with_context(|| format!("reading {}", path.display()))?;
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, found)?;
        } else if path.extension().is_some_and(|e| e == "json") {
            found.push(path);
        }
    }
    Ok(())
}

fn read(file: &Path) -> Result<Recording, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read it: {e}"))?;
    let format = serde_json::from_str::<Value>(&text).map_err(|e| format!("not JSON: {e}"))?["format"].as_u64();
    if format != Some(u64::from(FORMAT)) {
        return Err(format!(
            "format: {} is not a recording this ork reads (format {FORMAT})",
            format.map_or("missing".into(), |f| f.to_string())
        ));
    }
    serde_json::from_str(&text).map_err(|e| format!("not a recording: {e}"))
}

fn show(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

fn text(file: &Path, outcome: &Outcome) -> String {
    let mut out = format!("{}\n", file.display());
    match outcome {
        Outcome::Unreadable(why) => out.push_str(&format!("  error: {why}\n")),
        Outcome::Compared {
            recording,
            digest,
            comparison,
        } => {
            let recorded = &recording.component;
            let against = match *digest == recorded.digest {
                true => format!("the recorded component ({})", short(digest)),
                false => format!("component {} (recorded: {})", short(digest), short(&recorded.digest)),
            };
            out.push_str(&format!(
                "  {} {} of {}, against {against}\n",
                recorded.slot,
                serde_json::to_value(recording.hook)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or("?"),
                recording.request.key,
            ));
            match comparison.same() {
                true => out.push_str(&format!(
                    "  same: the output and all {} kube call(s) match\n",
                    recording.kube.len()
                )),
                false => {
                    out.push_str(&format!("  differs in {} place(s):\n", comparison.differences.len()));
                    for difference in &comparison.differences {
                        let side = |v: &Option<Value>| v.as_ref().map_or("(none)".into(), |v| v.to_string());
                        out.push_str(&format!(
                            "    {}: {} -> {}\n",
                            difference.at,
                            side(&difference.recorded),
                            side(&difference.replayed)
                        ));
                    }
                }
            }
            for note in &comparison.notes {
                out.push_str(&format!("  note: {note}\n"));
            }
        }
    }
    out
}

fn as_json(file: &Path, outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Unreadable(why) => json!({"file": file, "error": why}),
        Outcome::Compared {
            recording,
            digest,
            comparison,
        } => json!({
            "file": file,
            "component": recording.component.slot,
            "key": recording.request.key,
            "recordedDigest": recording.component.digest,
            "digest": digest,
            "same": comparison.same(),
            "differences": comparison.differences,
            "notes": comparison.notes,
        }),
    }
}
