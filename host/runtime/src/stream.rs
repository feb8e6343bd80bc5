//! `corral:plugin/stream`: provider plugins report progress while `complete`
//! runs; the host forwards each event to whoever is listening. The channel is
//! bounded and `emit` waits for room, so a plugin that streams faster than
//! the terminal prints is slowed down instead of filling the host's memory;
//! one event larger than the output limit ends the call.
//!
//! `corral:plugin/answer`: a provider that says its answer's text is what it
//! streamed leaves that text to the host, which keeps the text deltas of the
//! call (up to the plugin's memory limit) and fills in the answer with them.

use super::bindings::answer;
use super::bindings::stream::{self, Event, Host};
use super::budget::CallBudget;
use super::effects::CallCaps;
use super::limits::CallLimiter;
use crate::protocol::StreamEvent;
use tokio::sync::mpsc::Sender;
use wasmtime::component::{HasData, Linker};

/// What `corral:plugin/stream` and `corral:plugin/answer` see of a call:
/// where its events go, the answer text kept ([`Streamed`], this module's
/// state), and the limits they count against.
pub(crate) struct StreamView<'a> {
    /// Whoever listens to the call's events; `None` when nobody does.
    pub(crate) events: Option<&'a Sender<StreamEvent>>,
    /// The answer text the host keeps.
    pub(crate) streamed: &'a mut Streamed,
    /// The largest event accepted.
    pub(crate) budget: &'a mut CallBudget,
    /// The memory limit the kept text counts against.
    pub(crate) limiter: &'a mut CallLimiter,
    /// What kind of call this is: only a provider's answer can be kept.
    pub(crate) caps: &'a CallCaps,
}

/// The data both interfaces are served from: a [`StreamView`].
struct StreamData;

impl HasData for StreamData {
    type Data<'a> = StreamView<'a>;
}

/// Adds `corral:plugin/stream` and `corral:plugin/answer`, served from the
/// view `get` projects from a store's data.
pub(super) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> StreamView<'_>,
) -> wasmtime::Result<()> {
    stream::add_to_linker::<T, StreamData>(linker, get)?;
    answer::add_to_linker::<T, StreamData>(linker, get)
}

/// The text of a provider's answer as the host puts it together from the
/// call's text deltas, once the plugin said so (`keep-streamed-text`).
#[derive(Default)]
pub(crate) struct Streamed {
    /// The text kept so far; `None` until the plugin asks.
    kept: Option<String>,
    /// Whether the call emitted a text delta yet.
    any_text: bool,
    /// Why this module ended the call, when it did.
    pub(crate) ended: Option<String>,
}

impl Streamed {
    /// The text kept for the answer, if the plugin asked for it.
    pub(crate) fn take(&mut self) -> Option<String> {
        self.kept.take().map(|mut text| {
            // Grown by doubling: what stays in the history is its length.
            text.shrink_to_fit();
            text
        })
    }
}

/// `emit`'s part for a text delta: kept for the answer when the plugin
/// asked, counted against its memory limit with its linear memory. An error
/// ends the call.
fn keep(state: &mut StreamView<'_>, text: &str) -> wasmtime::Result<()> {
    let s = &mut *state.streamed;
    s.any_text = true;
    let Some(kept) = &mut s.kept else {
        return Ok(());
    };
    let limiter = &mut *state.limiter;
    if text.len() > limiter.room() {
        s.ended = Some(format!(
            "its streamed answer ({} MiB kept by the host) and its own memory passed the \
             memory limit of {} MiB: raise `limits.memory_mb` in the plugin's entry, or ask \
             for shorter answers (`[agent] max_tokens`)",
            kept.len() >> 20,
            limiter.memory_bytes >> 20
        ));
        return Err(wasmtime::format_err!(
            "streamed answer over the memory limit"
        ));
    }
    kept.push_str(text);
    limiter.held += text.len();
    Ok(())
}

impl Host for StreamView<'_> {
    async fn emit(&mut self, event: Event) -> wasmtime::Result<()> {
        use stream::Event as E;
        let size = match &event {
            E::MessageStarted | E::Usage(_) => 0,
            E::TextDelta(text) => text.len(),
            E::ToolCallDelta(d) => {
                d.arguments_delta.len()
                    + d.id.as_ref().map_or(0, String::len)
                    + d.name.as_ref().map_or(0, String::len)
            }
            E::ToolCallCompleted(c) => c.id.len() + c.name.len() + c.arguments.len(),
        };
        if size > self.budget.event_bytes {
            self.budget.event_hit = Some(size);
            return Err(wasmtime::format_err!("stream event over the output limit"));
        }
        if let E::TextDelta(text) = &event {
            keep(self, text)?;
        }
        if let Some(tx) = self.events {
            // A closed receiver means nobody listens any more; the call goes on.
            let _ = tx.send(event.into()).await;
        }
        Ok(())
    }
}

impl answer::Host for StreamView<'_> {
    fn keep_streamed_text(&mut self) -> wasmtime::Result<()> {
        let s = &mut *self.streamed;
        if !matches!(self.caps, CallCaps::Provider) || self.events.is_none() {
            s.ended = Some(
                "the plugin called `answer.keep-streamed-text` outside a provider's `complete`: \
                 only an answer being streamed can be kept (a plugin bug; report it to its author)"
                    .to_owned(),
            );
            return Err(wasmtime::format_err!("keep-streamed-text outside complete"));
        }
        if s.any_text {
            s.ended = Some(
                "the plugin called `answer.keep-streamed-text` after it had streamed text: \
                 call it before the first `text-delta` (a plugin bug; report it to its author)"
                    .to_owned(),
            );
            return Err(wasmtime::format_err!(
                "keep-streamed-text after a text delta"
            ));
        }
        s.kept.get_or_insert_with(String::new);
        Ok(())
    }
}
