//! `csv_query`: rows of a CSV document that meet simple conditions, as JSON
//! objects keyed by column.

use std::cmp::Ordering;

use toolhost_sdk::prelude::*;

use crate::{Input, MAX_OUTPUT_BYTES};

/// Rows returned when `limit` is not given.
const DEFAULT_ROWS: usize = 100;
/// Most rows one call returns.
const MAX_ROWS: usize = 10_000;

/// A comparison of a condition.
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    #[serde(rename = "==")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "contains")]
    Contains,
    #[serde(rename = "starts_with")]
    StartsWith,
    #[serde(rename = "ends_with")]
    EndsWith,
    #[serde(rename = "empty")]
    Empty,
    #[serde(rename = "not_empty")]
    NotEmpty,
}

/// A value to compare a cell with.
#[derive(Deserialize, JsonSchema, Clone, Debug)]
#[serde(untagged)]
enum Scalar {
    Number(f64),
    Text(String),
    Bool(bool),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Self::Number(n) => n.to_string(),
            Self::Text(s) => s.clone(),
            Self::Bool(b) => b.to_string(),
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Self::Number(n) => Some(*n),
            Self::Text(s) => number(s),
            Self::Bool(_) => None,
        }
    }
}

/// One condition on a column.
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct Condition {
    /// The column's name (or its number from 1 without a header).
    column: String,
    /// `==`, `!=`, `<`, `<=`, `>`, `>=` (numeric when both sides are
    /// numbers, else text), `contains`, `starts_with`, `ends_with` (text,
    /// case-sensitive), `empty` or `not_empty` (no `value`).
    op: Op,
    /// The value to compare with: a string or a number.
    #[serde(default)]
    value: Option<Scalar>,
}

/// Arguments of `csv_query`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CsvQueryArgs {
    /// The CSV text. Give `csv` or `path`.
    #[serde(default)]
    csv: Option<String>,
    /// A CSV file to read instead: relative to the workspace, or absolute
    /// inside a granted directory.
    #[serde(default)]
    path: Option<String>,
    /// Field delimiter, one character (default `,`; `\t` for tab-separated
    /// values, the default for `*.tsv` files).
    #[serde(default)]
    delimiter: Option<String>,
    /// The first row holds the column names (default true). Without a
    /// header, columns are named `1`, `2`, ...
    #[serde(default = "yes")]
    has_header: bool,
    /// Columns to return, in this order (default: all).
    #[serde(default)]
    columns: Option<Vec<String>>,
    /// Conditions a row must meet, all of them (default: every row).
    #[serde(default, rename = "where")]
    conditions: Vec<Condition>,
    /// Matching rows to skip before the first one returned (default 0), to
    /// page through a long result.
    #[serde(default)]
    offset: usize,
    /// Most rows returned (default 100, at most 10000).
    #[serde(default)]
    limit: Option<usize>,
}

fn yes() -> bool {
    true
}

/// Query a CSV document: parse it (quoted fields, a header row), keep the
/// rows that meet every condition in `where`, and return `columns` of at
/// most `limit` of them as JSON objects keyed by column name (values are
/// strings). Also returns `columns`, `matched` (rows that met the
/// conditions) and `total` (data rows). Malformed CSV (a row with a
/// different number of fields) is an error naming the line.
#[tool(toolset = "data", permissions = ["file:read"], read_only, emoji = "🧮")]
pub(crate) fn csv_query(args: CsvQueryArgs) -> Result<Value, ToolError> {
    let limit = args.limit.unwrap_or(DEFAULT_ROWS);
    if !(1..=MAX_ROWS).contains(&limit) {
        return Err(ToolError::invalid_arguments(format!(
            "limit must be between 1 and {MAX_ROWS}"
        )));
    }
    let tsv = args
        .path
        .as_deref()
        .is_some_and(|p| p.to_ascii_lowercase().ends_with(".tsv"));
    let delimiter = delimiter(args.delimiter.as_deref(), tsv)?;
    let input = Input::new(args.csv, args.path, "csv")?;
    let text = input.read()?;

    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .from_reader(text.as_bytes());
    let mut records = reader.records();
    let malformed = |e: csv::Error| {
        ToolError::invalid_arguments(format!("{} is not valid CSV: {e}", input.name()))
    };
    let first = records.next().transpose().map_err(malformed)?;
    let Some(first) = first else {
        return Ok(json!({ "columns": [], "rows": [], "matched": 0, "total": 0 }));
    };
    let (names, pending): (Vec<String>, Option<csv::StringRecord>) = if args.has_header {
        (first.iter().map(str::to_string).collect(), None)
    } else {
        (
            (1..=first.len()).map(|i| i.to_string()).collect(),
            Some(first),
        )
    };
    let column = |name: &str| {
        names.iter().position(|n| n == name).ok_or_else(|| {
            ToolError::invalid_arguments(format!(
                "{} has no column {name:?}; its columns are: {}",
                input.name(),
                names.join(", ")
            ))
        })
    };
    let selected: Vec<usize> = match &args.columns {
        Some(columns) => columns
            .iter()
            .map(|c| column(c))
            .collect::<Result<_, _>>()?,
        None => (0..names.len()).collect(),
    };
    let conditions: Vec<(usize, &Condition)> = args
        .conditions
        .iter()
        .map(|c| {
            check_condition(c)?;
            Ok((column(&c.column)?, c))
        })
        .collect::<Result<_, ToolError>>()?;

    let mut rows = Vec::new();
    let (mut matched, mut total, mut bytes) = (0usize, 0usize, 0usize);
    let mut cut_by_size = false;
    for record in pending.into_iter().map(Ok).chain(records) {
        let record = record.map_err(malformed)?;
        total += 1;
        let meets = conditions
            .iter()
            .all(|(i, c)| meets(record.get(*i).unwrap_or(""), c));
        if !meets {
            continue;
        }
        matched += 1;
        if matched <= args.offset || rows.len() >= limit || cut_by_size {
            continue;
        }
        let mut row = serde_json::Map::new();
        for &i in &selected {
            let value = record.get(i).unwrap_or("");
            bytes += names[i].len() + value.len() + 6;
            row.insert(names[i].clone(), Value::String(value.to_string()));
        }
        if bytes > MAX_OUTPUT_BYTES {
            cut_by_size = true;
            continue;
        }
        rows.push(Value::Object(row));
    }
    let returned = rows.len();
    let mut result = json!({
        "columns": selected.iter().map(|&i| &names[i]).collect::<Vec<_>>(),
        "rows": rows,
        "matched": matched,
        "total": total,
    });
    if args.offset + returned < matched {
        result["truncated"] = json!(true);
        result["note"] = json!(if cut_by_size {
            format!(
                "stopped at about {} KiB of rows; select fewer columns, add conditions, or \
                 pass offset {} to continue",
                MAX_OUTPUT_BYTES / 1024,
                args.offset + returned
            )
        } else {
            format!(
                "{returned} of {matched} matching rows returned; pass offset {} for more",
                args.offset + returned
            )
        });
    }
    Ok(result)
}

/// The delimiter byte: one ASCII character, `\t` spelled out, or `tab`.
fn delimiter(given: Option<&str>, tsv: bool) -> Result<u8, ToolError> {
    match given {
        None => Ok(if tsv { b'\t' } else { b',' }),
        Some("\\t" | "tab") => Ok(b'\t'),
        Some(d) if d.len() == 1 && d.is_ascii() => Ok(d.as_bytes()[0]),
        Some(d) => Err(ToolError::invalid_arguments(format!(
            "delimiter {d:?} must be one ASCII character, like \",\", \";\" or \"\\t\""
        ))),
    }
}

/// Checks that a condition has a value exactly when its op needs one.
fn check_condition(condition: &Condition) -> Result<(), ToolError> {
    let needs_value = !matches!(condition.op, Op::Empty | Op::NotEmpty);
    match (&condition.value, needs_value) {
        (None, true) => Err(ToolError::invalid_arguments(format!(
            "the condition on {:?} needs a value to compare with",
            condition.column
        ))),
        (Some(_), false) => Err(ToolError::invalid_arguments(format!(
            "the condition on {:?} (empty / not_empty) takes no value",
            condition.column
        ))),
        _ => Ok(()),
    }
}

/// A cell as a number, if it is one (surrounding spaces allowed).
fn number(text: &str) -> Option<f64> {
    let text = text.trim();
    let numeric = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
    numeric
        .then(|| text.parse::<f64>().ok())
        .flatten()
        .filter(|n| n.is_finite())
}

/// Whether a cell meets a condition.
fn meets(cell: &str, condition: &Condition) -> bool {
    let Some(value) = &condition.value else {
        return (condition.op == Op::Empty) == cell.trim().is_empty();
    };
    let ordering = || match (number(cell), value.number()) {
        (Some(a), Some(b)) => a.partial_cmp(&b),
        _ => Some(cell.cmp(value.text().as_str())),
    };
    match condition.op {
        Op::Eq => ordering() == Some(Ordering::Equal),
        Op::Ne => ordering() != Some(Ordering::Equal),
        Op::Lt => ordering() == Some(Ordering::Less),
        Op::Le => matches!(ordering(), Some(Ordering::Less | Ordering::Equal)),
        Op::Gt => ordering() == Some(Ordering::Greater),
        Op::Ge => matches!(ordering(), Some(Ordering::Greater | Ordering::Equal)),
        Op::Contains => cell.contains(&value.text()),
        Op::StartsWith => cell.starts_with(&value.text()),
        Op::EndsWith => cell.ends_with(&value.text()),
        Op::Empty | Op::NotEmpty => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(op: Op, value: Option<Scalar>) -> Condition {
        Condition {
            column: "c".into(),
            op,
            value,
        }
    }

    #[test]
    fn conditions_compare_numbers_as_numbers() {
        let gt = condition(Op::Gt, Some(Scalar::Number(9.0)));
        assert!(meets("10", &gt));
        assert!(!meets("9", &gt));
        // Text compares as text.
        assert!(meets(
            "b",
            &condition(Op::Gt, Some(Scalar::Text("a".into())))
        ));
        assert!(meets(
            "1.50",
            &condition(Op::Eq, Some(Scalar::Text("1.5".into())))
        ));
        assert!(!meets(
            "abc",
            &condition(Op::Eq, Some(Scalar::Text("ABC".into())))
        ));
        assert!(meets(
            "hello",
            &condition(Op::Contains, Some(Scalar::Text("ell".into())))
        ));
        assert!(meets(" ", &condition(Op::Empty, None)));
        assert!(meets("x", &condition(Op::NotEmpty, None)));
        assert_eq!(number("1e3"), Some(1000.0));
        assert_eq!(number("inf"), None);
        assert_eq!(number("-"), None);
    }

    #[test]
    fn delimiters() {
        assert_eq!(delimiter(None, false).unwrap(), b',');
        assert_eq!(delimiter(None, true).unwrap(), b'\t');
        assert_eq!(delimiter(Some("\t"), false).unwrap(), b'\t');
        assert_eq!(delimiter(Some("\\t"), false).unwrap(), b'\t');
        assert_eq!(delimiter(Some(";"), false).unwrap(), b';');
        assert!(delimiter(Some(";;"), false).is_err());
    }
}
