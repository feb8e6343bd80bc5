//! The pure parts of `web_fetch`: URLs, content types, HTML to Markdown and
//! the text cap. No I/O, so they are unit tested natively.

use url::Url;

/// Elements whose content is never page text: code, styling, embedded
/// documents and the navigation around the article.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas", "nav",
    "footer", "aside", "form", "button", "select", "dialog", "head",
];

/// `text` parsed as an absolute http(s) URL, or why not.
pub fn parse_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text.trim()).map_err(|e| {
        format!("`{text}` is not an absolute URL ({e}); write it as https://host/path")
    })?;
    check_scheme(url).map_err(|why| format!("{why}; web_fetch reads http and https URLs only"))
}

/// `url` if its scheme is http or https and it names a host.
pub fn check_scheme(url: Url) -> Result<Url, String> {
    match url.scheme() {
        "http" | "https" if url.host_str().is_some_and(|h| !h.is_empty()) => Ok(url),
        "http" | "https" => Err(format!("`{url}`, which names no host")),
        scheme => Err(format!("`{url}`, a `{scheme}:` URL")),
    }
}

/// `scheme://host:port` of a URL, the way grants.net names an origin.
pub fn origin_of(text: &str) -> String {
    match Url::parse(text) {
        Ok(url) => {
            let host = url.host_str().unwrap_or_default();
            match url.port_or_known_default() {
                Some(port) => format!("{}://{host}:{port}", url.scheme()),
                None => format!("{}://{host}", url.scheme()),
            }
        }
        Err(_) => text.to_owned(),
    }
}

/// How a body is turned into text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// HTML or XHTML, converted to Markdown.
    Html,
    /// Plain text, Markdown, CSV, XML and the like: as it is.
    Text,
    /// JSON: as it is.
    Json,
}

impl Kind {
    /// The kind of a `content-type` value, or `None` for a type web_fetch
    /// does not read (images, archives, PDFs, executables).
    pub fn of(content_type: &str) -> Option<Self> {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "text/html" | "application/xhtml+xml" => Some(Kind::Html),
            "application/json" => Some(Kind::Json),
            e if e.ends_with("+json") => Some(Kind::Json),
            "application/xml" | "application/javascript" | "application/ecmascript" => {
                Some(Kind::Text)
            }
            e if e.starts_with("text/") || e.ends_with("+xml") => Some(Kind::Text),
            _ => None,
        }
    }

    /// The text of `body` (UTF-8; invalid bytes become U+FFFD).
    pub fn render(self, body: &[u8]) -> Result<String, String> {
        let text = String::from_utf8_lossy(body);
        match self {
            Kind::Html => html_to_markdown(&text),
            Kind::Text | Kind::Json => Ok(text.into_owned()),
        }
    }
}

/// Markdown of an HTML page, without [`SKIPPED`] elements.
pub fn html_to_markdown(html: &str) -> Result<String, String> {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .build();
    let markdown = converter
        .convert(html)
        .map_err(|e| format!("the page's HTML could not be converted: {e}"))?;
    Ok(squeeze_blank_lines(&markdown))
}

/// At most one blank line in a row: skipped elements leave runs of them.
fn squeeze_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.trim().lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `text` cut to `max` characters, and the note saying so when it was.
pub fn cut(text: &str, max: usize) -> (&str, Option<String>) {
    match text.char_indices().nth(max) {
        None => (text, None),
        Some((at, _)) => {
            let total = text.chars().count();
            let note = format!(
                "[the text was cut: showing the first {max} of {total} characters; \
                 pass a larger max_chars (up to web-fetch's configured max_chars) to see more]"
            );
            (&text[..at], Some(note))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "a test fails loudly at the first surprise"
    )]
    use super::*;

    #[test]
    fn html_keeps_headings_and_links_and_drops_scripts_and_navigation() {
        let md = html_to_markdown(
            "<html><head><title>T</title><style>p{color:red}</style></head><body>\
             <nav><a href=\"/home\">Home</a></nav><h1>Release notes</h1>\
             <p>See <a href=\"https://example.com/docs\">the docs</a>.</p>\
             <script>steal()</script><footer>Copyright</footer></body></html>",
        )
        .unwrap();
        assert!(md.contains("# Release notes"), "{md}");
        assert!(md.contains("[the docs](https://example.com/docs)"), "{md}");
        for gone in ["steal", "color:red", "Home", "Copyright"] {
            assert!(!md.contains(gone), "{gone} in {md}");
        }
    }

    #[test]
    fn content_types_are_sorted_into_what_is_read() {
        assert_eq!(Kind::of("text/html; charset=utf-8"), Some(Kind::Html));
        assert_eq!(Kind::of("Application/JSON"), Some(Kind::Json));
        assert_eq!(Kind::of("application/problem+json"), Some(Kind::Json));
        assert_eq!(Kind::of("text/plain"), Some(Kind::Text));
        assert_eq!(Kind::of("image/png"), None);
        assert_eq!(Kind::of("application/octet-stream"), None);
    }

    #[test]
    fn urls_must_be_http_with_a_host() {
        assert!(parse_url("https://example.com/a").is_ok());
        assert!(
            parse_url("file:///etc/passwd")
                .unwrap_err()
                .contains("`file:` URL")
        );
        assert!(
            parse_url("example.com")
                .unwrap_err()
                .contains("not an absolute URL")
        );
        assert_eq!(
            origin_of("http://127.0.0.1:8080/x?y"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(origin_of("https://Example.com/"), "https://example.com:443");
    }

    #[test]
    fn the_cut_is_on_a_character_and_says_so() {
        assert_eq!(cut("héllo", 10), ("héllo", None));
        let (text, note) = cut("héllo", 2);
        assert_eq!(text, "hé");
        assert!(note.unwrap().contains("first 2 of 5 characters"));
    }
}
