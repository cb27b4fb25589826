//! How the policy reads shell syntax: a command line split into pipelines of
//! simple commands, with substitutions, here-documents and the commands a
//! shell is handed found too (words and invocations live in the submodules).

mod invocation;
mod words;

use std::mem;

pub(super) use invocation::{
    Invocation, dash_c_string, exec_commands, exec_commands_of_find, invocation, is_shell,
    shell_payloads, starts_shell,
};
pub(super) use words::{Token, tokenize, words};
use words::{keyword_at, scan_group};

/// How deep `$(...)`, backticks and `<(...)` may nest before the parser stops
/// looking inside; a line that goes deeper is reported as too complex.
const MAX_NESTING: usize = 16;

/// Characters of look-ahead (deciding whether `((` is arithmetic) allowed per
/// character of input, so hostile lines cost linear time; a line that needs
/// more is reported as too complex.
const LOOKAHEAD_PER_CHAR: usize = 8;

/// One simple command found in a line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct SimpleCommand {
    /// The command as written, whitespace collapsed outside quotes, comments
    /// and here-document bodies removed.
    pub(super) text: String,
    /// The inner text of each `$(...)`, backtick and `<(...)`/`>(...)` in it.
    pub(super) substitutions: Vec<String>,
    /// The bodies of its here-documents.
    pub(super) heredocs: Vec<String>,
    id: usize,
}

/// Simple commands joined by `|`.
pub(super) type Pipeline = Vec<SimpleCommand>;

/// A parsed command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ParsedLine {
    /// Every pipeline, including those inside substitutions, in the order
    /// they end.
    pub(super) pipelines: Vec<Pipeline>,
    /// True if the line nests substitutions deeper, or needs more look-ahead,
    /// than the parser allows; its commands may be incomplete.
    pub(super) too_complex: bool,
}

impl ParsedLine {
    /// All simple commands, flattened.
    pub(super) fn commands(&self) -> impl Iterator<Item = &SimpleCommand> {
        self.pipelines.iter().flatten()
    }
}

/// Parses a command line into pipelines of simple commands.
///
/// Not a shell parser: it follows bash closely enough that quoting, comments,
/// `$'...'`, `${...}`, arithmetic and here-documents cannot hide a command,
/// and where it is unsure it finds more commands rather than fewer.
pub(super) fn parse(line: &str) -> ParsedLine {
    let chars = join_continuations_after_dollar(line);
    let budget = chars.len().saturating_mul(LOOKAHEAD_PER_CHAR) + 1024;
    let mut parser = Parser::new(&chars, 1, budget);
    parser.sequence(None, 0, true);
    let Parser {
        bodies, mut out, ..
    } = parser;
    for (id, body) in bodies {
        if let Some(command) = out
            .pipelines
            .iter_mut()
            .flatten()
            .find(|command| command.id == id)
        {
            command.heredocs.push(body);
        }
    }
    out
}

struct Parser<'a> {
    chars: &'a [char],
    pos: usize,
    next_id: usize,
    /// Characters of look-ahead left (see [`LOOKAHEAD_PER_CHAR`]).
    lookahead_budget: usize,
    /// Here-documents whose bodies start after the next newline.
    pending: Vec<PendingHeredoc>,
    /// Bodies read so far, keyed by the id of the command that owns them.
    bodies: Vec<(usize, String)>,
    out: ParsedLine,
}

impl<'a> Parser<'a> {
    fn new(chars: &'a [char], next_id: usize, lookahead_budget: usize) -> Self {
        Self {
            chars,
            pos: 0,
            next_id,
            lookahead_budget,
            pending: Vec::new(),
            bodies: Vec::new(),
            out: ParsedLine::default(),
        }
    }
}

struct PendingHeredoc {
    owner: usize,
    delimiter: String,
    strip_tabs: bool,
    /// A quoted delimiter turns off expansion in the body.
    literal: bool,
}

/// The command and pipeline being built at one nesting level.
struct Builder {
    command: SimpleCommand,
    pipeline: Pipeline,
    /// False inside `$((...))`: arithmetic is not a command, though
    /// substitutions inside it are.
    keep: bool,
    /// True where a `#` would start a comment.
    word_start: bool,
}

impl Builder {
    fn new(keep: bool, id: usize) -> Self {
        Self {
            command: SimpleCommand {
                id,
                ..SimpleCommand::default()
            },
            pipeline: Vec::new(),
            keep,
            word_start: true,
        }
    }

    fn push(&mut self, c: char) {
        self.command.text.push(c);
        self.word_start = matches!(c, '<' | '>' | '&' | '|');
    }

    fn push_str(&mut self, s: &str) {
        self.command.text.push_str(s);
        self.word_start = false;
    }

    fn space(&mut self) {
        if !self.command.text.is_empty() && !self.command.text.ends_with(' ') {
            self.command.text.push(' ');
        }
        self.word_start = true;
    }

    /// Ends the simple command (at `|`).
    fn end_command(&mut self, next_id: &mut usize) {
        let id = *next_id;
        *next_id += 1;
        let mut command = mem::replace(
            &mut self.command,
            SimpleCommand {
                id,
                ..SimpleCommand::default()
            },
        );
        self.word_start = true;
        if let Some(text) = strip_keywords(&command.text).map(str::to_owned)
            && self.keep
        {
            command.text = text;
            self.pipeline.push(command);
        }
    }

    /// Ends the pipeline (at `;`, `&&`, `||`, `&`, a newline or a parenthesis).
    fn end_pipeline(&mut self, next_id: &mut usize, out: &mut ParsedLine) {
        self.end_command(next_id);
        if !self.pipeline.is_empty() {
            out.pipelines.push(mem::take(&mut self.pipeline));
        }
    }
}

/// Drops reserved words that only group or branch (`if`, `then`, `{`, `!`,
/// `function NAME`, ...) from the front of a command; `None` if nothing is left.
fn strip_keywords(text: &str) -> Option<&str> {
    const LEADING: [&str; 14] = [
        "{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "esac",
        "coproc",
    ];
    let mut rest = text.trim();
    loop {
        let (first, after) = rest.split_once(' ').unwrap_or((rest, ""));
        if LEADING.contains(&first) {
            rest = after.trim_start();
        } else if first == "function" {
            // `function NAME { body`: the body is the command.
            let after_name = after.split_once(' ').map_or("", |(_, body)| body);
            rest = after_name.trim_start();
        } else {
            break;
        }
    }
    (!rest.is_empty()).then_some(rest)
}

impl Parser<'_> {
    fn peek(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn slice(&self, start: usize, end: usize) -> String {
        self.chars
            .get(start..end.min(self.chars.len()))
            .unwrap_or_default()
            .iter()
            .collect()
    }

    fn new_builder(&mut self, keep: bool) -> Builder {
        let id = self.next_id;
        self.next_id += 1;
        Builder::new(keep, id)
    }

    /// Parses commands until the unquoted `end` (`)` or a backtick) or the end
    /// of input. Returns the text consumed, without the terminator.
    fn sequence(&mut self, end: Option<char>, depth: usize, keep: bool) -> String {
        let start = self.pos;
        let mut b = self.new_builder(keep);
        let mut parens = 0usize;
        // Open `case ... esac`s: inside one, `)` ends a pattern, not `$(`.
        let mut cases = 0usize;
        while let Some(c) = self.peek(0) {
            // `case` and `esac` are reserved words only where a command starts.
            let command_start = b.word_start && strip_keywords(&b.command.text).is_none();
            if command_start && keyword_at(self.chars, self.pos, "case") {
                cases += 1;
            } else if command_start && keyword_at(self.chars, self.pos, "esac") {
                cases = cases.saturating_sub(1);
            }
            if Some(c) == end && (c != ')' || (parens == 0 && cases == 0)) {
                let raw = self.slice(start, self.pos);
                self.pos += 1;
                b.end_pipeline(&mut self.next_id, &mut self.out);
                return raw;
            }
            let next = self.peek(1);
            match c {
                // In arithmetic `#` is a base (`2#101`), never a comment.
                '#' if b.word_start && b.keep => self.comment(),
                '\'' if b.keep => self.single_quoted(&mut b),
                '\'' => self.transparent_quotes(&mut b, depth),
                '"' => self.double_quoted(&mut b, depth),
                '\\' => self.escaped(&mut b),
                '$' if next == Some('\'') => self.ansi_quoted(&mut b),
                '$' if next == Some('(') => self.dollar_paren(&mut b, depth),
                '$' if next == Some('{') => self.bracketed(&mut b, depth, '{', false),
                '$' if next == Some('[') => self.bracketed(&mut b, depth, '[', false),
                '`' => self.backtick(&mut b, depth),
                '<' | '>' if next == Some('(') => self.process_substitution(&mut b, depth),
                // `<<<`: a here-string, whose word is read as any other.
                '<' if next == Some('<') && self.peek(2) == Some('<') => {
                    self.pos += 3;
                    for c in "<<<".chars() {
                        b.push(c);
                    }
                }
                // No here-documents in arithmetic, where `<<` is a shift.
                '<' if next == Some('<') && b.keep => {
                    self.heredoc(&mut b);
                }
                '(' if next == Some('(') && self.closes_as_arithmetic(self.pos + 1) => {
                    self.arithmetic_command(&mut b, depth);
                }
                '\n' => {
                    self.pos += 1;
                    b.end_pipeline(&mut self.next_id, &mut self.out);
                    self.heredoc_bodies(depth, end == Some(')'));
                }
                ';' => {
                    self.pos += 1;
                    b.end_pipeline(&mut self.next_id, &mut self.out);
                }
                '&' => {
                    let prev = self.pos.checked_sub(1).and_then(|i| self.chars.get(i));
                    if next == Some('&') {
                        self.pos += 2;
                        b.end_pipeline(&mut self.next_id, &mut self.out);
                    } else if next == Some('>') || matches!(prev, Some('>' | '<')) {
                        // `&>file`, `2>&1`, `<&3`: a redirection, not a separator.
                        self.pos += 1;
                        b.push('&');
                    } else {
                        self.pos += 1;
                        b.end_pipeline(&mut self.next_id, &mut self.out);
                    }
                }
                '|' => {
                    let prev = self.pos.checked_sub(1).and_then(|i| self.chars.get(i));
                    if next == Some('|') {
                        self.pos += 2;
                        b.end_pipeline(&mut self.next_id, &mut self.out);
                    } else if prev == Some(&'>') {
                        self.pos += 1;
                        b.push('|');
                    } else {
                        self.pos += if next == Some('&') { 2 } else { 1 };
                        b.end_command(&mut self.next_id);
                    }
                }
                // Inside `[[ ... ]]` parentheses group or are part of a
                // pattern (`[[ a =~ (a)# ]]`); no command starts there.
                '(' | ')' if in_conditional(&b.command.text) => {
                    self.pos += 1;
                    b.push(c);
                }
                // `@(a|b)` (extglob) and `name=(a b)` (an array) belong to
                // the word they stand in: a `#` right after is not a comment.
                '(' if !b.word_start
                    && self.pos > 0
                    && matches!(self.chars[self.pos - 1], '@' | '?' | '*' | '+' | '!' | '=') =>
                {
                    self.word_group(&mut b, depth);
                }
                '(' => {
                    parens += 1;
                    self.pos += 1;
                    b.end_pipeline(&mut self.next_id, &mut self.out);
                }
                // A `)` that closes nothing is a syntax error or part of a
                // `[[ =~ ]]` pattern: either way not where a comment starts.
                ')' if parens == 0 && cases == 0 => {
                    self.pos += 1;
                    b.push(')');
                }
                ')' => {
                    parens = parens.saturating_sub(1);
                    self.pos += 1;
                    b.end_pipeline(&mut self.next_id, &mut self.out);
                }
                // Only space and tab separate words; other white space (a
                // carriage return, a no-break space) is part of the word.
                ' ' | '\t' => {
                    self.pos += 1;
                    b.space();
                }
                c => {
                    self.pos += 1;
                    b.push(c);
                }
            }
        }
        b.end_pipeline(&mut self.next_id, &mut self.out);
        self.slice(start, self.chars.len())
    }

    /// Skips a comment up to (not including) the newline.
    fn comment(&mut self) {
        while let Some(c) = self.peek(0) {
            if c == '\n' {
                break;
            }
            self.pos += 1;
        }
    }

    fn single_quoted(&mut self, b: &mut Builder) {
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
    fn ansi_quoted(&mut self, b: &mut Builder) {
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

    fn double_quoted(&mut self, b: &mut Builder, depth: usize) {
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
    fn closes_as_arithmetic(&mut self, open: usize) -> bool {
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
    fn arithmetic_command(&mut self, b: &mut Builder, depth: usize) {
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
    fn transparent_quotes(&mut self, b: &mut Builder, depth: usize) {
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
    fn escaped(&mut self, b: &mut Builder) {
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
    fn dollar_paren(&mut self, b: &mut Builder, depth: usize) {
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
    fn word_group(&mut self, b: &mut Builder, depth: usize) {
        self.group_in_word(b, depth, "");
    }

    /// `<(...)` or `>(...)`.
    fn process_substitution(&mut self, b: &mut Builder, depth: usize) {
        let open = self.peek(0).unwrap_or('<');
        self.pos += 1;
        if let Some(inner) = self.group_in_word(b, depth, &open.to_string()) {
            b.command.substitutions.push(inner);
        }
    }

    /// The `(...)` at the cursor, written into the word after `prefix`;
    /// its inner text, unless nested too deeply.
    fn group_in_word(&mut self, b: &mut Builder, depth: usize, prefix: &str) -> Option<String> {
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

    fn backtick(&mut self, b: &mut Builder, depth: usize) {
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
    fn nested_line(&mut self, line: &str, depth: usize) {
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
    fn too_deep(&mut self, b: &mut Builder) {
        self.out.too_complex = true;
        let rest = self.slice(self.pos, self.chars.len());
        self.pos = self.chars.len();
        b.push_str(&collapse_whitespace(&rest));
    }

    /// `${...}` or `$[...]`: separators inside are literal, substitutions are not.
    fn bracketed(&mut self, b: &mut Builder, depth: usize, open: char, in_double: bool) {
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
    fn heredoc(&mut self, b: &mut Builder) {
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
    fn heredoc_bodies(&mut self, depth: usize, in_substitution: bool) {
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
    fn expansions(&mut self, start: usize, end: usize, depth: usize) {
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

/// True if `text` (a command so far) is an unfinished `[[ ... ]]`.
fn in_conditional(text: &str) -> bool {
    let mut words = text.split(' ');
    words.next() == Some("[[") && !words.any(|word| word == "]]")
}

/// The line's characters with each backslash-newline right after a `$`
/// removed, so `$\<newline>'...'` reads as the `$'...'` bash makes of it.
fn join_continuations_after_dollar(line: &str) -> Vec<char> {
    let mut chars: Vec<char> = Vec::with_capacity(line.len());
    let mut rest = line.chars().peekable();
    while let Some(c) = rest.next() {
        chars.push(c);
        if c == '$' {
            while rest.peek() == Some(&'\\') {
                let mut ahead = rest.clone();
                ahead.next();
                if ahead.next() != Some('\n') {
                    break;
                }
                rest = ahead;
            }
        }
    }
    chars
}

/// Collapses runs of whitespace into one space (for display inside another
/// command's text).
fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if !c.is_whitespace() {
            out.push(c);
        } else if !out.ends_with(' ') {
            out.push(' ');
        }
    }
    out
}

#[cfg(test)]
mod tests;
