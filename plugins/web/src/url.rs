//! Links in a page as absolute URLs: references resolved against the page's
//! URL by the `url` crate (the WHATWG URL Standard, as browsers do), kept
//! only for `http`, `https` and `mailto` targets.

pub(crate) use url::Url;

/// The absolute URL `href` points to from a page at `base` (`None` when the
/// page's own URL could not be parsed: then only absolute links resolve), or
/// `None` for links that lead nowhere useful (in-page anchors, `javascript:`,
/// `data:`, references that are not URLs).
pub(crate) fn resolve(base: Option<&Url>, href: &str) -> Option<Url> {
    let href = href.trim();
    if href.is_empty() || href.starts_with('#') {
        return None;
    }
    let url = Url::options().base_url(base).parse(href).ok()?;
    matches!(url.scheme(), "http" | "https" | "mailto").then_some(url)
}

#[cfg(test)]
mod tests {
    use super::{Url, resolve};

    fn resolved(base: &str, href: &str) -> Option<String> {
        resolve(Some(&Url::parse(base).unwrap()), href).map(String::from)
    }

    #[test]
    fn resolves_references_like_rfc_3986() {
        let base = "http://a/b/c/d;p?q";
        for (href, expected) in [
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            // An empty path is written `/` (as a browser goes there).
            ("//g", "http://g/"),
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
            assert_eq!(resolved(base, href).as_deref(), Some(expected), "{href}");
        }
        assert_eq!(resolved(base, "#top"), None);
        assert_eq!(resolved(base, "javascript:void(0)"), None);
        assert_eq!(
            resolved("http://127.0.0.1:8080", "docs/a.html").as_deref(),
            Some("http://127.0.0.1:8080/docs/a.html")
        );
    }

    #[test]
    fn normalises_what_browsers_normalise() {
        let base = "http://h/a/b";
        for (href, expected) in [
            ("  c d.html ", "http://h/a/c%20d.html"),
            ("/é?q=ü", "http://h/%C3%A9?q=%C3%BC"),
            ("HTTP://Example.COM:80/x", "http://example.com/x"),
            ("\\\\other\\y", "http://other/y"),
            ("mailto:someone@example.com", "mailto:someone@example.com"),
        ] {
            assert_eq!(resolved(base, href).as_deref(), Some(expected), "{href}");
        }
        for href in ["data:text/plain,x", "ftp://h/f", "http://[bad", ""] {
            assert_eq!(resolved(base, href), None, "{href}");
        }
        assert_eq!(
            resolve(None, "https://x.org/y")
                .map(String::from)
                .as_deref(),
            Some("https://x.org/y")
        );
        assert_eq!(resolve(None, "y"), None);
    }
}
