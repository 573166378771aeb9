//! Conditional notes: defaults, ternaries, emptiness.

use serde_json::Value;

use super::args::{Result, exactly};
use super::entry::Entry;
use crate::template::env::Env;
use crate::template::value::truthy;

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "default",
        func: default,
        usage: "default DEFAULT VALUE",
        doc: "VALUE, or DEFAULT when VALUE is empty (nil, \"\", 0, false, [] or {})",
    },
    Entry {
        name: "ternary",
        func: ternary,
        usage: "ternary IF_TRUE IF_FALSE COND",
        doc: "IF_TRUE when COND is truthy, else IF_FALSE",
    },
    Entry {
        name: "boolTernary",
        func: bool_ternary,
        usage: "boolTernary COND IF_TRUE IF_FALSE",
        doc: "IF_TRUE when COND is truthy, else IF_FALSE",
    },
    Entry {
        name: "boolDefault",
        func: bool_default,
        usage: "boolDefault DEFAULT VALUE",
        doc: "VALUE as a bool (true/false/yes/no/1/0), DEFAULT when absent or not a bool",
    },
    Entry {
        name: "coalesce",
        func: coalesce,
        usage: "coalesce A B...",
        doc: "the first non-empty argument",
    },
    Entry {
        name: "empty",
        func: empty,
        usage: "empty VALUE",
        doc: "VALUE is nil, \"\", 0, false, [] or {}",
    },
    Entry {
        name: "Empty",
        func: empty,
        usage: "Empty VALUE",
        doc: "same as empty",
    },
    Entry {
        name: "notEmpty",
        func: not_empty,
        usage: "notEmpty VALUE",
        doc: "VALUE is not empty",
    },
    Entry {
        name: "eqTernary",
        func: eq_ternary,
        usage: "eqTernary VALUE TARGET IF_EQUAL ELSE",
        doc: "IF_EQUAL when VALUE and TARGET print the same, else ELSE",
    },
];

fn default(_: &Env<'_>, args: &[&Value]) -> Result {
    match args {
        [fallback] => Ok((*fallback).clone()),
        [fallback, value] => Ok(if truthy(value) {
            (*value).clone()
        } else {
            (*fallback).clone()
        }),
        _ => Err(format!("wants 1 or 2 arguments, got {}", args.len())),
    }
}

fn ternary(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 3)?;
    Ok(if truthy(args[2]) {
        args[0].clone()
    } else {
        args[1].clone()
    })
}

fn bool_ternary(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 3)?;
    Ok(if truthy(args[0]) {
        args[1].clone()
    } else {
        args[2].clone()
    })
}

/// Reads a value as a bool when it clearly is one.
pub fn parse_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => n.as_f64().map(|f| f != 0.0),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "y" | "on" | "1" => Some(true),
            "false" | "no" | "n" | "off" | "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

fn bool_default(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    Ok(Value::Bool(parse_bool(args[1]).unwrap_or_else(|| truthy(args[0]))))
}

fn coalesce(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(args.iter().find(|a| truthy(a)).map_or(Value::Null, |a| (*a).clone()))
}

fn empty(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(Value::Bool(!truthy(args[0])))
}

fn not_empty(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(Value::Bool(truthy(args[0])))
}

fn eq_ternary(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 4)?;
    let same = crate::template::value::display(args[0]) == crate::template::value::display(args[1]);
    Ok(if same { args[2].clone() } else { args[3].clone() })
}
