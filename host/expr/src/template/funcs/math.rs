//! Math notes, and the Prometheus threshold helpers used with `protocol: prometheus`
//! externals. Results are integers when they are integral.

use serde_json::Value;

use super::args::{Result, at_least, exactly, float};
use super::entry::Entry;
use crate::template::env::Env;
use crate::template::value::{as_f64, number};

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "add",
        func: add,
        usage: "add A B...",
        doc: "sum",
    },
    Entry {
        name: "sub",
        func: sub,
        usage: "sub A B",
        doc: "A - B",
    },
    Entry {
        name: "mul",
        func: mul,
        usage: "mul A B...",
        doc: "product",
    },
    Entry {
        name: "div",
        func: div,
        usage: "div A B",
        doc: "A / B (integer division for integers); division by zero is an error",
    },
    Entry {
        name: "mod",
        func: modulo,
        usage: "mod A B",
        doc: "A modulo B",
    },
    Entry {
        name: "min",
        func: min,
        usage: "min A B...",
        doc: "smallest",
    },
    Entry {
        name: "max",
        func: max,
        usage: "max A B...",
        doc: "largest",
    },
    Entry {
        name: "clamp",
        func: clamp,
        usage: "clamp MIN MAX VALUE",
        doc: "VALUE limited to MIN..MAX",
    },
    Entry {
        name: "abs",
        func: abs,
        usage: "abs X",
        doc: "absolute value",
    },
];

pub const PROMETHEUS: &[Entry] = &[
    Entry {
        name: "promAboveThreshold",
        func: prom_above,
        usage: "promAboveThreshold THRESHOLD RESULT",
        doc: "the first sample of a Prometheus query result (body JSON or parsed) is above THRESHOLD",
    },
    Entry {
        name: "promBelowThreshold",
        func: prom_below,
        usage: "promBelowThreshold THRESHOLD RESULT",
        doc: "the first sample of a Prometheus query result is below THRESHOLD",
    },
    Entry {
        name: "promValue",
        func: prom_value,
        usage: "promValue RESULT",
        doc: "the value of a scalar result, or of a vector's first series; nil when none",
    },
    Entry {
        name: "promSum",
        func: prom_sum,
        usage: "promSum RESULT",
        doc: "the sum of every series' value",
    },
    Entry {
        name: "promMax",
        func: prom_max,
        usage: "promMax RESULT",
        doc: "the largest series value; nil when none",
    },
    Entry {
        name: "promSeriesCount",
        func: prom_series_count,
        usage: "promSeriesCount RESULT",
        doc: "the number of series in the result",
    },
    Entry {
        name: "promLabelValues",
        func: prom_label_values,
        usage: "promLabelValues LABEL RESULT",
        doc: "the values of LABEL across the series",
    },
];

fn is_int(args: &[&Value]) -> bool {
    args.iter().all(|a| match a {
        Value::Number(n) => n.is_i64() || n.is_u64(),
        Value::String(s) => s.trim().parse::<i64>().is_ok(),
        Value::Null => true,
        _ => false,
    })
}

fn fold(args: &[&Value], start: f64, op: fn(f64, f64) -> f64) -> Result {
    at_least(args, 1)?;
    let mut acc = start;
    for i in 0..args.len() {
        acc = op(acc, float(args, i)?);
    }
    Ok(number(acc))
}

fn add(_: &Env<'_>, args: &[&Value]) -> Result {
    fold(args, 0.0, |a, b| a + b)
}

fn mul(_: &Env<'_>, args: &[&Value]) -> Result {
    fold(args, 1.0, |a, b| a * b)
}

fn sub(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    Ok(number(float(args, 0)? - float(args, 1)?))
}

fn div(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let (a, b) = (float(args, 0)?, float(args, 1)?);
    if b == 0.0 {
        return Err("division by zero".into());
    }
    Ok(number(if is_int(args) { (a / b).trunc() } else { a / b }))
}

fn modulo(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let (a, b) = (float(args, 0)?, float(args, 1)?);
    if b == 0.0 {
        return Err("division by zero".into());
    }
    Ok(number(a % b))
}

fn min(_: &Env<'_>, args: &[&Value]) -> Result {
    fold(args, f64::INFINITY, f64::min)
}

fn max(_: &Env<'_>, args: &[&Value]) -> Result {
    fold(args, f64::NEG_INFINITY, f64::max)
}

fn clamp(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 3)?;
    let (lo, hi, x) = (float(args, 0)?, float(args, 1)?, float(args, 2)?);
    if lo > hi {
        return Err(format!("clamp: MIN {lo} is above MAX {hi}"));
    }
    Ok(number(x.clamp(lo, hi)))
}

fn abs(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(number(float(args, 0)?.abs()))
}

/// A Prometheus instant-query result (the body as text or parsed, whole or its `data`) as
/// its `result`: a vector's series, or a scalar's one `[time, value]` pair as one series.
fn series(result: &Value) -> Vec<Value> {
    let parsed;
    let result = match result {
        Value::String(body) => match serde_json::from_str::<Value>(body) {
            Ok(value) => {
                parsed = value;
                &parsed
            }
            Err(_) => return Vec::new(),
        },
        other => other,
    };
    let data = result.get("data").unwrap_or(result);
    match data.get("result") {
        Some(Value::Array(items)) if data["resultType"] == "scalar" => vec![serde_json::json!({ "value": items })],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    }
}

fn sample(series: &Value) -> Option<f64> {
    as_f64(series.get("value")?.as_array()?.get(1)?)
}

/// The first sample value of a Prometheus instant-query result.
fn first_sample(result: &Value) -> Option<f64> {
    series(result).first().and_then(sample)
}

/// The threshold and the result, in either order (upstream writes the result first).
fn threshold_and_result<'v>(args: &[&'v Value]) -> Result<(f64, &'v Value)> {
    exactly(args, 2)?;
    let numeric = |v: &Value| as_f64(v).is_some();
    match numeric(args[0]) || !numeric(args[1]) {
        true => Ok((float(args, 0)?, args[1])),
        false => Ok((float(args, 1)?, args[0])),
    }
}

fn prom_above(_: &Env<'_>, args: &[&Value]) -> Result {
    let (threshold, result) = threshold_and_result(args)?;
    Ok(Value::Bool(first_sample(result).is_some_and(|v| v > threshold)))
}

fn prom_below(_: &Env<'_>, args: &[&Value]) -> Result {
    let (threshold, result) = threshold_and_result(args)?;
    Ok(Value::Bool(first_sample(result).is_some_and(|v| v < threshold)))
}

fn prom_value(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(first_sample(args[0]).map_or(Value::Null, number))
}

fn prom_sum(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(number(series(args[0]).iter().filter_map(sample).sum()))
}

fn prom_max(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(series(args[0])
        .iter()
        .filter_map(sample)
        .reduce(f64::max)
        .map_or(Value::Null, number))
}

fn prom_series_count(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(Value::from(series(args[0]).len()))
}

fn prom_label_values(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let (label, result) =
        match args[0].is_string() && !args[0].as_str().is_some_and(|s| s.trim_start().starts_with('{')) {
            true => (args[0], args[1]),
            false => (args[1], args[0]),
        };
    let label = crate::template::value::display(label);
    Ok(Value::Array(
        series(result)
            .iter()
            .filter_map(|s| s["metric"].get(label.as_ref()).cloned())
            .collect(),
    ))
}
