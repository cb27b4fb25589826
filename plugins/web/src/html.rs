//! Readable text from HTML. The page is parsed by html5ever (through
//! `scraper`) as a browser parses it: unclosed and misnested tags, every
//! named character reference, raw text in scripts and styles. The tree is
//! then written as Markdown or plain text that keeps headings, paragraphs,
//! lists, links, quotes, code blocks and tables, and drops scripts, styles,
//! navigation, forms and other page furniture. The main content (`<main>`,
//! else the first `<article>`) is preferred when it has enough text.

use ego_tree::NodeRef;
use ego_tree::iter::Edge;
use scraper::node::Element;
use scraper::{Html, Node};

use crate::url::{Url, resolve};

/// The namespace of HTML elements (not SVG's or MathML's).
const HTML_NAMESPACE: &str = "http://www.w3.org/1999/xhtml";

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
    let document = Html::parse_document(html);
    let outline = Outline::of(&document);
    let page_url = Url::parse(url).ok();
    // `<base href>` moves relative links elsewhere, but only to a web page.
    let base = outline
        .base
        .and_then(|href| resolve(page_url.as_ref(), href))
        .filter(|base| base.scheme() != "mailto")
        .or(page_url);
    let whole = outline.body.unwrap_or(document.tree.root());
    let mut page = None;
    for node in [outline.main, outline.article, Some(whole)]
        .into_iter()
        .flatten()
    {
        let converted = convert(node, base.as_ref(), format, max_bytes);
        // Enough text to stand for the page (or more than will be returned).
        let substantial = converted.content.len() >= max_bytes
            || converted
                .content
                .chars()
                .filter(|c| c.is_alphanumeric())
                .count()
                >= 200;
        let last = node == whole;
        page = Some(converted);
        if substantial || last {
            break;
        }
    }
    let mut page = page.expect("the whole page is always converted");
    page.title = outline.title;
    page
}

/// The parts of a document that matter here.
#[derive(Default)]
struct Outline<'a> {
    title: Option<String>,
    /// The first `<base href>`.
    base: Option<&'a str>,
    main: Option<NodeRef<'a, Node>>,
    article: Option<NodeRef<'a, Node>>,
    body: Option<NodeRef<'a, Node>>,
}

impl<'a> Outline<'a> {
    fn of(document: &'a Html) -> Self {
        let mut outline = Self::default();
        for node in document.tree.root().descendants() {
            let Some(element) = html_element(node) else {
                continue;
            };
            match element.name() {
                "title" if outline.title.is_none() => {
                    let text: String = node
                        .descendants()
                        .filter_map(|n| n.value().as_text())
                        .map(|t| &**t)
                        .collect();
                    let title = collapse_whitespace(&text);
                    outline.title = (!title.is_empty()).then_some(title);
                }
                "base" if outline.base.is_none() => outline.base = element.attr("href"),
                "main" if outline.main.is_none() => outline.main = Some(node),
                "article" if outline.article.is_none() => outline.article = Some(node),
                "body" if outline.body.is_none() => outline.body = Some(node),
                _ => {}
            }
        }
        outline
    }
}

/// The node as an HTML element (not text, and not an SVG or MathML element).
fn html_element(node: NodeRef<'_, Node>) -> Option<&Element> {
    node.value()
        .as_element()
        .filter(|e| &*e.name.ns == HTML_NAMESPACE)
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

    /// Writes what is due before `text`'s first visible character.
    fn flush_before_text(&mut self, text: &str) {
        if text.starts_with(char::is_whitespace) {
            self.space = true;
        }
        self.flush();
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

    /// Writes preformatted text as is (no-break spaces as spaces).
    fn raw(&mut self, text: &str) {
        self.flush();
        self.out.extend(text.chars().map(|c| match c {
            '\u{a0}' => ' ',
            c => c,
        }));
    }
}

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
fn convert(root: NodeRef<'_, Node>, base: Option<&Url>, format: Format, max_bytes: usize) -> Page {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Converts a whole document, with links relative to `url`.
    fn convert(html: &str, url: &str, format: Format, max_bytes: usize) -> Page {
        let document = Html::parse_document(html);
        let base = Url::parse(url).ok();
        super::convert(document.tree.root(), base.as_ref(), format, max_bytes)
    }

    fn markdown(html: &str) -> String {
        convert(html, "http://example.com/docs/", Format::Markdown, 1 << 20).content
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
    fn malformed_html_is_read_as_a_browser_reads_it() {
        // Unclosed paragraphs and items, misnested inline tags, a stray end
        // tag, an unquoted attribute with `>` after it, a `<` that starts no tag.
        assert_eq!(
            markdown(
                "<p>one <b>bold <i>both</b> italic</i><p>two</span>\
                 <ul><li>a<li>b</ul><p>1 < 2 <a href=x.html>x</a>"
            ),
            "one bold both italic\n\ntwo\n\n- a\n- b\n\n\
             1 < 2 [x](http://example.com/docs/x.html)"
        );
        // A comment that hides a tag, a CDATA-like section, a lone `&`.
        assert_eq!(
            markdown("<p>a<!-- <b>not</b> -->b &amp c & d</p>"),
            "ab & c & d"
        );
    }

    #[test]
    fn decodes_every_named_character_reference() {
        assert_eq!(
            markdown(
                "<p>&alpha;&beta; &frac12; &check; &rArr; &NotEqualTilde; &lang;x&rang; \
                 &Aring;ngstr&ouml;m &#x1F600; &#128512; &amp;lt; &notit; &unknown;</p>"
            ),
            "αβ ½ ✓ ⇒ \u{2242}\u{338} ⟨x⟩ Ångström 😀 😀 &lt; ¬it; &unknown;"
        );
        // In attributes too: a link's query and an image's alt text.
        assert_eq!(
            markdown(
                "<a href='/a?x=1&amp;y=2&copy=3'>q</a><img alt='&eacute;t&eacute;' src=i.png>"
            ),
            "[q](http://example.com/a?x=1&y=2&copy=3)![été](http://example.com/docs/i.png)"
        );
    }

    #[test]
    fn scripts_styles_and_furniture_are_dropped() {
        let md = markdown(
            "<head><style>p{}</style><script>var head;</script></head><body>\
             <script>if (a</p>b) { document.write('<p>no</p>') }</script>\
             <p>kept</p><style>.x{content:'no'}</style><noscript>enable js</noscript>\
             <template><p>no</p></template><form><input value=no><button>no</button></form>\
             <svg><title>no</title><text>no</text></svg><iframe src=x>no</iframe>\
             <nav>no</nav><aside>no</aside><footer>no</footer><p>also kept</p>",
        );
        assert_eq!(md, "kept\n\nalso kept");
    }

    #[test]
    fn relative_links_are_made_absolute_against_the_base_href() {
        let html = "<html><head><base href='/v2/'><title>t</title></head><body>\
                    <p><a href='page.html'>page</a> <a href='../up'>up</a> \
                    <a href='//cdn.example.org/x'>cdn</a> <a href='#frag'>frag</a> \
                    <a href='javascript:go()'>js</a> <a href='mailto:a@b.c'>mail</a> \
                    <a href='page.html'>again</a></p></body></html>";
        let page = extract(
            html,
            "https://example.com/docs/index.html",
            Format::Text,
            1000,
        );
        assert_eq!(page.content, "page up cdn frag js mail again");
        let urls: Vec<&str> = page.links.iter().map(|(_, url)| url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "https://example.com/v2/page.html",
                "https://example.com/up",
                "https://cdn.example.org/x",
                "mailto:a@b.c",
            ]
        );
        // Without a base, and with one that is not a web address.
        for base in ["", "<base href='javascript:x'>", "<base target=_blank>"] {
            let page = extract(
                &format!("{base}<a href='page.html'>p</a>"),
                "https://example.com/docs/index.html",
                Format::Markdown,
                1000,
            );
            assert_eq!(
                page.content, "[p](https://example.com/docs/page.html)",
                "{base}"
            );
        }
    }

    #[test]
    fn preformatted_text_keeps_its_spacing() {
        assert_eq!(
            markdown("<pre>\nfn  main() {\n&nbsp;&nbsp;x &lt; y;\n}</pre><p>a&nbsp;&nbsp;b</p>"),
            "```\nfn  main() {\n  x < y;\n}\n```\n\na b"
        );
    }

    #[test]
    fn deep_nesting_is_walked_without_recursion() {
        let depth = 100_000;
        let html = format!("{}deep{}", "<span>".repeat(depth), "</span>".repeat(depth));
        let page = extract(&html, "http://h/", Format::Text, 1000);
        assert_eq!(page.content, "deep");
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
