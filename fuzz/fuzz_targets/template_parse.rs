//! Any text as a template: compiling (and rendering what compiles) must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use orkestra_expr::template::{Env, Functions, Template};

fuzz_target!(|data: &[u8]| {
    if let Ok(source) = std::str::from_utf8(data)
        && let Ok(template) = Template::compile(source, Functions::builtin())
    {
        let object = serde_json::json!({"metadata": {"name": "x"}, "spec": {"items": [1, 2, 3], "a": {"b": "c"}}});
        let _ = template.render(&Env::now(), &object);
    }
});
