//! Condition engine: a table per operator and shorthand, time conditions on a pinned clock,
//! compile errors, and property tests of negate and the when/or laws.

use proptest::prelude::*;
use serde_json::{Value, json};

use orkestra_expr::condition::*;
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::Functions;

use crate::yaml;

/// Monday 2026-01-05 10:30 UTC.
const NOW: &str = "2026-01-05T10:30:00Z";

fn object() -> Value {
    json!({
        "metadata": {"name": "shop", "labels": {"tier": "gold"}},
        "spec": {"replicas": 3, "ratio": 0.75, "image": "nginx:1.27", "enabled": true, "env": "", "tags": ["a", "b"],
                 "text": "12abc", "mode": "Prod"},
        "status": {"phase": "Running"},
    })
}

fn resolver() -> Resolver<'static, 'static> {
    let mut resolver = Resolver::owned(object(), &[]).at(NOW.parse().unwrap());
    resolver.set("metrics", json!({"queueDepth": 40}));
    resolver
}

/// Parses a condition from YAML flow text through the real Katalog deserializer.
fn spec(text: &str) -> ConditionSpec {
    let node = yaml::parse(text).unwrap();
    let (spec, problems) = crate::de::read::<ConditionSpec>(&node, "when[0]").unwrap();
    assert!(problems.is_empty(), "{text}: {problems:?}");
    spec
}

fn eval(text: &str) -> bool {
    Check::compile(&spec(text), Functions::builtin())
        .unwrap_or_else(|e| panic!("{text}: {e:?}"))
        .passes(&resolver(), None)
}

const TABLE: &[(&str, bool)] = &[
    // equals / notEquals, with value types.
    ("{field: spec.image, equals: 'nginx:1.27'}", true),
    ("{field: .spec.image, equals: nginx}", false),
    ("{field: spec.replicas, equals: 3}", true),
    ("{field: spec.replicas, equals: '3.0', valueType: float}", true),
    ("{field: spec.replicas, equals: '3.0'}", false),
    ("{field: spec.enabled, equals: 'TRUE', valueType: bool}", true),
    ("{field: spec.missing, equals: ''}", true),
    ("{field: spec.image, notEquals: apache}", true),
    ("{field: spec.image, operator: eq, value: 'nginx:1.27'}", true),
    ("{field: spec.image, operator: '!=', value: 'nginx:1.27'}", false),
    // contains, prefix, suffix.
    ("{field: spec.image, contains: ':1.'}", true),
    ("{field: spec.tags, contains: b}", true),
    ("{field: spec.tags, notContains: c}", true),
    ("{field: spec.image, prefix: ngi}", true),
    ("{field: spec.image, notPrefix: ngi}", false),
    ("{field: spec.image, suffix: '.27'}", true),
    ("{field: spec.image, notSuffix: '.27'}", false),
    ("{field: spec.image, operator: startsWith, value: nginx}", true),
    // regex, including an invalid one (false, also when negated).
    ("{field: spec.image, regex: '^nginx:[0-9.]+$'}", true),
    ("{field: spec.image, regex: '^apache'}", false),
    ("{field: spec.image, regex: '(unclosed'}", false),
    ("{field: spec.image, regex: '(unclosed', negate: true}", true),
    // exists / notExists.
    ("{field: status.phase, exists: true}", true),
    ("{field: status.nothing, exists: true}", false),
    ("{field: status.nothing, notExists: true}", true),
    ("{field: status.phase, exists: false}", false),
    ("{field: spec.env, exists: true}", true),
    // numbers: absent is 0, non-numbers fail.
    ("{field: spec.replicas, greaterThan: 2}", true),
    ("{field: spec.replicas, lessThan: 3}", false),
    ("{field: spec.replicas, greaterThanOrEqual: 3}", true),
    ("{field: spec.replicas, min: 4}", false),
    ("{field: spec.replicas, lessThanOrEqual: 3}", true),
    ("{field: spec.replicas, max: 2}", false),
    ("{field: spec.ratio, operator: '>', value: '0.5'}", true),
    ("{field: spec.absent, lessThan: 1}", true),
    ("{field: spec.absent, greaterThanOrEqual: 0}", true),
    ("{field: spec.text, greaterThan: 1}", false),
    ("{field: spec.text, lessThan: 1}", false),
    ("{field: spec.text, lessThan: 1, negate: true}", true),
    ("{field: metrics.queueDepth, lessThan: 100}", true),
    // between / in.
    ("{field: spec.replicas, between: '1,5'}", true),
    ("{field: spec.replicas, between: '3,3'}", true),
    ("{field: spec.replicas, notBetween: '4,9'}", true),
    ("{field: spec.replicas, between: [4, 9]}", false),
    ("{field: status.phase, in: 'Pending, Running'}", true),
    ("{field: status.phase, notIn: 'Pending,Failed'}", true),
    ("{field: spec.env, in: 'a,'}", true),
    ("{field: spec.mode, in: [prod, staging]}", false),
    ("{field: spec.replicas, operator: in, value: '1,2,3'}", true),
    // types.
    ("{field: spec.tags, operator: typeList}", true),
    ("{field: spec, operator: typeMap}", true),
    ("{field: spec.image, operator: typeString}", true),
    ("{field: spec.replicas, operator: typeNumber}", true),
    ("{field: spec.enabled, operator: typeBool}", true),
    ("{field: spec.nothing, operator: typeNull}", true),
    ("{field: spec.ratio, operator: typeOf, value: float}", true),
    ("{field: spec.ratio, operator: typeOf, value: number}", true),
    // unique passes when no checker is wired.
    ("{field: spec.image, operator: unique}", true),
    // templates as fields and values.
    ("{field: '{{ .spec.replicas | add 1 }}', equals: 4}", true),
    (
        "{field: '{{ index .metadata.labels \"tier\" }}', equals: '{{ \"go\" }}ld'}",
        true,
    ),
    ("{field: '{{ .spec.nothing }}', exists: true}", false),
    ("{field: spec.replicas, greaterThan: '{{ sub 5 3 }}'}", true),
    ("{field: '{{ div 1 0 }}', equals: x}", false),
    ("{field: '{{ div 1 0 }}', equals: x, negate: true}", false),
    // negate.
    ("{field: spec.replicas, equals: 3, negate: true}", false),
    ("{field: spec.replicas, equals: 9, negate: true}", true),
    // time conditions (now: Monday 10:30 UTC).
    ("{time: {after: '09:00', before: '18:00'}}", true),
    ("{time: {after: '11:00'}}", false),
    ("{time: {before: '10:31'}}", true),
    ("{time: {after: '22:00', before: '06:00'}}", false),
    ("{time: {after: '09:00', before: '18:00'}, negate: true}", false),
    ("{dayOfWeek: {weekday: true}}", true),
    ("{dayOfWeek: {weekend: true}}", false),
    ("{dayOfWeek: {in: [Mon, tuesday]}}", true),
    ("{dayOfWeek: {notIn: [monday]}}", false),
    ("{cron: '*/15 * * * *'}", true),
    ("{cron: '0 * * * *'}", false),
    ("{cron: '0 * * * *', duration: 1h}", true),
    ("{cron: '0 9 * * *', duration: 91m}", true),
    ("{cron: '0 9 * * *', duration: 90m}", false),
];

#[test]
fn every_operator_and_shorthand_behaves_as_documented() {
    let failures: Vec<String> = TABLE
        .iter()
        .filter(|(text, want)| eval(text) != *want)
        .map(|(text, want)| format!("{text}: want {want}"))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_operator_name_is_exercised() {
    let all = TABLE.iter().map(|(t, _)| *t).collect::<Vec<_>>().join(" ");
    let canonical = [
        "equals",
        "notEquals",
        "contains",
        "notContains",
        "prefix",
        "notPrefix",
        "suffix",
        "notSuffix",
        "regex",
        "exists",
        "notExists",
        "greaterThan",
        "lessThan",
        "greaterThanOrEqual",
        "min",
        "lessThanOrEqual",
        "max",
        "between",
        "notBetween",
        "in:",
        "notIn",
        "unique",
        "typeOf",
        "typeMap",
        "typeList",
        "typeString",
        "typeNumber",
        "typeBool",
        "typeNull",
        "time:",
        "dayOfWeek",
        "cron",
        "negate",
    ];
    let missing: Vec<&str> = canonical.iter().copied().filter(|n| !all.contains(n)).collect();
    assert!(missing.is_empty(), "untested: {missing:?}");
}

#[test]
fn when_and_or_combine_as_documented() {
    let compile = |when: &[&str], or: &[&str]| {
        let when: Vec<ConditionSpec> = when.iter().map(|t| spec(t)).collect();
        let or: Vec<ConditionSpec> = or.iter().map(|t| spec(t)).collect();
        Conditions::compile(&when, &or, Functions::builtin()).unwrap()
    };
    let yes = "{field: spec.replicas, equals: 3}";
    let no = "{field: spec.replicas, equals: 4}";
    let r = resolver();
    assert!(compile(&[], &[]).passes(&r, None), "nothing declared passes");
    assert!(compile(&[yes, yes], &[]).passes(&r, None));
    assert!(!compile(&[yes, no], &[]).passes(&r, None), "when: all must pass");
    assert!(compile(&[], &[no, yes]).passes(&r, None), "or: one is enough");
    assert!(!compile(&[], &[no, no]).passes(&r, None));
    assert!(!compile(&[no], &[yes]).passes(&r, None), "both present: both must hold");
    assert!(compile(&[yes], &[no, yes]).passes(&r, None));
}

#[test]
fn unique_asks_the_checker() {
    struct Taken;
    impl Uniqueness for Taken {
        fn is_unique(&self, field: &str, value: &str) -> bool {
            !(field == "spec.image" && value == "nginx:1.27")
        }
    }
    let check = Check::compile(&spec("{field: spec.image, operator: unique}"), Functions::builtin()).unwrap();
    assert!(!check.passes(&resolver(), Some(&Taken)));
    let check = Check::compile(&spec("{field: spec.mode, operator: unique}"), Functions::builtin()).unwrap();
    assert!(check.passes(&resolver(), Some(&Taken)));
}

#[test]
fn compile_errors_name_the_key() {
    for (text, key, message) in [
        (
            "{field: spec.x, operator: biggerThan, value: 1}",
            "operator",
            "unknown operator \"biggerThan\"; the closest is \"greaterThan\"",
        ),
        ("{field: spec.x}", "field", "no test"),
        (
            "{field: spec.x, equals: 1, exists: true}",
            "exists",
            "one test per condition, found equals and exists",
        ),
        ("{equals: 1}", "field", "needs `field`"),
        ("{field: spec.x, time: {after: '09:00'}}", "time", "have no `field`"),
        ("{time: {after: '25:00'}}", "time", "not a time of day"),
        (
            "{dayOfWeek: {weekday: true, weekend: false}}",
            "dayOfWeek",
            "exactly one",
        ),
        ("{dayOfWeek: {in: [funday]}}", "dayOfWeek", "unknown day"),
        ("{cron: '61 * * * *'}", "cron", "minute: 61 is outside 0-59"),
        ("{field: spec.x, between: '1'}", "between", "wants \"min,max\""),
        (
            "{field: spec.x, equals: '{{ .a | nosuch }}'}",
            "equals",
            "function \"nosuch\" not defined",
        ),
        ("{field: spec.x, operator: gt}", "value", "needs a value"),
        (
            "{field: spec.x, value: 1, equals: 1}",
            "value",
            "only used with `operator`",
        ),
        ("{cron: '* * * * *', duration: 5x}", "duration", "unknown unit"),
    ] {
        let err = Check::compile(&spec(text), Functions::builtin()).unwrap_err();
        assert_eq!(err.key, key, "{text}: {err:?}");
        assert!(err.message.contains(message), "{text}: {err:?}");
    }
    let err = Check::compile(&spec("{field: '{{ .a ', equals: 1}"), Functions::builtin()).unwrap_err();
    assert_eq!((err.key, err.offset), ("field", Some(0)));
    let check = Check::compile(&spec("{field: spec.x, regex: '(a'}"), Functions::builtin()).unwrap();
    assert!(check.invalid_regex().is_some());
}

fn arbitrary_condition() -> impl Strategy<Value = String> {
    let fields = prop::sample::select(vec![
        "spec.replicas",
        "spec.image",
        "spec.absent",
        "status.phase",
        "metrics.queueDepth",
    ]);
    let tests = prop::sample::select(vec![
        "equals: 3",
        "notEquals: Running",
        "contains: ngin",
        "greaterThan: 2",
        "lessThan: 50",
        "exists: true",
        "in: 'Running,3'",
        "between: '0,10'",
        "regex: '^[a-z]'",
        "prefix: n",
    ]);
    (fields, tests).prop_map(|(f, t)| format!("{{field: {f}, {t}}}"))
}

proptest! {
    #[test]
    fn negate_inverts_every_condition(condition in arbitrary_condition()) {
        let negated = format!("{}, negate: true}}", condition.trim_end_matches('}'));
        prop_assert_ne!(eval(&condition), eval(&negated));
    }

    #[test]
    fn when_is_conjunction_and_or_is_disjunction(a in arbitrary_condition(), b in arbitrary_condition()) {
        let r = resolver();
        let (sa, sb) = (spec(&a), spec(&b));
        let (pa, pb) = (eval(&a), eval(&b));
        let when = Conditions::compile(&[sa.clone(), sb.clone()], &[], Functions::builtin()).unwrap();
        let or = Conditions::compile(&[], &[sa.clone(), sb.clone()], Functions::builtin()).unwrap();
        let both = Conditions::compile(&[sa], &[sb], Functions::builtin()).unwrap();
        prop_assert_eq!(when.passes(&r, None), pa && pb);
        prop_assert_eq!(or.passes(&r, None), pa || pb);
        prop_assert_eq!(both.passes(&r, None), pa && pb);
    }
}
