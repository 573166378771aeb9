//! The example guest components, built from `examples/` on first use (once per test
//! binary) so a plain `cargo test` needs no separate step, and the spec a Katalog would
//! give one.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The repository's `examples/` folder.
pub fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// A hook of `component` (a path, URL or `oci://` reference) with the default limits and no
/// grants, as a Katalog declares it.
pub fn hook_spec(component: &str, sha256: Option<&str>) -> Result<orkestra_wasm::Spec, orkestra_katalog::Error> {
    hook_spec_with(component, sha256, &Default::default())
}

/// [`hook_spec`] with `instances` declared (`reuse: warm` and its bounds).
pub fn hook_spec_with(
    component: &str,
    sha256: Option<&str>,
    instances: &orkestra_katalog::ComponentInstances,
) -> Result<orkestra_wasm::Spec, orkestra_katalog::Error> {
    let limits = orkestra_katalog::ComponentLimits::default();
    let declared = orkestra_katalog::component::Declared {
        component,
        sha256,
        limits: &limits,
        deletion: &Default::default(),
        instances,
        capabilities: &[],
        run_first: false,
        args: None,
        service_account: None,
        files: &[],
        rollout: None,
    };
    orkestra_wasm::Spec::compile(orkestra_wasm::World::Hook, declared, Path::new("."))
}

static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The component of example `package`, built if this process has not built it yet: a
/// Rust crate with cargo (release, wasm32-wasip2; cargo makes an unchanged rebuild cheap),
/// a Python one (`app.py`) with componentize-py, a TypeScript one (`package.json`) with its
/// `npm run build` (componentize-qjs), a hand-written one (`wat/<package>.wat`,
/// component-model text) assembled.
///
/// # Errors
/// The build's own output when it fails, naming the missing toolchain.
pub fn component(package: &str) -> anyhow::Result<PathBuf> {
    let dir = examples_dir();
    let python = dir.join(package).join("app.py").exists();
    let js = dir.join(package).join("package.json").exists();
    if dir.join(package).join("go.mod").exists() {
        return go(&dir, package);
    }
    let file = format!("{}.wasm", package.replace('-', "_"));
    let text = dir.join("wat").join(format!("{package}.wat"));
    if text.exists() {
        let path = dir.join("target/wat").join(file);
        let binary = wat::parse_file(&text).map_err(|e| anyhow::anyhow!("assembling {}: {e}", text.display()))?;
        std::fs::create_dir_all(dir.join("target/wat"))?;
        // Through a temporary file: a test that loads it meanwhile sees the old or the new.
        let partial = path.with_extension("partial");
        std::fs::write(&partial, binary)?;
        std::fs::rename(&partial, &path)?;
        return Ok(path);
    }
    let path = if python {
        dir.join("target/python").join(file)
    } else if js {
        dir.join("target/js").join(file)
    } else {
        dir.join("target/wasm32-wasip2/release").join(file)
    };
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.iter().any(|b| b == package) {
        return Ok(path);
    }
    if python
        && is_fresh(
            &path,
            &[
                dir.join(package).join("app.py"),
                dir.join("../wit/operator.wit"),
                dir.join("../guest-sdk/python/orkestra_guest/__init__.py"),
            ],
        )
    {
        // componentize-py's output differs from build to build: rebuilding an unchanged hook
        // would defeat the host's compiled-artifact cache (a Python hook takes seconds to
        // compile).
        built.push(package.to_string());
        return Ok(path);
    }
    // Interpreted guests rebuild only when their sources changed: their output differs from
    // build to build, and each build costs seconds of compiling in the host.
    if js {
        let mut inputs = typescript_sources(&dir.join(package))?;
        inputs.extend([
            dir.join("package-lock.json"),
            dir.join("../wit/operator.wit"),
            dir.join("../guest-sdk/js/index.js"),
        ]);
        if is_fresh(&path, &inputs) {
            built.push(package.to_string());
            return Ok(path);
        }
    }
    // The JavaScript examples are one npm workspace: one install, at its root.
    let npm = |args: &[&str], folder: &std::path::Path| {
        Command::new("npm")
            .args(args)
            .current_dir(folder)
            .output()
            .map_err(|e| anyhow::anyhow!("npm (Node.js) is needed for {package}: {e}"))
    };
    let output = if js {
        std::fs::create_dir_all(dir.join("target/js"))?;
        if !dir.join("node_modules").exists() {
            let installed = npm(&["ci", "--silent", "--no-audit", "--no-fund"], &dir)?;
            if !installed.status.success() {
                anyhow::bail!(
                    "npm ci for {package} failed:\n{}",
                    String::from_utf8_lossy(&installed.stderr)
                );
            }
        }
        npm(&["run", "--silent", "build"], &dir.join(package))?
    } else if python {
        std::fs::create_dir_all(dir.join("target/python"))?;
        Command::new("componentize-py")
            .args(["-d", "../../wit", "-w", "hook", "componentize", "app"])
            // The app, and the Python SDK beside the Rust one.
            .args(["-p", ".", "-p", "../../guest-sdk/python", "-o"])
            .arg(&path)
            .current_dir(dir.join(package))
            .output()
            .map_err(|e| {
                anyhow::anyhow!("componentize-py is needed for {package} (pip install componentize-py==0.25.1): {e}")
            })?
    } else {
        // Each example alone: the SDK's world features must not unify across examples.
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "--quiet",
                "--release",
                "--target",
                "wasm32-wasip2",
                "-p",
                package,
            ])
            .current_dir(&dir)
            .output()?
    };
    if !output.status.success() {
        anyhow::bail!(
            "building example {package} failed (for Rust: `rustup target add wasm32-wasip2`):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    built.push(package.to_string());
    Ok(path)
}

/// A Go example: Go's own `wasip1` reactor build (fast and reproducible, so always run),
/// made a component as `ork component new` makes it.
fn go(dir: &std::path::Path, package: &str) -> anyhow::Result<PathBuf> {
    let target = dir.join("target/go");
    std::fs::create_dir_all(&target)?;
    let file = package.replace('-', "_");
    let module = target.join(format!("{file}.module.wasm"));
    let output = Command::new("go")
        .args(["build", "-buildmode=c-shared", "-o"])
        .arg(&module)
        .arg(".")
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .current_dir(dir.join(package))
        .output()
        .map_err(|e| anyhow::anyhow!("Go is needed for {package}: {e}"))?;
    if !output.status.success() {
        anyhow::bail!(
            "building example {package} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let component = orkestra_wasm::componentize::new_component(&std::fs::read(&module)?, orkestra_wasm::World::Hook)
        .map_err(|e| anyhow::anyhow!("{}: {e}", module.display()))?;
    let path = target.join(format!("{file}.wasm"));
    let partial = path.with_extension("partial");
    // Unchanged bytes are left alone: a rewrite would look like a new version to a watcher.
    if std::fs::read(&path).ok().as_deref() != Some(&component[..]) {
        std::fs::write(&partial, component)?;
        std::fs::rename(&partial, &path)?;
    }
    Ok(path)
}

/// The TypeScript files of a JavaScript example.
fn typescript_sources(folder: &std::path::Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut sources = Vec::new();
    for entry in std::fs::read_dir(folder)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "ts") {
            sources.push(path);
        }
    }
    Ok(sources)
}

/// Whether `output` exists and is newer than every one of `inputs`.
fn is_fresh(output: &std::path::Path, inputs: &[PathBuf]) -> bool {
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(built) = modified(output) else {
        return false;
    };
    inputs
        .iter()
        .all(|input| modified(input).is_some_and(|changed| changed <= built))
}
