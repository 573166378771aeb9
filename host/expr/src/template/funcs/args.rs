//! Argument checking and conversion shared by the library functions.

use std::borrow::Cow;

use serde_json::Value;

use crate::template::value::{as_f64, as_i64, display};

pub type Result<T = Value> = std::result::Result<T, String>;

/// Exactly `n` arguments.
pub fn exactly(args: &[&Value], n: usize) -> Result<()> {
    if args.len() == n {
        Ok(())
    } else {
        Err(format!("wants {n} argument(s), got {}", args.len()))
    }
}

/// Between `min` and `max` arguments.
pub fn between(args: &[&Value], min: usize, max: usize) -> Result<()> {
    if (min..=max).contains(&args.len()) {
        Ok(())
    } else {
        Err(format!("wants {min} to {max} arguments, got {}", args.len()))
    }
}

/// At least `n` arguments.
pub fn at_least(args: &[&Value], n: usize) -> Result<()> {
    if args.len() >= n {
        Ok(())
    } else {
        Err(format!("wants at least {n} argument(s), got {}", args.len()))
    }
}

/// The text of argument `i` (any scalar prints as text; nil is "").
pub fn text<'a>(args: &[&'a Value], i: usize) -> Cow<'a, str> {
    args.get(i).map_or(Cow::Borrowed(""), |v| display(v))
}

/// Argument `i` as a float; a non-number is an error naming the value.
pub fn float(args: &[&Value], i: usize) -> Result<f64> {
    let value = args.get(i).copied().unwrap_or(&Value::Null);
    match value {
        Value::Null => Ok(0.0),
        _ => as_f64(value).ok_or_else(|| format!("argument {} is not a number: {}", i + 1, display(value))),
    }
}

/// Argument `i` as an integer (nil counts as 0).
pub fn int(args: &[&Value], i: usize) -> Result<i64> {
    let value = args.get(i).copied().unwrap_or(&Value::Null);
    match value {
        Value::Null => Ok(0),
        _ => as_i64(value).ok_or_else(|| format!("argument {} is not an integer: {}", i + 1, display(value))),
    }
}

/// Argument `i` as a count (a non-negative integer).
pub fn count(args: &[&Value], i: usize) -> Result<usize> {
    let n = int(args, i)?;
    usize::try_from(n).map_err(|_| format!("argument {} must not be negative: {n}", i + 1))
}

/// The last argument (the piped value in a pipeline), nil when absent.
pub fn last<'a>(args: &[&'a Value]) -> &'a Value {
    args.last().copied().unwrap_or(&Value::Null)
}

/// A string value.
pub fn string(s: impl Into<String>) -> Value {
    Value::String(s.into())
}
