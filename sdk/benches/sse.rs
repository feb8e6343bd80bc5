//! SSE parser throughput, printed with a ratio against a baseline measured in
//! the same run.
//!
//! `cargo bench -p corral-sdk --bench sse`
//!
//! The input is a Chat Completions stream (one small JSON chunk per token),
//! delivered in 1400-byte pieces as TCP would. The baseline is one pass that
//! only counts the line feeds of the same bytes: the least any line-based
//! parser has to do. The `sse-stream` crate (the parser rmcp's transport was
//! given before the host read MCP streams with this one) reads the same
//! pieces beside it.

use corral_sdk::sse::Parser;
use futures::StreamExt as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

#[expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
fn report(line: &str) {
    println!("{line}");
}

/// Median of `rounds` timings of `f`.
fn measure(rounds: usize, mut f: impl FnMut()) -> Duration {
    let mut samples: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort();
    samples[rounds / 2]
}

fn transcript(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 512);
    let mut i = 0u64;
    while out.len() < bytes {
        let chunk = format!(
            "data: {{\"id\":\"chatcmpl-Bx1\",\"object\":\"chat.completion.chunk\",\"created\":1752000000,\"model\":\"gpt-4.1\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} é\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null}}\n\n"
        );
        out.extend_from_slice(chunk.as_bytes());
        i += 1;
    }
    out
}

fn main() {
    let input = transcript(32 * 1024 * 1024);
    let mb = input.len() as f64 / (1024.0 * 1024.0);

    let baseline = measure(7, || {
        let mut lines = 0usize;
        for piece in input.chunks(1400) {
            lines += piece.iter().filter(|&&b| b == b'\n').count();
        }
        black_box(lines);
    });
    let parse = measure(7, || {
        let mut parser = Parser::new();
        let mut bytes = 0usize;
        for piece in input.chunks(1400) {
            parser.feed(piece, &mut |event| bytes += event.data.len());
        }
        black_box(bytes);
    });

    let crate_parse = measure(7, || {
        let pieces = futures::stream::iter(
            input
                .chunks(1400)
                .map(Ok::<&[u8], std::convert::Infallible>),
        );
        let mut bytes = 0usize;
        futures::executor::block_on(sse_stream::SseStream::from_bytes_stream(pieces).for_each(
            |event| {
                if let Ok(event) = event {
                    bytes += event.data.map_or(0, |d| d.len());
                }
                std::future::ready(())
            },
        ));
        black_box(bytes);
    });

    let rate = |d: Duration| mb / d.as_secs_f64();
    report(&format!(
        "sse: {:.0} MB/s parsing, {:.0} MB/s counting line feeds (baseline); parser takes {:.1}x the baseline",
        rate(parse),
        rate(baseline),
        parse.as_secs_f64() / baseline.as_secs_f64()
    ));
    report(&format!(
        "sse-stream crate: {:.0} MB/s on the same pieces ({:.1}x this parser's time)",
        rate(crate_parse),
        crate_parse.as_secs_f64() / parse.as_secs_f64()
    ));
}
