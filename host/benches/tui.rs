//! Interactive UI rendering cost, printed as figures and a ratio from one run.
//!
//! `cargo bench -p corral --bench tui`
//!
//! Draws one 120×40 frame of a transcript of 10,000 messages and of one of
//! 100 messages (user prompts, Markdown answers with code, tool cards), both
//! steady (lines cached) and while the last answer streams (one text delta
//! per frame). A frame must cost about the same however long the session
//! is: the target is a ratio under 2 and a frame under 16 ms.

use corral_protocol::{AssistantMessage, Event, FinishReason, ToolCall, ToolOutcome, Usage};
use corral_tui::{App, render};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::time::{Duration, Instant};

const FRAMES: u32 = 200;

fn transcript(messages: usize) -> App {
    let mut app = App::new("replay", corral_protocol::Mode::Ask);
    app.set_tools([("read_file".to_owned(), "fs".to_owned(), true)]);
    let answer = "## Step\n\nThe *parser* reads `tokens` one at a time:\n\n- first\n- second\n\n```rust\nfn main() {\n    let n = 42; // answer\n}\n```\n";
    let mut i = 0;
    while i < messages {
        app.apply(&Event::TurnBegin { turn: 1 });
        app.apply(&Event::UserMessage {
            text: format!("question number {i}: what does this part of the code do?"),
        });
        i += 1;
        let id = format!("c{i}");
        let call = ToolCall {
            id: id.clone(),
            name: "read_file".into(),
            arguments: format!("{{\"path\":\"src/file{i}.rs\"}}"),
            model_id: None,
        };
        app.apply(&Event::RequestEnd {
            message: AssistantMessage {
                text: answer.into(),
                tool_calls: vec![call.clone()],
            },
            finish_reason: FinishReason::ToolCalls,
            usage: Some(Usage {
                input_tokens: 1000,
                output_tokens: 50,
            }),
        });
        i += 1;
        app.apply(&Event::ToolCallBegin { call });
        app.apply(&Event::ToolCallEnd {
            call_id: id,
            name: "read_file".into(),
            outcome: ToolOutcome {
                content: "line one\nline two\nline three\nline four\nline five\n".into(),
                is_error: false,
                data: None,
                truncated_from: None,
                artifact: None,
                labels: Vec::new(),
            },
            duration_ms: 3,
        });
        i += 1;
        app.apply(&Event::Stop {
            reason: corral_protocol::StopReason::FinalAnswer,
            message: None,
        });
    }
    // The last answer is still streaming.
    app.apply(&Event::TurnBegin { turn: 2 });
    app.apply(&Event::UserMessage {
        text: "and now?".into(),
    });
    app.apply(&Event::TextDelta {
        text: "Streaming ".into(),
    });
    app
}

/// Mean time of one frame: steady, and with one text delta before each.
fn measure(app: &mut App) -> (Duration, Duration, Duration) {
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap_or_else(|e| panic!("{e}"));
    let cold = Instant::now();
    term.draw(|f| render(f, app))
        .unwrap_or_else(|e| panic!("{e}"));
    let cold = cold.elapsed();
    let start = Instant::now();
    for _ in 0..FRAMES {
        term.draw(|f| render(f, app))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let steady = start.elapsed() / FRAMES;
    let start = Instant::now();
    for _ in 0..FRAMES {
        app.apply(&Event::TextDelta {
            text: "more words ".into(),
        });
        term.draw(|f| render(f, app))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let streaming = start.elapsed() / FRAMES;
    (cold, steady, streaming)
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    // A first pass warms caches and the allocator, so neither size pays it.
    let _ = measure(&mut transcript(100));
    let mut big = transcript(10_000);
    let mut small = transcript(100);
    let (small_cold, small_steady, small_stream) = measure(&mut small);
    let (big_cold, big_steady, big_stream) = measure(&mut big);
    println!("tui frame, 120x40, mean of {FRAMES} frames");
    println!(
        "  100 messages:    first {}  steady {}  streaming {}",
        ms(small_cold),
        ms(small_steady),
        ms(small_stream)
    );
    println!(
        "  10,000 messages: first {}  steady {}  streaming {}",
        ms(big_cold),
        ms(big_steady),
        ms(big_stream)
    );
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!(
        "  ratio 10,000/100: first {:.2}  steady {:.2}  streaming {:.2}",
        ratio(big_cold, small_cold),
        ratio(big_steady, small_steady),
        ratio(big_stream, small_stream)
    );
}
