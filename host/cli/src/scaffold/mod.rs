//! `ork component init`: a component project to start from, in Rust, Go, TypeScript or
//! Python. It holds a hook, the Katalog that runs it, a sample CR, `build.sh` (one command
//! to the component) and `test.sh` (the build, then the sample reconciled by `ork simulate`,
//! no cluster needed). The SDK and the WIT world are copied in, so the project builds on its
//! own, wherever it is moved.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};

mod templates;

pub use templates::kind_of;

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The component's name: a DNS label (`greeter`), also its CRD's.
    #[arg(value_name = "NAME")]
    name: String,
    /// Its language.
    #[arg(long, value_enum)]
    lang: Lang,
    /// Where to make it (default: ./NAME); must not exist yet.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The Orkestra-rs source tree to copy the SDK and the WIT world from (default: the one
    /// this ork was built from).
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    Rust,
    Go,
    /// TypeScript (JavaScript), built with componentize-qjs.
    Js,
    Python,
}

impl Lang {
    /// Its name as its users write it.
    fn label(self) -> &'static str {
        match self {
            Self::Rust => "Rust",
            Self::Go => "Go",
            Self::Js => "TypeScript",
            Self::Python => "Python",
        }
    }
}

/// The source tree this binary was built from, when it is still there.
fn built_from() -> Option<PathBuf> {
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    tree.join("guest-sdk").is_dir().then_some(tree)
}

pub fn init(args: InitArgs) -> anyhow::Result<ExitCode> {
    if !orkestra_expr::names::is_dns1123_label(&args.name) || args.name.len() > 40 {
        bail!(
            "{:?} cannot name a component: a DNS label of at most 40 characters (lowercase letters, digits, '-')",
            args.name
        );
    }
    let sdk = match args.sdk.clone().or_else(built_from) {
        Some(sdk) => sdk,
        None => bail!("no Orkestra-rs source tree to copy the SDK from: pass --sdk DIR"),
    };
    for needed in ["wit", "guest-sdk"] {
        if !sdk.join(needed).is_dir() {
            bail!(
                "{} has no {needed}/: --sdk names the Orkestra-rs source tree",
                sdk.display()
            );
        }
    }
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.exists() {
        bail!("{} exists already; pick another --dir", dir.display());
    }
    let project = templates::project(&args.name, args.lang);
    for (file, text) in &project.files {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("making {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        if file.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    copy_tree(&sdk.join("wit"), &dir.join("sdk/wit"))?;
    for (from, to) in &project.sdk {
        let (source, target) = (sdk.join("guest-sdk").join(from), dir.join("sdk").join(to));
        match source.is_dir() {
            true => copy_tree(&source, &target)?,
            false => {
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::copy(&source, &target).with_context(|| format!("copying {}", source.display()))?;
            }
        }
    }
    eprintln!(
        "made {} ({}): cd {} && ./test.sh   # builds it and reconciles samples/cr.yaml with ork simulate",
        dir.display(),
        args.lang.label(),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Copies `from` into `to`, leaving out build output and caches.
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("making {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        if ["target", "__pycache__", "node_modules", "test", "Cargo.lock"].contains(&name.to_string_lossy().as_ref()) {
            continue;
        }
        let (source, target) = (entry.path(), to.join(&name));
        match entry.file_type()?.is_dir() {
            true => copy_tree(&source, &target)?,
            false => {
                std::fs::copy(&source, &target).with_context(|| format!("copying {}", source.display()))?;
            }
        }
    }
    Ok(())
}
