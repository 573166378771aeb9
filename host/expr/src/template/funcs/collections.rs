//! List and map notes, nil-safe access into nested data, and coercions.

use serde_json::{Map, Value};

use super::args::{Result, at_least, exactly, string};
use super::conditional::parse_bool;
use super::entry::Entry;
use crate::template::env::Env;
use crate::template::value::{as_i64, display, equal};

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "concat",
        func: concat,
        usage: "concat A B ...",
        doc: "lists joined into one list; given anything but lists, their text joined",
    },
    Entry {
        name: "listHas",
        func: list_has,
        usage: "listHas ITEM LIST",
        doc: "LIST contains ITEM (upstream's `listHas LIST ITEM` reads the same)",
    },
    Entry {
        name: "listGet",
        func: list_get,
        usage: "listGet INDEX LIST",
        doc: "the item at INDEX (negative counts from the end), nil when out of range (upstream's `listGet LIST INDEX` reads the same)",
    },
    Entry {
        name: "listLen",
        func: list_len,
        usage: "listLen LIST",
        doc: "the number of items (nil is 0)",
    },
    Entry {
        name: "mapGet",
        func: map_get,
        usage: "mapGet KEY MAP",
        doc: "the value at KEY, nil when absent (upstream's `mapGet MAP KEY` reads the same)",
    },
    Entry {
        name: "mapKeys",
        func: map_keys,
        usage: "mapKeys MAP",
        doc: "the keys, sorted",
    },
    Entry {
        name: "mapValues",
        func: map_values,
        usage: "mapValues MAP",
        doc: "the values, in key order",
    },
    Entry {
        name: "mapPick",
        func: map_pick,
        usage: "mapPick MAP KEY...",
        doc: "MAP with only the given keys",
    },
    Entry {
        name: "mapOmit",
        func: map_omit,
        usage: "mapOmit MAP KEY...",
        doc: "MAP without the given keys",
    },
    Entry {
        name: "toList",
        func: to_list,
        usage: "toList ITEM...",
        doc: "a list of the arguments",
    },
];

pub const ACCESS: &[Entry] = &[
    Entry {
        name: "get",
        func: get,
        usage: "get OBJ KEY...",
        doc: "the value under the keys (map keys or list indexes), nil when any is missing",
    },
    Entry {
        name: "getOr",
        func: get_or,
        usage: "getOr OBJ KEY... DEFAULT",
        doc: "the value under the keys, DEFAULT when missing or nil",
    },
    Entry {
        name: "getStringOr",
        func: get_string_or,
        usage: "getStringOr OBJ KEY... DEFAULT",
        doc: "the value as text, DEFAULT when missing or empty",
    },
    Entry {
        name: "getIntOr",
        func: get_int_or,
        usage: "getIntOr OBJ KEY... DEFAULT",
        doc: "the value as an integer, DEFAULT when missing or not a number",
    },
    Entry {
        name: "getBoolOr",
        func: get_bool_or,
        usage: "getBoolOr OBJ KEY... DEFAULT",
        doc: "the value as a bool, DEFAULT when missing or not a bool",
    },
    Entry {
        name: "asList",
        func: as_list,
        usage: "asList VALUE",
        doc: "a list as is, nil as [], anything else as [VALUE]",
    },
    Entry {
        name: "asMap",
        func: as_map,
        usage: "asMap VALUE",
        doc: "a map as is, anything else as {}",
    },
    Entry {
        name: "asString",
        func: as_string,
        usage: "asString VALUE",
        doc: "the printed text (nil is \"\")",
    },
];

/// `(the other argument, the container)`: the piped form puts the container last
/// (`.spec.tags | listHas "b"`), upstream's documented calls put it first (`listHas
/// .spec.tags "b"`); a first argument that is a container (and a second that is not) is
/// upstream's order.
fn container_last<'v>(args: &[&'v Value], is_container: fn(&Value) -> bool) -> (&'v Value, &'v Value) {
    match is_container(args[0]) && !is_container(args[1]) {
        true => (args[1], args[0]),
        false => (args[0], args[1]),
    }
}

fn list_has(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let (item, list) = container_last(args, Value::is_array);
    Ok(Value::Bool(
        list.as_array()
            .is_some_and(|items| items.iter().any(|i| equal(i, item))),
    ))
}

fn list_get(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let (index, list) = container_last(args, Value::is_array);
    let Some(items) = list.as_array() else {
        return Ok(Value::Null);
    };
    let index = as_i64(index).ok_or_else(|| format!("index {} is not an integer", display(index)))?;
    let index = if index < 0 { items.len() as i64 + index } else { index };
    Ok(usize::try_from(index)
        .ok()
        .and_then(|i| items.get(i))
        .cloned()
        .unwrap_or(Value::Null))
}

fn list_len(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(Value::from(args[0].as_array().map_or(0, Vec::len)))
}

fn map_get(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let (key, map) = container_last(args, Value::is_object);
    Ok(map.get(display(key).as_ref()).cloned().unwrap_or(Value::Null))
}

fn map_keys(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    let mut keys: Vec<&String> = args[0].as_object().map(|m| m.keys().collect()).unwrap_or_default();
    keys.sort();
    Ok(Value::Array(keys.into_iter().map(|k| string(k.clone())).collect()))
}

fn map_values(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    let Some(map) = args[0].as_object() else {
        return Ok(Value::Array(vec![]));
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    Ok(Value::Array(keys.into_iter().map(|k| map[k].clone()).collect()))
}

fn key_list(args: &[&Value]) -> Vec<String> {
    args.iter()
        .flat_map(|a| match a {
            Value::Array(items) => items.iter().map(|i| display(i).into_owned()).collect(),
            other => vec![display(other).into_owned()],
        })
        .collect()
}

/// MAP with only (`keep`) or without (`!keep`) the keys given after it.
fn select_keys(args: &[&Value], keep: bool) -> Result {
    at_least(args, 1)?;
    let keys = key_list(&args[1..]);
    let map: Map<String, Value> = args[0]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| keys.contains(k) == keep)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    Ok(Value::Object(map))
}

fn map_pick(_: &Env<'_>, args: &[&Value]) -> Result {
    select_keys(args, true)
}

fn map_omit(_: &Env<'_>, args: &[&Value]) -> Result {
    select_keys(args, false)
}

fn to_list(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::Array(args.iter().map(|a| (*a).clone()).collect()))
}

/// Follows keys (map keys, or list indexes) from `value`; `None` when any step is missing.
pub fn dig<'a>(value: &'a Value, keys: &[&Value]) -> Option<&'a Value> {
    let mut current = value;
    for key in keys {
        current = match current {
            Value::Object(map) => map.get(display(key).as_ref())?,
            Value::Array(items) => items.get(usize::try_from(as_i64(key)?).ok()?)?,
            _ => return None,
        };
    }
    Some(current).filter(|v| !v.is_null())
}

fn get(_: &Env<'_>, args: &[&Value]) -> Result {
    at_least(args, 1)?;
    Ok(dig(args[0], &args[1..]).cloned().unwrap_or(Value::Null))
}

fn with_default<'a>(args: &[&'a Value]) -> Result<(Option<&'a Value>, &'a Value)> {
    at_least(args, 2)?;
    let (default, rest) = args.split_last().map(|(d, r)| (*d, r)).unwrap_or((&Value::Null, &[]));
    Ok((dig(rest[0], &rest[1..]), default))
}

fn get_or(_: &Env<'_>, args: &[&Value]) -> Result {
    let (found, default) = with_default(args)?;
    Ok(found.unwrap_or(default).clone())
}

fn get_string_or(_: &Env<'_>, args: &[&Value]) -> Result {
    let (found, default) = with_default(args)?;
    Ok(match found.map(display).filter(|s| !s.is_empty()) {
        Some(s) => string(s),
        None => string(display(default)),
    })
}

fn get_int_or(_: &Env<'_>, args: &[&Value]) -> Result {
    let (found, default) = with_default(args)?;
    Ok(Value::from(
        found.and_then(as_i64).or_else(|| as_i64(default)).unwrap_or(0),
    ))
}

fn get_bool_or(_: &Env<'_>, args: &[&Value]) -> Result {
    let (found, default) = with_default(args)?;
    Ok(Value::Bool(
        found
            .and_then(parse_bool)
            .or_else(|| parse_bool(default))
            .unwrap_or(false),
    ))
}

fn as_list(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(match &args[0] {
        Value::Array(_) => args[0].clone(),
        Value::Null => Value::Array(vec![]),
        other => Value::Array(vec![(*other).clone()]),
    })
}

fn as_map(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(if args[0].is_object() {
        args[0].clone()
    } else {
        Value::Object(Map::new())
    })
}

fn as_string(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(display(args[0])))
}

fn concat(_: &Env<'_>, args: &[&Value]) -> Result {
    at_least(args, 1)?;
    if args.iter().all(|a| matches!(a, Value::Array(_) | Value::Null)) {
        let items = args.iter().filter_map(|a| a.as_array()).flatten().cloned().collect();
        return Ok(Value::Array(items));
    }
    Ok(string(args.iter().map(|a| display(a).into_owned()).collect::<String>()))
}
