//! YAML text in, a tree of nodes that remember their line and column out, so every later
//! error (unknown key, wrong type, bad template) can point into the file.

use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A 1-based line and column, and which loaded file they belong to (an index into the
/// loader's file list, so nodes pulled in by `include:` still point at their own file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub file: usize,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// A YAML node and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: NodeValue,
    pub pos: Pos,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    Seq(Vec<Node>),
    /// Keys in file order; keys are scalars.
    Map(Vec<(Node, Node)>),
}

/// A YAML syntax error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    pub pos: Pos,
    pub message: String,
}

impl Node {
    pub fn new(value: NodeValue, pos: Pos) -> Self {
        Self { value, pos }
    }

    /// A string scalar at `pos` (for nodes the loader writes itself).
    pub fn string(text: impl Into<String>, pos: Pos) -> Self {
        Self::new(NodeValue::String(text.into()), pos)
    }

    /// The text of a string scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The entries of a map.
    pub fn entries(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            NodeValue::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// The value under `key` in a map.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entries()?
            .iter()
            .find(|(k, _)| k.key_text() == key)
            .map(|(_, v)| v)
    }

    /// The node a dot path (`spec.crds.web.onCreate.deployments[0].image`) leads to, and how
    /// many of its steps were found: where a step is missing, the deepest node reached.
    pub fn at_path(&self, path: &str) -> (&Node, usize) {
        let mut node = self;
        let mut found = 0;
        let steps = path.split('.').filter(|s| !s.is_empty()).flat_map(|segment| {
            // `key[1][2]`: the key, then each index.
            let mut parts = segment.split('[');
            let key = parts.next().map(|k| (k, None));
            key.into_iter()
                .chain(parts.map(|i| ("", i.trim_end_matches(']').parse::<usize>().ok())))
        });
        for (key, index) in steps {
            let next = match (key, index, &node.value) {
                ("", Some(i), NodeValue::Seq(items)) => items.get(i),
                ("", _, _) => None,
                (key, _, _) => node.get(key),
            };
            match next {
                Some(next) => {
                    node = next;
                    found += 1;
                }
                None => break,
            }
        }
        (node, found)
    }

    /// The value under `key` in a map, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        match &mut self.value {
            NodeValue::Map(entries) => entries.iter_mut().find(|(k, _)| k.key_text() == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Removes `key` from a map, returning its key node and value.
    pub fn remove(&mut self, key: &str) -> Option<(Node, Node)> {
        match &mut self.value {
            NodeValue::Map(entries) => {
                let index = entries.iter().position(|(k, _)| k.key_text() == key)?;
                Some(entries.remove(index))
            }
            _ => None,
        }
    }

    /// Sets `key` in a map (replacing an existing entry in place).
    pub fn insert(&mut self, key: Node, value: Node) {
        if let NodeValue::Map(entries) = &mut self.value {
            let text = key.key_text();
            match entries.iter_mut().find(|(k, _)| k.key_text() == text) {
                Some(slot) => slot.1 = value,
                None => entries.push((key, value)),
            }
        }
    }

    /// The text of a scalar used as a map key.
    pub fn key_text(&self) -> String {
        match &self.value {
            NodeValue::String(s) => s.clone(),
            NodeValue::Int(i) => i.to_string(),
            NodeValue::Float(f) => f.to_string(),
            NodeValue::Bool(b) => b.to_string(),
            NodeValue::Null => "null".into(),
            NodeValue::Seq(_) | NodeValue::Map(_) => String::new(),
        }
    }

    /// What kind of node this is, for messages.
    pub fn kind(&self) -> &'static str {
        match self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Int(_) => "an integer",
            NodeValue::Float(_) => "a number",
            NodeValue::String(_) => "a string",
            NodeValue::Seq(_) => "a list",
            NodeValue::Map(_) => "a map",
        }
    }

    /// The node as JSON (positions dropped).
    pub fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(i) => Value::from(*i),
            NodeValue::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            NodeValue::String(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.key_text(), v.to_json()))
                    .collect::<Map<_, _>>(),
            ),
        }
    }
}

/// Parses every document of `src`.
pub fn parse_documents(src: &str) -> Result<Vec<Node>, YamlError> {
    parse_documents_of(src, 0)
}

/// Parses every document of `src`, the loader's file number `file`.
pub fn parse_documents_of(src: &str, file: usize) -> Result<Vec<Node>, YamlError> {
    let mut builder = Builder {
        file,
        ..Builder::default()
    };
    let mut parser = Parser::new_from_str(src);
    parser.load(&mut builder, true).map_err(|e| YamlError {
        pos: pos(e.marker(), file),
        message: e.info().to_string(),
    })?;
    if let Some(error) = builder.error {
        return Err(error);
    }
    Ok(builder.documents)
}

/// Parses a single-document file; an empty file is a null node.
pub fn parse(src: &str) -> Result<Node, YamlError> {
    parse_file(src, 0)
}

/// Parses a single-document file that is the loader's file number `file`.
pub fn parse_file(src: &str, file: usize) -> Result<Node, YamlError> {
    let mut documents = parse_documents_of(src, file)?;
    match documents.len() {
        0 => Ok(Node::new(
            NodeValue::Null,
            Pos {
                file,
                line: 1,
                column: 1,
            },
        )),
        1 => Ok(documents.remove(0)),
        _ => Err(YamlError {
            pos: documents[1].pos,
            message: "a Katalog file holds one YAML document; split the others into their own files".into(),
        }),
    }
}

fn pos(marker: &Marker, file: usize) -> Pos {
    Pos {
        file,
        line: marker.line().max(1),
        column: marker.col() + 1,
    }
}

/// Builds nodes from parser events.
#[derive(Default)]
struct Builder {
    file: usize,
    documents: Vec<Node>,
    /// Open collections: the node being built and, for maps, a key waiting for its value.
    stack: Vec<(Node, Option<Node>, usize)>,
    anchors: HashMap<usize, Node>,
    error: Option<YamlError>,
}

impl Builder {
    fn push_value(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        let Some((parent, pending_key, _)) = self.stack.last_mut() else {
            self.documents.push(node);
            return;
        };
        match &mut parent.value {
            NodeValue::Seq(items) => items.push(node),
            NodeValue::Map(entries) => match pending_key.take() {
                None => {
                    if matches!(node.value, NodeValue::Seq(_) | NodeValue::Map(_)) && self.error.is_none() {
                        self.error = Some(YamlError {
                            pos: node.pos,
                            message: "a map key must be a scalar".into(),
                        });
                    }
                    *pending_key = Some(node);
                }
                Some(key) => {
                    let text = key.key_text();
                    if entries.iter().any(|(k, _)| k.key_text() == text) && self.error.is_none() {
                        self.error = Some(YamlError {
                            pos: key.pos,
                            message: format!("duplicate key {text:?}"),
                        });
                    }
                    entries.push((key, node));
                }
            },
            _ => {}
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, marker: Marker) {
        let at = pos(&marker, self.file);
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let value = if style == TScalarStyle::Plain && tag.as_ref().is_none_or(|t| t.suffix != "str") {
                    plain_scalar(text)
                } else {
                    NodeValue::String(text)
                };
                self.push_value(Node::new(value, at), anchor);
            }
            Event::SequenceStart(anchor, _) => self.stack.push((Node::new(NodeValue::Seq(vec![]), at), None, anchor)),
            Event::MappingStart(anchor, _) => self.stack.push((Node::new(NodeValue::Map(vec![]), at), None, anchor)),
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((node, _, anchor)) = self.stack.pop() {
                    self.push_value(node, anchor);
                }
            }
            Event::Alias(id) => {
                let node = self.anchors.get(&id).cloned().unwrap_or(Node::new(NodeValue::Null, at));
                self.push_value(Node { pos: at, ..node }, 0);
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentStart | Event::DocumentEnd => {}
        }
    }
}

/// YAML 1.2 core schema resolution of a plain scalar.
fn plain_scalar(text: String) -> NodeValue {
    match text.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => return NodeValue::Null,
        "true" | "True" | "TRUE" => return NodeValue::Bool(true),
        "false" | "False" | "FALSE" => return NodeValue::Bool(false),
        ".inf" | "+.inf" | ".Inf" => return NodeValue::Float(f64::INFINITY),
        "-.inf" | "-.Inf" => return NodeValue::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" => return NodeValue::Float(f64::NAN),
        _ => {}
    }
    if let Some(hex) = text.strip_prefix("0x")
        && let Ok(i) = i64::from_str_radix(hex, 16)
    {
        return NodeValue::Int(i);
    }
    if let Some(oct) = text.strip_prefix("0o")
        && let Ok(i) = i64::from_str_radix(oct, 8)
    {
        return NodeValue::Int(i);
    }
    if let Ok(i) = text.parse::<i64>() {
        return NodeValue::Int(i);
    }
    let numeric = text
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || c == '-' || c == '+' || c == '.');
    if numeric && let Ok(f) = text.parse::<f64>() {
        return NodeValue::Float(f);
    }
    NodeValue::String(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_remember_line_and_column() {
        let node = parse("a: 1\nb:\n  c: [x, \"2\"]\n").unwrap();
        let c = node.get("b").unwrap().get("c").unwrap();
        assert_eq!(
            c.pos,
            Pos {
                file: 0,
                line: 3,
                column: 6
            }
        );
        let NodeValue::Seq(items) = &c.value else {
            panic!("list expected")
        };
        assert_eq!(
            items[1].value,
            NodeValue::String("2".into()),
            "quoted scalars stay strings"
        );
        assert_eq!(
            items[1].pos,
            Pos {
                file: 0,
                line: 3,
                column: 10
            }
        );
        assert_eq!(node.get("a").unwrap().value, NodeValue::Int(1));
    }

    #[test]
    fn scalars_resolve_like_yaml_1_2() {
        let node = parse("a: ~\nb: true\nc: 1.5\nd: 0x1F\ne: 1e3\nf: yes\ng: '3'\nh: 1.0.0").unwrap();
        let value = |k: &str| node.get(k).unwrap().value.clone();
        assert_eq!(value("a"), NodeValue::Null);
        assert_eq!(value("b"), NodeValue::Bool(true));
        assert_eq!(value("c"), NodeValue::Float(1.5));
        assert_eq!(value("d"), NodeValue::Int(31));
        assert_eq!(value("e"), NodeValue::Float(1000.0));
        assert_eq!(value("f"), NodeValue::String("yes".into()));
        assert_eq!(value("g"), NodeValue::String("3".into()));
        assert_eq!(value("h"), NodeValue::String("1.0.0".into()));
    }

    #[test]
    fn anchors_aliases_and_json_conversion() {
        let node = parse("base: &b {x: 1}\ncopy: *b\n").unwrap();
        assert_eq!(node.to_json(), serde_json::json!({"base": {"x": 1}, "copy": {"x": 1}}));
    }

    #[test]
    fn errors_point_at_the_problem() {
        let err = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(
            (err.pos, err.message.as_str()),
            (
                Pos {
                    file: 0,
                    line: 2,
                    column: 1
                },
                "duplicate key \"a\""
            )
        );
        let err = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.pos.line >= 2, "{err:?}");
        assert!(parse("").unwrap().value == NodeValue::Null);
        assert!(
            parse("a: 1\n---\nb: 2\n")
                .unwrap_err()
                .message
                .contains("one YAML document")
        );
    }
}
