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
        markdown("<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>x<br>y"),
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
        markdown("<a href='/a?x=1&amp;y=2&copy=3'>q</a><img alt='&eacute;t&eacute;' src=i.png>"),
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
