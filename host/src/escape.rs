//! Text toolhost shows on a terminal for a guest or a command: C0 and C1
//! controls, DEL and the bidirectional controls made visible, so that what a
//! tool or a command line says can neither move the cursor, erase or repaint
//! a line, retitle the terminal, nor reorder the characters shown.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use serde::Serialize;
use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

/// True for a character a terminal acts on instead of showing: C0 controls
/// (newline and tab included), DEL, C1 controls, and the bidirectional
/// controls (embeddings, overrides, isolates, marks).
pub fn is_control(c: char) -> bool {
    matches!(c,
        '\0'..='\x1f'
        | '\x7f'..='\u{9f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{061c}')
}

/// `text` with every control character of [`is_control`] written as an
/// escape: `\n`, `\r` and `\t`; `\xHH` for the other C0 controls and DEL;
/// `\u{HHHH}` for C1 and bidirectional controls. A backslash becomes `\\`,
/// so every escape reads back to one string. Text with none of these is
/// returned as it is.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c == '\\' || is_control(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_control(c) && u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if is_control(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` shown line by line: each line [`escape`]d, the newlines between
/// them kept. For reports whose lines toolhost lays out but whose contents
/// (tool names, descriptions, errors) come from plugins or commands.
pub fn escape_lines(text: &str) -> String {
    text.split('\n').map(escape).collect::<Vec<_>>().join("\n")
}

/// `value` as compact JSON in which the controls serde_json leaves as they
/// are (DEL, C1 and the bidirectional controls) are `\u` escapes as well.
pub fn json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string(value).map(escape_json)
}

/// `value` as pretty-printed JSON, escaped as [`json`].
pub fn json_pretty<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string_pretty(value).map(escape_json)
}

/// Serialized JSON with the control characters serde_json leaves in it
/// (DEL, C1, bidirectional controls) written as `\uHHHH` escapes. Such a
/// character can only be inside a string, where the escape means the same
/// character; C0 controls in strings are escaped already, and the only ones
/// left are the newlines and spaces between values.
fn escape_json(text: String) -> String {
    let left = |c: char| is_control(c) && u32::from(c) >= 0x7f;
    if !text.chars().any(left) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if left(c) {
            // Every control character is in the Basic Multilingual Plane.
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// The log's field formatter: fields as `name=value` after the message,
/// every value [`escape`]d, so a guest's log line or output, or a command
/// line being logged, shows its controls instead of acting on the terminal.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogFields;

impl<'writer> FormatFields<'writer> for LogFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut visitor = LogVisitor {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct LogVisitor<'writer> {
    writer: Writer<'writer>,
    first: bool,
    result: fmt::Result,
}

impl LogVisitor<'_> {
    fn field(&mut self, field: &Field, value: &str) {
        if self.result.is_err() || field.name().starts_with("log.") {
            return;
        }
        let separator = if self.first { "" } else { " " };
        self.first = false;
        self.result = if field.name() == "message" {
            write!(self.writer, "{separator}{}", escape(value))
        } else {
            write!(self.writer, "{separator}{}={}", field.name(), escape(value))
        };
    }
}

impl Visit for LogVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.field(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.field(field, &format!("{value:?}"));
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Reads escaped text back: the inverse of [`escape`].
    fn unescape(text: &str) -> Option<String> {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next()? {
                '\\' => out.push('\\'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'x' => {
                    let hex: String = chars.by_ref().take(2).collect();
                    out.push(char::from(u8::from_str_radix(&hex, 16).ok()?));
                }
                'u' => {
                    let rest: String = chars.by_ref().take_while(|&c| c != '}').collect();
                    let hex = rest.strip_prefix('{')?;
                    out.push(char::from_u32(u32::from_str_radix(hex, 16).ok()?)?);
                }
                _ => return None,
            }
        }
        Some(out)
    }

    /// Strings rich in what a hostile guest would send: controls, bidi
    /// controls, backslashes and ordinary text, mixed.
    fn hostile() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            any::<char>().prop_map(String::from),
            (0u32..0xa0).prop_map(|c| char::from_u32(c).unwrap().to_string()),
            prop::sample::select(vec![
                "\u{202a}",
                "\u{202b}",
                "\u{202c}",
                "\u{202d}",
                "\u{202e}",
                "\u{2066}",
                "\u{2067}",
                "\u{2068}",
                "\u{2069}",
                "\u{200e}",
                "\u{200f}",
                "\u{061c}",
                "\\",
                "\\x1b",
                "\\u{202e}",
                "\x1b[2K",
                "\r",
                "\x1b]52;c;aGk=\x07",
                "rm -rf /",
                "é",
            ])
            .prop_map(str::to_owned),
        ];
        prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn escaped_text_has_no_control_and_reads_back(text in hostile()) {
            let escaped = escape(&text);
            prop_assert!(!escaped.chars().any(is_control), "{escaped:?}");
            let read_back = unescape(&escaped);
            prop_assert_eq!(read_back.as_deref(), Some(text.as_str()));
        }

        #[test]
        fn escaping_is_injective(a in hostile(), b in hostile()) {
            prop_assume!(a != b);
            prop_assert_ne!(escape(&a), escape(&b));
        }

        #[test]
        fn lines_keep_their_newlines_and_nothing_else(text in hostile()) {
            let shown = escape_lines(&text);
            prop_assert!(!shown.chars().any(|c| c != '\n' && is_control(c)), "{shown:?}");
            prop_assert_eq!(shown.matches('\n').count(), text.matches('\n').count());
        }

        #[test]
        fn json_has_no_control_and_means_the_same(text in hostile()) {
            let value = serde_json::json!({ "text": text });
            for written in [json(&value).unwrap(), json_pretty(&value).unwrap()] {
                prop_assert!(
                    !written.chars().any(|c| c != '\n' && is_control(c)),
                    "{written:?}"
                );
                let read: serde_json::Value = serde_json::from_str(&written).unwrap();
                prop_assert_eq!(&read, &value);
            }
        }
    }

    #[test]
    fn escapes_are_readable() {
        assert_eq!(escape("plain text"), Cow::Borrowed("plain text"));
        assert_eq!(escape("a\tb\nc\rd"), "a\\tb\\nc\\rd");
        assert_eq!(escape("\x1b[2Kok"), "\\x1b[2Kok");
        assert_eq!(escape("\x7f\u{9b}"), "\\x7f\\u{9b}");
        assert_eq!(escape("rm \u{202e}fr- mr"), "rm \\u{202e}fr- mr");
        assert_eq!(escape("C:\\x1b"), "C:\\\\x1b");
        assert_eq!(escape_lines("one\x1b\ntwo\r"), "one\\x1b\ntwo\\r");
        assert_eq!(
            json(&serde_json::json!("\x1b\x7f\u{85}\u{2067}")).unwrap(),
            "\"\\u001b\\u007f\\u0085\\u2067\""
        );
    }
}
