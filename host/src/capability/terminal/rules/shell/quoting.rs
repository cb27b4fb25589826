//! The parser's readers of quoted text, escapes, substitutions
//! (`$(...)`, backticks, `<(...)`), arithmetic, brackets and heredocs.

use std::mem;

use super::words::scan_group;
use crate::capability::terminal::rules::shell::{
    Builder, MAX_NESTING, Parser, PendingHeredoc, collapse_whitespace,
    join_continuations_after_dollar,
};

impl Parser<'_> {
    /// Skips a comment up to (not including) the newline.
    pub(super) fn comment(&mut self) {
        while let Some(c) = self.peek(0) {
            if c == '\n' {
                break;
            }
            self.pos += 1;
        }
    }

    pub(super) fn single_quoted(&mut self, b: &mut Builder) {
        b.push('\'');
        self.pos += 1;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            b.push(c);
            if c == '\'' {
                break;
            }
        }
        b.word_start = false;
    }

    /// `$'...'`, where `\'` does not end the string.
    pub(super) fn ansi_quoted(&mut self, b: &mut Builder) {
        b.push_str("$'");
        self.pos += 2;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            b.push(c);
            match c {
                '\\' => {
                    if let Some(escaped) = self.peek(0) {
                        self.pos += 1;
                        b.push(escaped);
                    }
                }
                '\'' => break,
                _ => {}
            }
        }
        b.word_start = false;
    }

    pub(super) fn double_quoted(&mut self, b: &mut Builder, depth: usize) {
        b.push('"');
        self.pos += 1;
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.pos += 1;
                    b.push('"');
                    break;
                }
                '\\' => self.escaped(b),
                '$' if self.peek(1) == Some('(') => self.dollar_paren(b, depth),
                '$' if self.peek(1) == Some('{') => self.bracketed(b, depth, '{', true),
                '`' => self.backtick(b, depth),
                _ => {
                    self.pos += 1;
                    b.push(c);
                }
            }
        }
        b.word_start = false;
    }

    /// True if the `(` at `open` closes with `))`: `$((...))` or `((...))`.
    /// Out of look-ahead budget, answers false (so the contents count as
    /// commands) and marks the line too complex.
    pub(super) fn closes_as_arithmetic(&mut self, open: usize) -> bool {
        if self.chars.get(open) != Some(&'(') {
            return false;
        }
        match scan_group(self.chars, open, &mut self.lookahead_budget) {
            Some(after_inner) => self.chars.get(after_inner) == Some(&')'),
            None => {
                self.out.too_complex = true;
                false
            }
        }
    }

    /// `((...))`: an arithmetic command, not a command; its substitutions are.
    pub(super) fn arithmetic_command(&mut self, b: &mut Builder, depth: usize) {
        if depth >= MAX_NESTING {
            self.too_deep(b);
            return;
        }
        b.end_pipeline(&mut self.next_id, &mut self.out);
        self.pos += 1;
        self.sequence(Some(')'), depth + 1, false);
    }

    /// Single quotes where bash does not honour them: in arithmetic (which
    /// bash expands as if double-quoted) and in `${...}` inside double
    /// quotes. The text is kept as written; substitutions inside it run.
    pub(super) fn transparent_quotes(&mut self, b: &mut Builder, depth: usize) {
        let start = self.pos + 1;
        let end = self.chars[start..]
            .iter()
            .position(|&c| c == '\'')
            .map_or(self.chars.len(), |offset| start + offset);
        let close = (end + 1).min(self.chars.len());
        b.push_str(&self.slice(self.pos, close));
        self.expansions(start, end, depth);
        self.pos = self.pos.max(close);
    }

    /// A backslash outside single quotes; backslash-newline joins lines
    /// (and leaves a word start a word start).
    pub(super) fn escaped(&mut self, b: &mut Builder) {
        self.pos += 1;
        match self.peek(0) {
            Some('\n') => {
                self.pos += 1;
                return;
            }
            Some(c) => {
                self.pos += 1;
                b.push('\\');
                b.push(c);
            }
            None => b.push('\\'),
        }
        b.word_start = false;
    }

    /// `$(...)` or arithmetic `$((...))`.
    pub(super) fn dollar_paren(&mut self, b: &mut Builder, depth: usize) {
        if depth >= MAX_NESTING {
            self.too_deep(b);
            return;
        }
        let arithmetic = self.closes_as_arithmetic(self.pos + 2);
        self.pos += 2;
        let inner = self.sequence(Some(')'), depth + 1, !arithmetic);
        b.push_str("$(");
        b.push_str(&collapse_whitespace(&inner));
        b.push(')');
        if !arithmetic {
            b.command.substitutions.push(inner);
        }
    }

    /// The `(...)` of an extglob pattern or an array inside a word: kept in
    /// the word, its contents read as commands too (so nothing hides there).
    pub(super) fn word_group(&mut self, b: &mut Builder, depth: usize) {
        self.group_in_word(b, depth, "");
    }

    /// `<(...)` or `>(...)`.
    pub(super) fn process_substitution(&mut self, b: &mut Builder, depth: usize) {
        let open = self.peek(0).unwrap_or('<');
        self.pos += 1;
        if let Some(inner) = self.group_in_word(b, depth, &open.to_string()) {
            b.command.substitutions.push(inner);
        }
    }

    /// The `(...)` at the cursor, written into the word after `prefix`;
    /// its inner text, unless nested too deeply.
    pub(super) fn group_in_word(
        &mut self,
        b: &mut Builder,
        depth: usize,
        prefix: &str,
    ) -> Option<String> {
        if depth >= MAX_NESTING {
            self.too_deep(b);
            return None;
        }
        self.pos += 1;
        let inner = self.sequence(Some(')'), depth + 1, true);
        b.push_str(prefix);
        b.push('(');
        b.push_str(&collapse_whitespace(&inner));
        b.push(')');
        Some(inner)
    }

    pub(super) fn backtick(&mut self, b: &mut Builder, depth: usize) {
        if depth >= MAX_NESTING {
            self.too_deep(b);
            return;
        }
        // As bash does: the body ends at the first backtick no backslash
        // escapes (quotes do not hide one); `\$`, `\``, `\\` lose their
        // backslash; what is left is parsed as a command line of its own.
        self.pos += 1;
        let mut inner = String::new();
        while let Some(c) = self.peek(0) {
            match (c, self.peek(1)) {
                ('`', _) => break,
                ('\\', Some(escaped @ ('$' | '`' | '\\'))) => {
                    inner.push(escaped);
                    self.pos += 2;
                }
                ('\\', Some(other)) => {
                    inner.push('\\');
                    inner.push(other);
                    self.pos += 2;
                }
                (c, _) => {
                    inner.push(c);
                    self.pos += 1;
                }
            }
        }
        self.pos += 1;
        self.nested_line(&inner, depth + 1);
        b.push_str("`");
        b.push_str(&collapse_whitespace(&inner));
        b.push_str("`");
        b.command.substitutions.push(inner);
    }

    /// Parses `line` (the unescaped body of a backtick substitution) as a
    /// command line of its own, its commands added to this line's.
    pub(super) fn nested_line(&mut self, line: &str, depth: usize) {
        let chars = join_continuations_after_dollar(line);
        let mut nested = Parser::new(&chars, self.next_id, self.lookahead_budget);
        nested.sequence(None, depth, true);
        self.next_id = nested.next_id;
        self.lookahead_budget = nested.lookahead_budget;
        self.bodies.append(&mut nested.bodies);
        self.out.too_complex |= nested.out.too_complex;
        self.out.pipelines.append(&mut nested.out.pipelines);
    }

    /// Past the nesting limit: record it and keep the rest as plain text.
    pub(super) fn too_deep(&mut self, b: &mut Builder) {
        self.out.too_complex = true;
        let rest = self.slice(self.pos, self.chars.len());
        self.pos = self.chars.len();
        b.push_str(&collapse_whitespace(&rest));
    }

    /// `${...}` or `$[...]`: separators inside are literal, substitutions are not.
    pub(super) fn bracketed(&mut self, b: &mut Builder, depth: usize, open: char, in_double: bool) {
        let close = if open == '[' { ']' } else { '}' };
        b.push('$');
        b.push(open);
        self.pos += 2;
        let mut level = 1usize;
        while let Some(c) = self.peek(0) {
            match c {
                '\\' => self.escaped(b),
                '\'' if open == '[' || in_double => self.transparent_quotes(b, depth),
                '\'' => self.single_quoted(b),
                '"' => self.double_quoted(b, depth),
                '$' if self.peek(1) == Some('(') => self.dollar_paren(b, depth),
                '`' => self.backtick(b, depth),
                _ => {
                    self.pos += 1;
                    b.push(c);
                    if c == open {
                        level += 1;
                    } else if c == close {
                        level -= 1;
                        if level == 0 {
                            break;
                        }
                    }
                }
            }
        }
        b.word_start = false;
    }

    /// `<<word` or `<<-word`: the body starts after the next newline.
    pub(super) fn heredoc(&mut self, b: &mut Builder) {
        self.pos += 2;
        b.push_str("<<");
        let strip_tabs = self.peek(0) == Some('-');
        if strip_tabs {
            self.pos += 1;
            b.push('-');
        }
        while self.peek(0).is_some_and(|c| c == ' ' || c == '\t') {
            self.pos += 1;
        }
        let mut delimiter = String::new();
        let mut literal = false;
        let mut quote: Option<char> = None;
        while let Some(c) = self.peek(0) {
            match (quote, c) {
                (None, '\'' | '"') => {
                    quote = Some(c);
                    literal = true;
                }
                (Some(open), c) if c == open => quote = None,
                (None, '\\') => {
                    literal = true;
                    if let Some(escaped) = self.peek(1) {
                        b.push('\\');
                        self.pos += 1;
                        delimiter.push(escaped);
                        b.push(escaped);
                        self.pos += 1;
                        continue;
                    }
                }
                (None, c) if c.is_whitespace() || ";&|()<>".contains(c) => break,
                (_, c) => delimiter.push(c),
            }
            b.push(c);
            self.pos += 1;
        }
        b.word_start = false;
        if !delimiter.is_empty() {
            self.pending.push(PendingHeredoc {
                owner: b.command.id,
                delimiter,
                strip_tabs,
                literal,
            });
        }
    }

    /// Reads the bodies of pending here-documents, which start here (just
    /// after a newline). Expanding bodies are searched for substitutions.
    /// In a substitution (`$(...)`, `<(...)`), bash also ends a body at its
    /// delimiter followed by the `)` that closes the substitution.
    pub(super) fn heredoc_bodies(&mut self, depth: usize, in_substitution: bool) {
        for heredoc in mem::take(&mut self.pending) {
            let body_start = self.pos;
            let mut line_start = self.pos;
            let (body_end, resume) = loop {
                if line_start >= self.chars.len() {
                    break (self.chars.len(), self.chars.len());
                }
                let line_end = self.chars[line_start..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.chars.len(), |offset| line_start + offset);
                let whole = self.slice(line_start, line_end);
                let line = if heredoc.strip_tabs {
                    whole.trim_start_matches('\t')
                } else {
                    &whole
                };
                if line == heredoc.delimiter {
                    break (line_start, (line_end + 1).min(self.chars.len()));
                }
                if in_substitution
                    && line
                        .strip_prefix(heredoc.delimiter.as_str())
                        .is_some_and(|after| {
                            after.starts_with([';', '&', '|', '(', ')', '<', '>', ' ', '\t'])
                        })
                {
                    // The rest of the line is shell code again (the `)`
                    // closing the substitution, `;; esac)`, ...).
                    let tabs = whole.chars().count() - line.chars().count();
                    let rest = line_start + tabs + heredoc.delimiter.chars().count();
                    break (line_start, rest);
                }
                line_start = line_end + 1;
            };
            let body = self.slice(body_start, body_end);
            if !heredoc.literal {
                self.expansions(body_start, body_end, depth);
            }
            self.bodies.push((heredoc.owner, body));
            self.pos = self.pos.max(resume);
        }
    }

    /// Finds the substitutions in an expanding here-document body, where
    /// quotes are ordinary characters.
    pub(super) fn expansions(&mut self, start: usize, end: usize, depth: usize) {
        self.pos = start;
        let mut scratch = self.new_builder(false);
        while self.pos < end {
            match (self.peek(0), self.peek(1)) {
                (Some('\\'), _) => self.pos += 2,
                (Some('$'), Some('(')) => self.dollar_paren(&mut scratch, depth),
                (Some('`'), _) => self.backtick(&mut scratch, depth),
                _ => self.pos += 1,
            }
        }
    }
}
