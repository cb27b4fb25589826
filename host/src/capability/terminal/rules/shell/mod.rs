//! How the policy reads shell syntax: a command line split into pipelines of
//! simple commands, with substitutions, here-documents and the commands a
//! shell is handed found too (words and invocations live in the submodules).

mod invocation;
mod quoting;
mod words;

use std::mem;

pub(super) use invocation::{
    Invocation, dash_c_string, exec_commands, exec_commands_of_find, invocation, is_shell,
    shell_payloads, starts_shell,
};
use words::keyword_at;
pub(super) use words::{Token, quote, tokenize, words};

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
