//! Readable text from HTML. The page is parsed by html5ever (through
//! `scraper`) as a browser parses it: unclosed and misnested tags, every
//! named character reference, raw text in scripts and styles. The tree is
//! then written as Markdown or plain text that keeps headings, paragraphs,
//! lists, links, quotes, code blocks and tables, and drops scripts, styles,
//! navigation, forms and other page furniture. The main content (`<main>`,
//! else the first `<article>`) is preferred when it has enough text.

mod converter;
mod writer;

#[cfg(test)]
mod tests;

use ego_tree::NodeRef;
use scraper::node::Element;
use scraper::{Html, Node};

use self::converter::convert;
use crate::url::{Url, resolve};

/// The namespace of HTML elements (not SVG's or MathML's).
const HTML_NAMESPACE: &str = "http://www.w3.org/1999/xhtml";

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
