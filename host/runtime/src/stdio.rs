//! A plugin's stdout and stderr: never the terminal. What it writes is kept
//! (up to a cap) and written to the host log under the plugin's name when the
//! call ends; it also explains a trap: [`exception`] finds what a crashed
//! plugin reported (a Rust panic, a Python traceback, a JavaScript error)
//! among its other output, and the last lines add context.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

/// Bytes of output kept per call and stream: the first half and the last
/// half of what was written (a crash is reported at the end of a long
/// output, its cause often at the start); the middle is dropped.
const CAP: usize = 64 * 1024;

/// Bytes of a reported exception shown in an error message.
const EXCEPTION_CAP: usize = 2048;
/// Lines of a panic message shown in an error message.
const PANIC_MESSAGE_LINES: usize = 8;

/// What one stream kept.
#[derive(Default)]
struct Kept {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: u64,
}

/// A capped in-memory sink shared between the store and the host.
#[derive(Clone, Default)]
pub(crate) struct LogPipe {
    buf: Arc<Mutex<Kept>>,
}

impl LogPipe {
    /// Everything kept so far, as text, with a marker where output was
    /// dropped.
    pub(crate) fn text(&self) -> String {
        let Ok(kept) = self.buf.lock() else {
            return String::new();
        };
        let mut text = String::from_utf8_lossy(&kept.head).into_owned();
        if kept.dropped > 0 {
            text.push_str(&format!("\n[… {} bytes not kept …]\n", kept.dropped));
        }
        let tail: Vec<u8> = kept.tail.iter().copied().collect();
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }

    /// The last non-empty lines, for error messages.
    pub(crate) fn tail(&self, lines: usize) -> String {
        let text = self.text();
        let mut kept: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .rev()
            .take(lines)
            .collect();
        kept.reverse();
        kept.join("\n")
    }
}

/// What a crashed plugin reported about its crash in `stderr`, if anything
/// recognisable: the exception line of the last Python traceback, else the
/// first Rust panic (its `panicked at` line and message), else the first
/// JavaScript-style `Error: message` line. Bounded to a few KiB.
pub(crate) fn exception(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    let found = python_exception(&lines)
        .or_else(|| rust_panic(&lines))
        .or_else(|| js_error(&lines))?;
    Some(bounded(found))
}

fn python_exception(lines: &[&str]) -> Option<String> {
    let start = lines
        .iter()
        .rposition(|l| l.trim_end() == "Traceback (most recent call last):")?;
    // Frames and source lines are indented; the exception is the first
    // line that is not.
    lines[start + 1..]
        .iter()
        .find(|l| !l.trim().is_empty() && !l.starts_with([' ', '\t']))
        .map(|l| l.trim_end().to_owned())
}

fn rust_panic(lines: &[&str]) -> Option<String> {
    let start = lines.iter().position(|l| {
        let l = l.trim_start();
        // `thread 'main' panicked at`, or with the thread's id after its
        // name (`thread 'main' (12) panicked at`), as newer Rust writes it.
        l.starts_with("thread '") && l.contains(" panicked at ")
    })?;
    let mut kept = vec![lines[start].trim()];
    // Rust 1.73 and later put the message on the lines after
    // `panicked at FILE:LINE:COL:`; before, it was on the same line.
    if lines[start].trim_end().ends_with(':') {
        kept.extend(
            lines[start + 1..]
                .iter()
                .take_while(|l| !l.starts_with("note: ") && !l.starts_with("stack backtrace:"))
                .take(PANIC_MESSAGE_LINES)
                .copied(),
        );
    }
    Some(kept.join("\n").trim_end().to_owned())
}

fn js_error(lines: &[&str]) -> Option<String> {
    lines.iter().find_map(|l| {
        let line = l.trim();
        let unprefixed = line.strip_prefix("Uncaught ").unwrap_or(line);
        let (name, message) = unprefixed.split_once(": ")?;
        let is_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
            && (name.ends_with("Error") || name.ends_with("Exception"));
        (is_name && !message.trim().is_empty()).then(|| line.to_owned())
    })
}

fn bounded(mut text: String) -> String {
    crate::budget::cut_marked(&mut text, EXCEPTION_CAP);
    text
}

impl IsTerminal for LogPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogPipe {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for LogPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if let Ok(mut kept) = self.buf.lock() {
            let half = CAP / 2;
            let room = half.saturating_sub(kept.head.len()).min(data.len());
            kept.head.extend_from_slice(&data[..room]);
            let rest = &data[room..];
            // Only the last `half` bytes of `rest` can survive.
            let rest = &rest[rest.len().saturating_sub(half)..];
            kept.dropped += (data.len() - room - rest.len()) as u64;
            kept.tail.extend(rest);
            let excess = kept.tail.len().saturating_sub(half);
            kept.tail.drain(..excess);
            kept.dropped += excess as u64;
        }
        // Accept everything: a chatty plugin loses output, it does not fail.
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::exception;

    #[test]
    fn a_rust_panic_is_found_amid_other_output() {
        let stderr = "step 1\nstep 2\nthread 'main' panicked at src/lib.rs:38:9:\nno config\nsecond line\n\
                      note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\
                      cleanup 1\ncleanup 2\ncleanup 3\ncleanup 4\n";
        assert_eq!(
            exception(stderr).as_deref(),
            Some("thread 'main' panicked at src/lib.rs:38:9:\nno config\nsecond line")
        );
        let with_id = "x\nthread '<unnamed>' (7) panicked at src/lib.rs:2:3:\nboom\n";
        assert_eq!(
            exception(with_id).as_deref(),
            Some("thread '<unnamed>' (7) panicked at src/lib.rs:2:3:\nboom")
        );
        let old = "x\nthread 'main' panicked at 'boom', src/lib.rs:1:1\nnote: run with\n";
        assert_eq!(
            exception(old).as_deref(),
            Some("thread 'main' panicked at 'boom', src/lib.rs:1:1")
        );
    }

    #[test]
    fn a_python_traceback_gives_its_exception_line() {
        let stderr = "loading\nTraceback (most recent call last):\n  File \"app.py\", line 3, in invoke\n    \
                      return parse(x)\n  File \"app.py\", line 9, in parse\n    raise ValueError(\"bad input\")\n\
                      ValueError: bad input: 'x'\nexiting\n";
        assert_eq!(
            exception(stderr).as_deref(),
            Some("ValueError: bad input: 'x'")
        );
        // Chained: the last traceback is the exception that ended the call.
        let chained = "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nKeyError: 'k'\n\n\
                       During handling of the above exception, another exception occurred:\n\n\
                       Traceback (most recent call last):\n  File \"a.py\", line 3, in f\n\
                       app.errors.ConfigMissing: no key\n";
        assert_eq!(
            exception(chained).as_deref(),
            Some("app.errors.ConfigMissing: no key")
        );
    }

    #[test]
    fn a_javascript_error_line_is_found() {
        let stderr = "fetching\nTypeError: cannot read properties of undefined (reading 'path')\n    at invoke (app.js:12:5)\n";
        assert_eq!(
            exception(stderr).as_deref(),
            Some("TypeError: cannot read properties of undefined (reading 'path')")
        );
        assert_eq!(
            exception("Uncaught Error: boom\n  invoke@app.js:3:9\n").as_deref(),
            Some("Uncaught Error: boom")
        );
    }

    #[test]
    fn ordinary_output_reports_nothing_and_reports_are_bounded() {
        assert_eq!(
            exception("working\nError handling enabled\nnote: x\n"),
            None
        );
        assert_eq!(exception(""), None);
        let long = format!("Error: {}\n", "x".repeat(10_000));
        let found = exception(&long).expect("found");
        assert!(found.len() < 2100, "{}", found.len());
        assert!(found.ends_with("[…]"), "{found}");
    }

    #[test]
    fn a_long_output_keeps_its_start_and_its_end() {
        use tokio::io::AsyncWriteExt;
        let pipe = super::LogPipe::default();
        let mut w = pipe.clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("rt");
        rt.block_on(async {
            w.write_all(b"first line\n").await.expect("write");
            for _ in 0..10_000 {
                w.write_all(b"chatter chatter chatter\n")
                    .await
                    .expect("write");
            }
            w.write_all(b"thread 'main' panicked at src/lib.rs:1:1:\nlate\n")
                .await
                .expect("write");
        });
        let text = pipe.text();
        assert!(text.starts_with("first line\n"), "{}", &text[..40]);
        assert!(text.contains("bytes not kept"));
        assert!(text.len() < 70 * 1024, "{}", text.len());
        assert_eq!(
            exception(&text).as_deref(),
            Some("thread 'main' panicked at src/lib.rs:1:1:\nlate")
        );
    }
}
