//! Readable text from HTML: a small, forgiving tokenizer and a converter to
//! Markdown or plain text that keeps headings, paragraphs, lists, links,
//! quotes, code blocks and tables, and drops scripts, styles, navigation,
//! forms and other page furniture. The main content (`<main>`, else the first
//! `<article>`) is preferred when it has enough text.

use std::borrow::Cow;

use crate::url::resolve;

/// One piece of an HTML document.
#[derive(Debug, PartialEq, Eq)]
enum Token<'a> {
    Text(&'a str),
    Start {
        name: &'a str,
        attributes: &'a str,
        self_closing: bool,
    },
    End {
        name: &'a str,
    },
}

/// Elements whose content is raw text up to their end tag.
const RAW_TEXT: &[&str] = &["script", "style", "textarea", "title", "xmp", "noembed"];

/// The tokens of a document with their byte offsets.
struct Tokens<'a> {
    html: &'a str,
    position: usize,
    /// Inside a raw-text element: everything up to `</name` is text.
    raw_until: Option<&'a str>,
}

impl<'a> Tokens<'a> {
    fn new(html: &'a str) -> Self {
        Self {
            html,
            position: 0,
            raw_until: None,
        }
    }
}

impl<'a> Iterator for Tokens<'a> {
    /// The token and the offset just past it.
    type Item = (Token<'a>, usize);

    fn next(&mut self) -> Option<Self::Item> {
        let html = self.html;
        let bytes = html.as_bytes();
        loop {
            let start = self.position;
            if start >= html.len() {
                return None;
            }
            if let Some(name) = self.raw_until.take() {
                let end = find_end_tag(html, start, name).unwrap_or(html.len());
                self.position = end;
                if end > start {
                    return Some((Token::Text(&html[start..end]), end));
                }
                continue;
            }
            if bytes[start] != b'<' {
                let end = html[start..].find('<').map_or(html.len(), |i| start + i);
                self.position = end;
                return Some((Token::Text(&html[start..end]), end));
            }
            let rest = &html[start..];
            let next = bytes.get(start + 1).copied().unwrap_or(0);
            if let Some(comment) = rest.strip_prefix("<!--") {
                self.position = comment
                    .find("-->")
                    .map_or(html.len(), |i| start + 4 + i + 3);
                continue;
            }
            if next == b'!' || next == b'?' {
                self.position = rest.find('>').map_or(html.len(), |i| start + i + 1);
                continue;
            }
            if next == b'/' && bytes.get(start + 2).is_some_and(u8::is_ascii_alphabetic) {
                let name_end = name_end(html, start + 2);
                let end = rest.find('>').map_or(html.len(), |i| start + i + 1);
                self.position = end;
                return Some((
                    Token::End {
                        name: &html[start + 2..name_end],
                    },
                    end,
                ));
            }
            if next.is_ascii_alphabetic() {
                let name_end = name_end(html, start + 1);
                let close = tag_close(html, name_end);
                let end = (close + 1).min(html.len());
                let inner = &html[name_end..close.min(html.len())];
                let self_closing = inner.ends_with('/');
                let name = &html[start + 1..name_end];
                if !self_closing && RAW_TEXT.iter().any(|raw| raw.eq_ignore_ascii_case(name)) {
                    self.raw_until = Some(name);
                }
                self.position = end;
                return Some((
                    Token::Start {
                        name,
                        attributes: inner.trim_end_matches('/'),
                        self_closing,
                    },
                    end,
                ));
            }
            // A `<` that starts no tag is text.
            self.position = start + 1;
            return Some((Token::Text(&html[start..start + 1]), start + 1));
        }
    }
}

/// The end of a tag name starting at `from`.
fn name_end(html: &str, from: usize) -> usize {
    html[from..]
        .find(|c: char| c.is_ascii_whitespace() || c == '/' || c == '>')
        .map_or(html.len(), |i| from + i)
}

/// The offset of the `>` closing a start tag whose attributes start at
/// `from`, skipping `>` inside quoted attribute values.
fn tag_close(html: &str, from: usize) -> usize {
    let bytes = html.as_bytes();
    let mut quote = None;
    let mut after_equals = false;
    for (i, &b) in bytes.iter().enumerate().skip(from) {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None => match b {
                b'>' => return i,
                b'"' | b'\'' if after_equals => quote = Some(b),
                b'=' => {
                    after_equals = true;
                    continue;
                }
                b if b.is_ascii_whitespace() => continue,
                _ => {}
            },
        }
        after_equals = false;
    }
    html.len()
}

/// The offset of `</name` (any case) at or after `from`.
fn find_end_tag(html: &str, from: usize, name: &str) -> Option<usize> {
    let mut search = from;
    while let Some(i) = html[search..].find("</") {
        let at = search + i;
        let candidate = html.get(at + 2..at + 2 + name.len());
        if candidate.is_some_and(|c| c.eq_ignore_ascii_case(name)) {
            return Some(at);
        }
        search = at + 2;
    }
    None
}

/// The value of attribute `wanted` in a start tag's attribute text, with
/// character references decoded.
fn attribute(attributes: &str, wanted: &str) -> Option<String> {
    let bytes = attributes.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b'/') {
            i += 1;
        }
        let name_start = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'=' {
            i += 1;
        }
        let name = &attributes[name_start..i];
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = "";
        if i < bytes.len() && bytes[i] == b'=' {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < bytes.len() && (bytes[i] == b'"' || bytes[i] == b'\'') {
                let quote = bytes[i];
                let start = i + 1;
                let end = bytes[start..]
                    .iter()
                    .position(|&b| b == quote)
                    .map_or(bytes.len(), |p| start + p);
                value = &attributes[start..end];
                i = end + 1;
            } else {
                let start = i;
                while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                    i += 1;
                }
                value = &attributes[start..i];
            }
        }
        if !name.is_empty() && name.eq_ignore_ascii_case(wanted) {
            return Some(decode_entities(value).into_owned());
        }
        if name.is_empty() {
            i += 1;
        }
    }
    None
}

/// Decodes character references (`&amp;`, `&#233;`, `&#xE9;` and the common
/// named ones); unknown ones are left as they are.
fn decode_entities(text: &str) -> Cow<'_, str> {
    if !text.contains('&') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        // The `;` that ends the reference, if it comes before a space or
        // another `&` within the longest name.
        let end = rest
            .char_indices()
            .skip(1)
            .take(33)
            .find(|&(_, c)| c == ';' || c == '&' || c.is_whitespace())
            .filter(|&(_, c)| c == ';')
            .map(|(i, _)| i);
        let decoded = end.and_then(|end| entity(&rest[1..end]).map(|c| (c, end)));
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The character a reference (without `&` and `;`) stands for.
fn entity(name: &str) -> Option<char> {
    if let Some(number) = name.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        return char::from_u32(code).filter(|&c| c != '\0');
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "ndash" => '–',
        "mdash" => '—',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "bull" => '•',
        "middot" => '·',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "deg" => '°',
        "times" => '×',
        "divide" => '÷',
        "euro" => '€',
        "pound" => '£',
        "yen" => '¥',
        "cent" => '¢',
        "sect" => '§',
        "para" => '¶',
        "larr" => '←',
        "rarr" => '→',
        "uarr" => '↑',
        "darr" => '↓',
        "shy" => '\u{ad}',
        "zwj" => '\u{200d}',
        "zwnj" => '\u{200c}',
        _ => return None,
    })
}

/// Elements dropped with everything inside them.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "math", "head", "nav", "footer", "aside",
    "form", "button", "select", "textarea", "iframe", "object", "canvas", "dialog", "audio",
    "video",
];

/// Elements without content or end tag.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

fn is(name: &str, set: &[&str]) -> bool {
    set.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// Blank lines a block element puts around itself: 2 for paragraphs, 1 for
/// lines, 0 for inline elements.
fn block_gap(name: &str) -> usize {
    const PARAGRAPHS: &[&str] = &[
        "p",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "pre",
        "blockquote",
        "table",
        "section",
        "article",
        "main",
        "header",
        "figure",
        "hr",
        "dl",
        "address",
        "details",
        "fieldset",
    ];
    const LINES: &[&str] = &[
        "div",
        "li",
        "tr",
        "dt",
        "dd",
        "br",
        "figcaption",
        "caption",
        "summary",
        "body",
        "center",
        "legend",
    ];
    if is(name, PARAGRAPHS) {
        2
    } else if is(name, LINES) {
        1
    } else {
        0
    }
}

/// What was extracted from a page.
pub(crate) struct Page {
    pub(crate) title: Option<String>,
    pub(crate) content: String,
    /// Links as (text, absolute URL), in order, without duplicates.
    pub(crate) links: Vec<(String, String)>,
}

/// Output format.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Markdown,
    Text,
}

/// Extracts the title and the readable content of `html`, fetched from `url`.
/// Conversion stops once the content passes `max_bytes`.
pub(crate) fn extract(html: &str, url: &str, format: Format, max_bytes: usize) -> Page {
    let outline = Outline::of(html);
    let base = outline
        .base
        .as_deref()
        .and_then(|b| resolve(url, b))
        .unwrap_or_else(|| url.to_string());
    let mut page = None;
    for range in [outline.main, outline.article, outline.body]
        .into_iter()
        .flatten()
    {
        let converted = convert(&html[range.0..range.1], &base, format, max_bytes);
        // Enough text to stand for the page (or more than will be returned).
        let substantial = converted.content.len() >= max_bytes
            || converted
                .content
                .chars()
                .filter(|c| c.is_alphanumeric())
                .count()
                >= 200;
        if substantial {
            page = Some(converted);
            break;
        }
    }
    let mut page = page.unwrap_or_else(|| convert(html, &base, format, max_bytes));
    page.title = outline.title;
    page
}

/// Where the parts of a document are.
#[derive(Default)]
struct Outline {
    title: Option<String>,
    base: Option<String>,
    main: Option<(usize, usize)>,
    article: Option<(usize, usize)>,
    body: Option<(usize, usize)>,
}

impl Outline {
    fn of(html: &str) -> Self {
        let mut outline = Self::default();
        // (name, start offset, nesting depth) of the elements being measured.
        let mut open: Vec<(&str, usize, usize)> = Vec::new();
        let mut in_title = false;
        for (token, end) in Tokens::new(html) {
            match token {
                Token::Start { name, .. } if name.eq_ignore_ascii_case("title") => {
                    in_title = outline.title.is_none();
                }
                Token::Text(text) if in_title => {
                    let title = collapse_whitespace(&decode_entities(text));
                    outline.title = (!title.is_empty()).then_some(title);
                    in_title = false;
                }
                Token::Start {
                    name, attributes, ..
                } if name.eq_ignore_ascii_case("base") && outline.base.is_none() => {
                    outline.base = attribute(attributes, "href");
                }
                Token::Start {
                    name, self_closing, ..
                } if !self_closing => {
                    for (open_name, _, depth) in &mut open {
                        if open_name.eq_ignore_ascii_case(name) {
                            *depth += 1;
                        }
                    }
                    let wanted = match name.to_ascii_lowercase().as_str() {
                        "main" => outline.main.is_none(),
                        "article" => outline.article.is_none(),
                        "body" => outline.body.is_none(),
                        _ => false,
                    };
                    if wanted && !open.iter().any(|(n, ..)| n.eq_ignore_ascii_case(name)) {
                        open.push((name, end, 1));
                    }
                }
                Token::End { name } => {
                    let mut closed = None;
                    for (i, (open_name, _, depth)) in open.iter_mut().enumerate() {
                        if open_name.eq_ignore_ascii_case(name) {
                            *depth -= 1;
                            if *depth == 0 {
                                closed = Some(i);
                            }
                        }
                    }
                    if let Some(i) = closed {
                        let (name, start, _) = open.remove(i);
                        let range = Some((start, end));
                        match name.to_ascii_lowercase().as_str() {
                            "main" => outline.main = range,
                            "article" => outline.article = range,
                            _ => outline.body = range,
                        }
                    }
                }
                _ => {}
            }
        }
        // Unclosed elements run to the end of the document.
        for (name, start, _) in open {
            let range = Some((start, html.len()));
            match name.to_ascii_lowercase().as_str() {
                "main" => outline.main = range,
                "article" => outline.article = range,
                _ => outline.body = range,
            }
        }
        outline
    }
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A list being written: its next item number, or `None` for bullets.
type List = Option<usize>;

/// Writes text with collapsed whitespace and block structure.
struct Writer {
    out: String,
    format: Format,
    /// A space is due before the next character.
    space: bool,
    /// Line breaks due before the next character.
    breaks: usize,
    /// Written before the next character (a list marker or heading hashes).
    prefix: String,
    /// Blockquote nesting.
    quote: usize,
    max_bytes: usize,
}

impl Writer {
    fn markdown(&self) -> bool {
        self.format == Format::Markdown
    }

    fn full(&self) -> bool {
        self.out.len() > self.max_bytes
    }

    fn block(&mut self, gap: usize) {
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

    /// Writes text, collapsing whitespace.
    fn text(&mut self, text: &str) {
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
    fn inline(&mut self, markup: &str) {
        self.flush();
        self.out.push_str(markup);
    }

    /// Writes preformatted text as is.
    fn raw(&mut self, text: &str) {
        self.flush();
        self.out.push_str(text);
    }
}

fn convert(html: &str, base: &str, format: Format, max_bytes: usize) -> Page {
    let mut w = Writer {
        out: String::new(),
        format,
        space: false,
        breaks: 0,
        prefix: String::new(),
        quote: 0,
        max_bytes,
    };
    let markdown = format == Format::Markdown;
    let mut skipping: Vec<&str> = Vec::new();
    let mut lists: Vec<List> = Vec::new();
    let mut pre = 0usize;
    let mut cells = 0usize;
    // The open link: its URL and where its text starts once it has any.
    let mut link: Option<(String, Option<usize>)> = None;
    let mut links: Vec<(String, String)> = Vec::new();

    for (token, _) in Tokens::new(html) {
        if w.full() {
            break;
        }
        if !skipping.is_empty() {
            match token {
                Token::Start {
                    name, self_closing, ..
                } if !self_closing && is(name, SKIPPED) => skipping.push(name),
                Token::End { name }
                    if skipping
                        .last()
                        .is_some_and(|s| s.eq_ignore_ascii_case(name)) =>
                {
                    skipping.pop();
                }
                // A page that never closes <head>.
                Token::Start { name, .. } if name.eq_ignore_ascii_case("body") => skipping.clear(),
                _ => {}
            }
            continue;
        }
        match token {
            Token::Text(text) => {
                let text = decode_entities(text);
                if pre > 0 {
                    w.raw(&text);
                } else if let Some((_, start @ None)) = &mut link {
                    if text.trim().is_empty() {
                        w.text(&text);
                    } else {
                        w.flush_before_text(&text);
                        if markdown {
                            w.out.push('[');
                        }
                        *start = Some(w.out.len());
                        w.text(text.trim_start());
                    }
                } else {
                    w.text(&text);
                }
            }
            Token::Start {
                name,
                attributes,
                self_closing,
            } => {
                let lower = name.to_ascii_lowercase();
                if is(&lower, SKIPPED) {
                    if !self_closing {
                        skipping.push(name);
                    }
                    continue;
                }
                let gap = block_gap(&lower);
                if gap > 0 {
                    w.block(gap);
                }
                match lower.as_str() {
                    "h1" | "h2" | "h3" | "h4" | "h5" | "h6" if markdown => {
                        let level = usize::from(lower.as_bytes()[1] - b'0');
                        w.prefix = format!("{} ", "#".repeat(level));
                    }
                    "ul" | "menu" => {
                        w.block(if lists.is_empty() { 2 } else { 1 });
                        lists.push(None);
                    }
                    "ol" => {
                        w.block(if lists.is_empty() { 2 } else { 1 });
                        let start = attribute(attributes, "start").and_then(|s| s.parse().ok());
                        lists.push(Some(start.unwrap_or(1)));
                    }
                    "li" => {
                        let indent = "  ".repeat(lists.len().saturating_sub(1));
                        let marker = match lists.last_mut() {
                            Some(Some(n)) => {
                                *n += 1;
                                format!("{}. ", *n - 1)
                            }
                            _ => "- ".to_string(),
                        };
                        w.prefix = format!("{indent}{marker}");
                    }
                    "pre" => {
                        if markdown && pre == 0 {
                            w.raw("```\n");
                        }
                        pre += 1;
                    }
                    "code" if markdown && pre == 0 => w.inline("`"),
                    "blockquote" if markdown => w.quote += 1,
                    "hr" if markdown => {
                        w.inline("---");
                        w.block(2);
                    }
                    "tr" => cells = 0,
                    "td" | "th" => {
                        if cells > 0 {
                            w.inline(" |");
                            w.space = true;
                        }
                        cells += 1;
                    }
                    "a" => {
                        link = attribute(attributes, "href")
                            .and_then(|href| resolve(base, &href))
                            .map(|url| (url, None));
                    }
                    "img" if markdown => {
                        let alt = attribute(attributes, "alt").unwrap_or_default();
                        let src = attribute(attributes, "src").and_then(|s| resolve(base, &s));
                        if let (false, Some(src)) = (alt.trim().is_empty(), src) {
                            w.inline(&format!("![{}]({src})", collapse_whitespace(&alt)));
                        }
                    }
                    _ => {}
                }
            }
            Token::End { name } => {
                let lower = name.to_ascii_lowercase();
                if is(&lower, VOID) {
                    continue;
                }
                match lower.as_str() {
                    "ul" | "ol" | "menu" => {
                        lists.pop();
                        w.block(if lists.is_empty() { 2 } else { 1 });
                    }
                    "pre" if pre > 0 => {
                        pre -= 1;
                        if markdown && pre == 0 {
                            if !w.out.ends_with('\n') {
                                w.out.push('\n');
                            }
                            w.out.push_str("```");
                        }
                    }
                    "code" if markdown && pre == 0 => w.out.push('`'),
                    "blockquote" if markdown => w.quote = w.quote.saturating_sub(1),
                    "a" => {
                        if let Some((url, Some(start))) = link.take() {
                            let text = collapse_whitespace(&w.out[start..]);
                            if markdown {
                                let trimmed = w.out.trim_end().len();
                                w.out.truncate(trimmed);
                                w.out.push_str(&format!("]({url})"));
                            }
                            if !links.iter().any(|(_, u)| *u == url) {
                                links.push((text, url));
                            }
                        }
                    }
                    _ => {}
                }
                let gap = block_gap(&lower);
                if gap > 0 {
                    w.block(gap);
                }
            }
        }
    }
    if markdown && let Some((_, Some(_))) = link {
        w.out.push(']');
    }
    let content = w.out.trim().to_string();
    Page {
        title: None,
        content,
        links,
    }
}

impl Writer {
    /// Writes what is due before `text`'s first visible character.
    fn flush_before_text(&mut self, text: &str) {
        if text.starts_with(char::is_whitespace) {
            self.space = true;
        }
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn markdown(html: &str) -> String {
        convert(html, "http://example.com/docs/", Format::Markdown, 1 << 20).content
    }

    #[test]
    fn tokenizes_tags_text_and_comments() {
        let tokens: Vec<Token<'_>> =
            Tokens::new("<p class=\"a>b\">x<!-- no --><br/>y < z<script>if (a<b) {}</script></P>")
                .map(|(t, _)| t)
                .collect();
        assert_eq!(
            tokens,
            vec![
                Token::Start {
                    name: "p",
                    attributes: " class=\"a>b\"",
                    self_closing: false
                },
                Token::Text("x"),
                Token::Start {
                    name: "br",
                    attributes: "",
                    self_closing: true
                },
                Token::Text("y "),
                Token::Text("<"),
                Token::Text(" z"),
                Token::Start {
                    name: "script",
                    attributes: "",
                    self_closing: false
                },
                Token::Text("if (a<b) {}"),
                Token::End { name: "script" },
                Token::End { name: "P" },
            ]
        );
    }

    #[test]
    fn attributes_and_entities() {
        assert_eq!(
            attribute(" href='/a?x=1&amp;y=2' data-x", "HREF").as_deref(),
            Some("/a?x=1&y=2")
        );
        assert_eq!(attribute(" data-x href=b", "href").as_deref(), Some("b"));
        assert_eq!(attribute(" data-x", "href"), None);
        assert_eq!(
            decode_entities("a &lt;b&gt; &#233;&#xe9; &bogus; & x"),
            "a <b> éé &bogus; & x"
        );
    }

    #[test]
    fn converts_structure_to_markdown() {
        let md = markdown(
            "<h1>Title</h1><p>Some   <b>bold</b>\n text with a <a href=\"a.html\">link</a>.</p>\
             <ul><li>one</li><li>two<ol><li>a</li><li>b</li></ol></li></ul>\
             <pre>let x = 1;\n  y</pre><p>Use <code>x</code> &amp; more</p>\
             <script>bad()</script><nav>menu</nav><blockquote>quoted</blockquote>",
        );
        assert_eq!(
            md,
            "# Title\n\nSome bold text with a [link](http://example.com/docs/a.html).\n\n\
             - one\n- two\n  1. a\n  2. b\n\n```\nlet x = 1;\n  y\n```\n\nUse `x` & more\n\n> quoted"
        );
    }

    #[test]
    fn plain_text_lists_links_separately() {
        let page = convert(
            "<p>See <a href=\"/x\">the x page</a> and <a href=\"#top\">top</a></p>",
            "http://h/a/b",
            Format::Text,
            1000,
        );
        assert_eq!(page.content, "See the x page and top");
        assert_eq!(
            page.links,
            vec![("the x page".to_string(), "http://h/x".to_string())]
        );
    }

    #[test]
    fn prefers_the_main_content_and_finds_the_title() {
        let body = "word ".repeat(60);
        let html = format!(
            "<html><head><title> The  page </title></head><body><div>header stuff</div>\
             <main><p>{body}</p></main><div>footer stuff</div></body></html>"
        );
        let page = extract(&html, "http://h/", Format::Markdown, 1 << 20);
        assert_eq!(page.title.as_deref(), Some("The page"));
        assert!(!page.content.contains("header stuff"), "{}", page.content);
        let short = "<html><body><p>just this</p><main>tiny</main></body></html>";
        let page = extract(short, "http://h/", Format::Markdown, 1 << 20);
        assert_eq!(page.content, "just this\n\ntiny");
    }

    #[test]
    fn tables_and_breaks() {
        assert_eq!(
            markdown(
                "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>x<br>y"
            ),
            "a | b\n1 | 2\n\nx\ny"
        );
    }

    #[test]
    fn tag_soup_never_panics() {
        const PIECES: &[&str] = &[
            "<",
            ">",
            "</",
            "/>",
            "a",
            "p",
            "&amp;",
            "&",
            ";",
            "&#",
            "x",
            "\"",
            "'",
            "=",
            "é",
            "<!--",
            "-->",
            "<!",
            "<pre>",
            "</pre>",
            "<a href=",
            "<a href='../x'>",
            "</a>",
            "<script>",
            "</script",
            "<li>",
            "<ol start=3>",
            "</ol>",
            " ",
            "\n",
            "<td>",
            "<title>",
            "<main>",
            "</main>",
            "<base href=/b/>",
            "<code>",
            "<h2>",
            "<br>",
            "<blockquote>",
            "<img alt=i src=s>",
            "<head>",
            "<body>",
            "\u{1F600}",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for round in 0..3000 {
            let mut html = String::new();
            for _ in 0..(round % 60) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                html.push_str(PIECES[(seed % PIECES.len() as u64) as usize]);
            }
            for format in [Format::Markdown, Format::Text] {
                let page = extract(&html, "http://h/a/b?q", format, 1 + round % 50);
                for (_, url) in &page.links {
                    assert!(
                        url.starts_with("http") || url.starts_with("mailto"),
                        "{url}"
                    );
                }
            }
        }
    }
}
