//! A plugin's stdout and stderr: never the terminal. What it writes is kept
//! (up to a cap) and written to the host log under the plugin's name when the
//! call ends; the last lines also explain a trap (a Rust panic message lands
//! here).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

/// Bytes of output kept per call and stream; the rest is dropped.
const CAP: usize = 64 * 1024;

/// A capped in-memory sink shared between the store and the host.
#[derive(Clone, Default)]
pub(crate) struct LogPipe {
    buf: Arc<Mutex<Vec<u8>>>,
}

impl LogPipe {
    /// Everything kept so far, as text.
    pub(crate) fn text(&self) -> String {
        let buf = self.buf.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&buf).into_owned()
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
        if let Ok(mut buf) = self.buf.lock() {
            let room = CAP.saturating_sub(buf.len());
            buf.extend_from_slice(&data[..data.len().min(room)]);
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
