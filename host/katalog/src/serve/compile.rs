//! `serve`, compiled: the surfaces (primary target and aliases) callers name, the intent's
//! fields with their templates, who may do what, and how answers are shaped. The gateway
//! reads this; every template in it is compiled here, once, with the Katalog's notes.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::gather::{Error, template};
use crate::model::{FieldType, Modes, Overrides, ResponseShape, Serve, ServeField, ServeTarget, TokenAccess};
use orkestra_expr::template::{Functions, Template};

/// A CRD's serve settings, compiled.
#[derive(Debug, Clone)]
pub struct CompiledServe {
    /// The primary target's name.
    pub primary: String,
    /// Every surface by name, the primary included.
    pub surfaces: BTreeMap<String, Surface>,
    pub category: Option<String>,
    pub description: Option<String>,
    /// Spec paths callers may neither see nor set.
    pub ignore: Vec<String>,
    pub fields: Vec<IntentField>,
    pub labels: Vec<IntentField>,
    pub annotations: Vec<IntentField>,
    /// `serve.name` and `serve.namespace`.
    pub name: Option<Template>,
    pub namespace: Option<Template>,
}

/// One caller-facing name of a CRD.
#[derive(Debug, Clone)]
pub struct Surface {
    pub name: String,
    pub primary: bool,
    pub enabled: bool,
    /// Who may use it: this surface's own list, then the CRD's (both must allow).
    pub tokens: Option<BTreeMap<String, TokenAccess>>,
    pub crd_tokens: Option<BTreeMap<String, TokenAccess>>,
    pub response: Response,
    /// Target mode and whole-CR mode, each open or not.
    pub target_mode: bool,
    pub cr_mode: bool,
    pub overrides: Overrides,
    /// A whole CR whose fields have these values is routed here.
    pub field_selector: BTreeMap<String, String>,
    /// The clusters its CRs go to (templates over the intent); empty: the gateway's own.
    pub clusters: Vec<Template>,
}

/// How an apply or read answer is shaped.
#[derive(Debug, Clone, Default)]
pub struct Response {
    /// The CR itself is in the answer.
    pub include_cr: bool,
    pub payload: Vec<(String, Template)>,
    /// Paths left out of the CR; a template may give several, comma-separated.
    pub exclude: Vec<Template>,
    pub poll_url: Option<Template>,
    pub poll_field: Option<String>,
}

/// One field of an intent and where it goes.
#[derive(Debug, Clone)]
pub struct IntentField {
    /// The name callers use.
    pub name: String,
    /// Where it is written: `spec.<path>`, `metadata.labels.<key>`, ...
    pub path: Vec<String>,
    /// Turns the submitted `.value` into what is written.
    pub value: Option<Template>,
    /// Writes it to several places instead.
    pub values: Vec<(Vec<String>, Template)>,
    pub default: Option<Value>,
    pub override_: Option<Value>,
    pub required: bool,
    pub type_: Option<FieldType>,
    pub enum_: Vec<Value>,
    /// What the schema shows of it, as written.
    pub spec: ServeField,
}

impl CompiledServe {
    /// `kind` names the default primary target (its lowercase form).
    pub fn compile(serve: &Serve, kind: &str, functions: &Functions) -> Result<Self, Error> {
        let crd_response = serve.config.as_ref().and_then(|c| c.response.as_ref());
        let response = Response::compile(crd_response, functions).map_err(|e| e.within("config.response"))?;
        let crd_modes = serve.modes.unwrap_or_default();
        let crd_overrides = overrides(serve.apply.as_ref().map(|a| a.overrides), serve.target_override);
        let crd_clusters = clusters(&serve.cluster, &serve.clusters, functions).map_err(|e| e.within("clusters"))?;
        let mut surfaces = BTreeMap::new();
        let mut primary = kind.to_lowercase();
        match &serve.target {
            None => {}
            Some(ServeTarget::Single(name)) => primary = name.clone(),
            Some(ServeTarget::Entries(entries)) => {
                for (name, entry) in entries {
                    if entry.primary {
                        primary = name.clone();
                    }
                    let own = entry.config.as_ref().and_then(|c| c.response.as_ref());
                    let response = match own {
                        Some(shape) => Response::compile(Some(shape), functions)
                            .map_err(|e| e.within(&format!("target.{name}.config.response")))?,
                        None => response.clone(),
                    };
                    let modes = entry.modes.unwrap_or(crd_modes);
                    let own_clusters = clusters(&entry.cluster, &entry.clusters, functions)
                        .map_err(|e| e.within(&format!("target.{name}.clusters")))?;
                    let overrides = match (entry.apply.as_ref(), entry.target_override) {
                        (None, None) => crd_overrides,
                        (apply, flag) => overrides(apply.map(|a| a.overrides), flag),
                    };
                    surfaces.insert(
                        name.clone(),
                        Surface {
                            name: name.clone(),
                            primary: entry.primary,
                            enabled: entry.enabled.unwrap_or(true),
                            tokens: entry.tokens.clone(),
                            crd_tokens: serve.tokens.clone(),
                            response,
                            target_mode: open(modes, crd_modes, |m| m.target),
                            cr_mode: open(modes, crd_modes, |m| m.cr),
                            overrides,
                            field_selector: entry.field_selector.clone(),
                            clusters: match own_clusters.is_empty() {
                                true => crd_clusters.clone(),
                                false => own_clusters,
                            },
                        },
                    );
                }
            }
        }
        surfaces.entry(primary.clone()).or_insert_with(|| Surface {
            name: primary.clone(),
            primary: true,
            enabled: true,
            tokens: None,
            crd_tokens: serve.tokens.clone(),
            response: response.clone(),
            target_mode: crd_modes.target.unwrap_or(true),
            cr_mode: crd_modes.cr.unwrap_or(true),
            overrides: crd_overrides,
            field_selector: BTreeMap::new(),
            clusters: crd_clusters.clone(),
        });
        let fields = |map: &BTreeMap<String, ServeField>, base: &[&str], at: &str| {
            map.iter()
                .map(|(name, spec)| IntentField::compile(name, spec, base, functions).map_err(|e| e.within(at)))
                .collect::<Result<Vec<_>, _>>()
        };
        let optional = |text: &Option<String>, at: &str| {
            text.as_deref()
                .map(|t| template(t, functions).map_err(|e| e.within(at)))
                .transpose()
        };
        Ok(Self {
            primary,
            surfaces,
            category: serve.category.clone(),
            description: serve.description.clone(),
            ignore: serve.ignore.clone(),
            fields: fields(&serve.fields, &["spec"], "fields")?,
            labels: fields(&serve.labels, &["metadata", "labels"], "labels")?,
            annotations: fields(&serve.annotations, &["metadata", "annotations"], "annotations")?,
            name: optional(&serve.name, "name")?,
            namespace: optional(&serve.namespace, "namespace")?,
        })
    }

    /// The surface a name reaches: `None` for an unknown or closed one (the same answer, so
    /// a closed surface does not show).
    pub fn surface(&self, name: &str) -> Option<&Surface> {
        self.surfaces.get(name).filter(|s| s.enabled)
    }

    /// The primary target's surface (present by construction).
    pub fn primary_surface(&self) -> &Surface {
        &self.surfaces[&self.primary]
    }

    /// The surface a whole CR is routed through: the one whose fieldSelector it matches,
    /// else the primary.
    pub fn route(&self, object: &Value) -> &Surface {
        let matches = |s: &&Surface| {
            !s.field_selector.is_empty()
                && s.field_selector.iter().all(|(path, wanted)| {
                    let value = path.split('.').try_fold(object, |v, k| v.get(k));
                    // A number or boolean matches its text (`replicas: "3"`).
                    value.is_some_and(|v| match v {
                        Value::String(text) => text == wanted,
                        other => serde_json::from_str::<Value>(wanted).is_ok_and(|w| w == *other),
                    })
                })
        };
        self.surfaces
            .values()
            .filter(|s| s.enabled)
            .find(matches)
            .unwrap_or_else(|| self.primary_surface())
    }
}

fn open(own: Modes, crd: Modes, pick: impl Fn(Modes) -> Option<bool>) -> bool {
    pick(own).or(pick(crd)).unwrap_or(true)
}

fn overrides(apply: Option<Overrides>, target_override: Option<bool>) -> Overrides {
    let mut overrides = apply.unwrap_or_default();
    if let Some(flag) = target_override {
        overrides.target_conflict |= flag;
    }
    overrides
}

impl Response {
    fn compile(shape: Option<&ResponseShape>, functions: &Functions) -> Result<Self, Error> {
        let Some(shape) = shape else {
            return Ok(Self {
                include_cr: true,
                ..Self::default()
            });
        };
        let payload = shape
            .payload
            .iter()
            .map(|(key, text)| {
                Ok((
                    key.clone(),
                    template(text, functions).map_err(|e| e.within(&format!("payload.{key}")))?,
                ))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let exclude = shape
            .exclude
            .iter()
            .enumerate()
            .map(|(i, text)| template(text, functions).map_err(|e| e.within(&format!("exclude[{i}]"))))
            .collect::<Result<Vec<_>, _>>()?;
        let poll = shape.poll.as_ref();
        Ok(Self {
            include_cr: shape.default.unwrap_or(true),
            payload,
            exclude,
            poll_url: poll
                .and_then(|p| p.url.as_deref())
                .map(|url| template(url, functions).map_err(|e| e.within("poll.url")))
                .transpose()?,
            poll_field: poll.and_then(|p| p.field.clone()),
        })
    }
}

impl IntentField {
    fn compile(name: &str, spec: &ServeField, base: &[&str], functions: &Functions) -> Result<Self, Error> {
        let at = |key: &str| format!("{name}.{key}");
        let mut path: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        match (base.len(), &spec.path) {
            // A label or annotation key is one segment, dots and all.
            (2, _) => path.push(name.to_string()),
            (_, Some(nested)) => path.extend(nested.split('.').map(String::from)),
            (_, None) => path.push(name.to_string()),
        }
        let values = spec
            .values
            .iter()
            .map(|(target, text)| {
                let compiled = template(text, functions).map_err(|e| e.within(&at(&format!("values.{target}"))))?;
                Ok((target.split('.').map(String::from).collect(), compiled))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Self {
            name: name.to_string(),
            path,
            value: spec
                .value
                .as_deref()
                .map(|text| template(text, functions).map_err(|e| e.within(&at("value"))))
                .transpose()?,
            values,
            default: spec.default.clone(),
            override_: spec.override_.clone(),
            required: spec.required,
            type_: spec.type_,
            enum_: spec.enum_.clone(),
            spec: spec.clone(),
        })
    }
}

/// `cluster` and `clusters` together, each compiled.
fn clusters(one: &Option<String>, many: &[String], functions: &Functions) -> Result<Vec<Template>, Error> {
    one.iter().chain(many).map(|name| template(name, functions)).collect()
}
