//! Type notes: conversions and type tests.

use serde_json::Value;

use super::args::{Result, exactly, string};
use super::conditional::parse_bool;
use super::entry::Entry;
use crate::template::env::Env;
use crate::template::value::{as_f64, as_i64, display, kind, number};

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "toInt",
        func: to_int,
        usage: "toInt VALUE",
        doc: "an integer (floats truncate, non-numbers are 0)",
    },
    Entry {
        name: "toFloat",
        func: to_float,
        usage: "toFloat VALUE",
        doc: "a number (non-numbers are 0)",
    },
    Entry {
        name: "toBool",
        func: to_bool,
        usage: "toBool VALUE",
        doc: "true/yes/on/1 are true, everything else false",
    },
    Entry {
        name: "toString",
        func: to_string,
        usage: "toString VALUE",
        doc: "the printed text",
    },
    Entry {
        name: "typeOf",
        func: type_of,
        usage: "typeOf VALUE",
        doc: "nil, bool, int, float, string, list or map",
    },
    Entry {
        name: "typeMap",
        func: type_map,
        usage: "typeMap VALUE",
        doc: "VALUE is a map",
    },
    Entry {
        name: "typeList",
        func: type_list,
        usage: "typeList VALUE",
        doc: "VALUE is a list",
    },
    Entry {
        name: "typeString",
        func: type_string,
        usage: "typeString VALUE",
        doc: "VALUE is a string",
    },
    Entry {
        name: "typeNumber",
        func: type_number,
        usage: "typeNumber VALUE",
        doc: "VALUE is a number",
    },
    Entry {
        name: "typeBool",
        func: type_bool,
        usage: "typeBool VALUE",
        doc: "VALUE is a bool",
    },
    Entry {
        name: "typeNull",
        func: type_null,
        usage: "typeNull VALUE",
        doc: "VALUE is nil",
    },
    Entry {
        name: "isScalar",
        func: is_scalar,
        usage: "isScalar VALUE",
        doc: "VALUE is a string, number, bool or nil",
    },
    Entry {
        name: "isComposite",
        func: is_composite,
        usage: "isComposite VALUE",
        doc: "VALUE is a list or map",
    },
];

fn one<'a>(args: &[&'a Value]) -> Result<&'a Value> {
    exactly(args, 1)?;
    Ok(args[0])
}

fn to_int(_: &Env<'_>, args: &[&Value]) -> Result {
    let v = one(args)?;
    Ok(Value::from(
        as_i64(v).or_else(|| as_f64(v).map(|f| f.trunc() as i64)).unwrap_or(0),
    ))
}

fn to_float(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(number(as_f64(one(args)?).unwrap_or(0.0)))
}

fn to_bool(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(parse_bool(one(args)?).unwrap_or(false)))
}

fn to_string(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(string(display(one(args)?)))
}

fn type_of(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(string(kind(one(args)?)))
}

fn type_map(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(one(args)?.is_object()))
}

fn type_list(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(one(args)?.is_array()))
}

fn type_string(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(one(args)?.is_string()))
}

fn type_number(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(one(args)?.is_number()))
}

fn type_bool(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(one(args)?.is_boolean()))
}

fn type_null(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(one(args)?.is_null()))
}

fn is_scalar(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(!matches!(one(args)?, Value::Array(_) | Value::Object(_))))
}

fn is_composite(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Bool(matches!(one(args)?, Value::Array(_) | Value::Object(_))))
}
