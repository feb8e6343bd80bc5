//! `corral:plugin/stream`: provider plugins report progress while `complete`
//! runs; the host forwards each event to whoever is listening. The channel is
//! bounded and `emit` waits for room, so a plugin that streams faster than
//! the terminal prints is slowed down instead of filling the host's memory;
//! one event larger than the output limit ends the call.

use super::bindings::stream::{self, Event, Host};
use super::store::CallState;
use wasmtime::component::{HasSelf, Linker};

/// Adds `corral:plugin/stream`.
pub(super) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    stream::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)
}

impl Host for CallState {
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
        if let Some(tx) = &self.events {
            // A closed receiver means nobody listens any more; the call goes on.
            let _ = tx.send(event.into()).await;
        }
        Ok(())
    }
}
