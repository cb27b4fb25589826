//! Response bodies as text: the media type and charset of `content-type`
//! (or a page's `<meta charset>`), Windows-1252 decoding for the Latin-1
//! family, and a binary check.

/// Bytes at the start of a page searched for a `<meta>` charset.
const META_SNIFF: usize = 1024;

/// The parts of a `content-type` header that matter here.
pub(crate) struct ContentType {
    /// The media type in lower case (`text/html`), empty when absent.
    pub(crate) media: String,
    charset: Option<String>,
}

impl ContentType {
    /// Parses a `content-type` value (`text/html; charset=ISO-8859-1`).
    pub(crate) fn parse(value: Option<&str>) -> Self {
        let value = value.unwrap_or("");
        let mut parts = value.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let charset = parts.find_map(|p| {
            let (name, value) = p.split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("charset")
                .then(|| value.trim().trim_matches(['"', '\'']).to_ascii_lowercase())
        });
        Self { media, charset }
    }

    pub(crate) fn is_json(&self) -> bool {
        self.media == "application/json" || self.media.ends_with("+json")
    }

    pub(crate) fn is_html(&self) -> bool {
        self.media.contains("html")
    }

    /// True for media types that are never text.
    fn is_binary_type(&self) -> bool {
        const BINARY: &[&str] = &["image/", "audio/", "video/", "font/", "model/"];
        const APPLICATION: &[&str] = &[
            "application/octet-stream",
            "application/pdf",
            "application/zip",
            "application/gzip",
            "application/wasm",
            "application/x-tar",
            "application/vnd.",
        ];
        let svg = self.media.starts_with("image/svg");
        (!svg && BINARY.iter().any(|p| self.media.starts_with(p)))
            || APPLICATION.iter().any(|p| self.media.starts_with(p))
    }
}

/// True when a body is not text: a binary media type, or NUL bytes near the
/// start.
pub(crate) fn is_binary(content_type: &ContentType, body: &[u8]) -> bool {
    content_type.is_binary_type() || body[..body.len().min(META_SNIFF)].contains(&0)
}

/// The body as text, decoded by the charset of `content-type`, else (for
/// HTML) of a `<meta>` tag, else as UTF-8. Invalid bytes are replaced.
pub(crate) fn decode(content_type: &ContentType, body: &[u8]) -> String {
    let charset = content_type
        .charset
        .clone()
        .or_else(|| content_type.is_html().then(|| meta_charset(body)).flatten());
    match charset.as_deref() {
        Some(label) if is_latin1_label(label) => body.iter().map(|&b| windows_1252(b)).collect(),
        _ => String::from_utf8_lossy(body).into_owned(),
    }
}

/// The `charset=` of a `<meta charset>` or `<meta http-equiv>` tag near the
/// start of a page.
fn meta_charset(body: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(META_SNIFF)]).to_ascii_lowercase();
    let at = head.find("<meta")?;
    let after = &head[at..];
    let value = &after[after.find("charset=")? + "charset=".len()..];
    let value = value.trim_start_matches(['"', '\'']);
    let end = value
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':')))
        .unwrap_or(value.len());
    (end > 0).then(|| value[..end].to_string())
}

/// Labels that browsers decode as Windows-1252.
fn is_latin1_label(label: &str) -> bool {
    matches!(
        label,
        "iso-8859-1"
            | "iso8859-1"
            | "iso_8859-1"
            | "latin1"
            | "l1"
            | "us-ascii"
            | "ascii"
            | "windows-1252"
            | "cp1252"
            | "x-cp1252"
    )
}

/// One Windows-1252 byte as a character.
fn windows_1252(byte: u8) -> char {
    const HIGH: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž',
        '\u{8f}', '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}',
        'ž', 'Ÿ',
    ];
    match byte {
        0x80..=0x9f => HIGH[usize::from(byte - 0x80)],
        _ => char::from(byte),
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary; true if it
/// was cut.
pub(crate) fn truncate_bytes(text: &mut String, max: usize) -> bool {
    if text.len() <= max {
        return false;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    true
}

/// Cuts `text` to at most `max` characters; true if it was cut.
pub(crate) fn truncate_chars(text: &mut String, max: usize) -> bool {
    match text.char_indices().nth(max) {
        Some((end, _)) => {
            text.truncate(end);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_and_charsets() {
        let ct = ContentType::parse(Some("Text/HTML; Charset=\"ISO-8859-1\""));
        assert_eq!(ct.media, "text/html");
        assert_eq!(decode(&ct, b"caf\xe9 \x80"), "café €");
        let ct = ContentType::parse(Some("text/html"));
        assert_eq!(
            decode(&ct, b"<meta charset=windows-1252><p>\x93hi\x94"),
            "<meta charset=windows-1252><p>“hi”"
        );
        assert_eq!(decode(&ct, "<p>é</p>".as_bytes()), "<p>é</p>");
        assert!(ContentType::parse(Some("application/problem+json")).is_json());
        assert!(is_binary(&ContentType::parse(Some("image/png")), b"x"));
        assert!(!is_binary(
            &ContentType::parse(Some("image/svg+xml")),
            b"<svg/>"
        ));
        assert!(is_binary(&ContentType::parse(None), b"ab\0cd"));
        assert!(!is_binary(&ContentType::parse(None), b"plain"));
    }

    #[test]
    fn truncation_respects_characters() {
        let mut s = "héllo".to_string();
        assert!(truncate_bytes(&mut s, 2));
        assert_eq!(s, "h");
        let mut s = "héllo".to_string();
        assert!(truncate_chars(&mut s, 2));
        assert_eq!(s, "hé");
        assert!(!truncate_chars(&mut s, 2));
    }
}
