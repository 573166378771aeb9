//! `ork component push`, `new` and `init` (in [`crate::scaffold`]), and the registry options
//! shared with `ork run`: where credentials come from and which registries are reached over
//! plain HTTP.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use orkestra_katalog::component::OciReference;
use orkestra_wasm::{Registries, World};

#[derive(Debug, Subcommand)]
pub enum ComponentCommand {
    /// Push a component to an OCI registry in the Wasm artifact layout, and print the
    /// digest-pinned reference to put in a Katalog's `component:`.
    Push(PushArgs),
    /// Start a component project: a hook in Rust, Go, TypeScript or Python, its Katalog, a
    /// sample CR, build.sh (one command to the component) and test.sh (the sample reconciled by
    /// `ork simulate`, no cluster).
    Init(crate::scaffold::InitArgs),
    /// Make a component of a WASI preview1 core module (Go's `GOOS=wasip1` build with the Go
    /// SDK): embed the Orkestra WIT world and adapt WASI with wasmtime's preview1 adapter.
    New(NewArgs),
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The core module (.wasm), such as `go build -buildmode=c-shared` writes.
    #[arg(value_name = "MODULE")]
    module: PathBuf,
    /// Where to write the component.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// The world the module implements.
    #[arg(long, value_enum, default_value = "hook")]
    world: WorldArg,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum WorldArg {
    /// Hooks (`orkestra:operator/hooks`).
    Hook,
    /// A constructor (`orkestra:operator/reconciler`).
    Constructor,
}

/// `ork component push` and `ork motif push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The file to push: a component (.wasm), or a motif (YAML of kind Motif).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Where to: `oci://HOST[:PORT]/REPOSITORY:TAG`.
    #[arg(value_name = "REFERENCE")]
    pub reference: String,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Registry credentials from Docker config files, and registries without TLS.
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// A Docker config file with registry credentials (`auths`); repeat for several, first
    /// match winning. Default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json, when
    /// there.
    #[arg(long = "registry-config", value_name = "FILE")]
    config: Vec<PathBuf>,
    /// Reach this registry (`HOST[:PORT]`) over plain HTTP; repeat for several. Only for a
    /// registry on loopback or a trusted network.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    insecure: Vec<String>,
}

/// [`RegistryArgs`] plus credentials kept in the cluster, for the runtime's pulls.
#[derive(Debug, Clone, Args)]
pub struct PullArgs {
    #[command(flatten)]
    registry: RegistryArgs,
    /// A `kubernetes.io/dockerconfigjson` Secret (`NAMESPACE/NAME`) with credentials for
    /// `oci://` components, read at each pull; repeat for several. Searched after the
    /// config files.
    #[arg(long = "pull-secret", value_name = "SECRET")]
    pull_secret: Vec<String>,
}

impl RegistryArgs {
    pub fn registries(&self) -> Registries {
        let config_files = match self.config.is_empty() {
            false => self.config.clone(),
            true => default_config().into_iter().collect(),
        };
        Registries {
            config_files,
            secrets: Vec::new(),
            insecure: self.insecure.clone(),
        }
    }
}

impl PullArgs {
    /// The `--pull-secret` Secrets, as given.
    pub fn pull_secrets(&self) -> &[String] {
        &self.pull_secret
    }

    /// The registry settings, or which `--pull-secret` is not `NAMESPACE/NAME`.
    pub fn registries(&self) -> anyhow::Result<Registries> {
        let mut registries = self.registry.registries();
        for secret in &self.pull_secret {
            registries.secrets.push(pull_secret(secret)?);
        }
        Ok(registries)
    }

    /// Where the runtime's components come from and where compiled ones are cached
    /// ([`cache_dir`]).
    pub fn store(&self) -> anyhow::Result<orkestra::runtime::slots::ComponentStore> {
        Ok(orkestra::runtime::slots::ComponentStore {
            registries: self.registries()?,
            cache_dir: Some(cache_dir()),
            recordings: None,
        })
    }

    /// Where the Katalog's OCI motifs come from: the same registries and cache.
    pub fn motifs(&self, cluster: Option<kube::Client>) -> anyhow::Result<orkestra::runtime::motifs::Source> {
        Ok(orkestra::runtime::motifs::Source::Registries {
            registries: self.registries()?,
            cache_dir: cache_dir(),
            cluster,
        })
    }
}

/// The component cache: compiled components and the blobs pulled from registries
/// (`$ORK_CACHE_DIR/wasm`, else `~/.cache/orkestra/wasm`).
pub fn cache_dir() -> PathBuf {
    orkestra_control_plane::cache_root().join("wasm")
}

/// Where the runtime may write recordings of component calls.
#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    /// Allow recording component calls on demand (`POST /recordings` on the Live API) into
    /// this folder, made readable by the runtime's user only. Without it nothing is ever
    /// recorded: a recording holds what the component was allowed to read. The sessions API
    /// always needs a bearer token: the Live API's, or (on an open Live API) the one the
    /// runtime writes to DIR/.token at start.
    #[arg(long, value_name = "DIR")]
    recordings: Option<PathBuf>,
    /// Bytes the recordings folder may hold in all, recordings already there included
    /// (a quantity: 512Mi, 2Gi); past it, no session starts and no recording is written.
    #[arg(long, value_name = "BYTES", default_value = "512Mi", value_parser = quantity_bytes)]
    recordings_max_bytes: u64,
}

/// The recordings folder, ready, with the token of its sessions API.
pub struct Recording {
    pub folder: orkestra_wasm::record::Folder,
    /// Written to the folder's `.token` (0600); the Live API asks it of the sessions API
    /// when the Live API has no token of its own.
    pub token: String,
}

/// `--recordings-max-bytes`: a quantity of bytes.
fn quantity_bytes(text: &str) -> Result<u64, String> {
    let bytes = orkestra_expr::template::funcs::quantity::parse(text)?;
    match bytes.fract() == 0.0 && bytes >= 1.0 && bytes <= u64::MAX as f64 {
        true => Ok(bytes as u64),
        false => Err(format!("{text:?} is not a whole number of bytes")),
    }
}

impl RecordArgs {
    /// The folder (made private where it is missing), its bound and a fresh sessions token.
    pub fn folder(&self) -> anyhow::Result<Option<Recording>> {
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
        let Some(dir) = &self.recordings else { return Ok(None) };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("--recordings {}: cannot make the folder", dir.display()))?;
        let mode = std::fs::metadata(dir)?.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(dir = %dir.display(), mode = format!("{mode:o}"), "the recordings folder is readable by others");
        }
        let token = crate::random::token();
        let path = dir.join(".token");
        let _ = std::fs::remove_file(&path);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("--recordings: cannot write {}", path.display()))?;
        std::io::Write::write_all(&mut file, token.as_bytes())
            .with_context(|| format!("--recordings: cannot write {}", path.display()))?;
        Ok(Some(Recording {
            folder: orkestra_wasm::record::Folder {
                dir: dir.clone(),
                max_bytes: self.recordings_max_bytes,
            },
            token,
        }))
    }
}

/// A `--pull-secret` as (namespace, name).
pub fn pull_secret(text: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((namespace.into(), name.into()))
        }
        _ => anyhow::bail!("--pull-secret {text:?}: give NAMESPACE/NAME"),
    }
}

/// Docker's own default, when the file exists.
fn default_config() -> Option<PathBuf> {
    let dir = match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".docker"),
    };
    let file = dir.join("config.json");
    file.is_file().then_some(file)
}

pub async fn component(command: ComponentCommand) -> anyhow::Result<ExitCode> {
    match command {
        ComponentCommand::Push(args) => push(args).await,
        ComponentCommand::New(args) => new(&args),
        ComponentCommand::Init(args) => crate::scaffold::init(args),
    }
}

fn new(args: &NewArgs) -> anyhow::Result<ExitCode> {
    let module = std::fs::read(&args.module).with_context(|| format!("reading {}", args.module.display()))?;
    let world = match args.world {
        WorldArg::Hook => World::Hook,
        WorldArg::Constructor => World::Constructor,
    };
    let component = orkestra_wasm::componentize::new_component(&module, world)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.module.display()))?;
    // Through a temporary file: a runtime watching the output sees the old or the new.
    let partial = args.output.with_extension("partial");
    std::fs::write(&partial, &component).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, &args.output).with_context(|| format!("writing {}", args.output.display()))?;
    Ok(ExitCode::SUCCESS)
}

async fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let (reference, component, title) = to_push(&args.reference, &args.file)?;
    let pinned = args
        .registry
        .registries()
        .push(&reference, &component, &title, &created()?)
        .await
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    println!("{pinned}");
    Ok(ExitCode::SUCCESS)
}

/// What a push needs (`ork component push`, `ork motif push`): the tag to push to (a
/// digest is what the registry gives back), the file's bytes and its name as the title.
pub fn to_push(reference: &str, file: &std::path::Path) -> anyhow::Result<(OciReference, Vec<u8>, String)> {
    let parsed = OciReference::parse(reference, false).map_err(anyhow::Error::msg)?;
    if !parsed.digest.is_empty() {
        anyhow::bail!("{reference}: push to a tag; the digest is what the registry gives back");
    }
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let title = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((parsed, bytes, title))
}

/// Now, or `SOURCE_DATE_EPOCH` for a reproducible manifest (the same bytes push to the same
/// digest).
pub fn created() -> anyhow::Result<String> {
    let at = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(seconds) => {
            let seconds: i64 = seconds
                .trim()
                .parse()
                .with_context(|| format!("SOURCE_DATE_EPOCH {seconds:?} is not a number of seconds"))?;
            jiff::Timestamp::from_second(seconds).context("SOURCE_DATE_EPOCH is out of range")?
        }
        Err(_) => jiff::Timestamp::now(),
    };
    Ok(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}
