//! The byte budget of streamed deltas on their way to the front-end.
//!
//! The provider's channel is bounded, but events leave it for the session's
//! event channel, which is not (approvals, stops and errors must never wait
//! behind a slow terminal). Deltas are what a provider can make without
//! limit, so each one reserves its size here before it is sent and the
//! front-end gives it back when it takes the event: once the budget is
//! spent, the agent stops draining the provider's channel, that channel
//! fills, and the plugin's `emit` waits. Nothing is dropped or merged.

use crate::protocol::Event;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Bytes of deltas that may wait for the front-end at once.
pub const BACKLOG_BYTES: u32 = 4 << 20;

/// The budget, shared by the agent (which reserves) and the session's
/// receiving end (which releases).
#[derive(Debug, Clone)]
pub struct Backlog {
    room: Arc<Semaphore>,
    cap: u32,
}

impl Default for Backlog {
    fn default() -> Self {
        Self::new(BACKLOG_BYTES)
    }
}

impl Backlog {
    /// A budget of `cap` bytes.
    pub fn new(cap: u32) -> Self {
        Self {
            room: Arc::new(Semaphore::new(cap as usize)),
            cap,
        }
    }

    /// What `event` costs: its delta's bytes, at most the whole budget (so
    /// one large delta waits for an empty backlog instead of forever).
    fn cost(&self, event: &Event) -> u32 {
        let mut event = event;
        // A subagent's deltas reach the front-end wrapped, and cost the same.
        while let Event::Subagent { event: inner, .. } = event {
            event = inner;
        }
        let bytes = match event {
            Event::TextDelta { text } => text.len(),
            Event::ToolCallDelta {
                name,
                arguments_delta,
                ..
            } => arguments_delta.len() + name.as_ref().map_or(0, String::len),
            _ => 0,
        };
        u32::try_from(bytes).unwrap_or(u32::MAX).min(self.cap)
    }

    /// Waits until `event` fits. Returns at once once the front-end is gone
    /// ([`Backlog::close`]): nobody will give room back.
    pub async fn reserve(&self, event: &Event) {
        let n = self.cost(event);
        if n == 0 {
            return;
        }
        if let Ok(permit) = self.room.acquire_many(n).await {
            // Given back by `release` when the front-end takes the event.
            permit.forget();
        }
    }

    /// The front-end took `event`: its bytes are room again.
    pub fn release(&self, event: &Event) {
        let n = self.cost(event);
        if n > 0 {
            self.room.add_permits(n as usize);
        }
    }

    /// The front-end stopped listening: reservations no longer wait.
    pub fn close(&self) {
        self.room.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_full_backlog_waits_until_the_front_end_takes_an_event() {
        let b = Backlog::new(10);
        let ev = Event::TextDelta {
            text: "x".repeat(6),
        };
        b.reserve(&ev).await;
        let second = tokio::time::timeout(Duration::from_millis(50), b.reserve(&ev)).await;
        assert!(second.is_err(), "the second delta did not wait");
        b.release(&ev);
        b.reserve(&ev).await;
        // Larger than the whole budget: waits for an empty backlog only.
        b.release(&ev);
        b.reserve(&Event::TextDelta {
            text: "y".repeat(100),
        })
        .await;
        b.close();
        b.reserve(&ev).await;
    }
}
