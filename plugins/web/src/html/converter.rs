//! The walk over a tree that writes its elements as Markdown or text.

use ego_tree::NodeRef;
use ego_tree::iter::Edge;
use scraper::Node;
use scraper::node::Element;

use super::writer::Writer;
use super::{Format, Page, collapse_whitespace, html_element};
use crate::url::{Url, resolve};

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
    if PARAGRAPHS.contains(&name) {
        2
    } else if LINES.contains(&name) {
        1
    } else {
        0
    }
}

/// A list being written: its next item number, or `None` for bullets.
type List = Option<usize>;

/// Writes the content of a tree as Markdown or text.
struct Converter<'a> {
    w: Writer,
    base: Option<&'a Url>,
    lists: Vec<List>,
    /// `<pre>` nesting.
    pre: usize,
    /// Cells written in the current table row.
    cells: usize,
    /// The open link: its URL and where its text starts once it has any.
    link: Option<(String, Option<usize>)>,
    links: Vec<(String, String)>,
}

/// Writes the content of `root` (fetched from `base`); stops once the
/// content passes `max_bytes`.
pub(super) fn convert(
    root: NodeRef<'_, Node>,
    base: Option<&Url>,
    format: Format,
    max_bytes: usize,
) -> Page {
    let mut c = Converter {
        w: Writer {
            out: String::new(),
            format,
            space: false,
            breaks: 0,
            prefix: String::new(),
            quote: 0,
            max_bytes,
        },
        base,
        lists: Vec::new(),
        pre: 0,
        cells: 0,
        link: None,
        links: Vec::new(),
    };
    // The skipped element being passed over.
    let mut skipping = None;
    for edge in root.traverse() {
        if c.w.full() {
            break;
        }
        match edge {
            Edge::Open(node) if skipping.is_none() => match node.value() {
                Node::Text(text) => c.text(text),
                Node::Element(element) => {
                    let skip = html_element(node).is_none_or(|e| SKIPPED.contains(&e.name()));
                    if skip {
                        skipping = Some(node.id());
                    } else {
                        c.open(element);
                    }
                }
                _ => {}
            },
            Edge::Close(node) if skipping.is_none() => {
                if let Some(element) = html_element(node) {
                    c.close(element.name());
                }
            }
            Edge::Close(node) if skipping == Some(node.id()) => skipping = None,
            _ => {}
        }
    }
    c.finish()
}

impl Converter<'_> {
    fn markdown(&self) -> bool {
        self.w.markdown()
    }

    fn text(&mut self, text: &str) {
        let w = &mut self.w;
        if self.pre > 0 {
            w.raw(text);
        } else if let Some((_, start @ None)) = &mut self.link {
            if text.trim().is_empty() {
                w.text(text);
            } else {
                w.flush_before_text(text);
                if w.markdown() {
                    w.out.push('[');
                }
                *start = Some(w.out.len());
                w.text(text.trim_start());
            }
        } else {
            w.text(text);
        }
    }

    /// The absolute URL of an attribute that holds a link.
    fn url(&self, element: &Element, attribute: &str) -> Option<String> {
        resolve(self.base, element.attr(attribute)?).map(String::from)
    }

    fn open(&mut self, element: &Element) {
        let name = element.name();
        let markdown = self.markdown();
        let gap = block_gap(name);
        if gap > 0 {
            self.w.block(gap);
        }
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" if markdown => {
                let level = usize::from(name.as_bytes()[1] - b'0');
                self.w.prefix = format!("{} ", "#".repeat(level));
            }
            "ul" | "menu" => {
                self.w.block(if self.lists.is_empty() { 2 } else { 1 });
                self.lists.push(None);
            }
            "ol" => {
                self.w.block(if self.lists.is_empty() { 2 } else { 1 });
                let start = element.attr("start").and_then(|s| s.trim().parse().ok());
                self.lists.push(Some(start.unwrap_or(1)));
            }
            "li" => {
                let indent = "  ".repeat(self.lists.len().saturating_sub(1));
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        *n += 1;
                        format!("{}. ", *n - 1)
                    }
                    _ => "- ".to_string(),
                };
                self.w.prefix = format!("{indent}{marker}");
            }
            "pre" => {
                if markdown && self.pre == 0 {
                    self.w.raw("```\n");
                }
                self.pre += 1;
            }
            "code" if markdown && self.pre == 0 => self.w.inline("`"),
            "blockquote" if markdown => self.w.quote += 1,
            "hr" if markdown => {
                self.w.inline("---");
                self.w.block(2);
            }
            "tr" => self.cells = 0,
            "td" | "th" => {
                if self.cells > 0 {
                    self.w.inline(" |");
                    self.w.space = true;
                }
                self.cells += 1;
            }
            "a" => self.link = self.url(element, "href").map(|url| (url, None)),
            "img" if markdown => {
                let alt = element.attr("alt").unwrap_or_default();
                if let (false, Some(src)) = (alt.trim().is_empty(), self.url(element, "src")) {
                    self.w
                        .inline(&format!("![{}]({src})", collapse_whitespace(alt)));
                }
            }
            _ => {}
        }
    }

    fn close(&mut self, name: &str) {
        if VOID.contains(&name) {
            return;
        }
        let markdown = self.markdown();
        let w = &mut self.w;
        match name {
            "ul" | "ol" | "menu" => {
                self.lists.pop();
                w.block(if self.lists.is_empty() { 2 } else { 1 });
            }
            "pre" if self.pre > 0 => {
                self.pre -= 1;
                if markdown && self.pre == 0 {
                    if !w.out.ends_with('\n') {
                        w.out.push('\n');
                    }
                    w.out.push_str("```");
                }
            }
            "code" if markdown && self.pre == 0 => w.out.push('`'),
            "blockquote" if markdown => w.quote = w.quote.saturating_sub(1),
            "a" => {
                if let Some((url, Some(start))) = self.link.take() {
                    let text = collapse_whitespace(&w.out[start..]);
                    if markdown {
                        let trimmed = w.out.trim_end().len();
                        w.out.truncate(trimmed);
                        w.out.push_str(&format!("]({url})"));
                    }
                    if !self.links.iter().any(|(_, u)| *u == url) {
                        self.links.push((text, url));
                    }
                }
            }
            _ => {}
        }
        let gap = block_gap(name);
        if gap > 0 {
            w.block(gap);
        }
    }

    fn finish(mut self) -> Page {
        // A link cut off by `max_bytes`.
        if self.markdown()
            && let Some((_, Some(_))) = self.link
        {
            self.w.out.push(']');
        }
        Page {
            title: None,
            content: self.w.out.trim().to_string(),
            links: self.links,
        }
    }
}
