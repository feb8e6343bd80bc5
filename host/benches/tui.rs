//! Interactive UI rendering cost, measured with divan.
//!
//! `cargo bench -p corral --bench tui`
//!
//! Draws one 120×40 frame of a transcript of 100 messages and of one of
//! 10,000 (user prompts, Markdown answers with code, tool cards): the first
//! frame (nothing cached), a steady frame (lines cached) and a frame while
//! the last answer streams (one text delta per frame). A frame must cost
//! about the same however long the session is: the goal is the 10,000-row
//! under twice the 100-row, and every frame under 16 ms.

use corral_protocol::{AssistantMessage, Event, FinishReason, ToolCall, ToolOutcome, Usage};
use corral_tui::{App, render};
use divan::Bencher;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// The transcripts' sizes, in messages.
const SIZES: [usize; 2] = [100, 10_000];

fn main() {
    divan::main();
}

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

/// A 120×40 terminal that has drawn `app` once.
fn drawn(app: &mut App) -> Terminal<TestBackend> {
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap_or_else(|e| panic!("{e}"));
    draw(&mut term, app);
    term
}

fn draw(term: &mut Terminal<TestBackend>, app: &mut App) {
    term.draw(|f| render(f, app))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The first frame of a transcript just loaded (a resumed session).
#[divan::bench(args = SIZES, sample_count = 20, sample_size = 1)]
fn first_frame(bencher: Bencher, messages: usize) {
    bencher
        .with_inputs(|| {
            let term = Terminal::new(TestBackend::new(120, 40)).unwrap_or_else(|e| panic!("{e}"));
            (transcript(messages), term)
        })
        .bench_local_values(|(mut app, mut term)| {
            draw(&mut term, &mut app);
            (app, term)
        });
}

/// A frame with nothing new.
#[divan::bench(args = SIZES)]
fn steady_frame(bencher: Bencher, messages: usize) {
    let mut app = transcript(messages);
    let mut term = drawn(&mut app);
    bencher.bench_local(|| draw(&mut term, &mut app));
}

/// A frame after one streamed text delta of the last answer.
#[divan::bench(args = SIZES)]
fn streaming_frame(bencher: Bencher, messages: usize) {
    let mut app = transcript(messages);
    let mut term = drawn(&mut app);
    bencher.bench_local(|| {
        app.apply(&Event::TextDelta {
            text: "more words ".into(),
        });
        draw(&mut term, &mut app);
    });
}
