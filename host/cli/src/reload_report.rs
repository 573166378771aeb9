//! What a reload did, told on the terminal: `ork reload`'s answer from a runtime, and in
//! `ork dev` each reload of a Katalog saved on disk.

use serde_json::Value;

/// Prints what a reload did (the Live API's answer to `POST /reload`, or the outcome of a
/// changed file's reload in `ork dev`), ending with `what` and whether it all applied.
pub fn print(body: &Value, ok: bool, what: &str) {
    for component in body["components"].as_array().into_iter().flatten() {
        println!(
            "{}: revision {} sha256 {} ({})",
            component["name"].as_str().unwrap_or_default(),
            component["revision"],
            component["digest"].as_str().unwrap_or("-"),
            component["source"].as_str().unwrap_or_default()
        );
    }
    for error in body["errors"].as_array().into_iter().flatten() {
        eprintln!("error: {}", error.as_str().unwrap_or_default());
    }
    let names = |key: &str| -> Vec<&str> {
        body[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    };
    for (key, said) in [
        ("started", "started (added to the Katalog)"),
        ("restarted", "restarted with its changed pipeline"),
        ("stopped", "stopped (removed from the Katalog)"),
    ] {
        for crd in names(key) {
            println!("CRD {crd}: {said}");
        }
    }
    for part in names("restartNeeded") {
        eprintln!("note: {part} changed; it applies at the next restart");
    }
    let changed = ["reloaded", "started", "restarted", "stopped"]
        .iter()
        .any(|key| !names(key).is_empty());
    println!(
        "{what}: {}",
        match (ok, changed) {
            (false, _) => "not everything reloaded; what ran before keeps running where it failed",
            (true, true) => "reloaded",
            (true, false) => "nothing changed",
        }
    );
}
