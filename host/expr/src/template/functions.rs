//! The name → function table templates are compiled against: the built-in library, the
//! sentinels and a Katalog's notes, with the parses made against it.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;

use super::funcs::{DOMAINS, Entry, Func};
use super::parse::Node;

/// A name → function table used at compile time.
#[derive(Debug, Clone)]
pub struct Functions {
    map: HashMap<String, Func>,
    /// Parsed templates by source, shared by the clones of one Katalog's table: validation
    /// and every compiled box draw from it, so each template text is parsed once per load.
    /// Only the Katalog's own text is ever compiled, so it cannot grow at run time; the
    /// built-in table has none.
    parsed: Option<Arc<ParseCache>>,
}

/// Template parses by source text.
type ParseCache = Mutex<HashMap<String, Arc<Vec<Node>>>>;

static BUILTIN: LazyLock<Functions> = LazyLock::new(|| {
    let mut map = HashMap::new();
    for domain in DOMAINS {
        for entry in domain.entries {
            map.insert(entry.name.to_string(), Func::Native(entry.func));
        }
    }
    map.insert("and".into(), Func::And);
    map.insert("or".into(), Func::Or);
    for (i, name) in crate::sentinel::NAMES.iter().enumerate() {
        map.insert((*name).to_string(), Func::Sentinel(i));
    }
    Functions { map, parsed: None }
});

impl Functions {
    /// The built-in library plus the sentinel names.
    pub fn builtin() -> &'static Functions {
        &BUILTIN
    }

    /// The built-ins plus notes, each `names[i]` resolving to [`Func::Note`]`(i)`. A note
    /// with a built-in's name replaces it (callers decide whether that is allowed).
    pub fn with_notes<'a>(names: impl IntoIterator<Item = &'a str>) -> Functions {
        let mut functions = BUILTIN.clone();
        for (i, name) in names.into_iter().enumerate() {
            functions.map.insert(name.to_string(), Func::Note(i));
        }
        functions.parsed = Some(Arc::default());
        functions
    }

    /// A parse of `source` made earlier with this table.
    pub(in crate::template) fn parsed(&self, source: &str) -> Option<Arc<Vec<Node>>> {
        let cache = self.parsed.as_ref()?;
        cache.lock().get(source).cloned()
    }

    pub(in crate::template) fn remember(&self, source: &str, nodes: &Arc<Vec<Node>>) {
        if let Some(cache) = &self.parsed {
            let mut cache = cache.lock();
            cache.insert(source.to_string(), nodes.clone());
        }
    }

    /// Looks a name up.
    pub fn get(&self, name: &str) -> Option<Func> {
        self.map.get(name).copied()
    }

    /// True for names of the built-in library (including `and`, `or` and sentinels).
    pub fn is_builtin(name: &str) -> bool {
        BUILTIN.map.contains_key(name)
    }

    /// The documentation entry of a built-in.
    pub fn doc(name: &str) -> Option<(&'static str, &'static Entry)> {
        DOMAINS
            .iter()
            .find_map(|d| d.entries.iter().find(|e| e.name == name).map(|e| (d.name, e)))
    }
}
