//! String notes. The subject string comes last so it can be piped.

use serde_json::Value;

use super::args::{Result, count, exactly, string, text};
use super::entry::Entry;
use crate::template::env::Env;

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "toLower",
        func: lower,
        usage: "toLower S",
        doc: "lowercase",
    },
    Entry {
        name: "lower",
        func: lower,
        usage: "lower S",
        doc: "lowercase (alias of toLower)",
    },
    Entry {
        name: "toUpper",
        func: upper,
        usage: "toUpper S",
        doc: "uppercase",
    },
    Entry {
        name: "upper",
        func: upper,
        usage: "upper S",
        doc: "uppercase (alias of toUpper)",
    },
    Entry {
        name: "trimSpace",
        func: trim_space,
        usage: "trimSpace S",
        doc: "without leading and trailing whitespace",
    },
    Entry {
        name: "trim",
        func: trim_space,
        usage: "trim S",
        doc: "without leading and trailing whitespace",
    },
    Entry {
        name: "trimPrefix",
        func: trim_prefix,
        usage: "trimPrefix PREFIX S",
        doc: "S without PREFIX",
    },
    Entry {
        name: "trimSuffix",
        func: trim_suffix,
        usage: "trimSuffix SUFFIX S",
        doc: "S without SUFFIX",
    },
    Entry {
        name: "hasPrefix",
        func: has_prefix,
        usage: "hasPrefix PREFIX S",
        doc: "S starts with PREFIX",
    },
    Entry {
        name: "hasSuffix",
        func: has_suffix,
        usage: "hasSuffix SUFFIX S",
        doc: "S ends with SUFFIX",
    },
    Entry {
        name: "contains",
        func: contains,
        usage: "contains SUBSTR S",
        doc: "S contains SUBSTR",
    },
    Entry {
        name: "replace",
        func: replace,
        usage: "replace OLD NEW S",
        doc: "S with every OLD replaced by NEW",
    },
    Entry {
        name: "split",
        func: split,
        usage: "split SEP S",
        doc: "the list of parts of S between SEP",
    },
    Entry {
        name: "join",
        func: join,
        usage: "join SEP LIST",
        doc: "the items of LIST joined by SEP (upstream's `join LIST SEP` reads the same)",
    },
    Entry {
        name: "repeat",
        func: repeat,
        usage: "repeat N S",
        doc: "S repeated N times",
    },
    Entry {
        name: "camelToKebab",
        func: camel_to_kebab,
        usage: "camelToKebab S",
        doc: "myFieldName → my-field-name",
    },
    Entry {
        name: "truncate",
        func: truncate,
        usage: "truncate N S",
        doc: "the first N characters of S",
    },
    Entry {
        name: "quote",
        func: quote,
        usage: "quote S",
        doc: "S in double quotes",
    },
    Entry {
        name: "title",
        func: title,
        usage: "title S",
        doc: "each word capitalised",
    },
    Entry {
        name: "joinList",
        func: join,
        usage: "joinList SEP LIST",
        doc: "join (a list's items with SEP), either order",
    },
    Entry {
        name: "domainHost",
        func: domain_host,
        usage: "domainHost TEXT",
        doc: "the bare host of a URL or domain: whitespace, http(s):// and a trailing / removed",
    },
    Entry {
        name: "domainBare",
        func: domain_bare,
        usage: "domainBare TEXT",
        doc: "domainHost, less a leading www.",
    },
    Entry {
        name: "repoSlug",
        func: repo_slug,
        usage: "repoSlug REPOSITORY",
        doc: "a name from a repository: its last path segment, .git removed, slugified",
    },
];

fn lower(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(text(args, 0).to_lowercase()))
}

fn upper(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(text(args, 0).to_uppercase()))
}

fn trim_space(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(text(args, 0).trim()))
}

fn trim_prefix(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let s = text(args, 1);
    Ok(string(s.strip_prefix(text(args, 0).as_ref()).unwrap_or(&s)))
}

fn trim_suffix(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let s = text(args, 1);
    Ok(string(s.strip_suffix(text(args, 0).as_ref()).unwrap_or(&s)))
}

fn has_prefix(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    Ok(Value::Bool(text(args, 1).starts_with(text(args, 0).as_ref())))
}

fn has_suffix(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    Ok(Value::Bool(text(args, 1).ends_with(text(args, 0).as_ref())))
}

fn contains(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    Ok(Value::Bool(text(args, 1).contains(text(args, 0).as_ref())))
}

fn replace(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 3)?;
    Ok(string(text(args, 2).replace(text(args, 0).as_ref(), &text(args, 1))))
}

fn split(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let s = text(args, 1);
    if s.is_empty() {
        return Ok(Value::Array(vec![]));
    }
    Ok(Value::Array(s.split(text(args, 0).as_ref()).map(string).collect()))
}

fn join(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    // Upstream documents `join LIST SEP` too; a missing list (nil) before a text is that.
    let upstream = args[0].is_array() || (args[0].is_null() && args[1].is_string());
    let (sep, list) = match upstream {
        true => (args[1], args[0]),
        false => (args[0], args[1]),
    };
    let sep = crate::template::value::display(sep);
    match list {
        Value::Array(items) => Ok(string(
            items
                .iter()
                .map(|i| crate::template::value::display(i).into_owned())
                .collect::<Vec<_>>()
                .join(&sep),
        )),
        Value::Null => Ok(string("")),
        other => Ok(string(crate::template::value::display(other))),
    }
}

fn repeat(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let n = count(args, 0)?;
    if n.saturating_mul(text(args, 1).len()) > 1 << 20 {
        return Err("result would exceed 1 MiB".into());
    }
    Ok(string(text(args, 1).repeat(n)))
}

fn camel_to_kebab(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    let mut out = String::new();
    let chars: Vec<char> = text(args, 0).chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let after_lower = i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let before_lower =
                chars.get(i + 1).is_some_and(|n| n.is_lowercase()) && i > 0 && chars[i - 1].is_uppercase();
            if after_lower || before_lower {
                out.push('-');
            }
            out.extend(c.to_lowercase());
        } else if *c == '_' || *c == ' ' {
            out.push('-');
        } else {
            out.push(*c);
        }
    }
    Ok(string(out))
}

fn truncate(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    Ok(string(text(args, 1).chars().take(count(args, 0)?).collect::<String>()))
}

fn quote(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(format!("{:?}", text(args, 0))))
}

fn title(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    let mut out = String::new();
    let mut start = true;
    for c in text(args, 0).chars() {
        if start && c.is_alphabetic() {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        start = c.is_whitespace() || c == '-' || c == '_';
    }
    Ok(string(out))
}

/// The host of a URL or domain as typed; non-text is "".
fn host_of(value: &Value) -> String {
    let Value::String(text) = value else {
        return String::new();
    };
    let text = text.trim();
    let text = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .unwrap_or(text);
    text.trim_end_matches('/').to_string()
}

fn domain_host(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(host_of(args[0])))
}

fn domain_bare(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    let host = host_of(args[0]);
    Ok(string(host.strip_prefix("www.").unwrap_or(&host)))
}

fn repo_slug(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    let repository = text(args, 0);
    let last = repository
        .trim()
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or_default();
    Ok(string(super::data::slug(last.trim_end_matches(".git"))))
}
