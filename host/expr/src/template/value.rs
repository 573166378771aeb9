//! How template values behave: truthiness, printing, numbers and comparison, following Go's
//! `text/template` and `fmt` where Katalogs can tell the difference.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::{Number, Value};

/// Go truthiness: false, 0, nil and empty strings, lists and maps are false.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The text a value prints as. Like Go's `%v`, except that nil prints as the empty string
/// (Go prints `<no value>`), which is what a Kubernetes manifest field wants.
pub fn display(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(s) => Cow::Borrowed(s),
        Value::Null => Cow::Borrowed(""),
        other => {
            let mut out = String::new();
            write_go(other, &mut out);
            Cow::Owned(out)
        }
    }
}

fn write_go(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number_text(n)),
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_go(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push_str("map[");
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                write_go(&map[key], out);
            }
            out.push(']');
        }
    }
}

/// A number the way Go's `%v` prints it: integers plainly, floats shortest, with an
/// exponent from 1e21 on.
pub fn number_text(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    float_text(n.as_f64().unwrap_or(0.0))
}

pub fn float_text(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        return format!("{f:.0}");
    }
    if f.abs() >= 1e21 || (f != 0.0 && f.abs() < 1e-4) {
        let text = format!("{f:e}");
        // Rust writes 1e21 and 1e-5; Go writes 1e+21 and 1e-05.
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = exponent.strip_prefix('-').map_or(("+", exponent), |d| ("-", d));
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    f.to_string()
}

/// A number from a value: numbers, numeric strings and booleans (1/0).
pub fn as_f64(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

/// An integer from a value: integers, integral floats and numeric strings.
pub fn as_i64(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) => {
            let s = s.trim();
            s.parse()
                .ok()
                .or_else(|| s.parse::<f64>().ok().filter(|f| f.fract() == 0.0).map(|f| f as i64))
        }
        Value::Bool(b) => Some(i64::from(*b)),
        _ => None,
    }
}

/// A JSON number from an f64, integral when it is.
pub fn number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Value::from(f as i64)
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// Equality for `eq`/`ne`: numbers numerically, same kinds structurally, mixed scalar kinds
/// by their printed text (`eq .spec.replicas "3"` is true; Go would refuse to compare).
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Null, Value::Null) => true,
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => a == b,
        _ if std::mem::discriminant(a) == std::mem::discriminant(b) => a == b,
        _ => display(a) == display(b),
    }
}

/// Ordering for `lt`/`le`/`gt`/`ge`: numbers (and numeric strings) numerically, strings
/// lexically; anything else does not compare.
pub fn compare(a: &Value, b: &Value) -> Result<Ordering, crate::error::Error> {
    match (a, b) {
        (Value::String(x), Value::String(y)) => match (x.trim().parse::<f64>(), y.trim().parse::<f64>()) {
            (Ok(x), Ok(y)) => x.partial_cmp(&y).ok_or(crate::error::Error::NaN),
            _ => Ok(x.cmp(y)),
        },
        _ => match (as_f64(a), as_f64(b)) {
            (Some(x), Some(y)) => x.partial_cmp(&y).ok_or(crate::error::Error::NaN),
            _ => Err(crate::error::Error::Incomparable(kind(a), kind(b))),
        },
    }
}

/// The type name used in messages and by `typeOf`.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nil",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn truthiness_follows_go() {
        for falsy in [
            json!(null),
            json!(false),
            json!(0),
            json!(0.0),
            json!(""),
            json!([]),
            json!({}),
        ] {
            assert!(!truthy(&falsy), "{falsy}");
        }
        for true_ in [
            json!(true),
            json!(1),
            json!(-0.5),
            json!("false"),
            json!([0]),
            json!({"a": null}),
        ] {
            assert!(truthy(&true_), "{true_}");
        }
    }

    #[test]
    fn display_prints_like_go_percent_v() {
        assert_eq!(display(&json!(null)), "");
        assert_eq!(display(&json!(3)), "3");
        assert_eq!(display(&json!(2.5)), "2.5");
        assert_eq!(display(&json!(3.0)), "3");
        assert_eq!(display(&json!(1e21)), "1e+21");
        assert_eq!(display(&json!([1, "a", true])), "[1 a true]");
        assert_eq!(display(&json!({"b": 1, "a": [2]})), "map[a:[2] b:1]");
    }

    #[test]
    fn equality_and_ordering() {
        assert!(equal(&json!(3), &json!(3.0)));
        assert!(equal(&json!(3), &json!("3")));
        assert!(!equal(&json!(null), &json!("")));
        assert_eq!(compare(&json!("10"), &json!("9")).unwrap(), Ordering::Greater);
        assert_eq!(compare(&json!("b"), &json!("a")).unwrap(), Ordering::Greater);
        assert!(compare(&json!([1]), &json!(1)).is_err());
    }
}
