//! Shell words: one simple command split into words and redirections with
//! quotes, backslashes and `$'...'` removed, and the bracket matching that
//! keeps substitutions in one piece.

/// A shell word or redirection of a simple command, with quotes removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::capability::terminal::rules) enum Token {
    /// A word: the program, an argument or an assignment.
    Word(String),
    /// A redirection: the operator with any fd (`>`, `2>>`, `&>`, `<<<`) and its
    /// target (a file, an fd, a here-document delimiter or a here-string).
    Redirect {
        /// The operator, including a leading fd number.
        op: String,
        /// The word after the operator.
        target: String,
    },
}

impl Token {
    /// The token as one canonical piece of text: words as they are,
    /// redirections as operator and target with no space between.
    pub(in crate::capability::terminal::rules) fn render(&self) -> String {
        match self {
            Self::Word(word) => word.clone(),
            Self::Redirect { op, target } => format!("{op}{target}"),
        }
    }
}

/// Splits one simple command into words and redirections, removing quotes
/// and backslashes. Substitutions stay as written inside their word.
pub(in crate::capability::terminal::rules) fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    loop {
        while chars.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        if let Some(len) = redirect_len(&chars, i) {
            let op: String = chars[i..i + len].iter().collect();
            i += len;
            let target = read_target(&chars, &mut i);
            tokens.push(Token::Redirect { op, target });
            continue;
        }
        let (word, plain_digits) = read_word(&chars, &mut i);
        if plain_digits && let Some(len) = redirect_len(&chars, i) {
            let op: String = chars[i..i + len].iter().collect();
            i += len;
            let target = read_target(&chars, &mut i);
            tokens.push(Token::Redirect {
                op: format!("{word}{op}"),
                target,
            });
            continue;
        }
        tokens.push(Token::Word(word));
    }
    tokens
}

/// `word` written for a shell line that reads back as the same word: as it
/// is when plain, else in single quotes.
pub(in crate::capability::terminal::rules) fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%^~".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The words of a simple command (redirections left out).
pub(in crate::capability::terminal::rules) fn words(tokens: &[Token]) -> Vec<String> {
    tokens
        .iter()
        .filter_map(|token| match token {
            Token::Word(word) => Some(word.clone()),
            Token::Redirect { .. } => None,
        })
        .collect()
}

/// The length of the redirection operator at `i`, if one starts there.
fn redirect_len(chars: &[char], i: usize) -> Option<usize> {
    let at = |offset: usize| chars.get(i + offset).copied();
    match (at(0)?, at(1), at(2)) {
        ('&', Some('>'), Some('>')) => Some(3),
        ('&', Some('>'), _) => Some(2),
        ('<' | '>', Some('('), _) => None,
        ('>', Some('>' | '|' | '&'), _) => Some(2),
        ('<', Some('<'), Some('<' | '-')) => Some(3),
        ('<', Some('<' | '>' | '&'), _) => Some(2),
        ('<' | '>', _, _) => Some(1),
        _ => None,
    }
}

fn read_target(chars: &[char], i: &mut usize) -> String {
    while chars.get(*i).is_some_and(|c| c.is_whitespace()) {
        *i += 1;
    }
    read_word(chars, i).0
}

/// Reads one word starting at `i`. Returns it unquoted, and whether it is
/// made of unquoted digits only (an fd before a redirection).
fn read_word(chars: &[char], i: &mut usize) -> (String, bool) {
    let mut word = String::new();
    let mut quoted = false;
    while let Some(&c) = chars.get(*i) {
        let next = chars.get(*i + 1).copied();
        match c {
            c if c.is_whitespace() => break,
            _ if redirect_len(chars, *i).is_some() => break,
            '\\' => {
                quoted = true;
                if let Some(escaped) = next {
                    word.push(escaped);
                }
                *i += 2;
            }
            '\'' => {
                quoted = true;
                *i += 1;
                while let Some(&q) = chars.get(*i) {
                    *i += 1;
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '$' if next == Some('\'') => {
                quoted = true;
                *i += 2;
                word.push_str(&decode_ansi_c(chars, i));
            }
            // `$"..."` is a double-quoted string (translated by locale).
            '$' if next == Some('"') => *i += 1,
            '"' => {
                quoted = true;
                *i += 1;
                read_double_quoted(chars, i, &mut word);
            }
            '$' if matches!(next, Some('(' | '{' | '[')) => {
                copy_group(chars, i, *i + 1, &mut word);
            }
            '<' | '>' if next == Some('(') => copy_group(chars, i, *i + 1, &mut word),
            '`' => copy_backticks(chars, i, &mut word),
            c => {
                word.push(c);
                *i += 1;
            }
        }
    }
    let plain_digits = !quoted && !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit());
    (word, plain_digits)
}

fn read_double_quoted(chars: &[char], i: &mut usize, word: &mut String) {
    while let Some(&c) = chars.get(*i) {
        let next = chars.get(*i + 1).copied();
        match c {
            '"' => {
                *i += 1;
                return;
            }
            '\\' => {
                match next {
                    Some(c @ ('$' | '`' | '"' | '\\')) => word.push(c),
                    Some('\n') => {}
                    Some(other) => {
                        word.push('\\');
                        word.push(other);
                    }
                    None => word.push('\\'),
                }
                *i += 2;
            }
            '$' if matches!(next, Some('(' | '{')) => copy_group(chars, i, *i + 1, word),
            '`' => copy_backticks(chars, i, word),
            c => {
                word.push(c);
                *i += 1;
            }
        }
    }
}

/// Copies `$(...)`, `${...}` or `<(...)` verbatim; `open` is the bracket.
fn copy_group(chars: &[char], i: &mut usize, open: usize, word: &mut String) {
    let end = skip_group(chars, open).max(*i + 1).min(chars.len());
    word.extend(&chars[*i..end]);
    *i = end;
}

fn copy_backticks(chars: &[char], i: &mut usize, word: &mut String) {
    let mut end = *i + 1;
    while let Some(&c) = chars.get(end) {
        end += if c == '\\' { 2 } else { 1 };
        if c == '`' {
            break;
        }
    }
    let end = end.min(chars.len());
    word.extend(&chars[*i..end]);
    *i = end;
}

/// Decodes the body of `$'...'` starting at `i` (after the quote).
fn decode_ansi_c(chars: &[char], i: &mut usize) -> String {
    let mut out = String::new();
    while let Some(&c) = chars.get(*i) {
        *i += 1;
        match c {
            '\'' => break,
            '\\' => {
                let Some(&e) = chars.get(*i) else { break };
                *i += 1;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'e' | 'E' => out.push('\u{1b}'),
                    'f' => out.push('\u{c}'),
                    'v' => out.push('\u{b}'),
                    'x' => out.extend(read_code(chars, i, 16, 2)),
                    'u' => out.extend(read_code(chars, i, 16, 4)),
                    'U' => out.extend(read_code(chars, i, 16, 8)),
                    '0'..='7' => {
                        *i -= 1;
                        out.extend(read_code(chars, i, 8, 3));
                    }
                    other => out.push(other),
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Reads up to `max` digits in `radix` as a character code.
fn read_code(chars: &[char], i: &mut usize, radix: u32, max: usize) -> Option<char> {
    let mut value: u32 = 0;
    let mut count = 0;
    while count < max {
        let Some(digit) = chars.get(*i).and_then(|c| c.to_digit(radix)) else {
            break;
        };
        value = value.saturating_mul(radix).saturating_add(digit);
        *i += 1;
        count += 1;
    }
    if count == 0 {
        return None;
    }
    char::from_u32(value)
}

/// The index just past the bracket that closes the `(`, `{` or `[` at `open`,
/// skipping quotes, nested groups and backticks; the end of input if unclosed.
/// Iterative, so hostile nesting cannot exhaust the stack.
fn skip_group(chars: &[char], open: usize) -> usize {
    let mut unlimited = usize::MAX;
    scan_group(chars, open, &mut unlimited).unwrap_or(chars.len())
}

/// [`skip_group`] that gives up (`None`) rather than scan more than `budget`
/// characters, and deducts what it scanned from `budget`.
pub(super) fn scan_group(chars: &[char], open: usize, budget: &mut usize) -> Option<usize> {
    let end = find_group_end(chars, open, *budget);
    let scanned = end.map_or(usize::MAX, |end| end.saturating_sub(open));
    *budget = budget.saturating_sub(scanned);
    end
}

/// The scan behind [`skip_group`]; `None` past `limit` characters.
fn find_group_end(chars: &[char], open: usize, limit: usize) -> Option<usize> {
    #[derive(Clone, Copy)]
    enum Context {
        Group(char, char),
        Double,
        Backtick,
    }
    let first = match chars.get(open) {
        Some('(') => Context::Group('(', ')'),
        Some('{') => Context::Group('{', '}'),
        Some('[') => Context::Group('[', ']'),
        _ => return Some(open.saturating_add(1).min(chars.len())),
    };
    let mut stack = vec![first];
    // Open `case ... esac`s of each `(` group on the stack: inside one, `)`
    // ends a pattern, not the group.
    let mut cases: Vec<usize> = vec![0];
    let mut i = open + 1;
    while let Some(&c) = chars.get(i) {
        if i - open > limit {
            return None;
        }
        let Some(&top) = stack.last() else {
            return Some(i);
        };
        if let Context::Group('(', _) = top {
            let open_cases = cases.last_mut().expect("one count per group");
            if keyword_at(chars, i, "case") {
                *open_cases += 1;
            } else if keyword_at(chars, i, "esac") {
                *open_cases = open_cases.saturating_sub(1);
            }
        }
        match (top, c) {
            (_, '\\') => {
                i += 2;
                continue;
            }
            (Context::Double, '"') | (Context::Backtick, '`') => {
                stack.pop();
            }
            (Context::Double, '$') if chars.get(i + 1) == Some(&'(') => {
                stack.push(Context::Group('(', ')'));
                cases.push(0);
                i += 1;
            }
            (Context::Double, '`') => stack.push(Context::Backtick),
            (Context::Double, _) => {}
            (_, '\'') => {
                let close = chars[i + 1..].iter().position(|&q| q == '\'');
                i = close.map_or(chars.len(), |offset| i + 1 + offset);
            }
            (_, '"') => stack.push(Context::Double),
            (_, '`') => stack.push(Context::Backtick),
            (Context::Group(opening, closing), c) if c == opening => {
                stack.push(Context::Group(opening, closing));
                cases.push(0);
            }
            (Context::Group(_, ')'), ')') if cases.last().is_some_and(|&n| n > 0) => {}
            (Context::Group(_, closing), c) if c == closing => {
                stack.pop();
                cases.pop();
                if stack.is_empty() {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Some(chars.len())
}

/// True if the reserved word `word` stands at `at` as a word of its own.
pub(super) fn keyword_at(chars: &[char], at: usize, word: &str) -> bool {
    let len = word.chars().count();
    let before = at.checked_sub(1).and_then(|i| chars.get(i));
    let boundary = |c: Option<&char>| {
        c.is_none_or(|&c| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
    };
    boundary(before)
        && chars.len() >= at + len
        && chars[at..at + len].iter().copied().eq(word.chars())
        && boundary(chars.get(at + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words_of(text: &str) -> Vec<String> {
        words(&tokenize(text))
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tokenize_unquotes_and_finds_redirections() {
        assert_eq!(words_of("r\"m\" -'rf' \\/"), strings(&["rm", "-rf", "/"]));
        assert_eq!(words_of("echo \"a b\" c"), strings(&["echo", "a b", "c"]));
        assert_eq!(words_of("echo $'\\x72\\155'"), strings(&["echo", "rm"]));
        assert_eq!(
            words_of("echo \"$(a \"b c\")\" d"),
            strings(&["echo", "$(a \"b c\")", "d"])
        );
        assert_eq!(
            tokenize("cat x>/dev/sda 2>&1 >> 'log file' <<<hi"),
            [
                Token::Word("cat".into()),
                Token::Word("x".into()),
                Token::Redirect {
                    op: ">".into(),
                    target: "/dev/sda".into()
                },
                Token::Redirect {
                    op: "2>&".into(),
                    target: "1".into()
                },
                Token::Redirect {
                    op: ">>".into(),
                    target: "log file".into()
                },
                Token::Redirect {
                    op: "<<<".into(),
                    target: "hi".into()
                },
            ]
        );
        assert_eq!(
            tokenize("echo &>>f"),
            [
                Token::Word("echo".into()),
                Token::Redirect {
                    op: "&>>".into(),
                    target: "f".into()
                },
            ]
        );
        assert_eq!(
            words_of("diff <(ls a) b"),
            strings(&["diff", "<(ls a)", "b"])
        );
    }

    #[test]
    fn skip_group_handles_quotes_and_nesting() {
        let chars: Vec<char> = "(a \")\" ')' $(b) `)`) tail".chars().collect();
        assert_eq!(skip_group(&chars, 0), 20);
        let open: Vec<char> = "(never closed".chars().collect();
        assert_eq!(skip_group(&open, 0), open.len());
    }
}
