//! Values a Katalog writes into an object (status fields, mutation rules): a template
//! evaluated to its declared type, set at a dotted path.

use crate::error::Error;
use serde_json::{Map, Value};

use orkestra_expr::condition::ValueType;
use orkestra_expr::resolver::Resolver;
use orkestra_expr::template::Template;

/// A template's value in its declared type, or why it has none (the template failed, or its
/// text does not convert).
pub fn typed(resolver: &Resolver<'_, '_>, template: &Template, value_type: ValueType) -> Result<Value, Error> {
    if value_type == ValueType::Auto {
        return resolver.evaluate(template).map_err(|e| Error::Typed(e.message));
    }
    let text = resolver.render(template).map_err(|e| Error::Typed(e.message))?;
    let value = match value_type {
        ValueType::String | ValueType::Auto => Some(Value::String(text.clone())),
        ValueType::Int => text.trim().parse::<i64>().ok().map(Value::from),
        ValueType::Float => text
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        ValueType::Bool => match text.trim() {
            "true" => Some(Value::Bool(true)),
            "false" | "" => Some(Value::Bool(false)),
            _ => None,
        },
    };
    value.ok_or_else(|| Error::Typed(format!("{text:?} does not convert to type {}", value_type.name())))
}

/// Sets `value` at `path` in `root`, creating (or replacing non-object) parents.
pub fn set_path(root: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = root;
    for segment in parents {
        if !current[segment.as_str()].is_object() {
            current[segment.as_str()] = Value::Object(Map::new());
        }
        current = &mut current[segment.as_str()];
    }
    current[last.as_str()] = value;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use orkestra_expr::template::Functions;

    fn eval(text: &str, value_type: ValueType) -> Result<Value, String> {
        let object = json!({"spec": {"replicas": 3, "name": "web"}});
        let template = Template::compile(text, Functions::builtin()).unwrap();
        typed(&Resolver::new(&object, &[]), &template, value_type).map_err(String::from)
    }

    #[test]
    fn converts_to_the_declared_type_or_says_why_not() {
        assert_eq!(eval("{{ .spec.replicas }}", ValueType::Int), Ok(json!(3)));
        assert_eq!(eval("{{ .spec.replicas }}", ValueType::String), Ok(json!("3")));
        assert_eq!(eval("true", ValueType::Bool), Ok(json!(true)));
        assert_eq!(
            eval("{{ .spec.name }}", ValueType::Int),
            Err("\"web\" does not convert to type int".into())
        );
        assert!(
            eval("{{ div 1 0 }}", ValueType::String).is_err(),
            "a failing template has no value"
        );
    }

    #[test]
    fn set_path_creates_parents_and_replaces_scalars() {
        let mut root = json!({"a": 1});
        set_path(&mut root, &["a".into(), "b".into()], json!(2));
        set_path(&mut root, &["c".into()], json!("x"));
        assert_eq!(root, json!({"a": {"b": 2}, "c": "x"}));
    }
}
