//! One field of an object by key: a label, an annotation read as a number, a status field,
//! a label selector match, the resource requests. Key and object come in either order
//! (`getLabel "app" .children.deployment` or upstream's `getLabel . "app"`); nil-safe.

use serde_json::Value;

use super::args::{Result, at_least, string};
use super::entry::Entry;
use super::kubernetes::{at, keyed, obj, text_at};
use crate::template::env::Env;
use crate::template::value::{as_i64, display, truthy};

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "getLabel",
        func: get_label,
        usage: "getLabel KEY OBJ",
        doc: "the label's value; \"\" when absent",
    },
    Entry {
        name: "hasLabel",
        func: has_label,
        usage: "hasLabel KEY OBJ",
        doc: "the label is set to a non-empty value",
    },
    Entry {
        name: "getLabelInt",
        func: get_label_int,
        usage: "getLabelInt KEY OBJ",
        doc: "the label's value as an integer; 0 when absent or not a number",
    },
    Entry {
        name: "getAnnotationInt",
        func: get_annotation_int,
        usage: "getAnnotationInt KEY OBJ",
        doc: "the annotation's value as an integer; 0 when absent or not a number",
    },
    Entry {
        name: "labelMatches",
        func: label_matches,
        usage: "labelMatches OBJ KEY VALUE [KEY VALUE...]",
        doc: "the object's labels hold every KEY=VALUE given (others are ignored)",
    },
    Entry {
        name: "getStatus",
        func: get_status,
        usage: "getStatus KEY OBJ",
        doc: "status.KEY as text; \"\" when absent or structured",
    },
    Entry {
        name: "hasStatus",
        func: has_status,
        usage: "hasStatus KEY OBJ",
        doc: "status.KEY is set and not empty",
    },
    Entry {
        name: "resourceCPU",
        func: resource_cpu,
        usage: "resourceCPU OBJ",
        doc: "spec.resources.requests.cpu; \"\" at any missing level",
    },
    Entry {
        name: "resourceMemory",
        func: resource_memory,
        usage: "resourceMemory OBJ",
        doc: "spec.resources.requests.memory; \"\" at any missing level",
    },
];

fn get_label(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    Ok(text_at(value, &["metadata", "labels", &key]))
}
fn has_label(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    Ok(Value::Bool(truthy(at(value, &["metadata", "labels", &key]))))
}
fn int_of(value: &Value) -> Value {
    Value::from(match value {
        Value::String(s) => s.trim().parse::<i64>().unwrap_or(0),
        other => as_i64(other).unwrap_or(0),
    })
}
fn get_label_int(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    Ok(int_of(at(value, &["metadata", "labels", &key])))
}
fn get_annotation_int(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    Ok(int_of(at(value, &["metadata", "annotations", &key])))
}
fn label_matches(_: &Env<'_>, args: &[&Value]) -> Result {
    at_least(args, 1)?;
    // The object first (upstream), or last when piped.
    let (object, pairs) = match args[0].is_object() {
        true => (args[0], &args[1..]),
        false => (args[args.len() - 1], &args[..args.len() - 1]),
    };
    if pairs.len() % 2 != 0 {
        return Err("wants KEY VALUE pairs".into());
    }
    let labels = at(object, &["metadata", "labels"]);
    Ok(Value::Bool(pairs.chunks(2).all(|pair| {
        labels
            .get(display(pair[0]).as_ref())
            .is_some_and(|v| display(v) == display(pair[1]))
    })))
}
fn get_status(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    Ok(match at(value, &["status", &key]) {
        Value::Object(_) | Value::Array(_) | Value::Null => string(""),
        scalar => string(display(scalar)),
    })
}
fn has_status(_: &Env<'_>, args: &[&Value]) -> Result {
    let (key, value) = keyed(args)?;
    Ok(Value::Bool(truthy(at(value, &["status", &key]))))
}
fn resource_cpu(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["spec", "resources", "requests", "cpu"]))
}
fn resource_memory(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(text_at(obj(args)?, &["spec", "resources", "requests", "memory"]))
}
