//! An incremental parser for Server-Sent Events (`text/event-stream`), the
//! format every streaming LLM API answers in. corral's host reads the event
//! streams of MCP servers with it too.
//!
//! Feed it the response body in whatever chunks the network delivers — split
//! mid-line, mid-UTF-8 sequence, between the CR and LF of a line ending — and
//! it calls you back once per complete event. It follows the
//! [HTML specification's interpretation rules][spec]: LF, CRLF and lone CR end
//! lines, `:` starts a comment, one space after the field's colon is dropped,
//! `data` lines are joined with `\n`, an event without data is not
//! dispatched, and an unfinished event at the end of the stream is discarded
//! (see [`Parser::finish`]).
//!
//! [spec]: https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
//!
//! ```
//! use corral_sdk::sse::Parser;
//!
//! let mut parser = Parser::new();
//! let mut events = Vec::new();
//! parser.feed(b"event: ping\r\ndata: {\"a\":", &mut |e| events.push(e));
//! parser.feed(b"1}\r\n\r\ndata: [DONE]\n\n", &mut |e| events.push(e));
//! assert_eq!(events[0].event, "ping");
//! assert_eq!(events[0].data, r#"{"a":1}"#);
//! assert_eq!(events[1].event, "message");
//! assert_eq!(events[1].data, "[DONE]");
//! ```

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field, or `message` when the event had none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The last `id:` seen on the stream so far (empty if none), which the
    /// specification carries over from earlier events.
    pub id: String,
}

impl Event {
    /// The event as an [`EventRef`].
    pub fn as_ref(&self) -> EventRef<'_> {
        EventRef {
            event: &self.event,
            data: &self.data,
            id: &self.id,
        }
    }
}

/// One dispatched event, borrowed from the parser: what
/// [`Parser::feed_ref`] hands out, so that a stream of many small events
/// costs no allocation per event. [`EventRef::to_owned`] makes an [`Event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRef<'a> {
    /// The `event:` field, or `message` when the event had none.
    pub event: &'a str,
    /// The `data:` lines, joined with `\n`.
    pub data: &'a str,
    /// The last `id:` seen on the stream so far (empty if none).
    pub id: &'a str,
}

impl EventRef<'_> {
    /// An owned copy.
    pub fn to_owned(&self) -> Event {
        Event {
            event: self.event.to_owned(),
            data: self.data.to_owned(),
            id: self.id.to_owned(),
        }
    }
}

/// The incremental parser. One per response body.
#[derive(Debug, Default)]
pub struct Parser {
    /// Bytes of a line whose end has not arrived yet. Lines that arrive whole
    /// inside one chunk are parsed in place and never copied here.
    partial: Vec<u8>,
    /// The previous chunk ended with CR: an LF at the start of the next one
    /// belongs to the same line ending.
    after_cr: bool,
    /// No line has been completed yet (a byte-order mark may lead the stream).
    at_start: bool,
    event: String,
    /// Raw bytes, each data line followed by `\n`; decoded once per event.
    /// Cleared, never freed, between events: its capacity serves the next.
    data: Vec<u8>,
    has_data: bool,
    last_id: String,
    /// The last valid `retry:` value, in milliseconds.
    retry: Option<u64>,
    /// The decoded data of an event that was not valid UTF-8.
    lossy: String,
}

impl Parser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self {
            at_start: true,
            ..Self::default()
        }
    }

    /// Parses one chunk of the body, calling `on_event` for every event it
    /// completes.
    pub fn feed(&mut self, chunk: &[u8], on_event: &mut impl FnMut(Event)) {
        self.feed_ref(chunk, &mut |event| on_event(event.to_owned()));
    }

    /// [`feed`](Parser::feed) with borrowed events: nothing is allocated per
    /// event once the parser's buffers have grown to the stream's event size.
    pub fn feed_ref(&mut self, mut chunk: &[u8], on_event: &mut impl FnMut(EventRef<'_>)) {
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        // `memchr2` scans a word at a time; a byte loop was the parser's
        // main cost inside a wasm component.
        while let Some(end) = memchr::memchr2(b'\n', b'\r', chunk) {
            let line = &chunk[..end];
            if self.partial.is_empty() {
                self.line(line, on_event);
            } else {
                self.partial.extend_from_slice(line);
                // Taking the buffer keeps its capacity for the next split line.
                let whole = std::mem::take(&mut self.partial);
                self.line(&whole, on_event);
                self.partial = whole;
                self.partial.clear();
            }
            let cr = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            if cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.partial.extend_from_slice(chunk);
    }

    /// The last `id:` seen on the stream (empty if none), dispatched or not:
    /// an event without data sets it too, as the specification says.
    pub fn last_id(&self) -> &str {
        &self.last_id
    }

    /// The reconnection time the stream asked for with its last valid
    /// `retry:` field (ASCII digits, in milliseconds), if any. A client that
    /// reconnects waits that long; an LLM call never does.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Ends the stream. Returns `true` when the stream stopped in the middle
    /// of an event (an unterminated line, or fields without the blank line
    /// that dispatches them); that event is discarded, as the specification
    /// says, and the caller decides whether the message was complete.
    pub fn finish(&mut self) -> bool {
        let unfinished = !self.partial.is_empty() || self.has_data || !self.event.is_empty();
        self.partial.clear();
        self.reset_event();
        unfinished
    }

    fn line(&mut self, mut line: &[u8], on_event: &mut impl FnMut(EventRef<'_>)) {
        if self.at_start {
            self.at_start = false;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(on_event);
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(0) => return, // a comment, e.g. a keep-alive
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.push_str(&String::from_utf8_lossy(value));
            }
            b"id" if !value.contains(&0) => {
                self.last_id = String::from_utf8_lossy(value).into_owned();
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Digits only, so UTF-8; past `u64` it is ignored.
                if let Ok(ms) = std::str::from_utf8(value).unwrap_or_default().parse() {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(EventRef<'_>)) {
        if !self.has_data {
            self.reset_event();
            return;
        }
        self.data.pop(); // the `\n` after the last data line
        let data = match std::str::from_utf8(&self.data) {
            Ok(text) => text,
            Err(_) => {
                self.lossy = String::from_utf8_lossy(&self.data).into_owned();
                &self.lossy
            }
        };
        let event = if self.event.is_empty() {
            "message"
        } else {
            &self.event
        };
        on_event(EventRef {
            event,
            data,
            id: &self.last_id,
        });
        self.reset_event();
    }

    fn reset_event(&mut self) {
        self.event.clear();
        self.data.clear();
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn ev(event: &str, data: &str) -> Event {
        Event {
            event: event.to_owned(),
            data: data.to_owned(),
            id: String::new(),
        }
    }

    fn parse_chunks(chunks: &[&[u8]]) -> (Vec<Event>, bool) {
        let mut parser = Parser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut |e| out.push(e));
        }
        let unfinished = parser.finish();
        (out, unfinished)
    }

    fn parse_split_every(input: &[u8], size: usize) -> (Vec<Event>, bool) {
        let chunks: Vec<&[u8]> = input.chunks(size).collect();
        parse_chunks(&chunks)
    }

    const TRANSCRIPT: &str = "\u{feff}: keep-alive comment\r\n\
        event: message_start\r\n\
        data: {\"type\":\"message_start\",\"text\":\"héllo – 日本語 🦀\"}\r\n\
        \r\n\
        data:first\n\
        data: second\n\
        data:  indented\n\
        \n\
        id: 7\r\
        event: custom\r\
        data\r\
        \r\
        event: ignored-without-data\n\
        \n\
        data: [DONE]\n\
        \n";

    fn transcript_events() -> Vec<Event> {
        let mut last = ev("custom", "");
        last.id = "7".to_owned();
        let mut done = ev("message", "[DONE]");
        done.id = "7".to_owned();
        vec![
            ev(
                "message_start",
                "{\"type\":\"message_start\",\"text\":\"héllo – 日本語 🦀\"}",
            ),
            ev("message", "first\nsecond\n indented"),
            last,
            done,
        ]
    }

    #[test]
    fn whole_transcript_in_one_chunk() {
        assert_eq!(
            parse_chunks(&[TRANSCRIPT.as_bytes()]),
            (transcript_events(), false)
        );
    }

    #[test]
    fn every_chunk_size_gives_the_same_events() {
        // Size 1 splits every CRLF pair and every multi-byte character
        // (the BOM, `é`, `–`, `日`, the 4-byte crab) across calls.
        for size in 1..=TRANSCRIPT.len() {
            assert_eq!(
                parse_split_every(TRANSCRIPT.as_bytes(), size),
                (transcript_events(), false),
                "chunk size {size}"
            );
        }
    }

    #[test]
    fn every_two_way_split_gives_the_same_events() {
        let bytes = TRANSCRIPT.as_bytes();
        for at in 0..=bytes.len() {
            let (a, b) = bytes.split_at(at);
            assert_eq!(
                parse_chunks(&[a, b]),
                (transcript_events(), false),
                "split at {at}"
            );
        }
    }

    #[test]
    fn split_inside_a_multibyte_character() {
        let text = "data: 🦀é\n\n".as_bytes();
        let crab = text.iter().position(|&b| b == 0xF0).unwrap();
        let (out, _) = parse_chunks(&[
            &text[..crab + 2],
            &text[crab + 2..crab + 5],
            &text[crab + 5..],
        ]);
        assert_eq!(out, vec![ev("message", "🦀é")]);
    }

    #[test]
    fn cr_at_chunk_end_then_lf_is_one_line_ending() {
        // Were the LF taken as a second line end, the blank line would
        // dispatch the event early and `b` would be lost in a second event.
        let (out, _) = parse_chunks(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(out, vec![ev("message", "a\nb")]);
    }

    #[test]
    fn cr_then_empty_chunk_then_lf() {
        let (out, _) = parse_chunks(&[b"data: a\r", b"", b"\n\r\n"]);
        assert_eq!(out, vec![ev("message", "a")]);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let (out, _) = parse_chunks(&[b"data: a\xFFb\n\n"]);
        assert_eq!(out, vec![ev("message", "a\u{FFFD}b")]);
    }

    #[test]
    fn stream_cut_mid_event_is_reported_and_discarded() {
        assert_eq!(
            parse_chunks(&[b"data: [DONE]\n\ndata: {\"partial\":"]),
            (vec![ev("message", "[DONE]")], true)
        );
        // Complete lines, but no blank line to dispatch them.
        assert_eq!(parse_chunks(&[b"data: x\n"]), (vec![], true));
        assert_eq!(
            parse_chunks(&[b"data: x\n\n"]),
            (vec![ev("message", "x")], false)
        );
    }

    #[test]
    fn bom_only_stripped_at_stream_start() {
        let (out, _) = parse_chunks(&[b"data: a\n\n\xEF\xBB\xBFdata: b\n\n"]);
        // The second BOM makes an unknown field name; the event has no data.
        assert_eq!(out, vec![ev("message", "a")]);
    }

    #[test]
    fn id_and_retry_are_kept_with_or_without_data() {
        let mut parser = Parser::new();
        let mut out = Vec::new();
        assert_eq!((parser.last_id(), parser.retry()), ("", None));
        parser.feed(b"id: 4\nretry: 1500\n\n", &mut |e| out.push(e));
        assert_eq!((parser.last_id(), parser.retry()), ("4", Some(1500)));
        // Not digits only, or past `u64`: ignored.
        for bad in [
            "retry: 1.5",
            "retry: -1",
            "retry:",
            "retry: 99999999999999999999",
        ] {
            parser.feed(format!("{bad}\n\n").as_bytes(), &mut |e| out.push(e));
            assert_eq!(parser.retry(), Some(1500), "{bad}");
        }
        parser.feed(b"retry:20\ndata: x\n\n", &mut |e| out.push(e));
        assert_eq!(parser.retry(), Some(20));
        let mut x = ev("message", "x");
        x.id = "4".to_owned();
        assert_eq!(out, vec![x]);
    }

    #[test]
    fn field_without_colon_and_empty_data() {
        let (out, _) = parse_chunks(&[b"data\ndata\n\n"]);
        assert_eq!(out, vec![ev("message", "\n")]);
    }
}
