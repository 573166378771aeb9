//! A component as the Katalog declares it (`reconcile.hooks` / `reconcile.constructor`),
//! checked and with defaults filled in: where its bytes come from, its world, its per-call
//! limits and its grants.

use crate::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::grants::Grants;
use crate::model::{Capability, ComponentDeletion, ComponentInstances, ComponentLimits, ComponentRollout};

mod limits;
use crate::oci::OciReference;
pub use limits::{Limits, MAX_MEMORY};

/// Which WIT world the component implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum World {
    /// Called by the declarative reconciler around its templates.
    Hook,
    /// Owns reconcile.
    Constructor,
}

impl World {
    pub fn name(self) -> &'static str {
        match self {
            World::Hook => "hook",
            World::Constructor => "constructor",
        }
    }

    /// The Katalog field that declares it, under `reconcile`.
    pub fn field(self) -> &'static str {
        match self {
            World::Hook => "hooks",
            World::Constructor => "constructor",
        }
    }
}

/// Where the component's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    Path(PathBuf),
    Url(String),
    /// An artifact in an OCI registry, pinned by its manifest digest.
    Oci(OciReference),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Path(path) => write!(f, "{}", path.display()),
            Source::Url(url) => f.write_str(url),
            Source::Oci(reference) => reference.fmt(f),
        }
    }
}

/// While on-delete keeps failing: how long the finalizer waits, and what then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Deletion {
    /// From the CR's deletionTimestamp.
    pub timeout: Duration,
    /// Past the timeout, let the finalizer go (true) or keep it and say DeletionBlocked.
    pub release: bool,
}

impl Default for Deletion {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            release: false,
        }
    }
}

impl Deletion {
    fn compile(spec: &ComponentDeletion) -> Result<Self, Error> {
        let mut deletion = Deletion::default();
        if let Some(text) = &spec.timeout {
            deletion.timeout = orkestra_expr::duration::parse(text)
                .map_err(|e| Error::ComponentSpec(format!("deletion.timeout: {e}")))?;
        }
        deletion.release = match spec.on_timeout.as_deref() {
            None | Some("block") => false,
            Some("release") => true,
            Some(other) => {
                return Err(Error::ComponentSpec(format!(
                    "deletion.onTimeout: {other:?} is neither block nor release"
                )));
            }
        };
        Ok(deletion)
    }
}

/// How calls get their instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Instances {
    /// A new instance per call: nothing of an earlier call is visible.
    #[default]
    Fresh,
    /// Instances kept between calls of one namespace's CRs.
    Warm(Warm),
}

/// When a warm instance is replaced by a fresh one (besides after any failed call).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Warm {
    /// Calls one instance serves.
    pub max_calls: u32,
    /// Bytes of memory and tables an instance may hold after a call and still be kept.
    pub high_water: usize,
}

/// Most calls one warm instance may serve.
const MAX_WARM_CALLS: u32 = 1_000_000;

impl Instances {
    fn compile(spec: &ComponentInstances, limits: &Limits) -> Result<Self, Error> {
        let warm = match spec.reuse.as_deref().map(str::trim) {
            None | Some("fresh") => false,
            Some("warm") => true,
            Some(other) => {
                return Err(Error::ComponentSpec(format!(
                    "instances.reuse: {other:?} is neither fresh nor warm"
                )));
            }
        };
        if !warm {
            if spec.max_calls.is_some() || spec.memory_high_water.is_some() {
                return Err(Error::ComponentSpec(
                    "instances: maxCalls and memoryHighWater apply to warm instances; add reuse: warm".into(),
                ));
            }
            return Ok(Instances::Fresh);
        }
        let max_calls = spec.max_calls.unwrap_or(1000);
        if max_calls == 0 || max_calls > MAX_WARM_CALLS {
            return Err(Error::ComponentSpec(format!(
                "instances.maxCalls: {max_calls} must be between 1 and {MAX_WARM_CALLS}"
            )));
        }
        let high_water = match &spec.memory_high_water {
            None => limits.memory / 2,
            Some(text) => {
                let n = orkestra_expr::template::funcs::quantity::parse(text)
                    .map_err(|e| Error::ComponentSpec(format!("instances.memoryHighWater: {e}")))?;
                if !(n >= 1.0 && n <= limits.memory as f64) {
                    return Err(Error::ComponentSpec(format!(
                        "instances.memoryHighWater: {text:?} must be between 1 byte and limits.memory ({} bytes)",
                        limits.memory
                    )));
                }
                n as usize
            }
        };
        Ok(Instances::Warm(Warm { max_calls, high_water }))
    }

    /// The reuse rules, where instances are kept.
    pub fn warm(self) -> Option<Warm> {
        match self {
            Instances::Fresh => None,
            Instances::Warm(warm) => Some(warm),
        }
    }
}

/// A declared component.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub world: World,
    pub source: Source,
    /// Lowercase hex; checked against the bytes before anything else happens to them.
    pub sha256: Option<String>,
    pub limits: Limits,
    pub deletion: Deletion,
    pub instances: Instances,
    pub grants: Arc<Grants>,
    /// Hooks only: before the templates instead of after.
    pub run_first: bool,
    /// Handed to every call as `context.args`.
    pub args: Option<Value>,
    /// Whom it acts as towards the API server (`None`: the host's own identity).
    pub service_account: Option<ServiceAccount>,
    /// Directories it may read, each at its mount path: nothing else of the filesystem.
    pub files: Vec<Mount>,
    /// How a new version rolls out (`None`: it serves every CR at once).
    pub rollout: Option<Rollout>,
}

/// A progressive rollout: `share` percent of the CRs on the new version, every CR after
/// `promote_after`, the last good version again once more than `max_error_percent` of at
/// least `min_reconciles` reconciles on the new one failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rollout {
    pub share: u32,
    pub promote_after: Duration,
    pub max_error_percent: u32,
    pub min_reconciles: u32,
}

/// The longest a new version may wait for its promotion.
const MAX_PROMOTE_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);

impl Rollout {
    fn compile(spec: &ComponentRollout) -> Result<Self, Error> {
        let share = spec.share.unwrap_or(10);
        if !(1..=99).contains(&share) {
            return Err(Error::ComponentSpec(format!(
                "rollout.share: {share} is not a percent between 1 and 99"
            )));
        }
        let promote_after = match &spec.promote_after {
            None => Duration::from_secs(600),
            Some(text) => {
                let value = orkestra_expr::duration::parse(text)
                    .map_err(|e| Error::ComponentSpec(format!("rollout.promoteAfter: {e}")))?;
                if value.is_zero() || value > MAX_PROMOTE_AFTER {
                    return Err(Error::ComponentSpec(format!(
                        "rollout.promoteAfter: {text:?} must be above 0 and at most 7 days"
                    )));
                }
                value
            }
        };
        let max_error_percent = spec.max_error_percent.unwrap_or(10);
        if max_error_percent > 100 {
            return Err(Error::ComponentSpec(format!(
                "rollout.maxErrorPercent: {max_error_percent} is not a percent between 0 and 100"
            )));
        }
        let min_reconciles = spec.min_reconciles.unwrap_or(5);
        if !(1..=10_000).contains(&min_reconciles) {
            return Err(Error::ComponentSpec(format!(
                "rollout.minReconciles: {min_reconciles} is not between 1 and 10000"
            )));
        }
        Ok(Self {
            share,
            promote_after,
            max_error_percent,
            min_reconciles,
        })
    }
}

/// A directory of the host a component sees read-only: one inside the Katalog's folder.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mount {
    pub host: std::path::PathBuf,
    /// An absolute path inside the guest.
    pub guest: String,
    /// The Katalog's folder, which `host` must stay inside.
    pub folder: std::path::PathBuf,
}

/// Why `path` (a grant's, relative to the Katalog's folder `base`) is not a directory inside
/// that folder: absolute, climbing out with `..`, or (where it exists) leading out through
/// a symlink. A grant is checked at load and again before each component load.
pub fn outside(base: &Path, path: &Path) -> Option<String> {
    if path.is_absolute() {
        return Some("is absolute: a grant is a directory inside the Katalog's folder, given relative to it".into());
    }
    if path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Some("climbs out with '..': a grant is a directory inside the Katalog's folder".into());
    }
    let (Ok(real), Ok(root)) = (base.join(path).canonicalize(), base.canonicalize()) else {
        // Not there (yet): the component's load says so.
        return None;
    };
    (!real.starts_with(&root)).then(|| format!("leads outside the Katalog's folder (to {})", real.display()))
}

impl Mount {
    /// `files[]`, paths relative to `base`; mount paths absolute, distinct and plain.
    fn compile(grants: &[crate::model::FileGrant], base: &Path) -> Result<Vec<Self>, Error> {
        let mut mounts: Vec<Mount> = Vec::with_capacity(grants.len());
        for (i, grant) in grants.iter().enumerate() {
            let at = format!("files[{i}]");
            if grant.path.trim().is_empty() {
                return Err(Error::ComponentSpec(format!(
                    "{at}.path: give a directory (relative to the Katalog file)"
                )));
            }
            if let Some(why) = outside(base, Path::new(grant.path.trim())) {
                return Err(Error::ComponentSpec(format!(
                    "{at}.path: {:?} {why}",
                    grant.path.trim()
                )));
            }
            let guest = grant.mount_path.clone().unwrap_or_else(|| "/files".into());
            let plain = guest.starts_with('/')
                && guest.len() > 1
                && guest[1..]
                    .split('/')
                    .all(|part| !part.is_empty() && part != "." && part != "..");
            if !plain {
                return Err(Error::ComponentSpec(format!(
                    "{at}.mountPath: {guest:?} is not an absolute path of plain names (like /policies)"
                )));
            }
            if mounts.iter().any(|m| m.guest == guest) {
                return Err(Error::ComponentSpec(format!("{at}.mountPath: {guest} is given twice")));
            }
            mounts.push(Mount {
                host: base.join(grant.path.trim()),
                guest,
                folder: base.to_path_buf(),
            });
        }
        Ok(mounts)
    }
}

/// `serviceAccount`: `name` (in the CR's namespace) or `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServiceAccount {
    /// `None`: the namespace of the custom resource being reconciled.
    pub namespace: Option<String>,
    pub name: String,
}

impl ServiceAccount {
    pub fn parse(text: &str) -> Result<Self, Error> {
        let dns_label = |part: &str| {
            !part.is_empty()
                && part.len() <= 63
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        };
        let (namespace, name) = match text.trim().split_once('/') {
            Some((namespace, name)) => (Some(namespace), name),
            None => (None, text.trim()),
        };
        // Names may be DNS subdomains; a namespace is a label.
        let subdomain = !name.is_empty() && name.len() <= 253 && name.split('.').all(dns_label);
        if !subdomain || namespace.is_some_and(|ns| !dns_label(ns)) {
            return Err(Error::ComponentSpec(format!(
                "serviceAccount: {text:?} is not NAME or NAMESPACE/NAME (lowercase letters, digits, '-')"
            )));
        }
        Ok(Self {
            namespace: namespace.map(String::from),
            name: name.to_string(),
        })
    }

    /// The user the API server knows it as, for a CR in `cr_namespace`; `None` when the
    /// account's namespace would be the CR's and the CR has none.
    pub fn user(&self, cr_namespace: Option<&str>) -> Option<String> {
        let namespace = self.namespace.as_deref().or(cr_namespace)?;
        Some(format!("system:serviceaccount:{namespace}:{}", self.name))
    }
}

/// The parts of a hooks or constructor declaration a component needs.
pub struct Declared<'a> {
    pub component: &'a str,
    pub sha256: Option<&'a str>,
    pub limits: &'a ComponentLimits,
    pub deletion: &'a ComponentDeletion,
    pub instances: &'a ComponentInstances,
    pub capabilities: &'a [Capability],
    pub run_first: bool,
    pub args: Option<&'a Value>,
    pub service_account: Option<&'a str>,
    pub files: &'a [crate::model::FileGrant],
    pub rollout: Option<&'a ComponentRollout>,
}

impl Spec {
    /// Checks a declaration; relative paths resolve against `base` (the Katalog's folder).
    pub fn compile(world: World, declared: Declared<'_>, base: &Path) -> Result<Self, Error> {
        let reference = declared.component.trim();
        let sha256 = match declared.sha256 {
            Some(hex) => {
                let hex = hex.trim().trim_start_matches("sha256:").to_ascii_lowercase();
                if !crate::oci::is_sha256_hex(&hex) {
                    return Err(Error::ComponentSpec(format!("sha256: {hex:?} is not 64 hex digits")));
                }
                Some(hex)
            }
            None => None,
        };
        let source = if reference.starts_with("https://") || reference.starts_with("http://") {
            if sha256.is_none() {
                return Err(Error::ComponentSpec(format!(
                    "component: {reference} is fetched over the network, so it needs a sha256 pin"
                )));
            }
            Source::Url(reference.to_string())
        } else if reference.starts_with("oci://") {
            Source::Oci(
                OciReference::parse(reference, true).map_err(|e| Error::ComponentSpec(format!("component: {e}")))?,
            )
        } else if reference.is_empty() {
            return Err(Error::ComponentSpec(
                "component: empty; give a path to a .wasm file, an http(s) URL or an oci:// reference".into(),
            ));
        } else if reference.contains("://") {
            return Err(Error::ComponentSpec(format!(
                "component: {reference:?} has an unsupported scheme; use a path, an http(s) URL or oci://"
            )));
        } else {
            Source::Path(base.join(reference))
        };
        let limits = Limits::compile(declared.limits)?;
        Ok(Self {
            world,
            source,
            sha256,
            instances: Instances::compile(declared.instances, &limits)?,
            limits,
            deletion: Deletion::compile(declared.deletion)?,
            grants: Arc::new(Grants::compile(declared.capabilities)?),
            run_first: declared.run_first,
            args: declared.args.cloned(),
            service_account: declared.service_account.map(ServiceAccount::parse).transpose()?,
            files: Mount::compile(declared.files, base)?,
            rollout: declared.rollout.map(Rollout::compile).transpose()?,
        })
    }
}

/// The component a reconcile section declares: a constructor's when `default: false`, else
/// its hooks'. `Ok(None)`: templates only.
pub fn declared_in(reconcile: &crate::model::Reconcile, base: &Path) -> Result<Option<Spec>, Error> {
    if reconcile.default == Some(false) {
        let Some(constructor) = &reconcile.constructor else {
            return Ok(None);
        };
        let Some(component) = &constructor.component else {
            return Err(Error::ComponentSpec(
                "reconcile.constructor.component: this runtime hosts constructors as Wasm \
                        components; give one (Go constructors by location are not hosted)"
                    .into(),
            ));
        };
        let declared = Declared {
            component,
            sha256: constructor.sha256.as_deref(),
            limits: &constructor.limits,
            deletion: &constructor.deletion,
            instances: &constructor.instances,
            capabilities: &constructor.capabilities,
            run_first: false,
            args: constructor.args.as_ref(),
            service_account: constructor.service_account.as_deref(),
            files: &constructor.files,
            rollout: constructor.rollout.as_ref(),
        };
        return Spec::compile(World::Constructor, declared, base)
            .map(Some)
            .map_err(|e| Error::ComponentSpec(format!("reconcile.constructor.{e}")));
    }
    let Some(hooks) = &reconcile.hooks else {
        return Ok(None);
    };
    let Some(component) = &hooks.component else {
        // Hooks that name Go code would silently not run: refuse them as constructors are.
        if hooks.location.is_some() || hooks.function.is_some() {
            return Err(Error::ComponentSpec(
                "reconcile.hooks.component: this runtime hosts hooks as Wasm components; give one \
                        (Go hooks by location are not hosted)"
                    .into(),
            ));
        }
        return Ok(None);
    };
    let declared = Declared {
        component,
        sha256: hooks.sha256.as_deref(),
        limits: &hooks.limits,
        deletion: &hooks.deletion,
        instances: &hooks.instances,
        capabilities: &hooks.capabilities,
        run_first: hooks.run_hooks_first,
        args: hooks.args.as_ref(),
        service_account: hooks.service_account.as_deref(),
        files: &hooks.files,
        rollout: hooks.rollout.as_ref(),
    };
    Spec::compile(World::Hook, declared, base)
        .map(Some)
        .map_err(|e| Error::ComponentSpec(format!("reconcile.hooks.{e}")))
}

#[cfg(test)]
mod tests;
