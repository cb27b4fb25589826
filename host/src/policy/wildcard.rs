//! The `*`-only glob shared by permission and command patterns: `*` matches any
//! sequence of characters (including none), every other character is literal.

/// True if `text` matches `pattern`, where `*` matches any run of characters.
///
/// Linear in `text` for each star, never recursive, so hostile input cannot
/// blow the stack. Byte-wise matching is exact for UTF-8: a literal run always
/// starts with a lead byte, which never equals a continuation byte.
pub(crate) fn matches(pattern: &str, text: &str) -> bool {
    let pattern = pattern.as_bytes();
    let text = text.as_bytes();
    let (mut p, mut t) = (0, 0);
    // Where to resume after the most recent star: (pattern index, text index).
    let mut resume: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                p += 1;
                resume = Some((p, t));
            }
            Some(&byte) if byte == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match resume {
                Some((star_p, star_t)) => {
                    p = star_p;
                    t = star_t + 1;
                    resume = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&byte| byte == b'*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn literal_patterns_match_exactly() {
        assert!(matches("file:read", "file:read"));
        assert!(!matches("file:read", "file:reads"));
        assert!(!matches("file:read", "file:rea"));
        assert!(matches("", ""));
        assert!(!matches("", "x"));
    }

    #[test]
    fn star_matches_any_run() {
        assert!(matches("*", ""));
        assert!(matches("*", "anything at all"));
        assert!(matches("file:*", "file:"));
        assert!(matches("file:*", "file:write"));
        assert!(!matches("file:*", "files:write"));
        assert!(matches("rm -rf /*", "rm -rf /"));
        assert!(matches("rm -rf /*", "rm -rf /home/x"));
        assert!(matches("*a*b*c", "xxaxxbxxc"));
        assert!(!matches("*a*b*c", "xxaxxcxxb"));
        assert!(matches("a**b", "ab"));
    }

    #[test]
    fn backtracks_past_false_starts() {
        assert!(matches("*ab", "aab"));
        assert!(matches("*aab", "aaaab"));
        assert!(matches(
            "git * --force*",
            "git push origin --force-with-lease"
        ));
    }

    #[test]
    fn unicode_is_literal() {
        assert!(matches("é*ü", "é-ü"));
        assert!(!matches("é", "e"));
        assert!(matches("*ü", "üü"));
    }
}
