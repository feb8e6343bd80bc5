//! Test harness for provider plugins (cargo feature `testing`, meant for a
//! plugin's `[dev-dependencies]`): replays a recorded SSE transcript through
//! the SDK's own driver into a provider's [`TurnStream`], whole or cut into
//! pieces, so a test can check that how the network splits the body never
//! changes the turn. In a plugin's tests (the sketch names the plugin's own
//! `Stream` and a recorded `TRANSCRIPT`, so it is not compiled here; both
//! provider plugins' tests run it):
//!
//! ```text
//! use corral_sdk::testing;
//! testing::assert_split_invariant(TRANSCRIPT, Stream::new);
//! ```

use crate::provider::{ChatResponse, Event, ProviderError, TurnStream, replay_turn};

/// What a replayed turn gave: the response (or why there was none) and the
/// streaming events sent on the way.
pub type Run = (Result<ChatResponse, ProviderError>, Vec<Event>);

/// Replays `chunks`, in order, into the fresh stream `new` makes.
pub fn run<S: TurnStream>(chunks: &[&[u8]], new: impl FnOnce() -> S) -> Run {
    replay_turn(chunks.iter().copied(), new())
}

/// Replays `transcript` as one piece into the fresh stream `new` makes.
pub fn run_whole<S: TurnStream>(transcript: &str, new: impl FnOnce() -> S) -> Run {
    run(&[transcript.as_bytes()], new)
}

/// Every way to cut `transcript` in two, plus one byte at a time, must give
/// exactly the events and response of the uncut transcript; panics naming
/// the cut that differs.
pub fn assert_split_invariant<S: TurnStream>(transcript: &str, new: impl Fn() -> S) {
    let whole = run_whole(transcript, &new);
    let bytes = transcript.as_bytes();
    for at in 0..=bytes.len() {
        let (a, b) = bytes.split_at(at);
        assert_eq!(run(&[a, b], &new), whole, "split at byte {at}");
    }
    let singles: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(run(&singles, &new), whole, "one byte at a time");
}
