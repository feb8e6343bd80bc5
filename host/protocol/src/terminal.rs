//! Text from plugins and models on the way to a terminal.
//!
//! A terminal obeys escape sequences wherever they come from: a tool output
//! or a model's answer holding `ESC ] 52` could rewrite the user's clipboard,
//! `ESC ] 8` could dress a link up as something else, and colour or cursor
//! sequences could hide or fake lines. Everything corral prints that a
//! plugin or a model wrote goes through [`inert`] first.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character except newline and tab written as a
/// visible escape (`\x1b`, `\r`, `\u{9b}`), so no escape sequence reaches the
/// terminal. Bidirectional overrides and other invisible formatting
/// characters are shown the same way, since they can make text read
/// differently from what it is.
///
/// ```
/// assert_eq!(corral_protocol::terminal::inert("a\x1b[31mred\tb\n"), "a\\x1b[31mred\tb\n");
/// ```
pub fn inert(text: &str) -> Cow<'_, str> {
    if is_clean(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !needs_escape(c) {
            out.push(c);
        } else if c == '\r' {
            out.push_str("\\r");
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// JSON text made safe for a terminal the same way: serde_json leaves DEL,
/// the C1 controls and invisible characters raw inside strings, so they are
/// written as `\uXXXX` escapes, which decode to the same value.
///
/// ```
/// let json = serde_json::to_string("a\u{9b}b").unwrap();
/// let safe = corral_protocol::terminal::inert_json(&json);
/// assert_eq!(safe, r#""a\u009bb""#);
/// assert_eq!(serde_json::from_str::<String>(&safe).unwrap(), "a\u{9b}b");
/// ```
pub fn inert_json(json: &str) -> Cow<'_, str> {
    if is_clean(json) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if needs_escape(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{:04x}", unit);
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Runs of this many spaces or more are shown as `␠×N`.
const SPACE_RUN: usize = 8;
/// Runs of this many newlines or more are shown as `↵×N`.
const NEWLINE_RUN: usize = 3;

/// `text` as an approval shows it: [`inert`], and besides every character
/// that could make what is read differ from what runs is written visibly —
/// tabs as `\t`, carriage returns as `\r`, spaces that are not U+0020 as
/// `\u{a0}`, long runs of spaces as `␠×N` and of newlines as `↵×N` (so a
/// tail pushed past the edge of the screen comes back into view), and the
/// two marks themselves escaped so that no text can fake them, and a
/// backslash doubled so that no text can fake an escape. Nothing is
/// dropped: the result is as long as it must be, and wraps where it is shown.
///
/// ```
/// let shown = corral_protocol::terminal::visible(&format!("echo hi{}; touch PWNED\t\u{202e}", " ".repeat(300)));
/// assert_eq!(shown, "echo hi␠×300; touch PWNED\\t\\u{202e}");
/// // The text `\t` (a backslash, then `t`) is not a tab.
/// assert_eq!(corral_protocol::terminal::visible(r"a\tb"), r"a\\tb");
/// ```
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ' ' || c == '\n' {
            let mut n = 1;
            while chars.peek() == Some(&c) {
                chars.next();
                n += 1;
            }
            match c {
                ' ' if n >= SPACE_RUN => {
                    let _ = write!(out, "␠×{n}");
                }
                '\n' if n >= NEWLINE_RUN => {
                    let _ = writeln!(out, "↵×{n}");
                }
                _ => out.extend(std::iter::repeat_n(c, n)),
            }
            continue;
        }
        match c {
            // Doubled so that a literal `\t` in the text cannot pass for an
            // escaped tab.
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 && needs_escape(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if needs_escape(c) || c == '␠' || c == '↵' || c.is_whitespace() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// A tool call's arguments as an approval shows them, whole: a JSON object
/// one `key: value` line each (string values decoded, so what the tool
/// receives is what is read), anything else as its text; all of it through
/// [`visible`].
///
/// ```
/// let shown = corral_protocol::terminal::visible_arguments(r#"{"command":"ls\t-l","n":2}"#);
/// assert_eq!(shown, "command: ls\\t-l\nn: 2");
/// ```
pub fn visible_arguments(arguments: &str) -> String {
    match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(arguments) {
        Ok(map) => map
            .iter()
            .map(|(k, v)| {
                let value = match v {
                    serde_json::Value::String(s) => visible(s),
                    other => visible(&other.to_string()),
                };
                format!("{}: {value}", visible(k))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(_) => visible(arguments),
    }
}

/// `text` made inert for one line of a log: like [`inert`], and newlines
/// and tabs are escaped too (`\n`, `\t`), so a path or a name holding them
/// cannot start a forged log line.
///
/// ```
/// assert_eq!(
///     corral_protocol::terminal::inert_line("a\nWARN forged\r\u{202e}"),
///     "a\\nWARN forged\\r\\u{202e}"
/// );
/// ```
pub fn inert_line(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c == '\n' || c == '\t' || needs_escape(c))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&inert(c.encode_utf8(&mut [0; 4]))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A log writer that makes each record inert ([`inert_line`]) before it
/// reaches `W`: whatever a record's fields hold (a client's path, a tool's
/// name, a plugin's log line), it stays one line with no control, bidi or
/// zero-width characters. The formatter hands over one whole record per
/// write, ending in its newline, which is kept.
#[derive(Debug)]
pub struct InertLog<W>(pub W);

impl<W: std::io::Write> std::io::Write for InertLog<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (body, newline) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (&*text, ""),
        };
        let mut out = inert_line(body).into_owned();
        out.push_str(newline);
        self.0.write_all(out.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Whether no character of `text` [needs an escape](needs_escape). Printable
/// ASCII, newline and tab (almost all of a model's answer) are checked 16
/// bytes at a time; only from the first other byte on is the text decoded
/// and checked character by character. A streamed answer goes through here
/// on its way to stdout, and the character-wise check alone was several
/// times the cost of writing it.
fn is_clean(text: &str) -> bool {
    const LANES: usize = 16;
    let plain = |b: u8| (b' '..=b'~').contains(&b) || b == b'\n' || b == b'\t';
    let bytes = text.as_bytes();
    let mut at = 0;
    for chunk in bytes.chunks_exact(LANES) {
        // `fold`, not `all`: no early exit, so the compiler checks the 16
        // bytes as one vector.
        if !chunk.iter().fold(true, |ok, &b| ok & plain(b)) {
            break;
        }
        at += LANES;
    }
    let rest = &bytes[at..];
    match rest.iter().position(|&b| !plain(b)) {
        None => true,
        // Every byte before `first` is ASCII, so it is a character boundary.
        Some(first) => !text[at + first..].chars().any(needs_escape),
    }
}

fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_invisible(c)
}

/// Characters that print as nothing yet change what text means or how it is
/// laid out: zero-width characters, bidirectional controls, the word joiner
/// family, the byte-order mark, variation selectors and the Unicode tag
/// characters (which can spell out a hidden ASCII message).
pub fn is_invisible(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

#[cfg(test)]
mod tests {
    use super::inert;

    #[test]
    fn a_log_record_stays_one_inert_line() {
        use std::io::Write as _;
        let mut log = super::InertLog(Vec::new());
        log.write_all("WARN path=a\nWARN forged\r\u{200b}x\n".as_bytes())
            .unwrap();
        assert_eq!(
            String::from_utf8(log.0).unwrap(),
            "WARN path=a\\nWARN forged\\r\\u{200b}x\n"
        );
    }

    #[test]
    fn escape_sequences_become_visible_text() {
        for (text, shown) in [
            ("plain\ttext\n", "plain\ttext\n"),
            ("\x1b]52;c;SGVsbG8=\x07", "\\x1b]52;c;SGVsbG8=\\x07"),
            (
                "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\",
                "\\x1b]8;;http://evil\\x1b\\click\\x1b]8;;\\x1b\\",
            ),
            ("over\rwrite\x7f", "over\\rwrite\\x7f"),
            ("c1\u{9b}31m", "c1\\u{9b}31m"),
            ("rtl\u{202e}txt", "rtl\\u{202e}txt"),
            ("tag\u{e0041}", "tag\\u{e0041}"),
            ("héllo wörld ✓", "héllo wörld ✓"),
        ] {
            assert_eq!(inert(text), shown, "{text:?}");
        }
    }

    #[test]
    fn the_fast_scan_finds_an_escape_wherever_it_sits() {
        // The 16-byte scan, its tail and the character-wise check after the
        // first non-ASCII byte must each catch every kind of character.
        let bad = [
            "\x1b",
            "\r",
            "\x7f",
            "\0",
            "\u{9b}",
            "\u{202e}",
            "\u{200b}",
            "\u{e0041}",
        ];
        for len in [0, 1, 15, 16, 17, 31, 32, 40] {
            let clean = "a".repeat(len);
            assert!(super::is_clean(&clean), "{len}");
            assert!(super::is_clean(&format!("{clean}é✓\t\n{clean}")), "{len}");
            for at in 0..=len {
                for b in bad {
                    let text = format!("{}{b}{}", &clean[..at], &clean[at..]);
                    assert!(!super::is_clean(&text), "{text:?}");
                    assert!(inert(&text).contains('\\'), "{text:?}");
                    // Behind a non-ASCII character, in the character-wise part.
                    let text = format!("{}é{b}{}", &clean[..at], &clean[at..]);
                    assert!(!super::is_clean(&text), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn approvals_show_whitespace_and_invisible_characters() {
        use super::visible;
        let hidden = format!("echo checking the build{}; touch PWNED", " ".repeat(300));
        assert_eq!(
            visible(&hidden),
            "echo checking the build␠×300; touch PWNED"
        );
        assert_eq!(visible("a  b\tc\rd"), "a  b\\tc\\rd");
        assert_eq!(visible("x\n\ny\n\n\n\nz"), "x\n\ny↵×4\nz");
        assert_eq!(
            visible("nb\u{a0}sp zw\u{200b}j"),
            "nb\\u{a0}sp zw\\u{200b}j"
        );
        assert_eq!(visible("fake ␠×3 ↵×9"), "fake \\u{2420}×3 \\u{21b5}×9");
        assert_eq!(visible("\x1b[2J\u{202e}"), "\\x1b[2J\\u{202e}");
        assert_eq!(visible("héllo ✓"), "héllo ✓");
    }

    #[test]
    fn a_literal_escape_in_the_text_is_not_an_escape() {
        use super::visible;
        assert_ne!(visible("a\\tb"), visible("a\tb"));
        assert_eq!(visible("a\\tb"), "a\\\\tb");
        assert_eq!(visible("\\u{202e}"), "\\\\u{202e}");
        assert_eq!(visible("\\\t"), "\\\\\\t");
    }
}
