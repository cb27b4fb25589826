//! Text written with collapsed whitespace and block structure.

use super::Format;

/// Writes text with collapsed whitespace and block structure.
pub(super) struct Writer {
    pub(super) out: String,
    pub(super) format: Format,
    /// A space is due before the next character.
    pub(super) space: bool,
    /// Line breaks due before the next character.
    pub(super) breaks: usize,
    /// Written before the next character (a list marker or heading hashes).
    pub(super) prefix: String,
    /// Blockquote nesting.
    pub(super) quote: usize,
    pub(super) max_bytes: usize,
}

impl Writer {
    pub(super) fn markdown(&self) -> bool {
        self.format == Format::Markdown
    }

    pub(super) fn full(&self) -> bool {
        self.out.len() > self.max_bytes
    }

    pub(super) fn block(&mut self, gap: usize) {
        self.breaks = self.breaks.max(gap);
        self.space = false;
    }

    /// Writes what is due before the next character.
    fn flush(&mut self) {
        if self.breaks > 0 && !self.out.is_empty() {
            let trimmed = self.out.trim_end_matches([' ', '\t']).len();
            self.out.truncate(trimmed);
            for _ in 0..self.breaks {
                self.out.push('\n');
            }
            if self.markdown() {
                for _ in 0..self.quote {
                    self.out.push_str("> ");
                }
            }
            self.space = false;
        } else if self.space && !self.out.is_empty() && !self.out.ends_with(['\n', ' ']) {
            self.out.push(' ');
        }
        self.breaks = 0;
        self.space = false;
        if !self.prefix.is_empty() {
            self.out.push_str(&self.prefix);
            self.prefix.clear();
        }
    }

    /// Writes what is due before `text`'s first visible character.
    pub(super) fn flush_before_text(&mut self, text: &str) {
        if text.starts_with(char::is_whitespace) {
            self.space = true;
        }
        self.flush();
    }

    /// Writes text, collapsing whitespace.
    pub(super) fn text(&mut self, text: &str) {
        for c in text.chars() {
            if c.is_whitespace() {
                self.space = true;
            } else {
                if self.breaks > 0 || self.space || !self.prefix.is_empty() {
                    self.flush();
                }
                self.out.push(c);
            }
        }
    }

    /// Writes markup (`[`, a backtick) as if it were a character of text.
    pub(super) fn inline(&mut self, markup: &str) {
        self.flush();
        self.out.push_str(markup);
    }

    /// Writes preformatted text as is (no-break spaces as spaces).
    pub(super) fn raw(&mut self, text: &str) {
        self.flush();
        self.out.extend(text.chars().map(|c| match c {
            '\u{a0}' => ' ',
            c => c,
        }));
    }
}
