//! The one condition evaluator: condition specs are compiled once at load (templates
//! parsed, operators resolved, regexes built) and evaluated against a [`Resolver`] by every
//! gate, resource `when`, status field, validation rule and autoscaler.
//!
//! Semantics: `when` = all pass, `or` = at least one passes, both present = both hold; an
//! empty list passes. Numeric comparisons read an absent field as 0; a non-number does not
//! compare (false, so `negate` turns it true), and an invalid regex never matches. Only a
//! template that fails to evaluate makes a condition false whatever its `negate`.
//!
//! Pure: no kube or wasmtime imports.

mod op;
mod spec;

use regex::Regex;
use serde_json::Value;

pub use op::{OPERATORS, Op, operator};
pub use spec::{ConditionSpec, ConditionsSpec, DayOfWeekSpec, ListValue, TimeSpec, ValueType};

use crate::calendar;
use crate::cron::Schedule;
use crate::resolver::Resolver;
use crate::template::value::{as_f64, display};
use crate::template::{Functions, ParseError, Template};

/// Answers `operator: unique`: is `value` unused at `field` by every other CR of the CRD?
pub trait Uniqueness {
    fn is_unique(&self, field: &str, value: &str) -> bool;
}

/// A compile error: which key of the condition and what is wrong (with the byte offset in
/// that key's template, when it is a template error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    pub key: &'static str,
    pub message: String,
    pub offset: Option<usize>,
}

impl CompileError {
    fn new(key: &'static str, message: impl Into<String>) -> Self {
        Self {
            key,
            message: message.into(),
            offset: None,
        }
    }

    fn template(key: &'static str, error: ParseError) -> Self {
        Self {
            key,
            message: error.message,
            offset: Some(error.offset),
        }
    }
}

#[derive(Debug, Clone)]
enum Subject {
    Path(String),
    Template(Template),
    Time { after: Option<u32>, before: Option<u32> },
    Days(DaySet),
    Cron { schedule: Box<Schedule>, open_seconds: i64 },
}

#[derive(Debug, Clone)]
enum DaySet {
    Weekday(bool),
    Weekend(bool),
    In(Vec<&'static str>),
    NotIn(Vec<&'static str>),
}

#[derive(Debug, Clone)]
enum Operand {
    None,
    One(Template),
    List(Vec<Template>),
}

/// A compiled condition.
#[derive(Debug, Clone)]
pub struct Check {
    subject: Subject,
    op: Option<Op>,
    operand: Operand,
    /// A literal regex compiled at load; `Err` keeps an invalid literal (evaluates false).
    regex: Option<Result<Regex, String>>,
    value_type: ValueType,
    negate: bool,
}

/// Compiled `when` and `or` lists.
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    pub when: Vec<Check>,
    pub or: Vec<Check>,
}

impl Conditions {
    /// Compiles both lists; errors carry `when[i]` / `or[i]` and the key.
    pub fn compile(
        when: &[ConditionSpec],
        or: &[ConditionSpec],
        functions: &Functions,
    ) -> Result<Self, (String, CompileError)> {
        let compile_all = |list: &[ConditionSpec], name: &str| {
            list.iter()
                .enumerate()
                .map(|(i, spec)| Check::compile(spec, functions).map_err(|e| (format!("{name}[{i}]"), e)))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            when: compile_all(when, "when")?,
            or: compile_all(or, "or")?,
        })
    }

    /// True when there is nothing to check.
    pub fn is_empty(&self) -> bool {
        self.when.is_empty() && self.or.is_empty()
    }

    /// `when` all pass and (`or` empty or any passes).
    pub fn passes(&self, resolver: &Resolver<'_, '_>, unique: Option<&dyn Uniqueness>) -> bool {
        self.when.iter().all(|c| c.passes(resolver, unique))
            && (self.or.is_empty() || self.or.iter().any(|c| c.passes(resolver, unique)))
    }
}

fn compile_template(key: &'static str, text: &str, functions: &Functions) -> Result<Template, CompileError> {
    Template::compile(text, functions).map_err(|e| CompileError::template(key, e))
}

impl Check {
    /// Compiles one condition.
    pub fn compile(spec: &ConditionSpec, functions: &Functions) -> Result<Self, CompileError> {
        let shorthands: [(&'static str, Op, Option<&String>); 16] = [
            ("equals", Op::Equals, spec.equals.as_ref()),
            ("notEquals", Op::NotEquals, spec.not_equals.as_ref()),
            ("contains", Op::Contains, spec.contains.as_ref()),
            ("notContains", Op::NotContains, spec.not_contains.as_ref()),
            ("prefix", Op::Prefix, spec.prefix.as_ref()),
            ("notPrefix", Op::NotPrefix, spec.not_prefix.as_ref()),
            ("suffix", Op::Suffix, spec.suffix.as_ref()),
            ("notSuffix", Op::NotSuffix, spec.not_suffix.as_ref()),
            ("regex", Op::Regex, spec.regex.as_ref()),
            ("greaterThan", Op::Gt, spec.greater_than.as_ref()),
            ("lessThan", Op::Lt, spec.less_than.as_ref()),
            ("greaterThanOrEqual", Op::Gte, spec.greater_than_or_equal.as_ref()),
            ("min", Op::Gte, spec.min.as_ref()),
            ("lessThanOrEqual", Op::Lte, spec.less_than_or_equal.as_ref()),
            ("max", Op::Lte, spec.max.as_ref()),
            ("operator", Op::Equals, spec.operator.as_ref()),
        ];
        let lists: [(&'static str, Op, Option<&ListValue>); 4] = [
            ("between", Op::Between, spec.between.as_ref()),
            ("notBetween", Op::NotBetween, spec.not_between.as_ref()),
            ("in", Op::In, spec.in_.as_ref()),
            ("notIn", Op::NotIn, spec.not_in.as_ref()),
        ];
        let flags = [
            ("exists", Op::Exists, spec.exists),
            ("notExists", Op::NotExists, spec.not_exists),
        ];

        let mut chosen: Vec<&'static str> = Vec::new();
        let mut op = None;
        let mut operand = Operand::None;
        for (key, shorthand_op, value) in shorthands {
            let Some(value) = value else { continue };
            chosen.push(key);
            if key == "operator" {
                let named = operator(value).ok_or_else(|| {
                    let names: Vec<&str> = OPERATORS.iter().map(|(n, _)| *n).collect();
                    let best = crate::text::closest(value, &names).unwrap_or_default();
                    CompileError::new(
                        "operator",
                        format!("unknown operator {value:?}; the closest is {best:?}"),
                    )
                })?;
                op = Some(named);
                operand = match (&spec.value, named) {
                    (_, Op::Between | Op::NotBetween | Op::In | Op::NotIn) => {
                        let text = spec.value.clone().unwrap_or_default();
                        let items: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
                        Operand::List(
                            items
                                .iter()
                                .map(|i| compile_template("value", i, functions))
                                .collect::<Result<_, _>>()?,
                        )
                    }
                    (Some(v), _) => Operand::One(compile_template("value", v, functions)?),
                    (None, op) if op.valueless() => Operand::None,
                    (None, _) => return Err(CompileError::new("value", format!("operator {value:?} needs a value"))),
                };
            } else {
                op = Some(shorthand_op);
                operand = Operand::One(compile_template(key, value, functions)?);
            }
        }
        if spec.operator.is_none() && spec.value.is_some() {
            return Err(CompileError::new("value", "`value` is only used with `operator`"));
        }
        for (key, list_op, list) in lists {
            let Some(list) = list else { continue };
            chosen.push(key);
            if matches!(list_op, Op::Between | Op::NotBetween) && list.0.len() != 2 {
                return Err(CompileError::new(
                    key,
                    format!("{key} wants \"min,max\", got {} value(s)", list.0.len()),
                ));
            }
            op = Some(list_op);
            operand = Operand::List(
                list.0
                    .iter()
                    .map(|i| compile_template(key, i, functions))
                    .collect::<Result<_, _>>()?,
            );
        }
        for (key, flag_op, flag) in flags {
            let Some(flag) = flag else { continue };
            chosen.push(key);
            // `exists: false` means the same as `notExists: true`.
            op = Some(match (flag_op, flag) {
                (Op::Exists, false) => Op::NotExists,
                (Op::NotExists, false) => Op::Exists,
                (op, _) => op,
            });
        }

        let time_kinds: Vec<&'static str> = [
            ("time", spec.time.is_some()),
            ("dayOfWeek", spec.day_of_week.is_some()),
            ("cron", spec.cron.is_some()),
        ]
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(k, _)| k)
        .collect();
        let subject = match (&spec.field, time_kinds.as_slice()) {
            (Some(_), [kind, ..]) => {
                return Err(CompileError::new(kind, format!("`{kind}` conditions have no `field`")));
            }
            (None, [_, second, ..]) => {
                return Err(CompileError::new(
                    second,
                    "use one of `time`, `dayOfWeek` and `cron` per condition",
                ));
            }
            (Some(field), []) => {
                if field.contains("{{") {
                    Subject::Template(compile_template("field", field, functions)?)
                } else {
                    Subject::Path(field.trim_start_matches('.').to_string())
                }
            }
            (None, ["time"]) => time_subject(spec.time.as_ref())?,
            (None, ["dayOfWeek"]) => days_subject(spec.day_of_week.as_ref())?,
            (None, _) if spec.cron.is_some() => {
                let expr = spec.cron.as_deref().unwrap_or_default();
                let schedule = Schedule::parse(expr).map_err(|e| CompileError::new("cron", e))?;
                let open = match &spec.duration {
                    Some(d) => crate::duration::parse(d)
                        .map_err(|e| CompileError::new("duration", e))?
                        .as_secs(),
                    None => 60,
                };
                Subject::Cron {
                    schedule: Box::new(schedule),
                    open_seconds: i64::try_from(open).unwrap_or(i64::MAX),
                }
            }
            (None, _) => {
                return Err(CompileError::new(
                    "field",
                    "a condition needs `field` (or one of `time`, `dayOfWeek`, `cron`)",
                ));
            }
        };
        let is_time = !matches!(subject, Subject::Path(_) | Subject::Template(_));
        match (chosen.as_slice(), is_time) {
            ([], false) => {
                return Err(CompileError::new(
                    "field",
                    "the condition has a field but no test: add an operator or a shorthand such as equals, exists or in",
                ));
            }
            ([_, second, ..], _) => {
                return Err(CompileError::new(
                    second,
                    format!("use one test per condition, found {}", chosen.join(" and ")),
                ));
            }
            ([key], true) => {
                return Err(CompileError::new(
                    key,
                    format!("`{key}` cannot be combined with a time condition"),
                ));
            }
            _ => {}
        }
        if spec.duration.is_some() && spec.cron.is_none() {
            return Err(CompileError::new(
                "duration",
                "`duration` belongs to a `cron` condition",
            ));
        }
        let regex = match (op, &operand) {
            (Some(Op::Regex), Operand::One(t)) if t.is_literal() => {
                Some(Regex::new(t.source()).map_err(|e| e.to_string()))
            }
            _ => None,
        };
        Ok(Self {
            subject,
            op,
            operand,
            regex,
            value_type: spec.value_type.unwrap_or_default(),
            negate: spec.negate,
        })
    }

    /// Whether a literal regex failed to compile (for a validation warning).
    pub fn invalid_regex(&self) -> Option<&str> {
        match &self.regex {
            Some(Err(e)) => Some(e),
            _ => None,
        }
    }

    /// Evaluates the condition.
    pub fn passes(&self, resolver: &Resolver<'_, '_>, unique: Option<&dyn Uniqueness>) -> bool {
        match self.test(resolver, unique) {
            Some(result) => result != self.negate,
            None => false,
        }
    }

    /// The raw test result before `negate`; `None` when it could not be evaluated.
    fn test(&self, resolver: &Resolver<'_, '_>, unique: Option<&dyn Uniqueness>) -> Option<bool> {
        let now = resolver.now();
        let rendered;
        let field: Option<&Value> = match &self.subject {
            Subject::Path(path) => resolver.lookup(path),
            Subject::Template(template) => {
                rendered = Value::String(resolver.render(template).ok()?);
                Some(&rendered).filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            }
            Subject::Time { after, before } => {
                let start = after.unwrap_or(0);
                let end = before.unwrap_or(24 * 60);
                return Some(calendar::in_clock_window(now, start, end));
            }
            Subject::Days(days) => {
                let today = calendar::day_name(now);
                return Some(match days {
                    DaySet::Weekday(want) => calendar::is_weekday(now) == *want,
                    DaySet::Weekend(want) => calendar::is_weekday(now) != *want,
                    DaySet::In(list) => list.contains(&today),
                    DaySet::NotIn(list) => !list.contains(&today),
                });
            }
            Subject::Cron { schedule, open_seconds } => {
                let last = schedule.previous_at_or_before(now)?;
                return Some(now.as_second() - last.as_second() < *open_seconds);
            }
        };
        let op = self.op?;
        let render = |t: &Template| resolver.render(t).ok();
        Some(match op {
            Op::Exists => field.is_some_and(|v| !v.is_null()),
            Op::NotExists => field.is_none_or(Value::is_null),
            Op::TypeMap => field.is_some_and(Value::is_object),
            Op::TypeList => field.is_some_and(Value::is_array),
            Op::TypeString => field.is_some_and(Value::is_string),
            Op::TypeNumber => field.is_some_and(Value::is_number),
            Op::TypeBool => field.is_some_and(Value::is_boolean),
            Op::TypeNull => field.is_none_or(Value::is_null),
            Op::Unique => {
                let Subject::Path(path) = &self.subject else {
                    return Some(true);
                };
                let value = field.map(|v| display(v).into_owned()).unwrap_or_default();
                unique.is_none_or(|u| u.is_unique(path, &value))
            }
            Op::TypeOf => {
                let Operand::One(t) = &self.operand else { return None };
                let want = render(t)?;
                let kind = field.map_or("null", crate::template::value::kind);
                want == kind
                    || (want == "number" && matches!(kind, "int" | "float"))
                    || (want == "nil" && kind == "null")
            }
            Op::Equals | Op::NotEquals => {
                let Operand::One(t) = &self.operand else { return None };
                // Values that do not read as the value type are simply not equal.
                let equal = self.equal(field, &render(t)?).unwrap_or(false);
                equal == (op == Op::Equals)
            }
            Op::Contains | Op::NotContains => {
                let Operand::One(t) = &self.operand else { return None };
                let needle = render(t)?;
                let found = match field {
                    Some(Value::Array(items)) => items.iter().any(|i| display(i) == needle),
                    Some(v) => display(v).contains(&needle),
                    None => false,
                };
                found == (op == Op::Contains)
            }
            Op::Prefix | Op::NotPrefix | Op::Suffix | Op::NotSuffix => {
                let Operand::One(t) = &self.operand else { return None };
                let affix = render(t)?;
                let text = field.map(|v| display(v).into_owned()).unwrap_or_default();
                match op {
                    Op::Prefix => text.starts_with(&affix),
                    Op::NotPrefix => !text.starts_with(&affix),
                    Op::Suffix => text.ends_with(&affix),
                    _ => !text.ends_with(&affix),
                }
            }
            Op::Regex => {
                let Operand::One(t) = &self.operand else { return None };
                let text = field.map(|v| display(v).into_owned()).unwrap_or_default();
                match &self.regex {
                    Some(Ok(re)) => re.is_match(&text),
                    Some(Err(_)) => false,
                    None => Regex::new(&render(t)?).is_ok_and(|re| re.is_match(&text)),
                }
            }
            Op::Gt | Op::Lt | Op::Gte | Op::Lte => {
                let Operand::One(t) = &self.operand else { return None };
                let y = render(t)?.trim().parse::<f64>().ok();
                let (Some(x), Some(y)) = (number(field), y) else {
                    return Some(false);
                };
                match op {
                    Op::Gt => x > y,
                    Op::Lt => x < y,
                    Op::Gte => x >= y,
                    _ => x <= y,
                }
            }
            Op::Between | Op::NotBetween => {
                let Operand::List(bounds) = &self.operand else {
                    return None;
                };
                let lo = render(&bounds[0])?.trim().parse::<f64>().ok();
                let hi = render(&bounds[1])?.trim().parse::<f64>().ok();
                let (Some(x), Some(lo), Some(hi)) = (number(field), lo, hi) else {
                    return Some(false);
                };
                (lo <= x && x <= hi) == (op == Op::Between)
            }
            Op::In | Op::NotIn => {
                let Operand::List(items) = &self.operand else {
                    return None;
                };
                let text = field.map(|v| display(v).into_owned()).unwrap_or_default();
                let mut found = false;
                for item in items {
                    if render(item)? == text {
                        found = true;
                        break;
                    }
                }
                found == (op == Op::In)
            }
        })
    }

    /// Equality by value type; `None` when a numeric or boolean side does not parse.
    fn equal(&self, field: Option<&Value>, want: &str) -> Option<bool> {
        match self.value_type {
            ValueType::String | ValueType::Auto => {
                Some(field.map(|v| display(v).into_owned()).unwrap_or_default() == want)
            }
            ValueType::Int | ValueType::Float => {
                let x = number(field)?;
                let y: f64 = want.trim().parse().ok()?;
                Some(x == y)
            }
            ValueType::Bool => {
                let parse = |text: &str| match text.trim().to_ascii_lowercase().as_str() {
                    "true" => Some(true),
                    "false" | "" => Some(false),
                    _ => None,
                };
                let x = parse(&field.map(|v| display(v).into_owned()).unwrap_or_default())?;
                Some(x == parse(want)?)
            }
        }
    }
}

/// A field as a number: absent is 0, a non-number is `None`.
fn number(field: Option<&Value>) -> Option<f64> {
    match field {
        None | Some(Value::Null) => Some(0.0),
        Some(v) => as_f64(v),
    }
}

fn time_subject(spec: Option<&TimeSpec>) -> Result<Subject, CompileError> {
    let spec = spec.cloned().unwrap_or_default();
    let parse = |key: &'static str, text: &Option<String>| {
        text.as_deref()
            .map(|t| calendar::clock_minutes(t).map_err(|e| CompileError::new(key, e)))
            .transpose()
    };
    let (after, before) = (parse("time", &spec.after)?, parse("time", &spec.before)?);
    if after.is_none() && before.is_none() {
        return Err(CompileError::new(
            "time",
            "`time` needs `after`, `before` or both (HH:MM, UTC)",
        ));
    }
    Ok(Subject::Time { after, before })
}

fn days_subject(spec: Option<&DayOfWeekSpec>) -> Result<Subject, CompileError> {
    let spec = spec.cloned().unwrap_or_default();
    let names = |list: &[String]| {
        list.iter()
            .map(|d| calendar::parse_day(d).ok_or_else(|| CompileError::new("dayOfWeek", format!("unknown day {d:?}"))))
            .collect::<Result<Vec<_>, _>>()
    };
    let set: Vec<DaySet> = [
        spec.weekday.map(|w| Ok(DaySet::Weekday(w))),
        spec.weekend.map(|w| Ok(DaySet::Weekend(w))),
        spec.in_.as_deref().map(|l| names(l).map(DaySet::In)),
        spec.not_in.as_deref().map(|l| names(l).map(DaySet::NotIn)),
    ]
    .into_iter()
    .flatten()
    .collect::<Result<_, _>>()?;
    match set.len() {
        1 => Ok(Subject::Days(set.into_iter().next().unwrap_or(DaySet::Weekday(true)))),
        _ => Err(CompileError::new(
            "dayOfWeek",
            "`dayOfWeek` needs exactly one of weekday, weekend, in, notIn",
        )),
    }
}
