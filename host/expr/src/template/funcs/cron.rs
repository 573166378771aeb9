//! Cron notes: cron expressions as text, as a map of their five fields, and described.

use serde_json::{Map, Value};

use super::args::{Result, exactly, string, text};
use super::entry::Entry;
use crate::cron::{FIELDS, Schedule, normalize};
use crate::template::env::Env;
use crate::template::value::display;

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "cronToMap",
        func: to_map,
        usage: "cronToMap EXPR",
        doc: "{minute, hour, dom, month, dow} of an expression",
    },
    Entry {
        name: "cronFromMap",
        func: from_map,
        usage: "cronFromMap MAP",
        doc: "an expression from a field map (missing fields are *)",
    },
    Entry {
        name: "cronFromAny",
        func: from_any,
        usage: "cronFromAny VALUE",
        doc: "an expression from text or a field map",
    },
    Entry {
        name: "cronNormalize",
        func: normalize_fn,
        usage: "cronNormalize EXPR",
        doc: "macros expanded (@daily → 0 0 * * *), whitespace collapsed",
    },
    Entry {
        name: "cronDescribe",
        func: describe,
        usage: "cronDescribe EXPR",
        doc: "a short English description",
    },
    Entry {
        name: "cronValid",
        func: valid,
        usage: "cronValid EXPR",
        doc: "EXPR is a valid five-field expression or macro",
    },
    Entry {
        name: "cronField",
        func: field,
        usage: "cronField NAME EXPR",
        doc: "one field (minute, hour, dom, month or dow)",
    },
    Entry {
        name: "cronMinute",
        func: minute,
        usage: "cronMinute EXPR",
        doc: "the minute field",
    },
    Entry {
        name: "cronHour",
        func: hour,
        usage: "cronHour EXPR",
        doc: "the hour field",
    },
    Entry {
        name: "cronDom",
        func: dom,
        usage: "cronDom EXPR",
        doc: "the day-of-month field",
    },
    Entry {
        name: "cronMonth",
        func: month,
        usage: "cronMonth EXPR",
        doc: "the month field",
    },
    Entry {
        name: "cronDow",
        func: dow,
        usage: "cronDow EXPR",
        doc: "the day-of-week field",
    },
    Entry {
        name: "cronExpr",
        func: expr,
        usage: "cronExpr MINUTE HOUR DOM MONTH DOW",
        doc: "an expression from five fields",
    },
];

fn parsed(args: &[&Value]) -> Result<Schedule> {
    exactly(args, 1)?;
    Ok(Schedule::parse(&text(args, 0))?)
}

fn to_map(_: &Env<'_>, args: &[&Value]) -> Result {
    let schedule = parsed(args)?;
    let map: Map<String, Value> = FIELDS
        .iter()
        .zip(schedule.fields)
        .map(|(k, v)| ((*k).to_string(), string(v)))
        .collect();
    Ok(Value::Object(map))
}

fn expr_from_map(map: &Map<String, Value>) -> Result<String> {
    let fields: Vec<String> = FIELDS
        .iter()
        .map(|f| {
            map.get(*f)
                .map(|v| display(v).into_owned())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "*".into())
        })
        .collect();
    let expr = fields.join(" ");
    Schedule::parse(&expr)?;
    Ok(expr)
}

fn from_map(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    match &args[0] {
        Value::Object(map) => expr_from_map(map).map(string),
        other => Err(format!("cronFromMap wants a map, got {}", display(other))),
    }
}

fn from_any(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    match &args[0] {
        Value::Object(map) => expr_from_map(map).map(string),
        other => {
            let expr = normalize(&display(other));
            Schedule::parse(&expr)?;
            Ok(string(expr))
        }
    }
}

fn normalize_fn(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(normalize(&text(args, 0))))
}

fn describe(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(string(parsed(args)?.describe()))
}

fn valid(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(Value::Bool(Schedule::parse(&text(args, 0)).is_ok()))
}

fn field(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let name = text(args, 0);
    let index = FIELDS
        .iter()
        .position(|f| *f == name)
        .ok_or_else(|| format!("unknown cron field {name:?} (minute, hour, dom, month, dow)"))?;
    let schedule = Schedule::parse(&text(args, 1))?;
    Ok(string(schedule.fields[index].clone()))
}

fn nth(args: &[&Value], index: usize) -> Result {
    Ok(string(parsed(args)?.fields[index].clone()))
}

fn minute(_: &Env<'_>, args: &[&Value]) -> Result {
    nth(args, 0)
}
fn hour(_: &Env<'_>, args: &[&Value]) -> Result {
    nth(args, 1)
}
fn dom(_: &Env<'_>, args: &[&Value]) -> Result {
    nth(args, 2)
}
fn month(_: &Env<'_>, args: &[&Value]) -> Result {
    nth(args, 3)
}
fn dow(_: &Env<'_>, args: &[&Value]) -> Result {
    nth(args, 4)
}

fn expr(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 5)?;
    let expr = (0..5).map(|i| text(args, i).into_owned()).collect::<Vec<_>>().join(" ");
    Schedule::parse(&expr)?;
    Ok(string(expr))
}
