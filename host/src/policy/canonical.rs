//! The canonical form of a URL, as parameter rules compare it: what the
//! WHATWG parser (the `url` crate, which the HTTP capability fetches with)
//! makes of it, with percent-escapes of unreserved characters decoded and
//! the others in upper case, no trailing dot on the host, no credentials,
//! and no segment a server could still read as `.` or `..`. A URL glob is
//! matched on the parsed URL part by part: its scheme, its host and port
//! (where `*` stays within one label), then the rest.

use url::{Position, Url};

use super::wildcard;

/// A parameter rule's globs written as URLs, which bound every request the
/// tool makes (each redirect hop included), not only its argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlRule {
    /// The config key the rule was written at, named in refusals.
    pub key: String,
    /// The globs; a URL must be canonical and match one.
    pub globs: Vec<String>,
}

impl UrlRule {
    /// Why a request to `url` breaks the rule, if it does.
    pub fn refuses(&self, url: &str) -> Option<String> {
        let why = match canonical_url(url) {
            Err(why) => why,
            Ok(()) if self.globs.iter().any(|g| glob_matches(g, url)) => return None,
            Ok(()) => format!("it matches none of {:?}", self.globs),
        };
        let shown = crate::error::bounded(url, 120);
        Some(format!(
            "the url {shown:?} is refused by {}: {why}",
            self.key
        ))
    }
}

/// Whether `text` matches `glob`: part by part for a URL glob (see
/// [`url_glob_matches`]), else as a plain `*` glob.
pub fn glob_matches(glob: &str, text: &str) -> bool {
    if is_url_glob(glob) {
        url_glob_matches(glob, text)
    } else {
        wildcard::matches(glob, text)
    }
}

/// Whether the URL `text` matches the URL glob `glob`, on the parsed URL:
/// the scheme as a glob; the host and port, where `*` never crosses `.`,
/// `:`, `@`, `[` or `]` (a host of `*` alone is any host and port); then
/// the path, query and fragment, where `*` matches anything. A glob that
/// ends at its host matches the root path only (`scheme://*` alone: every
/// URL of the scheme).
pub fn url_glob_matches(glob: &str, text: &str) -> bool {
    let Ok(url) = Url::parse(text) else {
        return false;
    };
    let Some((scheme, rest)) = glob.split_once("://") else {
        return false;
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if !wildcard::matches(scheme, url.scheme()) {
        return false;
    }
    if authority == "*" && tail.is_empty() {
        return true;
    }
    let url_authority = &url[Position::BeforeHost..Position::AfterPort];
    let url_tail = &url[Position::BeforePath..];
    let tail = if tail.is_empty() { "/" } else { tail };
    (authority == "*" || labels_match(authority, url_authority))
        && wildcard::matches(tail, url_tail)
}

/// Whether `text` matches `pattern` with `*` confined to the runs between
/// authority separators: both must have the same separators in the same
/// places, and each run match its pattern run (an empty run only an empty
/// one: `*.example.com` is not `.example.com`).
fn labels_match(pattern: &str, text: &str) -> bool {
    const SEPARATORS: [char; 5] = ['.', ':', '@', '[', ']'];
    let separators = |s: &str| s.matches(SEPARATORS).map(str::to_owned).collect::<Vec<_>>();
    separators(pattern) == separators(text)
        && pattern
            .split(SEPARATORS)
            .zip(text.split(SEPARATORS))
            .all(|(p, t)| {
                if t.is_empty() {
                    p.is_empty()
                } else {
                    wildcard::matches(p, t)
                }
            })
}

/// `text` if it is a URL in canonical form; else why not, naming the
/// canonical form where there is one.
pub fn canonical_url(text: &str) -> Result<(), String> {
    let url = Url::parse(text).map_err(|e| format!("it is not an absolute URL ({e})"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "it carries credentials (user@ or user:password@ before the host); pass them in a \
             header instead"
                .into(),
        );
    }
    let serialized = url.as_str();
    let mut canonical = String::with_capacity(serialized.len());
    let head = &serialized[..url[..Position::BeforePath].len()];
    match url.host_str() {
        Some(host) if host.len() > 1 && host.ends_with('.') => {
            let at = head.rfind(host).unwrap_or(head.len());
            canonical.push_str(&head[..at]);
            canonical.push_str(host.trim_end_matches('.'));
            canonical.push_str(&head[at + host.len()..]);
        }
        _ => canonical.push_str(head),
    }
    canonical.push_str(&escapes_normalized(&serialized[head.len()..]));
    let stable = Url::parse(&canonical).is_ok_and(|again| again.as_str() == canonical);
    if !stable {
        return Err(format!(
            "it has no canonical form ({canonical:?} does not read back as itself)"
        ));
    }
    if canonical != text {
        return Err(format!(
            "it is not in canonical form; the same URL is written {canonical:?}"
        ));
    }
    if let Some(segment) = url
        .path_segments()
        .into_iter()
        .flatten()
        .find(|segment| reads_as_dot_segment(segment))
    {
        return Err(format!(
            "its path segment {segment:?} may be read as \".\" or \"..\" by a server \
             (an encoded separator or a \";\" parameter around dots)"
        ));
    }
    Ok(())
}

/// Percent-escapes of unreserved characters (`A-Z a-z 0-9 - . _ ~`)
/// decoded, the others' hex digits in upper case.
fn escapes_normalized(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text) {
        match piece {
            Piece::Escape(byte) if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) => {
                out.push(char::from(byte));
            }
            Piece::Escape(byte) => out.push_str(&format!("%{byte:02X}")),
            Piece::Char(ch) => out.push(ch),
        }
    }
    out
}

/// Whether a path segment, decoded, holds a `.` or `..` part between
/// separators (`/`, `\`) or before a `;` parameter.
fn reads_as_dot_segment(segment: &str) -> bool {
    let mut decoded = Vec::with_capacity(segment.len());
    for piece in pieces(segment) {
        match piece {
            Piece::Escape(byte) => decoded.push(byte),
            Piece::Char(ch) => decoded.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    String::from_utf8_lossy(&decoded)
        .split(['/', '\\'])
        .any(|part| matches!(part.split(';').next(), Some("." | "..")))
}

/// A piece of URL text: a percent-escape's byte, or a character as it is.
enum Piece {
    Escape(u8),
    Char(char),
}

/// `text` as escapes and characters, in order.
fn pieces(text: &str) -> impl Iterator<Item = Piece> + '_ {
    let mut rest = text;
    std::iter::from_fn(move || {
        let escape = rest
            .strip_prefix('%')
            .and_then(|after| after.get(..2))
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        if let Some(byte) = escape {
            rest = &rest[3..];
            return Some(Piece::Escape(byte));
        }
        let ch = rest.chars().next()?;
        rest = &rest[ch.len_utf8()..];
        Some(Piece::Char(ch))
    })
}

/// Whether a glob of a parameter rule is written as a URL (`scheme://...`).
pub fn is_url_glob(glob: &str) -> bool {
    let Some((scheme, _)) = glob.split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_urls_pass() {
        for good in [
            "http://h/allowed/x",
            "https://api.github.com/repos/a/b?per_page=5",
            "http://127.0.0.1:8080/a%2Fb",
            "http://h/a//b",
            "http://h/%C3%A9",
            "http://h/a...b/",
        ] {
            assert_eq!(canonical_url(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn other_spellings_are_refused_naming_the_canonical_one() {
        for (bad, canonical) in [
            ("http://h/allowed/../private", "http://h/private"),
            ("http://h/allowed/%2e%2e/private", "http://h/private"),
            ("http://h/allowed/.%2E/private", "http://h/private"),
            ("http://h/allowed/./x", "http://h/allowed/x"),
            ("HTTP://h/x", "http://h/x"),
            ("http://H/x", "http://h/x"),
            ("http://h/%61llowed", "http://h/allowed"),
            ("http://h/a%2fb", "http://h/a%2Fb"),
            ("http://h\\allowed\\..\\private", "http://h/private"),
            ("http://h./x", "http://h/x"),
            ("http://h:80/x", "http://h/x"),
            ("http://ⓗ/x", "http://h/x"),
            ("http://0x7f.1/x", "http://127.0.0.1/x"),
            (" http://h/x", "http://h/x"),
            ("http://h/a\tb", "http://h/ab"),
        ] {
            let refused = canonical_url(bad).unwrap_err();
            assert!(
                refused.contains(&format!("{canonical:?}")),
                "{bad}: {refused}"
            );
        }
    }

    #[test]
    fn credentials_and_hidden_dot_segments_are_refused() {
        for bad in [
            "http://allowed.example@evil.example/",
            "http://u:p@h/",
            "http://h/allowed/..;/private",
            "http://h/allowed/x%2F..%2F..%2Fprivate",
            "http://h/allowed/x%5C..%5Cprivate",
            "not a url",
            "/relative/path",
        ] {
            assert!(canonical_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn url_glob_stars_stay_in_their_part() {
        let cases = [
            ("http://*.example.com/*", "http://api.example.com/x", true),
            ("http://*.example.com/*", "http://a.b.example.com/x", false),
            ("http://*.example.com/*", "http://.example.com/x", false),
            (
                "http://*.example.com/*",
                "http://h:8/x?.example.com/",
                false,
            ),
            (
                "http://*.example.com/*",
                "http://api.example.com:8080/x",
                false,
            ),
            ("http://*", "http://any.host:1/x?y#z", true),
            ("http://*/*", "http://any.host/x", true),
            ("http://h/a/*", "http://h/a/b/c?d", true),
            ("http://h/a/*", "http://h/b", false),
            ("http://h", "http://h/", true),
            ("http://h", "http://h/x", false),
            ("http://h:*/*", "http://h:8080/x", true),
            ("http://h:*/*", "http://h.evil:8080/x", false),
            ("https://h/*", "http://h/x", false),
        ];
        for (glob, url, expected) in cases {
            assert_eq!(url_glob_matches(glob, url), expected, "{glob} {url}");
        }
        let rule = UrlRule {
            key: "k".into(),
            globs: vec!["http://h/a/*".into()],
        };
        assert_eq!(rule.refuses("http://h/a/x"), None);
        assert!(
            rule.refuses("http://h/b")
                .is_some_and(|why| why.contains("k: it matches none"))
        );
        assert!(
            rule.refuses("http://h/a/../b")
                .is_some_and(|why| why.contains("canonical"))
        );
    }

    #[test]
    fn url_globs_are_told_from_others() {
        assert!(is_url_glob("https://api.github.com/*"));
        assert!(is_url_glob("http://*"));
        assert!(!is_url_glob("docs/**"));
        assert!(!is_url_glob("*://x"));
    }
}
