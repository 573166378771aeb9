//! The operators a condition may name, and what each tests.

/// Every operator name the long form accepts, with its canonical meaning.
pub const OPERATORS: &[(&str, Op)] = &[
    ("equals", Op::Equals),
    ("eq", Op::Equals),
    ("==", Op::Equals),
    ("notEquals", Op::NotEquals),
    ("ne", Op::NotEquals),
    ("!=", Op::NotEquals),
    ("contains", Op::Contains),
    ("notContains", Op::NotContains),
    ("prefix", Op::Prefix),
    ("startsWith", Op::Prefix),
    ("notPrefix", Op::NotPrefix),
    ("suffix", Op::Suffix),
    ("endsWith", Op::Suffix),
    ("notSuffix", Op::NotSuffix),
    ("regex", Op::Regex),
    ("matches", Op::Regex),
    ("exists", Op::Exists),
    ("notExists", Op::NotExists),
    ("greaterThan", Op::Gt),
    ("gt", Op::Gt),
    (">", Op::Gt),
    ("lessThan", Op::Lt),
    ("lt", Op::Lt),
    ("<", Op::Lt),
    ("greaterThanOrEqual", Op::Gte),
    ("gte", Op::Gte),
    (">=", Op::Gte),
    ("min", Op::Gte),
    ("lessThanOrEqual", Op::Lte),
    ("lte", Op::Lte),
    ("<=", Op::Lte),
    ("max", Op::Lte),
    ("between", Op::Between),
    ("notBetween", Op::NotBetween),
    ("in", Op::In),
    ("notIn", Op::NotIn),
    ("unique", Op::Unique),
    ("typeOf", Op::TypeOf),
    ("typeMap", Op::TypeMap),
    ("typeList", Op::TypeList),
    ("typeString", Op::TypeString),
    ("typeNumber", Op::TypeNumber),
    ("typeBool", Op::TypeBool),
    ("typeNull", Op::TypeNull),
];

/// What a condition tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Equals,
    NotEquals,
    Contains,
    NotContains,
    Prefix,
    NotPrefix,
    Suffix,
    NotSuffix,
    Regex,
    Exists,
    NotExists,
    Gt,
    Lt,
    Gte,
    Lte,
    Between,
    NotBetween,
    In,
    NotIn,
    Unique,
    TypeOf,
    TypeMap,
    TypeList,
    TypeString,
    TypeNumber,
    TypeBool,
    TypeNull,
}

impl Op {
    /// Operators that take no value.
    pub(super) fn valueless(self) -> bool {
        matches!(
            self,
            Op::Exists
                | Op::NotExists
                | Op::TypeMap
                | Op::TypeList
                | Op::TypeString
                | Op::TypeNumber
                | Op::TypeBool
                | Op::TypeNull
                | Op::Unique
        )
    }
}

/// Looks up an operator name.
pub fn operator(name: &str) -> Option<Op> {
    OPERATORS.iter().find(|(n, _)| *n == name).map(|(_, op)| *op)
}
