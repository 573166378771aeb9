//! Conditions as written in a Katalog (`when:` / `or:` entries). The same fields serve
//! every feature that has conditions; validation rules add their own next to them.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// How a condition reads values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ValueType {
    /// Compare as text (the default).
    #[default]
    #[serde(alias = "str")]
    String,
    #[serde(alias = "integer")]
    Int,
    #[serde(alias = "number")]
    Float,
    #[serde(alias = "boolean")]
    Bool,
    /// Keep the value's own type (status fields).
    Auto,
}

impl ValueType {
    /// The name a Katalog writes (`type: int`).
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::Int => "int",
            ValueType::Float => "float",
            ValueType::Bool => "bool",
            ValueType::Auto => "auto",
        }
    }
}

/// `time: {after, before}`: now (UTC) is after `after` and before `before` (`HH:MM`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TimeSpec {
    #[serde(default)]
    pub after: Option<String>,
    #[serde(default)]
    pub before: Option<String>,
}

/// `dayOfWeek`: exactly one of the four.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DayOfWeekSpec {
    #[serde(default)]
    pub weekday: Option<bool>,
    #[serde(default)]
    pub weekend: Option<bool>,
    #[serde(default, rename = "in")]
    pub in_: Option<Vec<String>>,
    #[serde(default)]
    pub not_in: Option<Vec<String>>,
}

/// A list written either as `"a,b"` or as a YAML list.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ListValue(pub Vec<String>);

impl<'de> Deserialize<'de> for ListValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor;
        impl<'de> Visitor<'de> for ListVisitor {
            type Value = ListValue;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a comma-separated string or a list")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ListValue, E> {
                Ok(ListValue(v.split(',').map(|s| s.trim().to_string()).collect()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ListValue, E> {
                Ok(ListValue(vec![v.to_string()]))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ListValue, E> {
                Ok(ListValue(vec![v.to_string()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ListValue, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    items.push(item);
                }
                Ok(ListValue(items))
            }
        }
        deserializer.deserialize_any(ListVisitor)
    }
}

/// Declares a struct holding every condition field plus its own, and a `condition()` view.
#[macro_export]
macro_rules! with_condition_fields {
    (
        $(#[$meta:meta])*
        pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident : $ty:ty,)* }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize, PartialEq)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
            /// A dot path into the resolver (`spec.replicas`, `metrics.queueDepth`) or a
            /// template (`"{{ jobSucceeded .children.job }}"`) whose rendered text is tested.
            #[serde(default)]
            pub field: Option<String>,
            /// The long form: an operator name, with `value`.
            #[serde(default)]
            pub operator: Option<String>,
            /// The operand of `operator` (templated).
            #[serde(default)]
            pub value: Option<String>,
            /// How values compare: string (default), int, float or bool.
            #[serde(default)]
            pub value_type: Option<$crate::condition::ValueType>,
            #[serde(default)]
            pub equals: Option<String>,
            #[serde(default)]
            pub not_equals: Option<String>,
            #[serde(default)]
            pub contains: Option<String>,
            #[serde(default)]
            pub not_contains: Option<String>,
            #[serde(default)]
            pub prefix: Option<String>,
            #[serde(default)]
            pub not_prefix: Option<String>,
            #[serde(default)]
            pub suffix: Option<String>,
            #[serde(default)]
            pub not_suffix: Option<String>,
            /// An RE2-style pattern; an invalid pattern never matches.
            #[serde(default)]
            pub regex: Option<String>,
            #[serde(default)]
            pub exists: Option<bool>,
            #[serde(default)]
            pub not_exists: Option<bool>,
            #[serde(default)]
            pub greater_than: Option<String>,
            #[serde(default)]
            pub less_than: Option<String>,
            #[serde(default)]
            pub greater_than_or_equal: Option<String>,
            #[serde(default)]
            pub min: Option<String>,
            #[serde(default)]
            pub less_than_or_equal: Option<String>,
            #[serde(default)]
            pub max: Option<String>,
            /// `"min,max"`, inclusive.
            #[serde(default)]
            pub between: Option<$crate::condition::ListValue>,
            #[serde(default)]
            pub not_between: Option<$crate::condition::ListValue>,
            /// `"a,b"`: the field is one of these (an empty element matches an empty field).
            #[serde(default, rename = "in")]
            pub in_: Option<$crate::condition::ListValue>,
            #[serde(default)]
            pub not_in: Option<$crate::condition::ListValue>,
            /// Time of day window (no `field`).
            #[serde(default)]
            pub time: Option<$crate::condition::TimeSpec>,
            /// Day of week (no `field`).
            #[serde(default)]
            pub day_of_week: Option<$crate::condition::DayOfWeekSpec>,
            /// A cron schedule (no `field`): true for `duration` after each firing.
            #[serde(default)]
            pub cron: Option<String>,
            /// How long a cron window stays open (default 60s).
            #[serde(default)]
            pub duration: Option<String>,
            /// Inverts the result.
            #[serde(default)]
            pub negate: bool,
            /// Teams to notify while the condition holds (accepted; delivery arrives with the gateway).
            #[serde(default)]
            pub notify: Option<serde_json::Value>,
            /// HTTP fallback for cross metrics of a CRD in another runtime (accepted; used by cross reads).
            #[serde(default)]
            pub source: Option<serde_json::Value>,
        }

        impl $name {
            /// The condition part of this entry.
            pub fn condition(&self) -> $crate::condition::ConditionSpec {
                $crate::condition::ConditionSpec {
                    field: self.field.clone(),
                    operator: self.operator.clone(),
                    value: self.value.clone(),
                    value_type: self.value_type,
                    equals: self.equals.clone(),
                    not_equals: self.not_equals.clone(),
                    contains: self.contains.clone(),
                    not_contains: self.not_contains.clone(),
                    prefix: self.prefix.clone(),
                    not_prefix: self.not_prefix.clone(),
                    suffix: self.suffix.clone(),
                    not_suffix: self.not_suffix.clone(),
                    regex: self.regex.clone(),
                    exists: self.exists,
                    not_exists: self.not_exists,
                    greater_than: self.greater_than.clone(),
                    less_than: self.less_than.clone(),
                    greater_than_or_equal: self.greater_than_or_equal.clone(),
                    min: self.min.clone(),
                    less_than_or_equal: self.less_than_or_equal.clone(),
                    max: self.max.clone(),
                    between: self.between.clone(),
                    not_between: self.not_between.clone(),
                    in_: self.in_.clone(),
                    not_in: self.not_in.clone(),
                    time: self.time.clone(),
                    day_of_week: self.day_of_week.clone(),
                    cron: self.cron.clone(),
                    duration: self.duration.clone(),
                    negate: self.negate,
                    notify: self.notify.clone(),
                    source: self.source.clone(),
                }
            }
        }
    };
}

with_condition_fields! {
    /// One condition.
    pub struct ConditionSpec {}
}

/// `when:` (all must pass) and `or:` (at least one must pass); with both, both must pass.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConditionsSpec {
    #[serde(default)]
    pub when: Vec<ConditionSpec>,
    #[serde(default)]
    pub or: Vec<ConditionSpec>,
}
