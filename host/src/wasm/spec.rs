//! A component as the Katalog declares it (`reconcile.hooks` / `reconcile.constructor`),
//! checked and with defaults filled in: where its bytes come from, its world, its per-call
//! limits and its grants.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::grants::Grants;
use crate::katalog::{Capability, ComponentLimits};

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
}

/// Where the component's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    Path(PathBuf),
    Url(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Path(path) => write!(f, "{}", path.display()),
            Source::Url(url) => f.write_str(url),
        }
    }
}

/// Per-call limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Wall-clock time of one call, host calls included.
    pub timeout: Duration,
    /// Bytes of linear memory per instance.
    pub memory: usize,
    /// Bytes of what one call returns (resources, status, events, log lines).
    pub result_size: usize,
    /// Kube calls per call.
    pub kube_calls: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(2),
            memory: 64 << 20,
            result_size: 1 << 20,
            kube_calls: 50,
        }
    }
}

/// Upper bounds a Katalog cannot exceed: the pool reserves memory slots of this size.
pub const MAX_MEMORY: usize = 1 << 30;
const MAX_TIMEOUT: Duration = Duration::from_secs(300);

impl Limits {
    fn compile(spec: &ComponentLimits) -> Result<Self, String> {
        let mut limits = Limits::default();
        if let Some(text) = &spec.timeout {
            let timeout = crate::duration::parse(text).map_err(|e| format!("limits.timeout: {e}"))?;
            if timeout.is_zero() || timeout > MAX_TIMEOUT {
                return Err(format!("limits.timeout: {text:?} must be above 0 and at most 5m"));
            }
            limits.timeout = timeout;
        }
        let bytes = |field: &str, text: &str, max: usize| -> Result<usize, String> {
            let n = crate::template::funcs::quantity::parse(text).map_err(|e| format!("limits.{field}: {e}"))?;
            if !(n >= 1.0 && n <= max as f64) {
                return Err(format!("limits.{field}: {text:?} must be between 1 and {max} bytes"));
            }
            Ok(n as usize)
        };
        if let Some(text) = &spec.memory {
            limits.memory = bytes("memory", text, MAX_MEMORY)?;
        }
        if let Some(text) = &spec.result_size {
            limits.result_size = bytes("resultSize", text, 64 << 20)?;
        }
        if let Some(calls) = spec.kube_calls {
            limits.kube_calls = calls;
        }
        Ok(limits)
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
    pub grants: Arc<Grants>,
    /// Hooks only: before the templates instead of after.
    pub run_first: bool,
    /// Handed to every call as `context.args`.
    pub args: Option<Value>,
}

/// The parts of a hooks or constructor declaration a component needs.
pub struct Declared<'a> {
    pub component: &'a str,
    pub sha256: Option<&'a str>,
    pub limits: &'a ComponentLimits,
    pub capabilities: &'a [Capability],
    pub run_first: bool,
    pub args: Option<&'a Value>,
}

impl Spec {
    /// Checks a declaration; relative paths resolve against `base` (the Katalog's folder).
    pub fn compile(world: World, declared: Declared<'_>, base: &Path) -> Result<Self, String> {
        let reference = declared.component.trim();
        let sha256 = match declared.sha256 {
            Some(hex) => {
                let hex = hex.trim().trim_start_matches("sha256:").to_ascii_lowercase();
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!("sha256: {hex:?} is not 64 hex digits"));
                }
                Some(hex)
            }
            None => None,
        };
        let source = if reference.starts_with("https://") || reference.starts_with("http://") {
            if sha256.is_none() {
                return Err(format!(
                    "component: {reference} is fetched over the network, so it needs a sha256 pin"
                ));
            }
            Source::Url(reference.to_string())
        } else if reference.is_empty() {
            return Err("component: empty; give a path to a .wasm file or an http(s) URL".into());
        } else if reference.contains("://") {
            return Err(format!(
                "component: {reference:?} has an unsupported scheme; use a path or an http(s) URL"
            ));
        } else {
            Source::Path(base.join(reference))
        };
        Ok(Self {
            world,
            source,
            sha256,
            limits: Limits::compile(declared.limits)?,
            grants: Arc::new(Grants::compile(declared.capabilities)?),
            run_first: declared.run_first,
            args: declared.args.cloned(),
        })
    }
}

/// The component a reconcile section declares: a constructor's when `default: false`, else
/// its hooks'. `Ok(None)`: templates only.
pub fn declared_in(reconcile: &crate::katalog::Reconcile, base: &Path) -> Result<Option<Spec>, String> {
    if reconcile.default == Some(false) {
        let Some(constructor) = &reconcile.constructor else {
            return Ok(None);
        };
        let Some(component) = &constructor.component else {
            return Err(
                "reconcile.constructor.component: this runtime hosts constructors as Wasm \
                        components; give one (Go constructors by location are not hosted)"
                    .into(),
            );
        };
        let declared = Declared {
            component,
            sha256: constructor.sha256.as_deref(),
            limits: &constructor.limits,
            capabilities: &constructor.capabilities,
            run_first: false,
            args: constructor.args.as_ref(),
        };
        return Spec::compile(World::Constructor, declared, base)
            .map(Some)
            .map_err(|e| format!("reconcile.constructor.{e}"));
    }
    let Some(hooks) = &reconcile.hooks else {
        return Ok(None);
    };
    let Some(component) = &hooks.component else {
        return Ok(None);
    };
    let declared = Declared {
        component,
        sha256: hooks.sha256.as_deref(),
        limits: &hooks.limits,
        capabilities: &hooks.capabilities,
        run_first: hooks.run_hooks_first,
        args: hooks.args.as_ref(),
    };
    Spec::compile(World::Hook, declared, base)
        .map(Some)
        .map_err(|e| format!("reconcile.hooks.{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared<'a>(component: &'a str, sha256: Option<&'a str>, limits: &'a ComponentLimits) -> Declared<'a> {
        Declared {
            component,
            sha256,
            limits,
            capabilities: &[],
            run_first: false,
            args: None,
        }
    }

    #[test]
    fn paths_resolve_against_the_katalog_and_defaults_are_safe() {
        let limits = ComponentLimits::default();
        let spec = Spec::compile(World::Hook, declared("hook.wasm", None, &limits), Path::new("/k")).unwrap();
        assert_eq!(spec.source, Source::Path(PathBuf::from("/k/hook.wasm")));
        assert_eq!(spec.limits, Limits::default());
        assert_eq!(*spec.grants, Grants::default());
    }

    #[test]
    fn limits_parse_and_are_bounded() {
        let limits = ComponentLimits {
            timeout: Some("500ms".into()),
            memory: Some("16Mi".into()),
            result_size: Some("64Ki".into()),
            kube_calls: Some(3),
        };
        let spec = Spec::compile(World::Hook, declared("a.wasm", None, &limits), Path::new(".")).unwrap();
        assert_eq!(
            spec.limits,
            Limits {
                timeout: Duration::from_millis(500),
                memory: 16 << 20,
                result_size: 64 << 10,
                kube_calls: 3
            }
        );
        let huge = ComponentLimits {
            memory: Some("8Gi".into()),
            ..Default::default()
        };
        let error = Spec::compile(World::Hook, declared("a.wasm", None, &huge), Path::new(".")).unwrap_err();
        assert!(error.starts_with("limits.memory"), "{error}");
        let never = ComponentLimits {
            timeout: Some("0s".into()),
            ..Default::default()
        };
        let error = Spec::compile(World::Hook, declared("a.wasm", None, &never), Path::new(".")).unwrap_err();
        assert!(error.starts_with("limits.timeout"), "{error}");
    }

    #[test]
    fn urls_need_a_well_formed_pin() {
        let limits = ComponentLimits::default();
        let url = "https://example.com/hook.wasm";
        let error = Spec::compile(World::Hook, declared(url, None, &limits), Path::new(".")).unwrap_err();
        assert!(error.contains("needs a sha256 pin"), "{error}");
        let error = Spec::compile(World::Hook, declared(url, Some("abc"), &limits), Path::new(".")).unwrap_err();
        assert!(error.starts_with("sha256"), "{error}");
        let pin = "AB".repeat(32);
        let spec = Spec::compile(World::Hook, declared(url, Some(&pin), &limits), Path::new(".")).unwrap();
        assert_eq!(spec.sha256.as_deref(), Some("ab".repeat(32).as_str()));
        let error = Spec::compile(World::Hook, declared("oci://x/y", None, &limits), Path::new(".")).unwrap_err();
        assert!(error.contains("unsupported scheme"), "{error}");
    }
}
