//! The query language of `json_query`: a JSON Pointer (RFC 6901), or a
//! path of keys, indexes and wildcards (`$.items[0].name`, `items[*].id`,
//! `["a.b"]`, `[-1]`).

use std::fmt::{self, Write as _};

use serde_json::Value;

/// One step of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// An object's member.
    Key(String),
    /// An array's element; negative counts from the end.
    Index(i64),
    /// Every element of an array or value of an object.
    All,
    /// A JSON Pointer token: a member of an object, or an element of an
    /// array when it is a non-negative integer.
    Token(String),
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Query {
    pub(crate) steps: Vec<Step>,
}

impl Query {
    /// Parses a JSON Pointer (starts with `/`, or is empty) or a path.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Ok(Self { steps: Vec::new() });
        }
        if let Some(pointer) = text.strip_prefix('/') {
            return pointer_steps(pointer).map(|steps| Self { steps });
        }
        path_steps(text).map(|steps| Self { steps })
    }

    /// True when the query can select more than one value.
    pub(crate) fn has_wildcard(&self) -> bool {
        self.steps.contains(&Step::All)
    }

    /// The values the query selects. Without a wildcard exactly one, or an
    /// error that says where the document did not fit; after a wildcard,
    /// values without the next key or index are skipped.
    pub(crate) fn select<'a>(&self, root: &'a Value) -> Result<Vec<&'a Value>, String> {
        let mut current = vec![root];
        let mut seen_wildcard = false;
        let mut at = String::from("$");
        for step in &self.steps {
            let mut next = Vec::new();
            for value in current {
                match apply(value, step) {
                    Ok(values) => next.extend(values),
                    Err(_) if seen_wildcard => {}
                    Err(why) => return Err(format!("{at} {why}")),
                }
            }
            seen_wildcard |= *step == Step::All;
            current = next;
            let _ = write!(at, "{step}");
        }
        Ok(current)
    }
}

/// The values one step leads to from `value`, or why there are none.
fn apply<'a>(value: &'a Value, step: &Step) -> Result<Vec<&'a Value>, String> {
    match (step, value) {
        (Step::All, Value::Array(items)) => Ok(items.iter().collect()),
        (Step::All, Value::Object(members)) => Ok(members.values().collect()),
        (Step::Key(key) | Step::Token(key), Value::Object(members)) => {
            members.get(key).map(|v| vec![v]).ok_or_else(|| {
                let keys: Vec<&str> = members.keys().take(20).map(String::as_str).collect();
                format!(
                    "has no key {key:?}; its keys are: {}{}",
                    keys.join(", "),
                    if members.len() > 20 { ", ..." } else { "" }
                )
            })
        }
        (Step::Index(index), Value::Array(items)) => {
            let len = items.len() as i64;
            let position = if *index < 0 { len + index } else { *index };
            usize::try_from(position)
                .ok()
                .and_then(|i| items.get(i))
                .map(|v| vec![v])
                .ok_or_else(|| format!("has {}; index {index} is out of range", elements(items)))
        }
        (Step::Token(token), Value::Array(items)) => {
            let index = token
                .parse::<usize>()
                .ok()
                .filter(|_| token == "0" || !token.starts_with('0'))
                .ok_or_else(|| format!("is an array; {token:?} is not an index"))?;
            items
                .get(index)
                .map(|v| vec![v])
                .ok_or_else(|| format!("has {}; index {index} is out of range", elements(items)))
        }
        (step, value) => {
            let wanted = match step {
                Step::Key(_) => "an object",
                Step::Index(_) => "an array",
                Step::All | Step::Token(_) => "an object or array",
            };
            Err(format!("is {}, not {wanted}", kind(value)))
        }
    }
}

/// "1 element", "3 elements".
fn elements(items: &[Value]) -> String {
    match items.len() {
        1 => "1 element".to_string(),
        n => format!("{n} elements"),
    }
}

/// "a string", "an object", ... for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Key(key) | Self::Token(key) if is_plain_key(key) => write!(f, ".{key}"),
            Self::Key(key) | Self::Token(key) => write!(f, "[{key:?}]"),
            Self::Index(index) => write!(f, "[{index}]"),
            Self::All => f.write_str("[*]"),
        }
    }
}

fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '$')
}

/// The tokens of a JSON Pointer after its first `/`.
fn pointer_steps(pointer: &str) -> Result<Vec<Step>, String> {
    pointer
        .split('/')
        .map(|token| {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => out.push('~'),
                    Some('1') => out.push('/'),
                    _ => {
                        return Err(format!(
                            "JSON Pointer token {token:?} has a `~` that is not `~0` (for ~) \
                             or `~1` (for /)"
                        ));
                    }
                }
            }
            Ok(Step::Token(out))
        })
        .collect()
}

/// The steps of a path: `$`, then `.key`, `[index]`, `[*]`, `.*` or
/// `["key"]`; the first key may go without its dot.
fn path_steps(path: &str) -> Result<Vec<Step>, String> {
    let bad = |at: usize, what: &str| {
        format!(
            "query {path:?} is not valid at character {}: {what}. Write a path like \
             `items[0].name`, `$.items[*].id` or `[\"key.with.dots\"]`, or a JSON Pointer \
             like `/items/0/name`",
            at + 1
        )
    };
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    if chars.first() == Some(&'$') {
        i = 1;
    }
    let mut first = true;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                i += 1;
                if chars.get(i) == Some(&'*') {
                    steps.push(Step::All);
                    i += 1;
                } else {
                    let (key, end) = plain_key(&chars, i);
                    if key.is_empty() {
                        return Err(bad(i, "a key must follow `.`"));
                    }
                    steps.push(Step::Key(key));
                    i = end;
                }
            }
            '[' => {
                let close = chars[i..]
                    .iter()
                    .position(|&c| c == ']')
                    .map(|p| i + p)
                    .ok_or_else(|| bad(i, "`[` is not closed"))?;
                let inside: String = chars[i + 1..close].iter().collect();
                let inside = inside.trim();
                if inside == "*" {
                    steps.push(Step::All);
                    i = close + 1;
                } else if let Some(quote @ ('"' | '\'')) = inside.chars().next() {
                    let (key, end) = quoted_key(&chars, i + 1, quote)
                        .ok_or_else(|| bad(i, "the quoted key is not closed"))?;
                    if chars.get(end) != Some(&']') {
                        return Err(bad(end, "expected `]` after the quoted key"));
                    }
                    steps.push(Step::Key(key));
                    i = end + 1;
                } else {
                    let index = inside.parse::<i64>().map_err(|_| {
                        bad(
                            i,
                            "brackets hold an integer index, `*`, or a quoted key like [\"a b\"]",
                        )
                    })?;
                    steps.push(Step::Index(index));
                    i = close + 1;
                }
            }
            '*' if first => {
                steps.push(Step::All);
                i += 1;
            }
            _ if first => {
                let (key, end) = plain_key(&chars, i);
                if key.is_empty() {
                    return Err(bad(i, "unexpected character"));
                }
                steps.push(Step::Key(key));
                i = end;
            }
            _ => return Err(bad(i, "expected `.` or `[`")),
        }
        first = false;
    }
    Ok(steps)
}

/// A key up to the next `.` or `[`.
fn plain_key(chars: &[char], from: usize) -> (String, usize) {
    let end = chars[from..]
        .iter()
        .position(|&c| c == '.' || c == '[')
        .map_or(chars.len(), |p| from + p);
    (chars[from..end].iter().collect(), end)
}

/// A quoted key starting at `from` (skipping spaces before the quote), with
/// `\` escaping the next character; returns it and the offset after the
/// closing quote and any spaces.
fn quoted_key(chars: &[char], from: usize, quote: char) -> Option<(String, usize)> {
    let mut i = from;
    while chars.get(i)?.is_whitespace() {
        i += 1;
    }
    i += 1;
    let mut key = String::new();
    loop {
        match *chars.get(i)? {
            '\\' => {
                key.push(*chars.get(i + 1)?);
                i += 2;
            }
            c if c == quote => break,
            c => {
                key.push(c);
                i += 1;
            }
        }
    }
    i += 1;
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    Some((key, i))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn select(query: &str, doc: &Value) -> Result<Vec<Value>, String> {
        let query = Query::parse(query)?;
        Ok(query.select(doc)?.into_iter().cloned().collect())
    }

    #[test]
    fn parses_paths_and_pointers() {
        use Step::*;
        assert_eq!(
            Query::parse("$.a[0][*].b[\"c.d\"]['e]'][-1].*")
                .unwrap()
                .steps,
            vec![
                Key("a".into()),
                Index(0),
                All,
                Key("b".into()),
                Key("c.d".into()),
                Key("e]".into()),
                Index(-1),
                All
            ]
        );
        assert_eq!(
            Query::parse("a.b").unwrap().steps,
            vec![Key("a".into()), Key("b".into())]
        );
        assert_eq!(
            Query::parse("/a~1b/0/~0").unwrap().steps,
            vec![Token("a/b".into()), Token("0".into()), Token("~".into())]
        );
        assert_eq!(Query::parse("$").unwrap().steps, vec![]);
        for bad in ["a..b", "a[", "a[x]", "a.", "[\"x\"", "/a~2"] {
            assert!(Query::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn selects_with_clear_errors() {
        let doc = json!({"items": [{"id": 1, "tags": ["x"]}, {"id": 2}], "n": 3});
        assert_eq!(select("items[1].id", &doc).unwrap(), vec![json!(2)]);
        assert_eq!(select("items[-1].id", &doc).unwrap(), vec![json!(2)]);
        assert_eq!(select("/items/0/id", &doc).unwrap(), vec![json!(1)]);
        assert_eq!(select("", &doc).unwrap(), vec![doc.clone()]);
        assert_eq!(
            select("items[*].id", &doc).unwrap(),
            vec![json!(1), json!(2)]
        );
        assert_eq!(select("items[*].tags[0]", &doc).unwrap(), vec![json!("x")]);
        assert_eq!(
            select("items[0].nope", &doc).unwrap_err(),
            "$.items[0] has no key \"nope\"; its keys are: id, tags"
        );
        assert_eq!(
            select("items[5]", &doc).unwrap_err(),
            "$.items has 2 elements; index 5 is out of range"
        );
        assert_eq!(
            select("n.x", &doc).unwrap_err(),
            "$.n is a number, not an object"
        );
        assert_eq!(
            select("/items/01", &doc).unwrap_err(),
            "$.items is an array; \"01\" is not an index"
        );
    }
}
