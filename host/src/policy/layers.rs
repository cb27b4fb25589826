//! The parameter layer of a profile: restrictions on a tool's arguments by
//! JSON pointer (globs, a regular expression, a set of
//! values, a numeric range), checked before the call. Globs written as URLs
//! take canonical URLs only; on a tool that declares file permissions the
//! other globs are path rules, checked here on the path resolved in the
//! workspace and enforced by the file capability on every path the call
//! touches (see [`super::confinement::Confinement`]).

use std::fmt;
use std::path::Path;

use serde_json::Value;

use super::{canonical, confinement, lexical};

/// What a rule knows of the call it checks.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    /// The workspace relative paths resolve in.
    pub workspace: &'a Path,
    /// The tool declares file permissions: its glob rules are path rules.
    pub files: bool,
}

/// One restriction on the values at a JSON pointer of a tool's arguments.
#[derive(Debug, Clone)]
pub struct ArgumentRule {
    /// The config key it was written at, named in refusals.
    pub key: String,
    /// The JSON pointer; a `*` segment stands for every item or member.
    pub pointer: String,
    /// What the values must be.
    pub matcher: Matcher,
}

/// What an argument's value must be.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// A string matching one of these `*` globs.
    Globs(Vec<String>),
    /// A string the expression matches as a whole.
    Regex(regex::Regex),
    /// One of these values.
    OneOf(Vec<Value>),
    /// A number within the range (inclusive).
    Range {
        /// Lowest allowed.
        min: Option<f64>,
        /// Highest allowed.
        max: Option<f64>,
    },
}

impl Matcher {
    /// A regular expression that must match the whole value.
    pub fn regex(expression: &str) -> Result<Self, String> {
        regex::RegexBuilder::new(&format!("^(?:{expression})$"))
            .size_limit(1 << 20)
            .build()
            .map(Self::Regex)
            .map_err(|e| format!("invalid regular expression {expression:?}: {e}"))
    }

    /// Whether the globs are a path rule in `context`: not URLs, on a tool
    /// that declares file permissions.
    pub fn is_path_rule(&self, files: bool) -> bool {
        matches!(self, Self::Globs(globs) if files && !globs.iter().any(|g| canonical::is_url_glob(g)))
    }

    /// Why `value` does not pass, if it does not.
    fn refuses(&self, value: &Value, context: &CallContext<'_>) -> Option<String> {
        match self {
            Self::Globs(globs) => {
                let Some(text) = value.as_str() else {
                    return Some("the rule takes strings and this is not one".into());
                };
                if globs.iter().any(|g| canonical::is_url_glob(g))
                    && let Err(why) = canonical::canonical_url(text)
                {
                    return Some(why);
                }
                if self.is_path_rule(context.files) {
                    return (!confinement::value_allowed(text, globs, context.workspace)).then(
                        || {
                            let resolved = lexical::normalize(&context.workspace.join(text));
                            format!(
                                "resolved in the workspace it is {resolved:?}, which matches none \
                             of {globs:?}"
                            )
                        },
                    );
                }
                if globs.iter().any(|g| canonical::glob_matches(g, text)) {
                    None
                } else {
                    Some(format!("it matches none of {globs:?}"))
                }
            }
            Self::Regex(regex) => match value.as_str() {
                Some(text) if regex.is_match(text) => None,
                Some(_) => Some(format!(
                    "it does not match the expression {:?}",
                    written(regex)
                )),
                None => Some("the rule takes strings and this is not one".into()),
            },
            Self::OneOf(values) => {
                if values.contains(value) {
                    None
                } else {
                    let listed: Vec<String> = values.iter().map(Value::to_string).collect();
                    Some(format!("it is none of [{}]", listed.join(", ")))
                }
            }
            Self::Range { min, max } => match value.as_f64() {
                Some(n) if min.is_none_or(|m| n >= m) && max.is_none_or(|m| n <= m) => None,
                Some(_) => Some(format!("it is outside {}", self)),
                None => Some("the rule takes numbers and this is not one".into()),
            },
        }
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Globs(globs) => write!(f, "one of the globs {globs:?}"),
            Self::Regex(regex) => write!(f, "the expression {:?}", written(regex)),
            Self::OneOf(values) => {
                let listed: Vec<String> = values.iter().map(Value::to_string).collect();
                write!(f, "one of [{}]", listed.join(", "))
            }
            Self::Range { min, max } => match (min, max) {
                (Some(lo), Some(hi)) => write!(f, "the range {lo}..={hi}"),
                (Some(lo), None) => write!(f, "the range {lo}.."),
                (None, Some(hi)) => write!(f, "the range ..={hi}"),
                (None, None) => write!(f, "any number"),
            },
        }
    }
}

/// The expression as written, without the anchors [`Matcher::regex`] adds.
fn written(regex: &regex::Regex) -> &str {
    let anchored = regex.as_str();
    anchored
        .strip_prefix("^(?:")
        .and_then(|rest| rest.strip_suffix(")$"))
        .unwrap_or(anchored)
}

impl ArgumentRule {
    /// Why `arguments` break this rule, if they do. Values absent from the
    /// arguments are not checked (the tool's schema decides what is
    /// required); every value present at the pointer is.
    pub fn refuses(&self, arguments: &Value, context: &CallContext<'_>) -> Option<String> {
        let mut found = Vec::new();
        select(arguments, &self.pointer, &mut String::new(), &mut found);
        found.into_iter().find_map(|(at, value)| {
            self.matcher.refuses(value, context).map(|why| {
                let text = value.to_string();
                let shown = crate::error::bounded(&text, 120);
                format!("argument {at} = {shown} is refused by {}: {why}", self.key)
            })
        })
    }
}

/// Every value at `pointer` (RFC 6901, with `*` for any item or member),
/// with its concrete pointer.
fn select<'a>(
    value: &'a Value,
    pointer: &str,
    at: &mut String,
    out: &mut Vec<(String, &'a Value)>,
) {
    let Some(rest) = pointer.strip_prefix('/') else {
        out.push((
            if at.is_empty() {
                "/".into()
            } else {
                at.clone()
            },
            value,
        ));
        return;
    };
    let (segment, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let segment = segment.replace("~1", "/").replace("~0", "~");
    let mut visit = |name: &str, child: &'a Value| {
        let len = at.len();
        at.push('/');
        at.push_str(&name.replace('~', "~0").replace('/', "~1"));
        select(child, tail, at, out);
        at.truncate(len);
    };
    match value {
        Value::Object(members) if segment == "*" => {
            for (name, child) in members {
                visit(name, child);
            }
        }
        Value::Object(members) => {
            if let Some(child) = members.get(&segment) {
                visit(&segment, child);
            }
        }
        Value::Array(items) if segment == "*" => {
            for (i, child) in items.iter().enumerate() {
                visit(&i.to_string(), child);
            }
        }
        Value::Array(items) => {
            if let Some(child) = segment.parse::<usize>().ok().and_then(|i| items.get(i)) {
                visit(&segment, child);
            }
        }
        _ => {}
    }
}

/// Checks a JSON pointer as written in the config.
pub fn check_pointer(pointer: &str) -> Result<(), String> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(format!(
            "{pointer:?} is not a JSON pointer; start it with '/' (\"/{pointer}\")"
        ));
    }
    let mut chars = pointer.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.peek(), Some('0' | '1')) {
            return Err(format!(
                "{pointer:?}: '~' must be followed by 0 or 1 (~0 is '~', ~1 is '/')"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A tool that declares no file permissions.
    fn text() -> CallContext<'static> {
        CallContext {
            workspace: Path::new("/w"),
            files: false,
        }
    }

    fn rule(pointer: &str, matcher: Matcher) -> ArgumentRule {
        ArgumentRule {
            key: format!("profiles.p.tools.t.arguments.{pointer}"),
            pointer: pointer.into(),
            matcher,
        }
    }

    #[test]
    fn globs_regexes_sets_and_ranges() {
        let url = rule(
            "/url",
            Matcher::Globs(vec!["https://api.github.com/*".into()]),
        );
        assert!(
            url.refuses(&json!({"url": "https://api.github.com/repos"}), &text())
                .is_none()
        );
        let refused = url
            .refuses(&json!({"url": "https://api.github.com.evil/x"}), &text())
            .unwrap();
        assert!(refused.contains("argument /url"), "{refused}");
        assert!(
            refused.contains("profiles.p.tools.t.arguments./url"),
            "{refused}"
        );
        assert!(
            url.refuses(&json!({"url": 7}), &text()).is_some(),
            "not a string"
        );
        assert!(
            url.refuses(&json!({}), &text()).is_none(),
            "absent values are the schema's"
        );

        let path = rule("/path", Matcher::regex("docs/[a-z]+\\.md").unwrap());
        assert!(
            path.refuses(&json!({"path": "docs/a.md"}), &text())
                .is_none()
        );
        assert!(
            path.refuses(&json!({"path": "x/docs/a.md"}), &text())
                .is_some(),
            "anchored"
        );
        assert!(
            path.refuses(&json!({"path": "docs/a.md.sh"}), &text())
                .is_some(),
            "anchored"
        );

        let method = rule("/method", Matcher::OneOf(vec![json!("GET"), json!("HEAD")]));
        assert!(method.refuses(&json!({"method": "GET"}), &text()).is_none());
        assert!(
            method
                .refuses(&json!({"method": "POST"}), &text())
                .is_some()
        );

        let n = rule(
            "/limit",
            Matcher::Range {
                min: Some(1.0),
                max: Some(10.0),
            },
        );
        assert!(n.refuses(&json!({"limit": 10}), &text()).is_none());
        assert!(n.refuses(&json!({"limit": 11}), &text()).is_some());
        assert!(
            n.refuses(&json!({"limit": "5"}), &text()).is_some(),
            "not a number"
        );
    }

    #[test]
    fn a_star_segment_checks_every_item_and_member() {
        let hosts = rule(
            "/requests/*/url",
            Matcher::Globs(vec!["https://a/*".into()]),
        );
        let ok = json!({"requests": [{"url": "https://a/1"}, {"url": "https://a/2"}]});
        assert!(hosts.refuses(&ok, &text()).is_none());
        let bad = json!({"requests": [{"url": "https://a/1"}, {"url": "https://b/2"}]});
        let refused = hosts.refuses(&bad, &text()).unwrap();
        assert!(refused.contains("/requests/1/url"), "{refused}");
        let headers = rule("/headers/*", Matcher::regex("[a-z]*").unwrap());
        assert!(
            headers
                .refuses(&json!({"headers": {"a/b": "X"}}), &text())
                .unwrap()
                .contains("a~1b")
        );
    }

    #[test]
    fn pointers_are_checked_as_written() {
        assert!(check_pointer("/a/b~1c").is_ok());
        assert!(check_pointer("url").is_err());
        assert!(check_pointer("/a~2").is_err());
    }
}
