//! Just enough URL handling for links in a page: resolving a reference
//! against the page's URL (RFC 3986, section 5) for `http`, `https` and
//! `mailto` targets.

/// The absolute URL `href` points to from a page at `base`, or `None` for
/// links that lead nowhere useful (in-page anchors, `javascript:`, `data:`).
pub(crate) fn resolve(base: &str, href: &str) -> Option<String> {
    let href = href.trim();
    if href.is_empty() || href.starts_with('#') {
        return None;
    }
    if let Some(scheme) = scheme_of(href) {
        return matches!(
            scheme.to_ascii_lowercase().as_str(),
            "http" | "https" | "mailto"
        )
        .then(|| href.to_string());
    }
    let scheme = scheme_of(base)?;
    let rest = &base[scheme.len() + 1..];
    let rest = rest.strip_prefix("//")?;
    if let Some(network_path) = href.strip_prefix("//") {
        return Some(format!("{scheme}://{network_path}"));
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let origin = format!("{scheme}://{}", &rest[..authority_end]);
    let after = &rest[authority_end..];
    let path_end = after.find(['?', '#']).unwrap_or(after.len());
    let base_path = if after[..path_end].is_empty() {
        "/"
    } else {
        &after[..path_end]
    };
    let target = if href.starts_with('/') {
        href.to_string()
    } else if href.starts_with('?') {
        format!("{base_path}{href}")
    } else {
        let dir = &base_path[..=base_path.rfind('/').unwrap_or(0)];
        format!("{dir}{href}")
    };
    Some(format!("{origin}{}", remove_dot_segments(&target)))
}

/// The scheme of an absolute URL (`https` of `https://...`).
fn scheme_of(url: &str) -> Option<&str> {
    let colon = url.find(':')?;
    let scheme = &url[..colon];
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(scheme)
}

/// Resolves `.` and `..` segments of the path part of `target`.
fn remove_dot_segments(target: &str) -> String {
    let split = target.find(['?', '#']).unwrap_or(target.len());
    let (path, tail) = target.split_at(split);
    let mut segments: Vec<&str> = Vec::new();
    let parts: Vec<&str> = path.split('/').collect();
    for (i, segment) in parts.iter().enumerate() {
        let last = i == parts.len() - 1;
        match *segment {
            "." => {
                if last {
                    segments.push("");
                }
            }
            ".." => {
                if segments.len() > 1 {
                    segments.pop();
                }
                if last {
                    segments.push("");
                }
            }
            s => segments.push(s),
        }
    }
    let mut path = segments.join("/");
    if !path.starts_with('/') {
        path.insert(0, '/');
    }
    format!("{path}{tail}")
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn resolves_references_like_rfc_3986() {
        let base = "http://a/b/c/d;p?q";
        for (href, expected) in [
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g"),
            ("?y", "http://a/b/c/d;p?y"),
            ("g?y", "http://a/b/c/g?y"),
            ("g#s", "http://a/b/c/g#s"),
            (".", "http://a/b/c/"),
            ("..", "http://a/b/"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("../../g", "http://a/g"),
            ("../../../g", "http://a/g"),
            ("https://x.org/y", "https://x.org/y"),
        ] {
            assert_eq!(resolve(base, href).as_deref(), Some(expected), "{href}");
        }
        assert_eq!(resolve(base, "#top"), None);
        assert_eq!(resolve(base, "javascript:void(0)"), None);
        assert_eq!(
            resolve("http://127.0.0.1:8080", "docs/a.html").as_deref(),
            Some("http://127.0.0.1:8080/docs/a.html")
        );
    }
}
