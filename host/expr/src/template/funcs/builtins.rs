//! Go's predefined template functions (`and` and `or` are special forms in the evaluator).

use std::cmp::Ordering;
use std::fmt::Write;

use serde_json::Value;

use super::args::{Result, at_least, exactly, string};
use super::entry::Entry;
use crate::template::env::Env;
use crate::template::value::{as_f64, as_i64, compare, display, equal, float_text, kind, number_text, truthy};

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "not",
        func: not,
        usage: "not VALUE",
        doc: "the boolean negation of VALUE's truthiness",
    },
    Entry {
        name: "eq",
        func: eq,
        usage: "eq A B [C...]",
        doc: "A equals B (or any of the rest)",
    },
    Entry {
        name: "ne",
        func: ne,
        usage: "ne A B",
        doc: "A differs from B",
    },
    Entry {
        name: "lt",
        func: lt,
        usage: "lt A B",
        doc: "A < B (numbers numerically, strings lexically)",
    },
    Entry {
        name: "le",
        func: le,
        usage: "le A B",
        doc: "A <= B",
    },
    Entry {
        name: "gt",
        func: gt,
        usage: "gt A B",
        doc: "A > B",
    },
    Entry {
        name: "ge",
        func: ge,
        usage: "ge A B",
        doc: "A >= B",
    },
    Entry {
        name: "len",
        func: len,
        usage: "len VALUE",
        doc: "length of a string (bytes), list or map; nil is 0",
    },
    Entry {
        name: "index",
        func: index,
        usage: "index COLLECTION KEY...",
        doc: "element by map key or list index; nil when absent",
    },
    Entry {
        name: "slice",
        func: slice,
        usage: "slice LIST|STRING [FROM [TO]]",
        doc: "a sub-list or substring",
    },
    Entry {
        name: "print",
        func: print,
        usage: "print ARGS...",
        doc: "Go fmt.Sprint",
    },
    Entry {
        name: "printf",
        func: printf,
        usage: "printf FORMAT ARGS...",
        doc: "Go fmt.Sprintf (%v %s %d %f %q %t %x ...)",
    },
    Entry {
        name: "println",
        func: println,
        usage: "println ARGS...",
        doc: "Go fmt.Sprintln",
    },
    Entry {
        name: "html",
        func: html,
        usage: "html VALUE",
        doc: "HTML-escaped text",
    },
    Entry {
        name: "js",
        func: js,
        usage: "js VALUE",
        doc: "JavaScript-escaped text",
    },
    Entry {
        name: "urlquery",
        func: urlquery,
        usage: "urlquery VALUE",
        doc: "text escaped for a URL query",
    },
];

fn not(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(Value::Bool(!truthy(args[0])))
}

fn eq(_: &Env<'_>, args: &[&Value]) -> Result {
    at_least(args, 2)?;
    Ok(Value::Bool(args[1..].iter().any(|b| equal(args[0], b))))
}

fn ne(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    Ok(Value::Bool(!equal(args[0], args[1])))
}

fn ordered(args: &[&Value], accept: fn(Ordering) -> bool) -> Result {
    exactly(args, 2)?;
    Ok(Value::Bool(accept(compare(args[0], args[1])?)))
}

fn lt(_: &Env<'_>, args: &[&Value]) -> Result {
    ordered(args, Ordering::is_lt)
}
fn le(_: &Env<'_>, args: &[&Value]) -> Result {
    ordered(args, Ordering::is_le)
}
fn gt(_: &Env<'_>, args: &[&Value]) -> Result {
    ordered(args, Ordering::is_gt)
}
fn ge(_: &Env<'_>, args: &[&Value]) -> Result {
    ordered(args, Ordering::is_ge)
}

fn len(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    let n = match &args[0] {
        Value::Null => 0,
        Value::String(s) => s.len(),
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        other => return Err(format!("len of {}", kind(other))),
    };
    Ok(Value::from(n))
}

fn index(_: &Env<'_>, args: &[&Value]) -> Result {
    at_least(args, 1)?;
    let mut current = args[0];
    for key in &args[1..] {
        current = match current {
            Value::Object(map) => map.get(display(key).as_ref()).unwrap_or(&Value::Null),
            Value::Array(items) => {
                let i = as_i64(key).ok_or_else(|| format!("cannot index a list with {}", display(key)))?;
                usize::try_from(i)
                    .ok()
                    .and_then(|i| items.get(i))
                    .ok_or_else(|| format!("index out of range: {i}"))?
            }
            Value::Null => &Value::Null,
            other => return Err(format!("can't index item of type {}", kind(other))),
        };
    }
    Ok(current.clone())
}

fn slice(_: &Env<'_>, args: &[&Value]) -> Result {
    at_least(args, 1)?;
    let bound = |i: usize, default: usize| -> Result<usize> {
        match args.get(i) {
            None => Ok(default),
            Some(v) => as_i64(v)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("bad slice index {}", display(v))),
        }
    };
    match &args[0] {
        Value::Array(items) => {
            let (from, to) = (bound(1, 0)?, bound(2, items.len())?);
            if from > to || to > items.len() {
                return Err(format!("slice index out of range: {from}:{to}"));
            }
            Ok(Value::Array(items[from..to].to_vec()))
        }
        Value::String(s) => {
            let (from, to) = (bound(1, 0)?, bound(2, s.len())?);
            s.get(from..to)
                .map(string)
                .ok_or_else(|| format!("slice index out of range: {from}:{to}"))
        }
        Value::Null => Ok(Value::Null),
        other => Err(format!("can't slice item of type {}", kind(other))),
    }
}

/// Go's Sprint: a space between operands when neither side is a string.
fn print(_: &Env<'_>, args: &[&Value]) -> Result {
    let mut out = String::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 && !arg.is_string() && !args[i - 1].is_string() {
            out.push(' ');
        }
        out.push_str(&go_text(arg));
    }
    Ok(string(out))
}

fn println(_: &Env<'_>, args: &[&Value]) -> Result {
    let mut out = args.iter().map(|a| go_text(a)).collect::<Vec<_>>().join(" ");
    out.push('\n');
    Ok(string(out))
}

/// Like [`display`] but nil prints as Go's `<nil>` (print/printf semantics).
fn go_text(value: &Value) -> String {
    if value.is_null() {
        "<nil>".to_string()
    } else {
        display(value).into_owned()
    }
}

fn printf(_: &Env<'_>, args: &[&Value]) -> Result {
    at_least(args, 1)?;
    Ok(string(sprintf(&display(args[0]), &args[1..])))
}

/// Go's `fmt.Sprintf` for the verbs templates use.
pub fn sprintf(format: &str, args: &[&Value]) -> String {
    let mut out = String::new();
    let mut next = 0usize;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&flag) = chars.peek() {
            match flag {
                '-' => spec.left = true,
                '+' => spec.plus = true,
                '#' => spec.sharp = true,
                ' ' => spec.space = true,
                '0' => spec.zero = true,
                _ => break,
            }
            chars.next();
        }
        spec.width = read_number(&mut chars);
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.precision = Some(read_number(&mut chars).unwrap_or(0));
        }
        let Some(verb) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.get(next) else {
            let _ = write!(out, "%!{verb}(MISSING)");
            continue;
        };
        next += 1;
        out.push_str(&spec.pad(format_verb(verb, &spec, arg)));
    }
    if next < args.len() {
        out.push_str("%!(EXTRA ");
        let extra: Vec<String> = args[next..]
            .iter()
            .map(|a| format!("{}={}", kind(a), go_text(a)))
            .collect();
        out.push_str(&extra.join(", "));
        out.push(')');
    }
    out
}

#[derive(Default)]
struct Spec {
    left: bool,
    plus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

impl Spec {
    fn pad(&self, text: String) -> String {
        let Some(width) = self.width else { return text };
        let len = text.chars().count();
        if len >= width {
            return text;
        }
        let fill = width - len;
        if self.left {
            format!("{text}{}", " ".repeat(fill))
        } else if self.zero {
            let (sign, digits) = match text.strip_prefix('-') {
                Some(rest) => ("-", rest.to_string()),
                None => ("", text.clone()),
            };
            format!("{sign}{}{digits}", "0".repeat(fill))
        } else {
            format!("{}{text}", " ".repeat(fill))
        }
    }
}

fn read_number(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<usize> {
    let mut n: Option<usize> = None;
    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
        n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(d as usize));
        chars.next();
    }
    n
}

fn format_verb(verb: char, spec: &Spec, arg: &Value) -> String {
    let bad = || format!("%!{verb}({}={})", kind(arg), go_text(arg));
    let signed = |text: String, negative: bool| {
        if negative {
            text
        } else if spec.plus {
            format!("+{text}")
        } else if spec.space {
            format!(" {text}")
        } else {
            text
        }
    };
    match verb {
        'v' => match arg {
            Value::String(s) if spec.sharp => format!("{s:?}"),
            Value::Number(n) if spec.plus => signed(number_text(n), n.as_f64().is_some_and(|f| f < 0.0)),
            _ => go_text(arg),
        },
        's' => {
            let text = go_text(arg);
            match spec.precision {
                Some(p) => text.chars().take(p).collect(),
                None => text,
            }
        }
        'q' => match arg {
            Value::String(s) => go_quote(s),
            Value::Number(n) if n.as_u64().is_some() => {
                char::from_u32(n.as_u64().unwrap_or(0) as u32).map_or_else(bad, |c| format!("'{c}'"))
            }
            _ => bad(),
        },
        't' => match arg {
            Value::Bool(b) => b.to_string(),
            _ => bad(),
        },
        'd' => match as_integer(arg) {
            Some(i) => signed(i.to_string(), i < 0),
            None => bad(),
        },
        'c' => as_integer(arg)
            .and_then(|i| u32::try_from(i).ok())
            .and_then(char::from_u32)
            .map_or_else(bad, String::from),
        'x' | 'X' | 'o' | 'b' => {
            let text = match (arg, as_integer(arg)) {
                (Value::String(s), _) => s.bytes().map(|b| format!("{b:02x}")).collect(),
                (_, Some(i)) => {
                    let magnitude = i.unsigned_abs();
                    let digits = match verb {
                        'x' => format!("{magnitude:x}"),
                        'X' => format!("{magnitude:X}"),
                        'o' => format!("{magnitude:o}"),
                        _ => format!("{magnitude:b}"),
                    };
                    let prefix = match (spec.sharp, verb) {
                        (true, 'x') => "0x",
                        (true, 'X') => "0X",
                        (true, 'o') => "0",
                        _ => "",
                    };
                    format!("{}{prefix}{digits}", if i < 0 { "-" } else { "" })
                }
                _ => return bad(),
            };
            if verb == 'X' { text.to_uppercase() } else { text }
        }
        'f' | 'F' | 'e' | 'E' | 'g' | 'G' => match as_f64(arg).filter(|_| arg.is_number()) {
            Some(f) => {
                let text = match verb {
                    'f' | 'F' => format!("{f:.*}", spec.precision.unwrap_or(6)),
                    'e' | 'E' => {
                        let text = go_exponent(&format!("{f:.*e}", spec.precision.unwrap_or(6)));
                        if verb == 'E' { text.to_uppercase() } else { text }
                    }
                    _ => match spec.precision {
                        Some(p) => {
                            let rounded: f64 = format!("{f:.*e}", p.saturating_sub(1)).parse().unwrap_or(f);
                            float_text(rounded)
                        }
                        None => float_text(f),
                    },
                };
                signed(text, f < 0.0)
            }
            None => bad(),
        },
        _ => format!("%!{verb}(BADVERB)"),
    }
}

fn as_integer(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

/// Rust writes `1.5e3`; Go writes `1.5e+03`.
fn go_exponent(text: &str) -> String {
    let Some((mantissa, exponent)) = text.split_once('e') else {
        return text.to_string();
    };
    let (sign, digits) = exponent.strip_prefix('-').map_or(("+", exponent), |d| ("-", d));
    format!("{mantissa}e{sign}{digits:0>2}")
}

fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The arguments' text, run together (Go's escapers take several arguments).
fn concatenated(args: &[&Value]) -> String {
    args.iter().map(|a| display(a)).collect()
}

fn html(_: &Env<'_>, args: &[&Value]) -> Result {
    let text = concatenated(args);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    Ok(string(out))
}

fn js(_: &Env<'_>, args: &[&Value]) -> Result {
    let text = concatenated(args);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    Ok(string(out))
}

fn urlquery(_: &Env<'_>, args: &[&Value]) -> Result {
    let text = concatenated(args);
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(char::from(b)),
            b' ' => out.push('+'),
            b => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    Ok(string(out))
}
