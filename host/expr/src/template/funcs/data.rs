//! Data notes (encodings, hashes, names) and random values.

use base64::Engine;
use rand::Rng;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::args::{Result, at_least, between, count, exactly, string, text};
use super::entry::Entry;
use crate::template::env::Env;
use crate::template::value::display;

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "toBase64",
        func: to_base64,
        usage: "toBase64 S",
        doc: "standard base64 of S",
    },
    Entry {
        name: "fromBase64",
        func: from_base64,
        usage: "fromBase64 S",
        doc: "S decoded from base64 (must be UTF-8)",
    },
    Entry {
        name: "toJSON",
        func: to_json,
        usage: "toJSON VALUE",
        doc: "VALUE as compact JSON",
    },
    Entry {
        name: "toJson",
        func: to_json,
        usage: "toJson VALUE",
        doc: "toJSON, as upstream's examples also spell it",
    },
    Entry {
        name: "sha256sum",
        func: sha256sum,
        usage: "sha256sum S",
        doc: "hex SHA-256 of S",
    },
    Entry {
        name: "slugify",
        func: slugify,
        usage: "slugify S",
        doc: "lowercase, non-alphanumerics collapsed to '-'",
    },
    Entry {
        name: "truncateName",
        func: truncate_name,
        usage: "truncateName [MAX] NAME",
        doc: "NAME fitted into MAX (default 63) characters; a cut name ends in a 5-character hash so names stay distinct",
    },
    Entry {
        name: "lookup",
        func: lookup,
        usage: "lookup KEY K1 V1 [K2 V2...]",
        doc: "the value paired with KEY in the pairs that follow (the first match); \"\" when none",
    },
];

pub const RANDOM: &[Entry] = &[
    Entry {
        name: "randomAlphanumeric",
        func: random_alphanumeric,
        usage: "randomAlphanumeric N",
        doc: "N random letters and digits",
    },
    Entry {
        name: "randomHex",
        func: random_hex,
        usage: "randomHex N",
        doc: "N random hex digits",
    },
    Entry {
        name: "randomBase64",
        func: random_base64,
        usage: "randomBase64 N",
        doc: "N random bytes, base64-encoded",
    },
    Entry {
        name: "uuidv4",
        func: uuid_v4,
        usage: "uuidv4",
        doc: "a random UUID (version 4)",
    },
];

/// Random values are for secrets: keep them bounded.
const MAX_RANDOM: usize = 4096;

fn to_base64(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(
        base64::engine::general_purpose::STANDARD.encode(text(args, 0).as_bytes()),
    ))
}

fn from_base64(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text(args, 0).trim().as_bytes())
        .map_err(|e| format!("not base64: {e}"))?;
    String::from_utf8(bytes)
        .map(string)
        .map_err(|_| "decoded bytes are not UTF-8".into())
}

fn to_json(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    serde_json::to_string(&args[0]).map(string).map_err(|e| e.to_string())
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256sum(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(sha256_hex(text(args, 0).as_bytes())))
}

pub(super) fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

fn slugify(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(string(slug(&text(args, 0))))
}

fn truncate_name(_: &Env<'_>, args: &[&Value]) -> Result {
    between(args, 1, 2)?;
    let (max, name) = if args.len() == 2 {
        (count(args, 0)?, text(args, 1))
    } else {
        (63, text(args, 0))
    };
    if name.chars().count() <= max {
        return Ok(string(name));
    }
    if max < 7 {
        return Ok(string(name.chars().take(max).collect::<String>()));
    }
    let hash = &sha256_hex(name.as_bytes())[..5];
    let head: String = name.chars().take(max - 6).collect();
    Ok(string(format!("{}-{hash}", head.trim_end_matches(['-', '.']))))
}

fn bounded(args: &[&Value]) -> Result<usize> {
    exactly(args, 1)?;
    let n = count(args, 0)?;
    if n > MAX_RANDOM {
        return Err(format!("at most {MAX_RANDOM}"));
    }
    Ok(n)
}

fn random_alphanumeric(_: &Env<'_>, args: &[&Value]) -> Result {
    let n = bounded(args)?;
    Ok(string(
        rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(n)
            .map(char::from)
            .collect::<String>(),
    ))
}

fn random_hex(_: &Env<'_>, args: &[&Value]) -> Result {
    let n = bounded(args)?;
    let mut rng = rand::rng();
    Ok(string(
        (0..n)
            .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
            .collect::<String>(),
    ))
}

fn random_base64(_: &Env<'_>, args: &[&Value]) -> Result {
    let n = bounded(args)?;
    let mut bytes = vec![0u8; n];
    rand::rng().fill(bytes.as_mut_slice());
    Ok(string(base64::engine::general_purpose::STANDARD.encode(bytes)))
}

fn lookup(_: &Env<'_>, args: &[&Value]) -> Result {
    at_least(args, 1)?;
    let key = text(args, 0);
    // A trailing key without a value pairs with nothing.
    Ok(args[1..]
        .chunks_exact(2)
        .find(|pair| display(pair[0]) == key)
        .map_or_else(|| string(""), |pair| pair[1].clone()))
}

fn uuid_v4(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 0)?;
    let mut bytes: [u8; 16] = rand::random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(string(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )))
}
