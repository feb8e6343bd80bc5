//! An SSE body of a streamable-HTTP server, read by the SDK's parser
//! (`corral_sdk::sse`, the one the provider plugins use) into the events
//! rmcp's client transport takes.

use super::HttpError;
use corral_sdk::sse::Parser;
use rmcp::transport::streamable_http_client::SseError;

/// The event rmcp's transport takes. The `sse-stream` crate, which rmcp
/// names in its interface, is a dependency for this type only.
pub(super) type Sse = sse_stream::Sse;

/// One SSE body being read.
pub(super) struct Reader {
    parser: Parser,
    /// The most bytes between two blank lines: no event is held longer.
    cap: usize,
    since_blank: usize,
    newline: bool,
    /// The stream's last event id and retry as rmcp has been given them
    /// (it resumes with them when it reconnects).
    told_id: String,
    told_retry: Option<u64>,
}

impl Reader {
    /// A reader at the start of a body, whose events hold at most `cap`
    /// bytes.
    pub(super) fn new(cap: usize) -> Self {
        Self {
            parser: Parser::new(),
            cap,
            since_blank: 0,
            newline: false,
            told_id: String::new(),
            told_retry: None,
        }
    }

    /// The events one piece of the body completes, or why it failed.
    pub(super) fn read(
        &mut self,
        piece: Result<impl AsRef<[u8]>, HttpError>,
    ) -> Vec<Result<Sse, SseError>> {
        let piece = match piece {
            Ok(piece) => piece,
            Err(e) => return vec![Err(SseError::Body(Box::new(e)))],
        };
        let bytes = piece.as_ref();
        if let Err(e) = self.count(bytes) {
            return vec![Err(SseError::Body(Box::new(e)))];
        }
        let mut out = Vec::new();
        let told_id = &mut self.told_id;
        self.parser.feed_ref(bytes, &mut |event| {
            if event.id != told_id.as_str() {
                event.id.clone_into(told_id);
            }
            out.push(Ok(Sse {
                // rmcp reads no `event:` and `message` alike.
                event: (event.event != "message").then(|| event.event.to_owned()),
                data: Some(event.data.to_owned()),
                id: (!event.id.is_empty()).then(|| event.id.to_owned()),
                retry: None,
            }));
        });
        // An `id:` or `retry:` outside a dispatched event still counts for
        // a reconnection: told in an event without data, which rmcp skips.
        let id = (self.parser.last_id() != self.told_id).then(|| self.parser.last_id().to_owned());
        let retry = self
            .parser
            .retry()
            .filter(|_| self.parser.retry() != self.told_retry);
        if id.is_some() || retry.is_some() {
            if let Some(id) = &id {
                self.told_id.clone_from(id);
            }
            self.told_retry = self.parser.retry();
            out.push(Ok(Sse {
                id,
                retry,
                ..Sse::default()
            }));
        }
        out
    }

    /// Counts the bytes since the last blank line: `Err` past the cap.
    fn count(&mut self, bytes: &[u8]) -> Result<(), HttpError> {
        for &b in bytes {
            match b {
                b'\n' if self.newline => self.since_blank = 0,
                b'\n' => self.newline = true,
                b'\r' => {}
                _ => self.newline = false,
            }
            self.since_blank += 1;
            if self.since_blank > self.cap {
                return Err(HttpError::TooLarge(self.cap / 1024));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(pieces: &[&[u8]], cap: usize) -> Vec<Result<Sse, String>> {
        let mut reader = Reader::new(cap);
        pieces
            .iter()
            .flat_map(|p| reader.read(Ok::<_, HttpError>(*p)))
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
    }

    #[test]
    fn events_arrive_as_rmcp_reads_them() {
        let body: &[u8] = b"id: 1\nretry: 3000\ndata:\n\nevent: message\ndata: {\"a\":\ndata: 1}\n\n: ping\n\nevent: other\r\ndata: x\r\n\r\n";
        let want = [
            Ok(Sse::default().data("").id("1")),
            Ok(Sse::default().retry(3000)),
            Ok(Sse::default().data("{\"a\":\n1}").id("1")),
            Ok(Sse::default().event("other").data("x").id("1")),
        ];
        // Whole, the retry is told after the piece's events; byte by
        // byte, as soon as its line ends.
        let whole = read_all(&[body], 1 << 20);
        assert_eq!(whole[0], want[0]);
        assert_eq!(
            whole[1..],
            [want[2].clone(), want[3].clone(), want[1].clone()]
        );
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        let split = read_all(&bytes, 1 << 20);
        assert_eq!(
            split,
            [
                Ok(Sse::default().id("1")),
                want[1].clone(),
                want[0].clone(),
                want[2].clone(),
                want[3].clone()
            ]
        );
    }

    #[test]
    fn an_id_without_data_is_told() {
        assert_eq!(
            read_all(&[b"data: a\n\nid: 9\n\n"], 1 << 20),
            vec![Ok(Sse::default().data("a")), Ok(Sse::default().id("9"))]
        );
    }

    #[test]
    fn an_event_past_the_cap_fails() {
        let out = read_all(
            &[
                b"data: 0123456789\n\n",
                b"data: 0123456789012345678901234567890",
            ],
            24,
        );
        assert_eq!(out[0], Ok(Sse::default().data("0123456789")));
        assert_eq!(out.len(), 2);
        assert!(out[1].as_ref().is_err_and(|e| e.contains("cap")), "{out:?}");
    }
}
