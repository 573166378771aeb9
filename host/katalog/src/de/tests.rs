use std::collections::BTreeMap;

use serde::Deserialize;

use super::*;
use crate::yaml;

#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Outer {
    name: String,
    #[serde(default)]
    workers: Option<u32>,
    #[serde(default)]
    inner: Option<Inner>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    mode: Option<Mode>,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Inner {
    #[serde(default)]
    when: Vec<String>,
    #[serde(default)]
    or: Vec<String>,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
enum Mode {
    Typed,
    Dynamic,
}

fn read(src: &str) -> (Result<Outer, Problem>, Vec<Problem>) {
    let node = yaml::parse(src).unwrap();
    let collector = Collector::default();
    let result = from_node::<Outer>(&node, "", &collector);
    (result, collector.into_problems())
}

#[test]
fn every_unknown_key_is_collected_with_path_position_and_closest_key() {
    let (result, problems) = read("name: a\nworkrs: 2\ninner:\n  wen: [x]\n  extra: 1\n");
    assert_eq!(result.unwrap().name, "a");
    let messages: Vec<String> = problems
        .iter()
        .map(|p| format!("{} {} {}", p.path, p.pos, p.message))
        .collect();
    assert_eq!(
        messages,
        [
            "workrs 2:1 unknown field `workrs`; the closest valid key is `workers`",
            "inner.wen 4:3 unknown field `wen`; the closest valid key is `when`",
            "inner.extra 5:3 unknown field `extra`; the keys here are `when`, `or`",
        ]
    );
}

#[test]
fn renamed_legacy_keys_name_the_new_key() {
    let (_, problems) = read("name: a\ninner:\n  anyOf: [x]\n");
    assert_eq!(
        problems[0].message,
        "`anyOf` was renamed to `or` in v0.7.16; use `or` (`ork migrate` rewrites it)"
    );
    assert_eq!(problems[0].path, "inner.anyOf");
}

#[test]
fn type_errors_carry_the_path_and_position_of_the_value_and_are_all_reported() {
    let (result, problems) = read("name: a\nworkers: lots\ninner: {when: 3, or: [a]}\nlabels: [x]\n");
    assert!(result.is_ok(), "reading goes on past a wrong type");
    let found: Vec<(String, usize, usize, String)> = problems
        .iter()
        .map(|p| (p.path.clone(), p.pos.line, p.pos.column, p.message.clone()))
        .collect();
    assert_eq!(
        found,
        [
            ("workers".into(), 2, 10, "expected an integer, found a string".into()),
            ("inner.when".into(), 3, 15, "expected a list, found an integer".into()),
            ("labels".into(), 4, 9, "expected a map, found a list".into()),
        ]
    );
    let (result, _) = read("name: a\nmode: typd\n");
    let problem = result.unwrap_err();
    assert_eq!(problem.path, "mode");
    assert!(
        problem
            .message
            .contains("unknown value `typd`; expected one of typed, dynamic (closest: `typed`)")
    );
    let (_, problems) = read("name: a\ninner: [1]\n");
    assert_eq!(problems[0].message, "expected a map, found a list");
}

#[test]
fn scalars_read_as_strings_and_maps_keep_free_keys() {
    let (result, problems) = read("name: 42\nlabels: {a: 1, b: true}\ninner:\n");
    let outer = result.unwrap();
    assert!(problems.is_empty());
    assert_eq!(outer.name, "42");
    assert_eq!(outer.labels["a"], "1");
    assert_eq!(outer.labels["b"], "true");
    assert_eq!(outer.inner, None, "an empty optional section is absent");
}
