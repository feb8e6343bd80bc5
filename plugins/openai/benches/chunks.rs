//! What the one-pass chunk reader (`src/fast.rs`) saves: a streamed answer
//! of small text deltas (the chunk OpenAI sends per token) folded into a
//! [`Stream`] as the plugin does, with the one-pass reader and with serde
//! reading every chunk, in interleaved rounds; medians. The SSE parse of the
//! same bytes is printed beside them, for the share of the plugin's work.
//!
//! `cargo bench -p corral-plugin-openai --bench chunks`
//!
//! Native code: inside the wasm component both readers run the same
//! scalar code (serde_json has no SIMD path), so the ratio carries over.

use corral_plugin_openai::{Stream, bench};
use corral_sdk::provider::TurnStream;
use corral_sdk::sse;
use std::hint::black_box;
use std::time::{Duration, Instant};

#[expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
fn report(line: &str) {
    println!("{line}");
}

/// An answer of `tokens` deltas, as the server writes it.
fn transcript(tokens: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let words = [
        "The", " parser", " reads", " tokens", " é", " 日本", " 🦀", "\\n",
    ];
    for i in 0..tokens {
        let word = words[i % words.len()];
        out.extend_from_slice(
            format!(
                "data: {{\"id\":\"chatcmpl-Bx1\",\"object\":\"chat.completion.chunk\",\"created\":1752000000,\"model\":\"gpt-4.1-2025-04-14\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_b3f1157249\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{word}\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null}}\n\n"
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(b"data: {\"id\":\"chatcmpl-Bx1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    out
}

/// Folds every event into a fresh stream, one way or the other; returns the
/// bytes of text streamed.
fn fold(events: &[sse::Event], one_pass: bool) -> usize {
    let mut stream = Stream::new();
    let mut text = 0usize;
    let mut sink = |e| {
        if let corral_sdk::provider::Event::TextDelta(t) = e {
            text += t.len();
        }
    };
    for event in events {
        let event = event.as_ref();
        let step = if one_pass {
            stream.on_event(&event, &mut sink)
        } else {
            bench::on_event_serde_only(&mut stream, &event, &mut sink)
        };
        if !matches!(step, Ok(std::ops::ControlFlow::Continue(()))) {
            break;
        }
    }
    text
}

fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let bytes = transcript(200_000);
    let mb = bytes.len() as f64 / 1e6;
    let mut events = Vec::new();
    let mut parser = sse::Parser::new();
    for piece in bytes.chunks(1400) {
        parser.feed(piece, &mut |e| events.push(e));
    }
    assert_eq!(
        fold(&events, true),
        fold(&events, false),
        "the two ways agree"
    );

    let (mut one_pass, mut serde, mut sse) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..9 {
        one_pass.push(time(|| {
            black_box(fold(&events, true));
        }));
        serde.push(time(|| {
            black_box(fold(&events, false));
        }));
        sse.push(time(|| {
            let mut parser = sse::Parser::new();
            let mut n = 0usize;
            for piece in bytes.chunks(1400) {
                parser.feed_ref(piece, &mut |e| n += e.data.len());
            }
            black_box(n);
        }));
    }
    let (one_pass, serde, sse) = (median(one_pass), median(serde), median(sse));
    let rate = |d: Duration| mb / d.as_secs_f64();
    report(&format!(
        "openai chunks ({} events, {mb:.1} MB): one-pass reader {:.0} MB/s, serde only {:.0} MB/s \
         ({:.2}x the one-pass time); SSE parse of the same bytes {:.0} MB/s",
        events.len(),
        rate(one_pass),
        rate(serde),
        serde.as_secs_f64() / one_pass.as_secs_f64(),
        rate(sse),
    ));
    report(&format!(
        "  per chunk: one-pass {:.0} ns, serde {:.0} ns, SSE {:.0} ns",
        one_pass.as_nanos() as f64 / events.len() as f64,
        serde.as_nanos() as f64 / events.len() as f64,
        sse.as_nanos() as f64 / events.len() as f64,
    ));
}
