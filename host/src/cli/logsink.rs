//! Where log records go: stderr, or, while the interactive UI owns the
//! terminal, into its transcript, so that a warning (a missing API key, a
//! denied request) is read when it happens instead of after exit. Each
//! record is made inert on its way, whichever way it goes.

use std::sync::Mutex;
use tokio::sync::mpsc::UnboundedSender;

/// One log record for the UI: its text, and whether it is a warning or an
/// error (shown as one).
pub(crate) type Line = (String, bool);

/// The UI's receiver of log records while it runs.
static SINK: Mutex<Option<UnboundedSender<Line>>> = Mutex::new(None);

/// Sends the log records to `tx` until [`release`].
pub(crate) fn capture(tx: UnboundedSender<Line>) {
    if let Ok(mut sink) = SINK.lock() {
        *sink = Some(tx);
    }
}

/// Sends log records to stderr again.
pub(crate) fn release() {
    if let Ok(mut sink) = SINK.lock() {
        *sink = None;
    }
}

/// A writer for one record: the formatter hands it the whole record, and
/// it goes to the UI if one listens, else to stderr.
pub(crate) struct Record;

impl std::io::Write for Record {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let line = corral_protocol::terminal::inert_line(text.trim_end_matches('\n')).into_owned();
        let sent = SINK.lock().ok().and_then(|sink| {
            let tx = sink.as_ref()?;
            let level = line.trim_start();
            let alarm = level.starts_with("WARN") || level.starts_with("ERROR");
            tx.send((level.to_owned(), alarm)).ok()
        });
        if sent.is_none() {
            let mut err = std::io::stderr().lock();
            // Not after a progress frame, on its line.
            super::render::erase_progress(&mut err);
            // The record and its newline in one write: another writer of
            // the same pipe (stdout, under `2>&1`) cannot land between them.
            let mut whole = line;
            whole.push('\n');
            err.write_all(whole.as_bytes())?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
