//! `corral:plugin/stream`: provider plugins report progress while `complete`
//! runs; the host forwards each event to whoever is listening.

use super::State;
use super::provider_generated::corral::plugin::stream::{Event, Host};

impl Host for State {
    fn emit(&mut self, event: Event) {
        if let Some(tx) = &self.events {
            // A closed receiver means nobody listens any more; the call goes on.
            let _ = tx.send(event.into());
        }
    }
}
