//! A strict, single-pass reader for the chunk that makes up almost all of a
//! streamed answer: `{"id": …, "choices": [{"index": 0, "delta":
//! {"content": "…"}, "finish_reason": …}], …}` with no tool calls, refusal,
//! usage or error. A long answer is hundreds of thousands of these, and
//! serde's generic machinery (a key string and a match per field, an
//! `Option` and a `Vec` per chunk) was most of the plugin's time.
//!
//! Anything outside that shape — tool calls, a refusal, usage, an error,
//! escaped keys, duplicate fields, nesting deeper than serde allows, or text
//! that is not JSON — gives `None`, and the caller parses the chunk with
//! serde as before: this reader only ever agrees with it or declines.
//! `stream/differential.rs` holds it to that on tens of thousands of
//! generated chunks; `benches/chunks.rs` measures what it saves.

use std::borrow::Cow;

/// What a chunk of the common shape says.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Simple<'a> {
    /// The completion id.
    pub id: Option<Cow<'a, str>>,
    /// Whether a choice with index 0 (or without an index) is present.
    pub has_choice: bool,
    /// That choice's `delta.content`.
    pub content: Option<Cow<'a, str>>,
    /// That choice's `finish_reason`.
    pub finish_reason: Option<Cow<'a, str>>,
}

/// Reads `data` if it is a chunk of the common shape.
pub(crate) fn parse(data: &str) -> Option<Simple<'_>> {
    let mut r = Reader {
        text: data,
        bytes: data.as_bytes(),
        at: 0,
        depth: 0,
    };
    let mut out = Simple::default();
    let (mut id, mut choices, mut usage, mut error) = (false, false, false, false);
    r.ws();
    r.object(|r, key| {
        match key {
            b"id" => {
                once(&mut id)?;
                out.id = r.string_or_null()?;
            }
            b"choices" => {
                once(&mut choices)?;
                if !r.null() {
                    r.array(|r| r.choice(&mut out))?;
                }
            }
            // Usage and errors are rare: serde reads them.
            b"usage" => r.null_once(&mut usage)?,
            b"error" => r.null_once(&mut error)?,
            _ => r.skip()?,
        }
        Some(())
    })?;
    r.ws();
    (r.at == r.bytes.len()).then_some(out)
}

/// Serde refuses a field given twice; so does this reader, by declining.
fn once(seen: &mut bool) -> Option<()> {
    if std::mem::replace(seen, true) {
        None
    } else {
        Some(())
    }
}

/// serde_json's recursion limit is 128; past this the reader declines.
const MAX_DEPTH: u32 = 100;

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    depth: u32,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.ws();
        (self.peek() == Some(byte)).then(|| self.at += 1)
    }

    /// `null`, consumed, if it comes next.
    fn null(&mut self) -> bool {
        self.ws();
        if self.bytes[self.at..].starts_with(b"null") {
            self.at += 4;
            true
        } else {
            false
        }
    }

    fn deeper(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// An object, calling `field` with each key (raw; a key with an escape
    /// declines) positioned at its value.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.container(b'{', b'}', |r| {
            r.eat(b'"')?;
            let start = r.at;
            let end = start + special(&r.bytes[start..])?;
            if r.bytes[end] != b'"' {
                return None;
            }
            r.at = end + 1;
            r.eat(b':')?;
            r.ws();
            let bytes = r.bytes;
            field(r, &bytes[start..end])
        })
    }

    /// A field this reader takes only when it is `null`, and only once.
    fn null_once(&mut self, seen: &mut bool) -> Option<()> {
        once(seen)?;
        self.null().then_some(())
    }

    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.container(b'[', b']', |r| {
            r.ws();
            item(r)
        })
    }

    /// An object or an array, from `open` to `close`: `element` reads each
    /// of its comma-separated elements.
    fn container(
        &mut self,
        open: u8,
        close: u8,
        mut element: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.eat(open)?;
        self.deeper()?;
        self.ws();
        if self.peek() == Some(close) {
            self.at += 1;
            self.depth -= 1;
            return Some(());
        }
        loop {
            element(self)?;
            self.ws();
            match self.peek()? {
                b',' => self.at += 1,
                c if c == close => {
                    self.at += 1;
                    self.depth -= 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// One element of `choices`; the first with index 0 (or none) fills
    /// `out`, as serde's reading keeps only that one.
    fn choice(&mut self, out: &mut Simple<'a>) -> Option<()> {
        let mut index: Option<u64> = None;
        let mut content = None;
        let mut finish = None;
        let (mut seen_index, mut seen_delta, mut seen_finish) = (false, false, false);
        self.object(|r, key| {
            match key {
                b"index" => {
                    once(&mut seen_index)?;
                    if !r.null() {
                        index = Some(r.unsigned()?);
                    }
                }
                b"delta" => {
                    once(&mut seen_delta)?;
                    if !r.null() {
                        content = r.delta()?;
                    }
                }
                b"finish_reason" => {
                    once(&mut seen_finish)?;
                    finish = r.string_or_null()?;
                }
                _ => r.skip()?,
            }
            Some(())
        })?;
        if !out.has_choice && index.unwrap_or(0) == 0 {
            out.has_choice = true;
            out.content = content;
            out.finish_reason = finish;
        }
        Some(())
    }

    /// A `delta` object: its `content`; tool calls or a refusal decline.
    fn delta(&mut self) -> Option<Option<Cow<'a, str>>> {
        let mut content = None;
        let (mut seen_content, mut seen_refusal, mut seen_calls) = (false, false, false);
        self.object(|r, key| {
            match key {
                b"content" => {
                    once(&mut seen_content)?;
                    content = r.string_or_null()?;
                }
                b"refusal" => r.null_once(&mut seen_refusal)?,
                b"tool_calls" => r.null_once(&mut seen_calls)?,
                _ => r.skip()?,
            }
            Some(())
        })?;
        Some(content)
    }

    /// A non-negative integer that fits `u64`, as serde reads `index`.
    fn unsigned(&mut self) -> Option<u64> {
        self.ws();
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        let digits = &self.text[start..self.at];
        if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
            return None;
        }
        // A fraction or exponent makes it a float, which serde refuses.
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return None;
        }
        digits.parse().ok()
    }

    fn string_or_null(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.null() {
            Some(None)
        } else {
            self.string().map(Some)
        }
    }

    /// A string, borrowed unless it has escapes.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.at;
        let mut owned: Option<String> = None;
        let mut run = start;
        loop {
            let end = run + special(&self.bytes[run..])?;
            if self.bytes[end] < 0x20 {
                return None;
            }
            if self.bytes[end] == b'"' {
                self.at = end + 1;
                return Some(match owned {
                    None => Cow::Borrowed(&self.text[start..end]),
                    Some(mut s) => {
                        s.push_str(&self.text[run..end]);
                        Cow::Owned(s)
                    }
                });
            }
            let s = owned.get_or_insert_with(String::new);
            s.push_str(&self.text[run..end]);
            let escape = *self.bytes.get(end + 1)?;
            let mut next = end + 2;
            match escape {
                b'"' => s.push('"'),
                b'\\' => s.push('\\'),
                b'/' => s.push('/'),
                b'b' => s.push('\u{8}'),
                b'f' => s.push('\u{c}'),
                b'n' => s.push('\n'),
                b'r' => s.push('\r'),
                b't' => s.push('\t'),
                b'u' => {
                    let high = hex4(self.bytes.get(next..next + 4)?)?;
                    next += 4;
                    let c = match high {
                        0xD800..=0xDBFF => {
                            if self.bytes.get(next..next + 2)? != b"\\u" {
                                return None;
                            }
                            let low = hex4(self.bytes.get(next + 2..next + 6)?)?;
                            next += 6;
                            if !(0xDC00..=0xDFFF).contains(&low) {
                                return None;
                            }
                            char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))?
                        }
                        // A lone low surrogate: serde refuses it.
                        0xDC00..=0xDFFF => return None,
                        c => char::from_u32(c)?,
                    };
                    s.push(c);
                }
                _ => return None,
            }
            run = next;
        }
    }

    /// Skips one value, checking it is JSON.
    fn skip(&mut self) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => self.object(|r, _| r.skip()),
            b'[' => self.array(Self::skip),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.bytes[self.at..]
            .starts_with(word)
            .then(|| self.at += word.len())
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }
}

/// The position of the first byte that ends a run of plain string
/// characters: `"`, `\\` or a control character. Eight bytes at a time, as
/// serde_json does: inside a component there is no SIMD to lean on.
fn special(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    for (n, word) in words.enumerate() {
        let x = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
        let quote = x ^ (ONES * u64::from(b'"'));
        let backslash = x ^ (ONES * u64::from(b'\\'));
        // Each term flags its lowest matching byte exactly (a borrow can
        // only flag bytes above a true match), so the lowest flag of the
        // three is the first special byte.
        let flags = ((quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (x.wrapping_sub(ONES * 0x20) & !x))
            & HIGH;
        if flags != 0 {
            return Some(n * 8 + (flags.trailing_zeros() / 8) as usize);
        }
    }
    let done = bytes.len() - tail.len();
    tail.iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|p| done + p)
}

fn hex4(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |n, &d| {
        let v = char::from(d).to_digit(16)?;
        Some(n * 16 + v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simple<'a>(
        id: Option<&'a str>,
        content: Option<&'a str>,
        finish: Option<&'a str>,
    ) -> Simple<'a> {
        Simple {
            id: id.map(Cow::Borrowed),
            has_choice: true,
            content: content.map(Cow::Borrowed),
            finish_reason: finish.map(Cow::Borrowed),
        }
    }

    #[test]
    fn the_common_chunk_is_read() {
        let data = r#"{"id":"chatcmpl-Bx1","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1","system_fingerprint":null,"choices":[{"index":0,"delta":{"role":"assistant","content":"tok é"},"logprobs":null,"finish_reason":null}],"usage":null}"#;
        assert_eq!(
            parse(data),
            Some(simple(Some("chatcmpl-Bx1"), Some("tok é"), None))
        );
        let end = r#" { "choices" : [ { "delta" : { } , "finish_reason" : "stop" } ] } "#;
        assert_eq!(parse(end), Some(simple(None, None, Some("stop"))));
        assert_eq!(parse(r#"{"choices":[]}"#), Some(Simple::default()));
        assert_eq!(
            parse(r#"{"choices":null,"id":null}"#),
            Some(Simple::default())
        );
    }

    #[test]
    fn escapes_are_decoded() {
        let data =
            r#"{"choices":[{"delta":{"content":"a\"b\\c\/d\n\t\u00e9\ud83e\udd80\u0000"}}]}"#;
        assert_eq!(
            parse(data).and_then(|s| s.content).as_deref(),
            Some("a\"b\\c/d\n\té🦀\u{0}")
        );
    }

    #[test]
    fn only_the_first_choice_with_index_zero_counts() {
        let data = r#"{"choices":[{"index":1,"delta":{"content":"no"}},{"index":0,"delta":{"content":"yes"}},{"index":0,"delta":{"content":"later"}}]}"#;
        assert_eq!(parse(data).and_then(|s| s.content).as_deref(), Some("yes"));
        let none = r#"{"choices":[{"index":2,"delta":{"content":"no"}}]}"#;
        assert_eq!(parse(none), Some(Simple::default()));
    }

    /// Everything serde would read differently, or refuse, is declined.
    #[test]
    fn anything_else_is_declined() {
        for data in [
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#,
            r#"{"choices":[{"delta":{"refusal":"no"}}]}"#,
            r#"{"choices":[{"delta":{"refusal":""}}]}"#,
            r#"{"usage":{"prompt_tokens":1}}"#,
            r#"{"error":{"message":"x"}}"#,
            r#"{"id":"a","id":"b"}"#,
            r#"{"choices":[{"index":0,"index":0}]}"#,
            r#"{"choices":[{"index":0.0}]}"#,
            r#"{"choices":[{"index":-1}]}"#,
            r#"{"choices":[{"index":01}]}"#,
            r#"{"choices":[{"delta":{"content":5}}]}"#,
            r#"{"choices":[{"finish_reason":1}]}"#,
            r#"{"\u0069d":"x"}"#,
            r#"{"choices":[{"delta":{"content":"a\ud800"}}]}"#,
            r#"{"choices":[{"delta":{"content":"a\udc00b"}}]}"#,
            r#"{"choices":[{"delta":{"content":"bad\x"}}]}"#,
            "{\"choices\":[{\"delta\":{\"content\":\"raw\ttab\"}}]}",
            r#"{"choices":[{"delta":{"content":"x"}}]"#,
            r#"{"choices":[{"delta":{"content":"x"}}]} x"#,
            r#"{"a":[1,2,]}"#,
            r#"{"a":1.}"#,
            r#"{"a":tru}"#,
            r#"[]"#,
            "",
            "{not json",
        ] {
            assert_eq!(parse(data), None, "{data}");
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert_eq!(parse(&deep), None);
    }

    #[test]
    fn special_bytes_are_found_wherever_they_are() {
        for len in 0..40 {
            let plain = vec![b'a'; len];
            assert_eq!(special(&plain), None);
            for at in 0..len {
                for byte in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
                    let mut bytes = vec![0xC3; len];
                    // Bytes after the special one, special or not, do not
                    // change where it is.
                    bytes[at] = byte;
                    if at + 1 < len {
                        bytes[at + 1] = b'"';
                    }
                    assert_eq!(special(&bytes), Some(at), "{byte:#x} at {at} of {len}");
                }
            }
        }
        assert_eq!(
            special(&[0x20, 0x7f, 0x80, 0xff, b'!', b'#', b'[', b']']),
            None
        );
    }

    #[test]
    fn unknown_values_of_every_kind_are_skipped() {
        let data = r#"{"x":{"a":[true,false,null,-0.5e+3,12,"s\"",{}],"b":[]},"choices":[{"delta":{"content":"ok","extra":[1]},"logprobs":{"content":null}}]}"#;
        assert_eq!(parse(data).and_then(|s| s.content).as_deref(), Some("ok"));
    }
}
