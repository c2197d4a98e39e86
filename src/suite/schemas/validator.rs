//! JSON Schema validation with the `jsonschema` crate (the
//! `schema-validation` feature): a tool's schemas compiled once, instances
//! checked against them.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::{Value, json};

use super::schema::{MAX_MESSAGE_LEN, MAX_REPORTED_ERRORS, truncate};

/// A compiled schema.
pub(crate) use jsonschema::Validator;

/// Compiles `schema` without ever letting a panic of the compiler out.
pub(crate) fn build(schema: &Value) -> Result<jsonschema::Validator, String> {
    catch_unwind(AssertUnwindSafe(|| jsonschema::validator_for(schema)))
        .map_err(|_| "the schema compiler panicked".to_owned())?
        .map_err(|e| e.to_string())
}

/// The first messages of `instance`'s errors against `validator`, as
/// `{instancePath, schemaPath, message}` objects (at most
/// [`MAX_REPORTED_ERRORS`], messages truncated), and the first message.
pub(crate) fn errors(validator: &jsonschema::Validator, instance: &Value) -> (Vec<Value>, String) {
    let mut out = Vec::new();
    let mut first = None;
    for error in validator.iter_errors(instance).take(MAX_REPORTED_ERRORS) {
        // Messages may quote the offending value: keep them short, so a huge
        // or secret value is not echoed back whole.
        let message = truncate(error.to_string(), MAX_MESSAGE_LEN);
        if first.is_none() {
            first = Some(message.clone());
        }
        out.push(json!({
            "instancePath": error.instance_path().as_str(),
            "schemaPath": error.schema_path().as_str(),
            "message": message,
        }));
    }
    (out, first.unwrap_or_else(|| "invalid".into()))
}
