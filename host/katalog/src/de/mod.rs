//! A serde deserializer over [`Node`]s that knows where it is: every unknown key is
//! collected (with its path, position and the closest valid key) instead of stopping at the
//! first, renamed legacy keys get a message naming the new key, and type errors carry the
//! path and position of the value that caused them.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Error as _, IntoDeserializer, Visitor};

use super::yaml::{Node, NodeValue, Pos};
use orkestra_expr::text::closest;

/// One problem found while reading a Katalog: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dot path to the field (`spec.crds.web.operatorBox.reconcile`).
    pub path: String,
    pub pos: Pos,
    pub message: String,
}

/// Keys renamed upstream, per struct: (struct, old key, new key, since).
const RENAMED: &[(&str, &str, &str, &str)] = &[
    ("*", "anyOf", "or", "v0.7.16"),
    ("HooksSpec", "resources", "managedResources", "v0.7.16"),
    ("ConstructorSpec", "resources", "managedResources", "v0.7.16"),
    ("CrossSpec", "labels", "labelSelector", "v0.7.17"),
    ("CrossSource", "type", "protocol", "v0.7.17"),
    // The konductor-era queue keys.
    ("Queue", "maxQueueDepth", "maxDepth", ""),
    ("Queue", "default", "shared", ""),
];

/// Collects the non-fatal problems of one deserialization.
#[derive(Debug, Default)]
pub struct Collector {
    problems: RefCell<Vec<Problem>>,
    /// Renamed keys met: the old key's path and its new name (what `ork migrate` rewrites).
    renames: RefCell<Vec<(String, &'static str)>>,
}

impl Collector {
    pub fn into_problems(self) -> Vec<Problem> {
        self.problems.into_inner()
    }

    fn push(&self, problem: Problem) {
        self.problems.borrow_mut().push(problem);
    }
}

/// Deserializes `T` from `node`, whose path is `path`. Unknown keys and values of the wrong
/// kind go to `collector` (reading goes on with a stand-in, so a file's mistakes are reported
/// together); an error no stand-in can cover (an out-of-range number) is returned.
pub fn from_node<'de, T: serde::Deserialize<'de>>(
    node: &'de Node,
    path: &str,
    collector: &Collector,
) -> Result<T, Problem> {
    T::deserialize(NodeDe {
        node,
        path: path.to_string(),
        collector,
    })
    .map_err(|e| Problem {
        path: e.path.unwrap_or_else(|| path.to_string()),
        pos: e.pos.unwrap_or(node.pos),
        message: e.message,
    })
}

/// Reads `T` from a node: the value with the problems found (unknown keys, values of the wrong
/// kind), or the first error that stopped it.
pub fn read<T: serde::de::DeserializeOwned>(node: &Node, path: &str) -> Result<(T, Vec<Problem>), Problem> {
    let collector = Collector::default();
    let value = from_node(node, path, &collector)?;
    Ok((value, collector.into_problems()))
}

/// The renamed keys `T` meets in `node`: each old key's dot path and its new name.
pub fn renames<T: serde::de::DeserializeOwned>(node: &Node) -> Vec<(String, &'static str)> {
    let collector = Collector::default();
    let _ = from_node::<T>(node, "", &collector);
    collector.renames.into_inner()
}

/// A deserialization error; path and position are filled in by the innermost node that
/// sees it.
#[derive(Debug)]
pub struct Error {
    message: String,
    path: Option<String>,
    pos: Option<Pos>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<M: fmt::Display>(msg: M) -> Self {
        Self {
            message: msg.to_string(),
            path: None,
            pos: None,
        }
    }
}

struct NodeDe<'de, 'c> {
    node: &'de Node,
    path: String,
    collector: &'c Collector,
}

impl<'de, 'c> NodeDe<'de, 'c> {
    fn child(&self, node: &'de Node, key: &str) -> Self {
        let path = if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        };
        Self {
            node,
            path,
            collector: self.collector,
        }
    }

    fn element(&self, node: &'de Node, index: usize) -> Self {
        Self {
            node,
            path: format!("{}[{index}]", self.path),
            collector: self.collector,
        }
    }

    fn locate(&self, mut error: Error) -> Error {
        if error.path.is_none() {
            error.path = Some(self.path.clone());
            error.pos = Some(self.node.pos);
        }
        error
    }

    fn expected(&self, what: &str) -> Error {
        self.locate(Error::custom(format!("expected {what}, found {}", self.node.kind())))
    }

    /// Records that the value is not `what` and lets reading go on (with a stand-in the
    /// caller supplies), so every such mistake of a file is reported at once; the file is
    /// refused all the same.
    fn mismatch(&self, what: &str) {
        self.collector.push(Problem {
            path: self.path.clone(),
            pos: self.node.pos,
            message: format!("expected {what}, found {}", self.node.kind()),
        });
    }

    fn unknown_key(&self, struct_name: &str, key: &Node, fields: &[&str]) {
        let text = key.key_text();
        let path = if self.path.is_empty() {
            text.clone()
        } else {
            format!("{}.{text}", self.path)
        };
        let renamed = RENAMED
            .iter()
            .find(|(s, old, _, _)| (*s == "*" || *s == struct_name) && *old == text);
        let message = match renamed {
            Some((_, old, new, since)) => {
                self.collector.renames.borrow_mut().push((path.clone(), new));
                let since = match *since {
                    "" => String::new(),
                    version => format!(" in {version}"),
                };
                format!("`{old}` was renamed to `{new}`{since}; use `{new}` (`ork migrate` rewrites it)")
            }
            None => match orkestra_expr::text::misspelt(&text, fields) {
                Some(best) => format!("unknown field `{text}`; the closest valid key is `{best}`"),
                None if fields.is_empty() => format!("unknown field `{text}`"),
                None => format!("unknown field `{text}`; the keys here are {}", valid_keys(fields)),
            },
        };
        self.collector.push(Problem {
            path,
            pos: key.pos,
            message,
        });
    }
}

impl<'de> de::Deserializer<'de> for NodeDe<'de, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match &self.node.value {
            NodeValue::Null => visitor.visit_unit(),
            NodeValue::Bool(b) => visitor.visit_bool(*b),
            NodeValue::Int(i) => visitor.visit_i64(*i),
            NodeValue::Float(f) => visitor.visit_f64(*f),
            NodeValue::String(s) => visitor.visit_borrowed_str(s),
            NodeValue::Seq(items) => visitor.visit_seq(SeqAccess {
                de: &self,
                items: items.iter(),
                index: 0,
            }),
            NodeValue::Map(entries) => visitor.visit_map(MapAccess {
                de: &self,
                entries: entries.iter(),
                value: None,
                fields: None,
            }),
        };
        result.map_err(|e| self.locate(e))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node.value {
            NodeValue::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    /// Scalars read as text where the Katalog wants text (`replicas: 3` for a templated
    /// string field).
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match &self.node.value {
            NodeValue::String(s) => visitor.visit_borrowed_str(s),
            NodeValue::Int(i) => visitor.visit_string(i.to_string()),
            NodeValue::Float(f) => visitor.visit_string(f.to_string()),
            NodeValue::Bool(b) => visitor.visit_string(b.to_string()),
            _ => {
                self.mismatch("a string");
                visitor.visit_str("")
            }
        };
        result.map_err(|e| self.locate(e))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match &self.node.value {
            NodeValue::Bool(b) => visitor.visit_bool(*b),
            _ => {
                self.mismatch("a boolean");
                visitor.visit_bool(false)
            }
        };
        result.map_err(|e| self.locate(e))
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match &self.node.value {
            NodeValue::Int(i) => visitor.visit_i64(*i),
            _ => {
                self.mismatch("an integer");
                visitor.visit_u64(0)
            }
        };
        result.map_err(|e| self.locate(e))
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match &self.node.value {
            NodeValue::Int(i) => visitor.visit_i64(*i),
            NodeValue::Float(f) => visitor.visit_f64(*f),
            _ => {
                self.mismatch("a number");
                visitor.visit_f64(0.0)
            }
        };
        result.map_err(|e| self.locate(e))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let items: &[Node] = match &self.node.value {
            NodeValue::Seq(items) => items,
            _ => {
                self.mismatch("a list");
                &[]
            }
        };
        visitor
            .visit_seq(SeqAccess {
                de: &self,
                items: items.iter(),
                index: 0,
            })
            .map_err(|e| self.locate(e))
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let entries: &[(Node, Node)] = match &self.node.value {
            NodeValue::Map(entries) => entries,
            NodeValue::Null => &[],
            _ => {
                self.mismatch("a map");
                &[]
            }
        };
        visitor
            .visit_map(MapAccess {
                de: &self,
                entries: entries.iter(),
                value: None,
                fields: None,
            })
            .map_err(|e| self.locate(e))
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let NodeValue::Map(entries) = &self.node.value else {
            if matches!(self.node.value, NodeValue::Null) {
                // An empty section (`observe:` with nothing under it) is an empty struct.
                return visitor
                    .visit_map(MapAccess {
                        de: &self,
                        entries: [].iter(),
                        value: None,
                        fields: Some(fields),
                    })
                    .map_err(|e| self.locate(e));
            }
            self.mismatch("a map");
            return visitor
                .visit_map(MapAccess {
                    de: &self,
                    entries: [].iter(),
                    value: None,
                    fields: Some(fields),
                })
                .map_err(|e| self.locate(e));
        };
        for (key, _) in entries {
            if !fields.contains(&key.key_text().as_str()) {
                self.unknown_key(name, key, fields);
            }
        }
        visitor
            .visit_map(MapAccess {
                de: &self,
                entries: entries.iter(),
                value: None,
                fields: Some(fields),
            })
            .map_err(|e| self.locate(e))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match &self.node.value {
            NodeValue::String(s) => {
                if !variants.contains(&s.as_str()) {
                    let best = closest(s, variants).unwrap_or_default();
                    return Err(self.locate(Error::custom(format!(
                        "unknown value `{s}`; expected one of {} (closest: `{best}`)",
                        variants.join(", ")
                    ))));
                }
                visitor
                    .visit_enum(s.as_str().into_deserializer())
                    .map_err(|e: Error| self.locate(e))
            }
            _ => Err(self.expected(&format!("one of {}", variants.join(", ")))),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i64(visitor)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_f64(visitor)
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char bytes byte_buf unit unit_struct tuple tuple_struct identifier
    }
}

struct SeqAccess<'a, 'de, 'c> {
    de: &'a NodeDe<'de, 'c>,
    items: std::slice::Iter<'de, Node>,
    index: usize,
}

impl<'de> de::SeqAccess<'de> for SeqAccess<'_, 'de, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        let Some(item) = self.items.next() else { return Ok(None) };
        let child = self.de.element(item, self.index);
        self.index += 1;
        seed.deserialize(child).map(Some)
    }
}

struct MapAccess<'a, 'de, 'c> {
    de: &'a NodeDe<'de, 'c>,
    entries: std::slice::Iter<'de, (Node, Node)>,
    value: Option<(&'de Node, String)>,
    /// For structs: only these keys reach the visitor (unknown ones were reported).
    fields: Option<&'static [&'static str]>,
}

impl<'de> de::MapAccess<'de> for MapAccess<'_, 'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        for (key, value) in self.entries.by_ref() {
            let text = key.key_text();
            if self.fields.is_some_and(|f| !f.contains(&text.as_str())) {
                continue;
            }
            self.value = Some((value, text.clone()));
            let key_de: de::value::StringDeserializer<Error> = text.into_deserializer();
            return seed.deserialize(key_de).map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let (node, key) = self
            .value
            .take()
            .ok_or_else(|| Error::custom("value requested before key"))?;
        seed.deserialize(self.de.child(node, &key))
    }
}

/// The keys a map takes, for a message: all of them up to 16, else the first 16 and a count.
fn valid_keys(fields: &[&str]) -> String {
    let shown: Vec<String> = fields.iter().take(16).map(|f| format!("`{f}`")).collect();
    match fields.len() > shown.len() {
        true => format!("{} and {} more", shown.join(", "), fields.len() - shown.len()),
        false => shown.join(", "),
    }
}

#[cfg(test)]
mod tests;
