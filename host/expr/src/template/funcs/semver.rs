//! Semver notes. Versions are read leniently (`v1.2` is 1.2.0); constraints accept `>=1.2
//! <2`, `>=1.2, <2` and alternatives joined by `||`.

use serde_json::Value;

use super::args::{Result, exactly, string, text};
use super::entry::Entry;
use crate::template::env::Env;

pub const FUNCS: &[Entry] = &[
    Entry {
        name: "semverMajor",
        func: major,
        usage: "semverMajor VERSION",
        doc: "the major number",
    },
    Entry {
        name: "semverMinor",
        func: minor,
        usage: "semverMinor VERSION",
        doc: "the minor number",
    },
    Entry {
        name: "semverPatch",
        func: patch,
        usage: "semverPatch VERSION",
        doc: "the patch number",
    },
    Entry {
        name: "semverValid",
        func: valid,
        usage: "semverValid VERSION",
        doc: "VERSION reads as a semantic version",
    },
    Entry {
        name: "semverCompare",
        func: compare,
        usage: "semverCompare CONSTRAINT VERSION",
        doc: "VERSION satisfies CONSTRAINT (\">=1.2 <2\", \"^1.4\", \"~1.2 || >=3\")",
    },
    Entry {
        name: "semverBump",
        func: bump,
        usage: "semverBump PART VERSION",
        doc: "VERSION with major, minor or patch raised (lower parts reset)",
    },
    Entry {
        name: "semverConstraint",
        func: constraint,
        usage: "semverConstraint CONSTRAINT",
        doc: "CONSTRAINT is a valid constraint",
    },
];

/// A version from lenient text: an optional `v`, and missing minor/patch as 0.
pub fn version(text: &str) -> std::result::Result<semver::Version, String> {
    let t = text.trim().trim_start_matches(['v', 'V']);
    let (core, suffix) = match t.find(['-', '+']) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, ""),
    };
    let mut parts: Vec<&str> = core.split('.').collect();
    while parts.len() < 3 {
        parts.push("0");
    }
    let full = format!("{}{suffix}", parts.join("."));
    semver::Version::parse(&full).map_err(|_| format!("not a semantic version: {text:?}"))
}

/// A constraint: alternatives separated by `||`, each a list of comparators.
fn requirement(text: &str) -> std::result::Result<Vec<semver::VersionReq>, String> {
    text.split("||")
        .map(|alternative| {
            let comparators: Vec<String> = alternative
                .split([',', ' '])
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            let mut joined = Vec::new();
            let mut pending = String::new();
            // `>= 1.2` (operator apart from its version) joins back together.
            for c in comparators {
                if c.chars().all(|ch| "<>=~^!".contains(ch)) {
                    pending.push_str(&c);
                } else {
                    joined.push(format!("{pending}{c}"));
                    pending.clear();
                }
            }
            semver::VersionReq::parse(&joined.join(", "))
                .map_err(|e| format!("not a version constraint: {text:?} ({e})"))
        })
        .collect()
}

fn parsed(args: &[&Value]) -> Result<semver::Version> {
    exactly(args, 1)?;
    version(&text(args, 0))
}

fn major(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(parsed(args)?.major))
}
fn minor(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(parsed(args)?.minor))
}
fn patch(_: &Env<'_>, args: &[&Value]) -> Result {
    Ok(Value::from(parsed(args)?.patch))
}

fn valid(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(Value::Bool(version(&text(args, 0)).is_ok()))
}

fn compare(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let alternatives = requirement(&text(args, 0))?;
    let v = version(&text(args, 1))?;
    Ok(Value::Bool(alternatives.iter().any(|r| r.matches(&v))))
}

fn bump(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 2)?;
    let mut v = version(&text(args, 1))?;
    match text(args, 0).as_ref() {
        "major" => (v.major, v.minor, v.patch) = (v.major + 1, 0, 0),
        "minor" => (v.minor, v.patch) = (v.minor + 1, 0),
        "patch" => v.patch += 1,
        other => return Err(format!("unknown part {other:?} (major, minor, patch)")),
    }
    v.pre = semver::Prerelease::EMPTY;
    v.build = semver::BuildMetadata::EMPTY;
    Ok(string(v.to_string()))
}

fn constraint(_: &Env<'_>, args: &[&Value]) -> Result {
    exactly(args, 1)?;
    Ok(Value::Bool(requirement(&text(args, 0)).is_ok()))
}
