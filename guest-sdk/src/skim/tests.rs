//! The skimming parse against serde_json: the same value or the same error, for every type
//! and text here; and the skim itself (without serde_json's second look) succeeding where it
//! is meant to be the fast path.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{from_str, skim};

/// `from_str` gives what serde_json gives, value or error message.
fn same<T: DeserializeOwned + PartialEq + Debug>(text: &str) {
    let ours = from_str::<T>(text).map_err(|e| e.to_string());
    let theirs = serde_json::from_str::<T>(text).map_err(|e| e.to_string());
    assert_eq!(ours, theirs, "{} from {text}", std::any::type_name::<T>());
}

/// The skim alone reads `text` into what serde_json reads.
fn skims<T: DeserializeOwned + PartialEq + Debug>(text: &str) {
    let expected = serde_json::from_str::<T>(text).expect("serde_json reads it");
    match skim::<T>(text) {
        Ok(value) => assert_eq!(value, expected, "{} from {text}", std::any::type_name::<T>()),
        Err(error) => panic!("the skim fell back for {}: {error}\n{text}", std::any::type_name::<T>()),
    }
}

#[derive(Debug, PartialEq, Deserialize)]
struct Cr {
    #[serde(default)]
    spec: Spec,
    metadata: Metadata,
}

#[derive(Debug, PartialEq, Deserialize)]
struct Metadata {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    mode: String,
    replicas: Option<i32>,
    #[serde(default)]
    ports: Vec<u16>,
    ratio: Option<f64>,
    tier: Option<Tier>,
    #[serde(default)]
    extra_args: Vec<String>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Tier {
    Gold,
    Silver,
}

/// A custom resource as the host serializes one: compact, with a large spec the type skips.
fn cr(note: &str) -> Value {
    let items: Vec<Value> = (0..40)
        .map(|i| json!({"name": format!("item-{i}"), "port": 8000 + i, "on": i % 2 == 0, "tags": ["a", "[b]", "{c}"]}))
        .collect();
    // As `kubectl apply` leaves it: the object again, as an escaped string.
    let applied = json!({"kind": "Website", "spec": {"items": items, "note": note}}).to_string();
    json!({
        "apiVersion": "demo.orkestra.io/v1", "kind": "Website",
        "metadata": {
            "name": "shop", "namespace": "web", "labels": {"tier": "gold", "team": "pay}ments"},
            "annotations": {
                "note": note,
                "json": "{\"nested\": [1, 2, {\"x\": \"]\"}]}",
                "kubectl.kubernetes.io/last-applied-configuration": applied,
            },
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:items": {}}}}],
        },
        "spec": {
            "mode": "ok", "replicas": 3, "ports": [80, 443], "ratio": 0.25, "tier": "gold",
            "extraArgs": ["--a=\"1\"", "tab\there", "é ✓ 😀"], "items": items, "empty": {}, "none": [],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True", "message": "\\\\ done \\"}]},
    })
}

#[test]
fn a_typed_read_of_a_custom_resource_skims_and_matches_serde_json() {
    for note in [
        "",
        "x",
        &"x".repeat(400),
        "quote \" and backslash \\",
        &"\\".repeat(70),
        "}]\"{[",
    ] {
        let text = cr(note).to_string();
        skims::<Cr>(&text);
        skims::<Spec>(&cr(note)["spec"].to_string());
        skims::<Value>(&text);
        // Pretty-printed: whitespace between every token.
        skims::<Cr>(&serde_json::to_string_pretty(&cr(note)).expect("json"));
    }
}

#[test]
fn strings_with_escapes_across_block_edges_skip_to_their_real_end() {
    // A backslash at every offset around the 16- and 64-byte boundaries the scan works in,
    // escaping a quote, a backslash or a bracket.
    for offset in 0..140 {
        for escaped in ["\\\"", "\\\\", "\\]", "\\u005d", "\\n"] {
            let value = format!("{}{escaped}}}", "a".repeat(offset));
            let text = json!({"skip": {"s": value, "after": [1, {"k": "v"}]}, "mode": "read"}).to_string();
            let text = serde_json::from_str::<Value>(&text).expect("valid").to_string();
            #[derive(Debug, PartialEq, Deserialize)]
            struct Mode {
                mode: String,
            }
            skims::<Mode>(&text);
            skims::<Value>(&text);
        }
    }
}

#[test]
fn escaped_strings_and_keys_are_read_by_serde_json() {
    same::<BTreeMap<String, String>>(r#"{"a\"b":"c\nd","\u00e9":"\ud83d\ude00"}"#);
    same::<Value>(r#"{"k":"line\u2028sep","n":"\/"}"#);
    // A raw control character is refused, as by serde_json.
    same::<Value>("{\"k\":\"a\u{1}b\"}");
    same::<BTreeMap<String, String>>("{\"a\u{1}\":\"b\"}");
}

#[test]
fn numbers_are_serde_jsons_own() {
    for text in [
        "[0, -0, 1.5, -2.5e10, 1e400, 18446744073709551615, -9223372036854775808, 3.0]",
        "[18446744073709551616]",
        "[1.7976931348623157e308, 5e-324, 0.1]",
    ] {
        same::<Value>(text);
        same::<Vec<f64>>(text);
        same::<Vec<i64>>(text);
        same::<Vec<u64>>(text);
    }
    same::<Vec<u8>>("[255, 256]");
    same::<(i8, u16, bool, Option<char>)>(r#"[-128, 65535, true, "x"]"#);
}

#[test]
fn enums_options_and_unusual_shapes_read_as_by_serde_json() {
    #[derive(Debug, PartialEq, Deserialize)]
    enum External {
        Unit,
        New(u32),
        Pair(u8, u8),
        Named { a: String },
    }
    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(tag = "kind")]
    enum Internal {
        Web { port: u16 },
        Job,
    }
    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(untagged)]
    enum Untagged {
        Number(i64),
        Text(String),
        List(Vec<Untagged>),
    }
    #[derive(Debug, PartialEq, Deserialize)]
    struct Flat {
        name: String,
        #[serde(flatten)]
        rest: BTreeMap<String, Value>,
    }
    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Strict {
        a: u8,
    }
    #[derive(Debug, PartialEq, Deserialize)]
    struct Newtype(Vec<u8>);
    #[derive(Debug, PartialEq, Deserialize)]
    struct Unit;

    same::<Vec<External>>(r#"["Unit", {"New": 7}, {"Pair": [1, 2]}, {"Named": {"a": "x"}}]"#);
    same::<Vec<External>>(r#"["Nope"]"#);
    same::<Vec<Internal>>(r#"[{"kind": "Web", "port": 80}, {"kind": "Job"}]"#);
    same::<Vec<Untagged>>(r#"[1, "two", [3, ["four"]]]"#);
    same::<Flat>(r#"{"name": "n", "x": [1, {"y": null}], "z": "w"}"#);
    same::<Strict>(r#"{"a": 1}"#);
    same::<Strict>(r#"{"a": 1, "b": 2}"#);
    same::<Newtype>("[1, 2, 3]");
    same::<Unit>("null");
    same::<Option<Option<u8>>>("null");
    same::<Vec<Option<String>>>(r#"[null, "x"]"#);
    same::<HashMap<u32, String>>(r#"{"1": "a", "22": "b"}"#);
    same::<()>("null");
    // A struct from an array, as serde_json allows.
    same::<Metadata>(r#"["shop", {"a": "b"}]"#);
    skims::<Vec<External>>(r#"["Unit", {"New": 7}]"#);
}

#[test]
fn raw_values_keep_their_text() {
    #[derive(Debug, Deserialize)]
    struct Raw {
        spec: Box<serde_json::value::RawValue>,
    }
    let text = r#"{"kind":"K","spec":{"a":[1,2],"b":"}"},"status":{}}"#;
    let raw: Raw = from_str(text).expect("parse");
    assert_eq!(raw.spec.get(), r#"{"a":[1,2],"b":"}"}"#);
}

#[test]
fn wrong_text_fails_with_serde_jsons_error() {
    for text in [
        "",
        " ",
        "{",
        r#"{"metadata": {"name": "a"}"#,
        r#"{"metadata": {"name": "a"}} x"#,
        r#"{"metadata": {"name": 1}}"#,
        r#"{"metadata": {"name": "a"},}"#,
        r#"{"metadata" {"name": "a"}}"#,
        r#"{"spec": {"mode": "a"}}"#,
        r#"{"metadata": {"name": "a"}, "spec": {"replicas": "3"}}"#,
        r#"{"metadata": {"name": "a"}, "spec": {"tier": "bronze"}}"#,
        r#"{"metadata": {"name": "a"}, "spec": {"ports": [80, -1]}}"#,
        r#"{"metadata": {"name": "a"}, "skipped": "unterminated}"#,
        r#"[1, 2"#,
        "nul",
    ] {
        same::<Cr>(text);
        same::<Value>(text);
    }
}

#[test]
fn nesting_is_limited_as_serde_json_limits_it() {
    #[derive(Debug, PartialEq, Deserialize)]
    struct Holder {
        held: Vec<Value>,
    }
    for depth in [1, 100, 125, 126, 127, 128, 129, 130, 1000] {
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        same::<Value>(&text);
        let inside = format!(r#"{{"metadata": {{"name": "a"}}, "skipped": {text}}}"#);
        same::<Cr>(&inside);
        // Values two and three levels down: the limit counts from the top of the text.
        let held = format!(r#"{{"held": [{text}, {{"a": {text}}}]}}"#);
        same::<Holder>(&held);
    }
}

/// A small deterministic generator of JSON values, for texts no one wrote by hand.
struct Values(u64);

impl Values {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn string(&mut self) -> String {
        const PIECES: [&str; 12] = ["a", "mode", "\"", "\\", "{", "}", "[", "]", ",", ":", "é", "\n"];
        let len = self.next() % 12;
        (0..len).map(|_| PIECES[(self.next() % 12) as usize]).collect()
    }

    fn value(&mut self, depth: u32) -> Value {
        match self.next() % if depth > 4 { 5 } else { 8 } {
            0 => Value::Null,
            1 => Value::Bool(self.next().is_multiple_of(2)),
            2 => json!(self.next() as i64 >> (self.next() % 64)),
            3 => json!((self.next() % 10_000) as f64 / 7.0),
            4 => Value::String(self.string()),
            5 | 6 => {
                let len = self.next() % 6;
                Value::Object((0..len).map(|_| (self.string(), self.value(depth + 1))).collect())
            }
            _ => {
                let len = self.next() % 6;
                Value::Array((0..len).map(|_| self.value(depth + 1)).collect())
            }
        }
    }
}

#[test]
fn generated_documents_read_the_same_in_part_and_whole() {
    #[derive(Debug, PartialEq, Deserialize)]
    struct Part {
        mode: Option<Value>,
        a: Option<Value>,
    }
    let mut values = Values(0x9E37_79B9_7F4A_7C15);
    for _ in 0..2000 {
        let mut document = serde_json::Map::new();
        for _ in 0..values.next() % 5 {
            document.insert(values.string(), values.value(0));
        }
        let document = Value::Object(document);
        for text in [
            document.to_string(),
            serde_json::to_string_pretty(&document).expect("json"),
        ] {
            skims::<Part>(&text);
            skims::<Value>(&text);
            skims::<BTreeMap<String, Value>>(&text);
        }
    }
}

#[test]
fn damaged_documents_never_panic_and_agree_where_serde_json_reads_them() {
    #[derive(Debug, PartialEq, Deserialize)]
    struct Part {
        mode: Option<Value>,
        a: Option<Vec<Value>>,
    }
    let mut values = Values(0x2545_F491_4F6C_DD1D);
    for _ in 0..3000 {
        let mut document = serde_json::Map::new();
        for _ in 0..1 + values.next() % 4 {
            document.insert(values.string(), values.value(0));
        }
        let mut text = Value::Object(document).to_string().into_bytes();
        // Cut it short, or overwrite a byte with one that matters to a skip.
        const DAMAGE: [u8; 9] = [b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', 0x01];
        let at = (values.next() % text.len() as u64) as usize;
        match values.next() % 3 {
            0 => text.truncate(at),
            _ => text[at] = DAMAGE[(values.next() % DAMAGE.len() as u64) as usize],
        }
        let Ok(text) = String::from_utf8(text) else { continue };
        // The skipped parts are not validated (the host's text is valid JSON), so the skim may
        // read text serde_json refuses; where serde_json reads it, the values agree.
        if let Ok(expected) = serde_json::from_str::<Value>(&text) {
            assert_eq!(from_str::<Value>(&text).expect("reads"), expected, "{text}");
        }
        if let Ok(expected) = serde_json::from_str::<Part>(&text) {
            assert_eq!(from_str::<Part>(&text).expect("reads"), expected, "{text}");
        }
        let _ = (from_str::<Part>(&text), from_str::<Value>(&text));
    }
}
