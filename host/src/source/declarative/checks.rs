//! Checks of a declarative file's values (URLs, headers, authentication,
//! timeouts), and each parameter's JSON Schema.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::file::{Auth, Parameter, TYPES};
use crate::contract::spec::is_valid_env_name;
use crate::policy::parse_duration;

/// `{name}` placeholders in a URL template.
pub(super) fn placeholders(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = url;
    while let Some(start) = rest.find('{') {
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        found.push(rest[start + 1..start + end].to_string());
        rest = &rest[start + end + 1..];
    }
    found
}

pub(super) fn check_url(url: &str, key: &str, problem: &mut impl FnMut(String, String)) {
    let concrete: String = {
        let mut text = url.to_string();
        for placeholder in placeholders(url) {
            text = text.replace(&format!("{{{placeholder}}}"), "x");
        }
        text
    };
    match reqwest::Url::parse(&concrete) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => {}
        Ok(parsed) => problem(
            key.into(),
            format!(
                "{url:?} must be an http:// or https:// URL with a host (scheme {:?})",
                parsed.scheme()
            ),
        ),
        Err(e) => problem(key.into(), format!("{url:?} is not a valid URL: {e}")),
    }
}

pub(super) fn check_headers(
    headers: &BTreeMap<String, String>,
    key: &str,
    problem: &mut impl FnMut(String, String),
) {
    for (name, value) in headers {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            problem(format!("{key}.{name}"), "is not a valid header name".into());
        } else if reqwest::header::HeaderValue::from_str(value).is_err() {
            problem(
                format!("{key}.{name}"),
                "is not a valid header value (control characters?)".into(),
            );
        }
    }
}

pub(super) fn check_auth(auth: &Auth, key: &str, problem: &mut impl FnMut(String, String)) {
    let mut need = |field: &str, value: &Option<String>| match value {
        None => problem(
            format!("{key}.{field}"),
            format!("is required for {:?} authentication", auth.kind),
        ),
        Some(name) if !is_valid_env_name(name) => problem(
            format!("{key}.{field}"),
            format!("{name:?} is not an environment variable name"),
        ),
        Some(_) => {}
    };
    match auth.kind.as_str() {
        "bearer" => need("env", &auth.env),
        "basic" => {
            need("username_env", &auth.username_env);
            need("password_env", &auth.password_env);
        }
        "header" => {
            need("env", &auth.env);
            match &auth.name {
                Some(name) if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok() => {}
                Some(name) => problem(
                    format!("{key}.name"),
                    format!("{name:?} is not a valid header name"),
                ),
                None => problem(
                    format!("{key}.name"),
                    "is required for \"header\" authentication: the header to send".into(),
                ),
            }
        }
        other => problem(
            format!("{key}.type"),
            format!("{other:?} is not an authentication type: use bearer, basic or header"),
        ),
    }
}

pub(super) fn auth_env(auth: &Auth) -> Vec<String> {
    [&auth.env, &auth.username_env, &auth.password_env]
        .into_iter()
        .flatten()
        .cloned()
        .collect()
}

pub(super) fn auth_json(auth: &Auth) -> Value {
    match auth.kind.as_str() {
        "basic" => json!({
            "type": "basic",
            "username_env": auth.username_env,
            "password_env": auth.password_env,
        }),
        "header" => json!({ "type": "header", "name": auth.name, "env": auth.env }),
        _ => json!({ "type": "bearer", "env": auth.env }),
    }
}

pub(super) fn check_timeout(
    text: &str,
    key: &str,
    problem: &mut impl FnMut(String, String),
) -> Option<Duration> {
    match parse_duration(text) {
        Ok(timeout) => Some(timeout),
        Err(e) => {
            problem(key.into(), e);
            None
        }
    }
}

/// The JSON Schema of one parameter, or `None` after reporting problems.
pub(super) fn parameter_schema(
    parameter: &Parameter,
    key: &str,
    problem: &mut impl FnMut(String, String),
) -> Option<Value> {
    let mut ok = true;
    if !TYPES.contains(&parameter.ty.as_str()) {
        problem(
            format!("{key}.type"),
            format!(
                "{:?} is not a type: use one of {}",
                parameter.ty,
                TYPES.join(", ")
            ),
        );
        return None;
    }
    let mut schema = json!({ "type": parameter.ty });
    if let Some(description) = &parameter.description {
        schema["description"] = Value::String(description.clone());
    }
    match (&parameter.items, parameter.ty.as_str()) {
        (Some(items), "array") if TYPES.contains(&items.as_str()) => {
            schema["items"] = json!({ "type": items });
        }
        (Some(items), "array") => {
            problem(
                format!("{key}.items"),
                format!("{items:?} is not a type: use one of {}", TYPES.join(", ")),
            );
            ok = false;
        }
        (Some(_), _) => {
            problem(
                format!("{key}.items"),
                "applies only to parameters of type \"array\"".into(),
            );
            ok = false;
        }
        (None, _) => {}
    }
    if let Some(values) = &parameter.values {
        if values.is_empty() {
            problem(format!("{key}.enum"), "must list at least one value".into());
            ok = false;
        }
        let values: Vec<Value> = values.iter().map(to_json).collect();
        for value in &values {
            if !has_type(value, &parameter.ty) {
                problem(
                    format!("{key}.enum"),
                    format!("{value} is not of type {}", parameter.ty),
                );
                ok = false;
            }
        }
        schema["enum"] = Value::Array(values);
    }
    if let Some(default) = &parameter.default {
        let default = to_json(default);
        if !has_type(&default, &parameter.ty) {
            problem(
                format!("{key}.default"),
                format!("{default} is not of type {}", parameter.ty),
            );
            ok = false;
        } else if schema
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|values| !values.contains(&default))
        {
            problem(
                format!("{key}.default"),
                format!("{default} is not one of the enum values"),
            );
            ok = false;
        }
        if parameter.required {
            problem(
                format!("{key}.default"),
                "a required parameter never uses its default; drop one of them".into(),
            );
            ok = false;
        }
        schema["default"] = default;
    }
    ok.then_some(schema)
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        _ => value.is_object(),
    }
}

pub(super) fn to_json(value: &toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) => json!(f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.iter().map(to_json).collect()),
        toml::Value::Table(table) => {
            Value::Object(table.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
    }
}
