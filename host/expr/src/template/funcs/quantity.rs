//! Kubernetes quantity notes (`500m`, `1Gi`, `2.5`, `1e3`).

use serde_json::Value;

use super::args::{Result, between, exactly, float, string, text};
use super::entry::Entry;
use crate::template::env::Env;
use crate::template::value::{display, float_text, number};

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "parseQuantity",
        func: parse_quantity,
        usage: "parseQuantity Q",
        doc: "a quantity in base units (\"500m\" → 0.5, \"1Gi\" → 1073741824)",
    },
    Entry {
        name: "formatQuantity",
        func: format_quantity,
        usage: "formatQuantity [SUFFIX] N",
        doc: "N as a quantity, in SUFFIX (Ki, Mi, Gi, m, k, M, ...) or the largest exact binary suffix",
    },
    Entry {
        name: "sumQuantity",
        func: sum_quantity,
        usage: "sumQuantity Q...",
        doc: "the sum of quantities (arguments or a list), formatted",
    },
    Entry {
        name: "subtractQuantity",
        func: subtract_quantity,
        usage: "subtractQuantity A B",
        doc: "A minus B, formatted (\"1Gi\" \"512Mi\" → \"512Mi\")",
    },
];

const SUFFIXES: &[(&str, f64)] = &[
    ("Ki", 1024.0),
    ("Mi", 1_048_576.0),
    ("Gi", 1_073_741_824.0),
    ("Ti", 1_099_511_627_776.0),
    ("Pi", 1_125_899_906_842_624.0),
    ("Ei", 1_152_921_504_606_846_976.0),
    ("n", 1e-9),
    ("u", 1e-6),
    ("m", 1e-3),
    ("k", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
    ("P", 1e15),
    ("E", 1e18),
];

/// A quantity in base units.
pub fn parse(text: &str) -> std::result::Result<f64, crate::error::Error> {
    let t = text.trim();
    if let Ok(n) = t.parse::<f64>() {
        return Ok(n);
    }
    for (suffix, scale) in SUFFIXES {
        if let Some(number) = t.strip_suffix(suffix)
            && let Ok(n) = number.parse::<f64>()
        {
            return Ok(n * scale);
        }
    }
    Err(crate::error::Error::Quantity(text.to_string()))
}

/// Formats base units with the largest binary suffix that divides exactly, milli-units for
/// fractions, plain otherwise.
pub fn format(n: f64) -> String {
    if n.fract() != 0.0 {
        let milli = n * 1000.0;
        return if milli.fract() == 0.0 {
            format!("{milli:.0}m")
        } else {
            float_text(n)
        };
    }
    for (suffix, scale) in SUFFIXES[..6].iter().rev() {
        if n != 0.0 && n % scale == 0.0 {
            return format!("{:.0}{suffix}", n / scale);
        }
    }
    format!("{n:.0}")
}

fn quantity_of(value: &Value) -> std::result::Result<f64, String> {
    match value {
        Value::Number(n) => Ok(n.as_f64().unwrap_or(0.0)),
        Value::Null => Ok(0.0),
        other => Ok(parse(&display(other))?),
    }
}

fn parse_quantity(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(number(quantity_of(args[0])?))
}

fn format_quantity(_: &Env<'_>, args: &[&Value]) -> Result {
    between(args, 1, 2)?;
    if args.len() == 1 {
        return Ok(string(format(quantity_of(args[0])?)));
    }
    let suffix = text(args, 0);
    let scale = SUFFIXES
        .iter()
        .find(|(s, _)| *s == suffix)
        .map(|(_, scale)| *scale)
        .ok_or_else(|| format!("unknown suffix {suffix:?}"))?;
    let n = quantity_of(args[1]).or_else(|_| float(args, 1))?;
    Ok(string(format!(
        "{}{suffix}",
        float_text(((n / scale) * 1e6).round() / 1e6)
    )))
}

fn sum_quantity(_: &Env<'_>, args: &[&Value]) -> Result {
    let items: Vec<&Value> = match args {
        [Value::Array(items)] => items.iter().collect(),
        _ => args.to_vec(),
    };
    let mut total = 0.0;
    for item in items {
        total += quantity_of(item)?;
    }
    Ok(string(format(total)))
}

fn subtract_quantity(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    Ok(string(format(quantity_of(args[0])? - quantity_of(args[1])?)))
}
