//! Resource template blocks (`onCreate`, `onReconcile`, `onDelete`), compiled: every string
//! holding `{{` of every entry is a template; rendering them is the runtime's.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::{Error, Gather, call::Call, conditions, template};
use crate::kinds::{KindSpec, kind_spec};
use crate::model::{HookTemplates, ResourceEntry};
use orkestra_expr::condition::Conditions;
use orkestra_expr::template::{Functions, Template};
use orkestra_expr::tree::Tree;

/// One resource template, compiled.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Where the Katalog declares it (`operatorBox.reconcile.onCreate.deployments[0]`), for
    /// errors met while rendering it.
    pub at: String,
    pub kind: &'static KindSpec,
    pub name: Option<Template>,
    pub namespace: Option<Template>,
    pub labels: Vec<(String, Template)>,
    pub annotations: Vec<(String, Template)>,
    pub fields: BTreeMap<String, Tree>,
    pub conditions: Conditions,
    /// `(list path, as)`.
    pub for_each: Option<(String, Option<String>)>,
    /// Drift-correct every reconcile: onReconcile unless it says `reconcile: false` (created
    /// once), onCreate only with `reconcile: true`.
    pub reconcile: bool,
    pub force: Option<bool>,
    /// Motif inputs, visible as `.inputs`.
    pub inputs: Option<Value>,
    /// When an existing object is deleted and created anew instead of patched.
    pub replace: Replace,
    /// A Secret's `once`: created if absent, never overwritten.
    pub once: bool,
    /// Profiles whose name is a template: chosen when the entry renders.
    pub profiles: Vec<ProfileChoice>,
    /// A workload's replicas, stepped by conditions.
    pub autoscale: Option<Scale>,
}

/// A workload's `autoscale`, compiled: between `min` and `max` replicas, a step up when
/// `up` holds, down when `down` holds, no sooner than `cooldown` after the last step.
#[derive(Debug, Clone)]
pub struct Scale {
    pub min: i64,
    pub max: i64,
    pub cooldown: Duration,
    pub up: Option<(Conditions, i64)>,
    pub down: Option<(Conditions, i64)>,
}

/// A workload's cooldown when `autoscale` gives none.
const SCALE_COOLDOWN: Duration = Duration::from_secs(60);

impl Scale {
    fn compile(kind: &KindSpec, spec: &crate::model::WorkloadAutoscale, functions: &Functions) -> Result<Self, Error> {
        if !matches!(kind.key, "deployments" | "statefulSets") {
            return Err(Error::at(
                "autoscale",
                format!(
                    "{} have no replicas to scale: autoscale is for deployments and statefulSets",
                    kind.key
                ),
            ));
        }
        let max = spec.max.ok_or_else(|| Error::at("autoscale.max", "is required"))?;
        let min = spec.min.unwrap_or(1);
        if min < 0 || min > max {
            return Err(Error::at(
                "autoscale",
                format!("min {min} and max {max}: want 0 <= min <= max"),
            ));
        }
        let step =
            |step: &Option<crate::model::ScaleStep>, name: &str, by: fn(&crate::model::ScaleStep) -> Option<i64>| {
                step.as_ref()
                    .map(|step| {
                        let conditions = conditions(&step.conditions.when, &step.conditions.or, functions)
                            .map_err(|e| e.within(&format!("autoscale.{name}.conditions")))?;
                        match by(step).unwrap_or(1) {
                            n if n >= 1 => Ok((conditions, n)),
                            n => Err(Error::at(
                                format!("autoscale.{name}"),
                                format!("a step of {n}: want at least 1"),
                            )),
                        }
                    })
                    .transpose()
            };
        Ok(Self {
            min,
            max,
            cooldown: match &spec.cooldown {
                Some(text) => orkestra_expr::duration::parse(text).map_err(|e| Error::at("autoscale.cooldown", e))?,
                None => SCALE_COOLDOWN,
            },
            up: step(&spec.scale_up, "scaleUp", |s| s.increment)?,
            down: step(&spec.scale_down, "scaleDown", |s| s.decrement)?,
        })
    }
}

/// A templated `profile:` of an entry, with every preset it may choose, compiled.
#[derive(Debug, Clone)]
pub struct ProfileChoice {
    /// Where the profile is written under the entry's fields (empty: the entry itself).
    pub path: Vec<String>,
    pub class: &'static str,
    pub options: BTreeMap<String, Tree>,
}

impl Entry {
    /// Whether a child of this entry may be one no owner reference collects with its CR:
    /// cluster-scoped, of a kind whose scope only discovery knows (`custom`), in a namespace
    /// the entry names (other than the CR's own), or copied to others (`toNamespaces`).
    pub fn may_outlive_its_owner(&self) -> bool {
        let own_namespace = |namespace: &orkestra_expr::template::Template| {
            namespace.source().split_whitespace().collect::<String>() == "{{.metadata.namespace}}"
        };
        !self.kind.namespaced
            || self.kind.key == "custom"
            || self.fields.contains_key("toNamespaces")
            || self
                .namespace
                .as_ref()
                .is_some_and(|namespace| !own_namespace(namespace))
    }

    /// Puts the preset each templated profile names (rendered in `fields`) in its place.
    pub fn choose_profiles(
        &self,
        fields: &mut serde_json::Map<String, Value>,
        resolver: &orkestra_expr::resolver::Resolver<'_, '_>,
    ) -> Result<(), crate::error::Error> {
        for choice in &self.profiles {
            let mut holder = &*fields;
            for step in &choice.path {
                holder = holder
                    .get(step)
                    .and_then(Value::as_object)
                    .ok_or_else(|| crate::error::Error::Render("a profile's holder did not render".into()))?;
            }
            let name =
                orkestra_expr::template::value::display(holder.get("profile").unwrap_or(&Value::Null)).into_owned();
            let at = choice.path.iter().map(|p| format!("{p}.")).collect::<String>() + "profile";
            let Some(option) = choice.options.get(&name.to_lowercase()) else {
                let known = choice.options.keys().map(String::as_str);
                return Err(crate::error::Error::Render(format!(
                    "{at}: {}",
                    crate::profile::children::unknown(choice.class, &name, known)
                )));
            };
            let preset = match option
                .render(resolver)
                .map_err(|e| crate::error::Error::Render(e.message))?
            {
                Value::Object(preset) => preset,
                _ => {
                    return Err(crate::error::Error::Render(format!(
                        "{at}: the {} profile \"{name}\" is not a map",
                        choice.class
                    )));
                }
            };
            crate::profile::children::place(choice.class, fields, &choice.path, &preset);
        }
        Ok(())
    }
}

/// When an existing child is replaced rather than patched or left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Replace {
    #[default]
    Never,
    /// On drift (Pods: most of a Pod's spec cannot change in place).
    OnDrift,
    /// Once it is older than this (a `once` Secret with `rotateAfter`), by its generated-at
    /// annotation.
    After(Duration),
}

/// How an entry's existing object is replaced. `rotateAfter` only means something on a `once`
/// Secret (anything else is already rewritten on every drift).
fn replace(kind: &KindSpec, entry: &ResourceEntry) -> Result<Replace, Error> {
    if kind.key == "pods" {
        return Ok(Replace::OnDrift);
    }
    let rotate = |message: String| Error::at("rotateAfter", message);
    match entry.fields.get("rotateAfter") {
        Some(Value::String(text)) if kind.key == "secrets" => {
            if entry.fields.get("once") != Some(&Value::Bool(true)) && !entry.fields.contains_key("tls") {
                return Err(rotate("rotateAfter needs once: true (or tls)".into()));
            }
            let text = fixed(text, entry.inputs.as_ref()).map_err(rotate)?;
            Ok(Replace::After(
                orkestra_expr::duration::parse(&text).map_err(|e| rotate(e.into()))?,
            ))
        }
        Some(other) if kind.key == "secrets" => Err(rotate(format!("{other} is not a duration"))),
        _ => Ok(Replace::Never),
    }
}

/// A value fixed when the Katalog loads: plain text, or a template over the `.inputs` a motif
/// import gave its entry (`rotateAfter: '{{ .inputs.rotateAfter }}'`).
fn fixed(text: &str, inputs: Option<&Value>) -> Result<String, String> {
    if !text.contains("{{") {
        return Ok(text.to_string());
    }
    let template = Template::compile(text, Functions::builtin()).map_err(|e| e.to_string())?;
    let data = serde_json::json!({ "inputs": inputs.cloned().unwrap_or(Value::Null) });
    match template.render(&orkestra_expr::template::Env::now(), &data) {
        Ok(rendered) if !rendered.trim().is_empty() => Ok(rendered.trim().to_string()),
        Ok(_) => Err(format!(
            "{text:?} is fixed when the Katalog loads, so a template here reads only a motif's .inputs (and gave nothing)"
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// A block (`onCreate`, `onReconcile`, `onDelete`), compiled.
#[derive(Debug, Clone, Default)]
pub struct Block {
    pub conditions: Conditions,
    pub entries: Vec<Entry>,
    /// onDelete `ordered: true`: groups deleted one after the other, each gone before the next.
    pub groups: Vec<Block>,
    /// One deadline for the whole ordered sequence, from the CR's deletionTimestamp.
    pub timeout: Duration,
    /// HTTP calls made before the entries (results in `.external.<name>`).
    pub external: Vec<Call>,
}

/// Default deadline of an ordered deletion.
const ORDERED_TIMEOUT: Duration = Duration::from_secs(300);

impl Block {
    /// Whether a child of this block may outlive its CR (see [`Entry::may_outlive_its_owner`]).
    pub fn may_outlive_its_owner(&self) -> bool {
        self.entries.iter().any(Entry::may_outlive_its_owner) || self.groups.iter().any(Block::may_outlive_its_owner)
    }

    /// Compiles the block the Katalog declares at `at`; `drift` is true for onReconcile
    /// (every entry drift-corrects). Every entry's error is reported.
    pub fn compile(
        templates: &HookTemplates,
        drift: bool,
        functions: &Functions,
        at: &str,
    ) -> Result<Self, Vec<Error>> {
        let mut gather = Gather::default();
        let conditions = gather.ok(conditions(&templates.when, &templates.or, functions));
        let mut entries = Vec::new();
        for (key, list) in templates.resources() {
            let Some(kind) = kind_spec(key) else { continue };
            entries.extend(gather.each(list.iter().enumerate().map(|(i, entry)| {
                let place = format!("{key}[{i}]");
                let compiled = Entry::compile(kind, entry, drift, functions, format!("{at}.{place}"));
                compiled.map_err(|e| e.within(&place))
            })));
        }
        let groups = match templates.ordered {
            true => templates
                .groups
                .iter()
                .enumerate()
                .filter_map(|(i, g)| {
                    let place = format!("groups[{i}]");
                    gather.all(&place, Block::compile(g, drift, functions, &format!("{at}.{place}")))
                })
                .collect(),
            false => {
                if !templates.groups.is_empty() {
                    gather.push(Error::at("groups", "they need ordered: true"));
                }
                Vec::new()
            }
        };
        let timeout = match &templates.timeout {
            Some(text) => gather.ok(orkestra_expr::duration::parse(text).map_err(|e| Error::at("timeout", e))),
            None => Some(ORDERED_TIMEOUT),
        };
        let external = gather.each(
            templates
                .external
                .iter()
                .enumerate()
                .map(|(i, call)| Call::compile(call, functions).map_err(|e| e.within(&format!("external[{i}]")))),
        );
        let (Some(conditions), Some(timeout)) = (conditions, timeout) else {
            return Err(gather.0);
        };
        gather.finish()?;
        Ok(Self {
            conditions,
            entries,
            groups,
            timeout,
            external,
        })
    }
}

impl Entry {
    fn compile(
        kind: &'static KindSpec,
        entry: &ResourceEntry,
        drift: bool,
        functions: &Functions,
        at: String,
    ) -> Result<Self, Error> {
        let optional = |key: &str, text: &Option<String>| {
            text.as_deref()
                .map(|t| template(t, functions).map_err(|e| e.within(key)))
                .transpose()
        };
        let pairs = |key: &str, map: &BTreeMap<String, String>| {
            map.iter()
                .map(|(k, v)| {
                    let compiled = template(v, functions).map_err(|e| e.within(k).within(key))?;
                    Ok((k.clone(), compiled))
                })
                .collect::<Result<Vec<_>, Error>>()
        };
        Ok(Self {
            at,
            kind,
            name: optional("name", &entry.name)?,
            namespace: optional("namespace", &entry.namespace)?,
            labels: pairs("labels", &entry.labels)?,
            annotations: pairs("annotations", &entry.annotations)?,
            fields: entry
                .fields
                .iter()
                .map(|(k, v)| {
                    let written = match (kind.key, k.as_str()) {
                        ("custom", "metadata") => custom_metadata(v),
                        _ => std::borrow::Cow::Borrowed(v),
                    };
                    Ok((k.clone(), super::tree(&written, functions).map_err(|e| e.within(k))?))
                })
                .collect::<Result<_, Error>>()?,
            conditions: conditions(&entry.when, &entry.or, functions)?,
            for_each: entry.for_each.as_ref().map(|f| (f.field.clone(), f.as_.clone())),
            reconcile: entry.reconcile.unwrap_or(drift),
            force: entry.force_conflict,
            inputs: entry.inputs.clone(),
            replace: replace(kind, entry)?,
            // A generated certificate is a credential too: made once, then left alone.
            once: kind.key == "secrets"
                && (entry.fields.get("once") == Some(&Value::Bool(true)) || entry.fields.contains_key("tls")),
            profiles: entry
                .profiles
                .iter()
                .map(|choice| {
                    let class = choice.class;
                    let options = choice
                        .options
                        .iter()
                        .map(|(name, preset)| {
                            let tree = super::tree(preset, functions)
                                .map_err(|e| e.within(&format!("profiles.{class}.{name}")))?;
                            Ok((name.clone(), tree))
                        })
                        .collect::<Result<_, Error>>()?;
                    Ok(ProfileChoice {
                        path: choice.path.clone(),
                        class,
                        options,
                    })
                })
                .collect::<Result<_, Error>>()?,
            autoscale: entry
                .autoscale
                .as_ref()
                .map(|spec| Scale::compile(kind, spec, functions))
                .transpose()?,
        })
    }

    /// Create once, never overwrite: Jobs always, Secrets marked `once` (generated
    /// credentials), and anything outside drift correction.
    pub fn create_only(&self) -> bool {
        !self.reconcile || self.kind.key == "jobs" || self.once
    }
}

/// A custom entry's `metadata` as Kubernetes takes it: upstream's `labels`/`annotations`
/// lists of `{key, value}` become maps, and its `namespaced` hint (the API server says
/// which scope a kind has) is dropped.
fn custom_metadata(metadata: &Value) -> std::borrow::Cow<'_, Value> {
    let Value::Object(fields) = metadata else {
        return std::borrow::Cow::Borrowed(metadata);
    };
    let listed = |k: &str| fields.get(k).is_some_and(Value::is_array);
    if !fields.contains_key("namespaced") && !listed("labels") && !listed("annotations") {
        return std::borrow::Cow::Borrowed(metadata);
    }
    let mut fields = fields.clone();
    fields.remove("namespaced");
    for key in ["labels", "annotations"] {
        if let Some(Value::Array(pairs)) = fields.get(key) {
            let map: serde_json::Map<String, Value> = pairs
                .iter()
                .filter_map(|p| Some((p["key"].as_str()?.to_string(), p["value"].clone())))
                .collect();
            fields.insert(key.into(), Value::Object(map));
        }
    }
    std::borrow::Cow::Owned(Value::Object(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block from its YAML alone (an onReconcile block when `drift`).
    fn block_of(yaml: &str, drift: bool) -> Result<Block, String> {
        let node = crate::yaml::parse(yaml).unwrap();
        let (spec, problems) = crate::de::read::<HookTemplates>(&node, "").unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        Block::compile(&spec, drift, Functions::builtin(), "b").map_err(|errors| errors[0].to_string())
    }

    #[test]
    fn rotation_is_for_once_secrets_and_pods_are_replaced_on_drift() {
        let block = |yaml: &str| block_of(yaml, true);
        let secret = block("secrets: [{once: true, rotateAfter: 90d}]").unwrap();
        assert_eq!(
            secret.entries[0].replace,
            Replace::After(std::time::Duration::from_secs(90 * 86400))
        );
        assert!(secret.entries[0].create_only(), "a once secret is never patched");
        let error = block("secrets: [{once: true, rotateAfter: '{{ .spec.days }}'}]").unwrap_err();
        assert!(error.contains("reads only a motif's .inputs"), "{error}");
        let error = block("secrets: [{rotateAfter: 90d}]").unwrap_err();
        assert!(error.contains("rotateAfter needs once: true"), "{error}");
        let pod = block("pods: [{image: busybox}]").unwrap();
        assert_eq!(pod.entries[0].replace, Replace::OnDrift);
        assert!(!pod.entries[0].create_only());
    }

    #[test]
    fn ordered_groups_compile_with_their_deadline() {
        let compile = |yaml: &str| block_of(yaml, false);
        let block = compile("{ordered: true, timeout: 90s, groups: [{configMaps: [{}]}, {services: [{}]}]}").unwrap();
        assert_eq!(block.groups.len(), 2);
        assert_eq!(block.timeout, std::time::Duration::from_secs(90));
        assert_eq!(compile("{ordered: true, groups: []}").unwrap().timeout, ORDERED_TIMEOUT);
        let error = compile("{groups: [{configMaps: [{}]}]}").unwrap_err();
        assert!(error.contains("ordered: true"), "{error}");
    }

    #[test]
    fn custom_metadata_takes_upstream_label_lists_and_drops_the_scope_hint() {
        let block = block_of(
            "custom: [{apiVersion: a.io/v1, kind: Vault, metadata: {name: v, namespaced: true, labels: [{key: team, value: '{{ .spec.team }}'}]}}]",
            true,
        )
        .unwrap();
        let cr = serde_json::json!({"spec": {"team": "blue"}});
        let resolver = orkestra_expr::resolver::Resolver::new(&cr, &[]);
        let metadata = block.entries[0].fields["metadata"].render(&resolver).unwrap();
        assert_eq!(metadata, serde_json::json!({"name": "v", "labels": {"team": "blue"}}));
    }
}
