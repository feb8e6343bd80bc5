//! Markdown to styled lines: headings, lists, emphasis, inline code, quotes
//! and fenced code blocks coloured by a small keyword highlighter.

use super::text::{clean, wrap};
use pulldown_cmark::{CodeBlockKind, Event as Md, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// Renders Markdown `source` (which may be a partial, still-streaming
/// message) as lines wrapped to `width` columns. All text is made inert
/// first, so no escape sequence from the model reaches the terminal.
pub fn markdown(source: &str, width: usize) -> Vec<Line<'static>> {
    let source = clean(source);
    let mut r = Renderer::default();
    for event in Parser::new_ext(&source, Options::ENABLE_STRIKETHROUGH) {
        r.event(event);
    }
    r.flush();
    while r.lines.last().is_some_and(|l| l.spans.is_empty()) {
        r.lines.pop();
    }
    let mut out = Vec::with_capacity(r.lines.len());
    for (line, indent) in r.lines.into_iter().zip(r.indents) {
        out.extend(wrap(line, width, &" ".repeat(indent)));
    }
    out
}

/// A tail longer than this is cut at its last line end even without a blank
/// line, so one endless paragraph does not make every frame re-render it.
const TAIL_CUT: usize = 32 << 10;

/// The lines of a message that is still streaming, kept between frames:
/// the blocks that a blank line (outside a code fence) has closed are
/// rendered once, and each frame renders only the open tail after them. A
/// frame's work is then the tail's size, not the whole answer's. Rendering
/// block by block can differ in small ways from rendering the whole text
/// (a loose list, a reference defined later), so the finished message is
/// rendered whole once ([`markdown`]).
#[derive(Debug, Default)]
pub struct Streaming {
    width: usize,
    /// Bytes of the source rendered into the first `done` lines.
    upto: usize,
    /// How far the source has been scanned for block ends, and whether a
    /// code fence is open there.
    scanned: usize,
    in_fence: bool,
    /// The last block end found at or before `scanned`.
    cut: usize,
    done: usize,
    /// The closed blocks' lines, then the tail's, then a blank line.
    lines: Vec<Line<'static>>,
}

impl Streaming {
    /// `source`'s lines at `width`, followed by one blank line. `source` is
    /// expected to grow at its end; anything else starts over.
    pub fn lines(&mut self, source: &str, width: usize) -> &[Line<'static>] {
        if width != self.width
            || source.len() < self.scanned
            || !source.is_char_boundary(self.scanned)
        {
            *self = Self {
                width,
                ..Self::default()
            };
        }
        self.scan(source);
        self.lines.truncate(self.done);
        if self.cut > self.upto {
            let block = markdown(&source[self.upto..self.cut], width);
            if !block.is_empty() {
                if self.done > 0 {
                    self.lines.push(Line::default());
                }
                self.lines.extend(block);
            }
            self.upto = self.cut;
            self.done = self.lines.len();
        }
        let tail = markdown(&source[self.upto..], width);
        if !tail.is_empty() && self.done > 0 {
            self.lines.push(Line::default());
        }
        self.lines.extend(tail);
        self.lines.push(Line::default());
        &self.lines
    }

    /// Finds block ends in the whole lines after `scanned`.
    fn scan(&mut self, source: &str) {
        let rest = &source[self.scanned..];
        let mut at = self.scanned;
        for line in rest.split_inclusive('\n') {
            if !line.ends_with('\n') {
                break;
            }
            at += line.len();
            let trimmed = line.trim_start_matches(' ');
            if line.len() - trimmed.len() <= 3
                && (trimmed.starts_with("```") || trimmed.starts_with("~~~"))
            {
                self.in_fence = !self.in_fence;
            }
            if !self.in_fence && (line.trim().is_empty() || at - self.cut > TAIL_CUT) {
                self.cut = at;
            }
        }
        self.scanned = at;
    }
}

#[derive(Default)]
struct Renderer {
    lines: Vec<Line<'static>>,
    /// Continuation indent of each line in `lines`.
    indents: Vec<usize>,
    cur: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// Each open list: the next number, or `None` for bullets.
    lists: Vec<Option<u64>>,
    quote: usize,
    code: Option<(String, String)>,
    /// The prefix of the current line's continuation (list indent).
    indent: usize,
}

impl Renderer {
    fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(Style::default(), |acc, s| acc.patch(*s))
    }

    fn flush(&mut self) {
        if !self.cur.is_empty() {
            let spans = std::mem::take(&mut self.cur);
            self.lines.push(Line::from(spans));
            self.indents.push(self.indent);
        }
    }

    fn blank(&mut self) {
        self.flush();
        if self.lines.last().is_some_and(|l| !l.spans.is_empty()) {
            self.lines.push(Line::default());
            self.indents.push(0);
        }
    }

    fn start_line(&mut self) {
        if self.cur.is_empty() && self.quote > 0 {
            self.cur.push(Span::styled(
                "│ ".repeat(self.quote),
                Style::default().fg(Color::DarkGray),
            ));
        }
    }

    fn text(&mut self, text: &str) {
        // Character references (`&#27;`) decode to control characters after
        // the source was cleaned, so the parsed text is cleaned again.
        let text = &clean(text);
        let style = self.style();
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                self.flush();
            }
            if !part.is_empty() {
                self.start_line();
                self.cur.push(Span::styled(part.to_owned(), style));
            }
        }
    }

    fn event(&mut self, event: Md<'_>) {
        if let Some((_, body)) = &mut self.code {
            match event {
                Md::Text(t) => body.push_str(&clean(&t)),
                Md::End(TagEnd::CodeBlock) => self.end_code(),
                _ => {}
            }
            return;
        }
        match event {
            Md::Start(tag) => self.start(tag),
            Md::End(tag) => self.end(tag),
            Md::Text(t) => self.text(&t),
            Md::Code(t) => {
                self.start_line();
                self.cur
                    .push(Span::styled(clean(&t), Style::default().fg(Color::Cyan)));
            }
            Md::SoftBreak => self.text(" "),
            Md::HardBreak => self.flush(),
            Md::Rule => {
                self.blank();
                self.lines.push(Line::styled(
                    "────────",
                    Style::default().fg(Color::DarkGray),
                ));
                self.indents.push(0);
            }
            Md::Html(t) | Md::InlineHtml(t) => self.text(&t),
            Md::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph if self.lists.is_empty() => self.blank(),
            Tag::Heading { level, .. } => {
                self.blank();
                let n = match level {
                    HeadingLevel::H1 => 1,
                    HeadingLevel::H2 => 2,
                    HeadingLevel::H3 => 3,
                    _ => 4,
                };
                let style = Style::default()
                    .fg(Color::Magenta)
                    .add_modifier(Modifier::BOLD);
                self.cur
                    .push(Span::styled(format!("{} ", "#".repeat(n)), style));
                self.styles.push(style);
            }
            Tag::BlockQuote(_) => {
                self.blank();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.blank();
                let lang = match kind {
                    CodeBlockKind::Fenced(l) => l.split([',', ' ']).next().unwrap_or("").to_owned(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.blank();
                } else {
                    self.flush();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "• ".to_owned(),
                };
                let pad = "  ".repeat(depth);
                self.indent = pad.len() + marker.chars().count();
                self.cur.push(Span::raw(pad));
                self.cur
                    .push(Span::styled(marker, Style::default().fg(Color::Yellow)));
            }
            Tag::Emphasis => self
                .styles
                .push(Style::default().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self
                .styles
                .push(Style::default().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self
                .styles
                .push(Style::default().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { .. } => self.styles.push(
                Style::default()
                    .fg(Color::Blue)
                    .add_modifier(Modifier::UNDERLINED),
            ),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.flush(),
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.flush();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote = self.quote.saturating_sub(1);
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.indent = 0;
                }
            }
            TagEnd::Item => self.flush(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link => {
                self.styles.pop();
            }
            _ => {}
        }
    }

    fn end_code(&mut self) {
        let Some((lang, body)) = self.code.take() else {
            return;
        };
        let gutter = Style::default().fg(Color::DarkGray);
        if !lang.is_empty() {
            self.lines.push(Line::styled(format!("┌ {lang}"), gutter));
            self.indents.push(0);
        }
        for line in body.trim_end_matches('\n').split('\n') {
            let mut spans = vec![Span::styled("│ ", gutter)];
            spans.extend(highlight(line, &lang));
            self.lines.push(Line::from(spans));
            self.indents.push(2);
        }
        self.lines.push(Line::default());
        self.indents.push(0);
    }
}

const KEYWORDS: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "def",
    "default",
    "do",
    "elif",
    "else",
    "enum",
    "export",
    "extern",
    "false",
    "fi",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "import",
    "in",
    "interface",
    "let",
    "loop",
    "match",
    "mod",
    "mut",
    "new",
    "nil",
    "None",
    "null",
    "package",
    "pub",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "switch",
    "then",
    "trait",
    "true",
    "True",
    "False",
    "try",
    "type",
    "use",
    "var",
    "where",
    "while",
    "with",
    "yield",
];

/// Colours one line of code: keywords, strings, numbers and comments. A
/// guess that fits the languages models write most, not a parser.
fn highlight(line: &str, lang: &str) -> Vec<Span<'static>> {
    let hash_comments = matches!(
        lang,
        "python" | "py" | "sh" | "bash" | "shell" | "toml" | "yaml" | "yml" | "ruby" | "rb"
    );
    let mut out = Vec::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let mut plain = String::new();
    let flush = |plain: &mut String, out: &mut Vec<Span<'static>>| {
        if !plain.is_empty() {
            out.push(Span::raw(std::mem::take(plain)));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let rest: String = chars[i..].iter().collect();
        if (c == '/' && chars.get(i + 1) == Some(&'/')) || (c == '#' && hash_comments) {
            flush(&mut plain, &mut out);
            out.push(Span::styled(rest, Style::default().fg(Color::DarkGray)));
            break;
        }
        if c == '"' || c == '\'' || c == '`' {
            flush(&mut plain, &mut out);
            let mut j = i + 1;
            while j < chars.len() && chars[j] != c {
                if chars[j] == '\\' {
                    j += 1;
                }
                j += 1;
            }
            let end = (j + 1).min(chars.len());
            out.push(Span::styled(
                chars[i..end].iter().collect::<String>(),
                Style::default().fg(Color::Green),
            ));
            i = end;
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            let mut j = i;
            while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            let word: String = chars[i..j].iter().collect();
            let style = if c.is_ascii_digit() {
                Some(Style::default().fg(Color::Magenta))
            } else if KEYWORDS.contains(&word.as_str()) {
                Some(
                    Style::default()
                        .fg(Color::Blue)
                        .add_modifier(Modifier::BOLD),
                )
            } else {
                None
            };
            match style {
                Some(s) => {
                    flush(&mut plain, &mut out);
                    out.push(Span::styled(word, s));
                }
                None => plain.push_str(&word),
            }
            i = j;
            continue;
        }
        plain.push(c);
        i += 1;
    }
    flush(&mut plain, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(source: &str, width: usize) -> Vec<String> {
        markdown(source, width)
            .iter()
            .map(|l| l.to_string())
            .collect()
    }

    #[test]
    fn blocks_lists_and_code() {
        let text =
            "# Title\n\nSome *text* and `code`.\n\n- one\n- two\n\n```rust\nfn main() {}\n```\n";
        assert_eq!(
            plain(text, 40),
            [
                "# Title",
                "",
                "Some text and code.",
                "",
                "• one",
                "• two",
                "",
                "┌ rust",
                "│ fn main() {}",
            ]
        );
    }

    #[test]
    fn keywords_and_strings_are_coloured() {
        let spans = highlight("let s = \"x\"; // note", "rust");
        let styled: Vec<(String, Option<Color>)> = spans
            .iter()
            .map(|s| (s.content.to_string(), s.style.fg))
            .collect();
        assert_eq!(styled[0], ("let".into(), Some(Color::Blue)));
        assert!(styled.contains(&("\"x\"".into(), Some(Color::Green))));
        assert_eq!(styled.last().unwrap().1, Some(Color::DarkGray));
    }

    #[test]
    fn escapes_in_model_text_are_inert() {
        assert_eq!(
            plain("hi \x1b]52;c;QQ==\x07", 40),
            ["hi \\x1b]52;c;QQ==\\x07"]
        );
        assert_eq!(plain("&#27;[2J &#x9b;", 40), ["\\x1b[2J \\u{9b}"]);
    }

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn a_streaming_message_renders_as_the_whole_does() {
        let text = "# Title\n\nSome *text* and `code`.\n\n```rust\nfn main() {}\n\nlet x = 1;\n```\n\nlast para\nline two\n";
        let mut whole = markdown(text, 40);
        whole.push(Line::default());
        let mut s = Streaming::default();
        let mut shown = Vec::new();
        for end in (1..=text.len()).filter(|&e| text.is_char_boundary(e)) {
            shown = texts(s.lines(&text[..end], 40));
        }
        assert_eq!(shown, texts(&whole));
        // Only the tail after the last closed block is rendered again.
        assert_eq!(s.upto, text.find("last para").unwrap());
    }

    #[test]
    fn an_endless_paragraph_is_cut_at_line_ends() {
        let line = "word ".repeat(20) + "\n";
        let text = line.repeat(2000);
        let mut s = Streaming::default();
        let n = s.lines(&text, 80).len();
        assert!(n > 2000, "{n}");
        assert!(text.len() - s.upto <= TAIL_CUT + line.len());
    }
}
