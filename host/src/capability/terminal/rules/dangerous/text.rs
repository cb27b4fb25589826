//! Patterns found in the raw text of a line rather than in one command: fork
//! bombs, and destructive SQL, which hides inside quoted arguments and
//! here-documents.

/// Splits text into words and single punctuation characters.
fn punctuated_tokens(text: &str, is_word: impl Fn(char) -> bool) -> Vec<&str> {
    let mut tokens = Vec::new();
    let mut start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if is_word(c) {
            start.get_or_insert(i);
            continue;
        }
        if let Some(s) = start.take() {
            tokens.push(&text[s..i]);
        }
        if !c.is_whitespace() {
            tokens.push(&text[i..i + c.len_utf8()]);
        }
    }
    if let Some(s) = start {
        tokens.push(&text[s..]);
    }
    tokens
}

/// A function that calls itself at least twice with `|` or `&`, or
/// backgrounds a call to itself: `:(){ :|:& };:`, `bomb(){ bomb|bomb& };bomb`.
pub(super) fn fork_bomb(line: &str) -> bool {
    const MAX_BODY: usize = 64;
    if line.to_lowercase().contains("fork while fork") {
        return true;
    }
    let tokens = punctuated_tokens(line, |c| !c.is_whitespace() && !"(){};&|<>".contains(c));
    let is_name = |t: &str| !matches!(t, "(" | ")" | "{" | "}" | ";" | "&" | "|" | "<" | ">");
    for i in 0..tokens.len() {
        let rest = &tokens[i..];
        let (name, body_start) = match rest {
            [name, "(", ")", "{", ..] if is_name(name) => (*name, i + 4),
            ["function", name, "(", ")", "{", ..] if is_name(name) => (*name, i + 5),
            ["function", name, "{", ..] if is_name(name) => (*name, i + 3),
            _ => continue,
        };
        let mut level = 1usize;
        let body: Vec<&str> = tokens[body_start..]
            .iter()
            .take(MAX_BODY)
            .take_while(|t| {
                match **t {
                    "{" => level += 1,
                    "}" => level -= 1,
                    _ => {}
                }
                level > 0
            })
            .copied()
            .collect();
        let calls = body.iter().filter(|t| **t == name).count();
        let spawns = body.iter().any(|t| *t == "|" || *t == "&");
        let backgrounds_itself = body.windows(2).any(|w| w[0] == name && w[1] == "&");
        if (calls >= 2 && spawns) || backgrounds_itself {
            return true;
        }
    }
    false
}

/// `line` with terminal control sequences (`ESC [ ... m`, `ESC ] ... BEL`,
/// their one-character C1 forms), NUL, other C1 controls and invisible
/// format characters (zero-width spaces and joiners, bidirectional
/// controls, the byte-order mark, variation selectors, tags) removed, and
/// full-width (`ｒｍ`) and mathematical (`𝐫𝐦`) letters folded to ASCII;
/// `None` if there are none.
/// A shell would not run the folded line, but one that reads as a dangerous
/// command once folded is hiding it from a reader.
pub(super) fn fold_lookalikes(line: &str) -> Option<String> {
    let needs_folding = |c: char| {
        matches!(c, '\0' | '\u{1b}' | '\u{80}'..='\u{9f}' | '\u{3000}' | '\u{ff01}'..='\u{ff5e}')
            || invisible(c)
            || math_letter(c).is_some()
    };
    if !line.contains(needs_folding) {
        return None;
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    // Skips the parameters and final byte of a control sequence.
    let skip_csi = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        for c in chars.by_ref() {
            if ('\u{40}'..='\u{7e}').contains(&c) {
                break;
            }
        }
    };
    // Skips an operating-system command up to BEL or the string terminator.
    let skip_osc = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while let Some(c) = chars.next() {
            if c == '\u{7}' || c == '\u{9c}' {
                break;
            }
            if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                chars.next();
                break;
            }
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']') => skip_osc(&mut chars),
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' => skip_osc(&mut chars),
            '\0' | '\u{80}'..='\u{9f}' => {}
            '\u{3000}' => out.push(' '),
            '\u{ff01}'..='\u{ff5e}' => {
                out.extend(char::from_u32(u32::from(c) - 0xfee0));
            }
            c if invisible(c) => {}
            c => out.push(math_letter(c).unwrap_or(c)),
        }
    }
    Some(out)
}

/// True for a character that shows nothing: zero-width spaces and joiners,
/// bidirectional controls, the soft hyphen, the byte-order mark, variation
/// selectors and tags.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}'
        | '\u{e0000}'..='\u{e007f}' | '\u{e0100}'..='\u{e01ef}')
}

/// The ASCII letter or digit a mathematical alphanumeric symbol (`𝐫`, `𝟏`)
/// stands for.
fn math_letter(c: char) -> Option<char> {
    let code = u32::from(c);
    let ascii = match code {
        0x1d400..=0x1d6a3 => {
            let offset = (code - 0x1d400) % 52;
            if offset < 26 {
                u32::from(b'A') + offset
            } else {
                u32::from(b'a') + offset - 26
            }
        }
        0x1d6a4 => u32::from(b'i'),
        0x1d6a5 => u32::from(b'j'),
        0x1d7ce..=0x1d7ff => u32::from(b'0') + (code - 0x1d7ce) % 10,
        _ => return None,
    };
    char::from_u32(ascii)
}

/// True for programs whose arguments are text to look for or to record
/// (search patterns, commit messages), never SQL to run.
pub(super) fn searches_text(program: &str) -> bool {
    matches!(
        program,
        "grep" | "egrep" | "fgrep" | "zgrep" | "rg" | "ag" | "ack" | "git"
    )
}

/// Destructive SQL anywhere in the text (case-insensitive).
pub(super) fn destructive_sql(line: &str) -> Option<String> {
    let lower = line.to_lowercase();
    let tokens = punctuated_tokens(&lower, |c| c.is_alphanumeric() || c == '_');
    // For each position, where the next `where` and the next statement end are.
    let len = tokens.len();
    let mut next_where = vec![len; len + 1];
    let mut next_end = vec![len; len + 1];
    for i in (0..len).rev() {
        next_where[i] = if tokens[i] == "where" {
            i
        } else {
            next_where[i + 1]
        };
        next_end[i] = if matches!(tokens[i], ";" | "\"" | "'" | "|" | "&" | ")") {
            i
        } else {
            next_end[i + 1]
        };
    }
    let at = |i: usize| tokens.get(i).copied().unwrap_or_default();
    let is_identifier = |t: &str| t.starts_with(|c: char| c.is_alphabetic() || c == '_');
    for i in 0..len {
        let reason = match (tokens[i], at(i + 1)) {
            ("drop", object @ ("table" | "database" | "schema")) => {
                format!("destructive sql (drop {object})")
            }
            ("drop", "temporary") if at(i + 2) == "table" => {
                "destructive sql (drop table)".to_owned()
            }
            ("truncate", "table") => "destructive sql (truncate table)".to_owned(),
            ("truncate", name) if is_identifier(name) && at(i + 2) != "." => {
                "destructive sql (truncate)".to_owned()
            }
            ("delete", "from") => {
                let end = next_end[i];
                let condition = next_where[i];
                if condition < end && !always_true(&tokens[condition + 1..end]) {
                    continue;
                }
                "destructive sql (delete without a where clause)".to_owned()
            }
            (command @ ("flushall" | "flushdb"), _) => {
                format!("destructive redis command ({command})")
            }
            ("dropdatabase", "(") => "destructive mongodb command (dropDatabase)".to_owned(),
            _ => continue,
        };
        return Some(reason);
    }
    None
}

/// `WHERE 1=1`, `WHERE true`: a condition that keeps every row.
fn always_true(condition: &[&str]) -> bool {
    matches!(condition, ["1", "=", "1"] | ["true"] | ["1"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_split_words_from_punctuation() {
        let tokens = punctuated_tokens("DELETE FROM t;--x", |c| c.is_alphanumeric());
        assert_eq!(tokens, ["DELETE", "FROM", "t", ";", "-", "-", "x"]);
        assert!(punctuated_tokens("   ", |c| c.is_alphanumeric()).is_empty());
    }

    #[test]
    fn fork_bomb_needs_self_calls_that_spawn() {
        assert!(fork_bomb(":(){ :|:& };:"));
        assert!(fork_bomb("x() { x | x & }"));
        assert!(!fork_bomb("f() { echo hi; }; f"));
        assert!(!fork_bomb("f() { f; }"));
        assert!(!fork_bomb("f() { g | g & }"));
        assert!(!fork_bomb("(){"));
    }

    #[test]
    fn delete_needs_a_real_where_clause_in_the_same_statement() {
        assert!(destructive_sql("DELETE FROM t WHERE id = 1").is_none());
        assert!(destructive_sql("delete from t where true").is_some());
        assert!(destructive_sql("psql -c 'DELETE FROM t' -c 'SELECT 1 WHERE x'").is_some());
        assert!(destructive_sql("DELETE FROM t; SELECT * FROM u WHERE id = 1").is_some());
        assert!(destructive_sql("DELETE FROM t WHERE id IN (SELECT id FROM u)").is_none());
    }

    #[test]
    fn lookalikes_are_folded() {
        assert_eq!(fold_lookalikes("ls -la").as_deref(), None);
        assert_eq!(fold_lookalikes("ｒｍ -ｒｆ /").as_deref(), Some("rm -rf /"));
        assert_eq!(
            fold_lookalikes("\u{1b}[31mrm\u{1b}[0m -rf /").as_deref(),
            Some("rm -rf /")
        );
        assert_eq!(
            fold_lookalikes("\u{1b}]0;title\u{7}rm -rf /").as_deref(),
            Some("rm -rf /")
        );
        assert_eq!(
            fold_lookalikes("\u{9b}31mrm\u{9b}0m -rf /").as_deref(),
            Some("rm -rf /")
        );
        assert_eq!(fold_lookalikes("r\0m -rf /").as_deref(), Some("rm -rf /"));
        assert_eq!(fold_lookalikes("echo é").as_deref(), None);
    }

    #[test]
    fn keywords_must_be_whole_words() {
        assert!(destructive_sql("backdrop table").is_none());
        assert!(destructive_sql("drop_table()").is_none());
        assert!(destructive_sql("DROP TEMPORARY TABLE t").is_some());
        assert!(destructive_sql("redis-cli flushdb").is_some());
        assert!(destructive_sql("undelete from_here").is_none());
    }
}
