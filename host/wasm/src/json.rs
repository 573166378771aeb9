//! JSON text for a call: the CR and the context, as the guest receives them.

use serde_json::Value;

/// `value` as compact JSON text, through serde_json's writer into one buffer: `Display`
/// goes through the formatter a few bytes at a time, about 2.5 times slower on a 4 KB CR.
pub fn json_text(value: &Value) -> String {
    // Serializing a Value cannot fail (its keys are strings); the fallback only keeps this
    // total.
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}
