//! A streamed answer at a model's pace, read back as a terminal shows it.
//!
//! A loopback model streams OpenAI chat-completions or Anthropic messages
//! SSE an event at a time with pauses (and the replay provider pauses by its
//! `delay_ms`), long enough for the "waiting for the model" line to be drawn
//! before the first words arrive. `corral run`, `corral resume -p` and
//! `--json` run on a real pseudo-terminal whose bytes go through a terminal
//! emulator; the UI runs in tmux. What the terminal shows must hold the
//! answer's lines whole. The answer carries escape sequences too, which must
//! reach the terminal inert.
//!
//! Run against the code before the progress line was drawn by the renderer,
//! the `run` and `resume` tests failed for both wire formats and for the
//! replay provider: the first words were written on the progress line and
//! its next clear erased them (` start by looking at…`, without `I'll`).
//! `--json` draws no progress line and the UI has one writer of its own, so
//! their tests passed then too; they keep those paths exact at this pace.

use crate::support::cassette;
use crate::support::manifest::{anthropic_plugin, openai_plugin};
use crate::support::mock::{Call, anthropic_sse, openai_sse};
use crate::support::pty;
use crate::support::text::has;
use crate::support::tui::{Pane, trusted_command};
use crate::*;
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// The pause before a reply's first event: the spinner's first frame comes
/// 100 ms after the request starts, so by then it is on the screen.
const FIRST: Duration = Duration::from_millis(300);
/// The pause between events: longer than a spinner frame, so the spinner
/// would act between two pieces of one line if it could.
const PACE: Duration = Duration::from_millis(120);

/// The answer's first turn, before its tool call.
const OPENING: &str = "I'll start by looking at how the project is laid out.";
/// The answer after the tool's result, with a cursor move, a line erase, a
/// carriage return and a C1 control of the model's own: all of them must
/// show as text, not act.
const CLOSING: &str = "Now the README, which should say more.\n\
                       This project is small; \u{1b}[2K\rthat line \u{1b}[1Astays \u{9b}2Jwhole.";

/// The two wire formats.
#[derive(Clone, Copy)]
enum Wire {
    OpenAi,
    Anthropic,
}

impl Wire {
    /// The provider's name in the manifest.
    fn provider(self) -> &'static str {
        match self {
            Wire::OpenAi => "openai",
            Wire::Anthropic => "anthropic",
        }
    }

    /// The environment variable its key comes from, and a value.
    fn key(self) -> (&'static str, &'static str) {
        match self {
            Wire::OpenAi => ("TEST_OPENAI_KEY", "sk-at-pace"),
            Wire::Anthropic => ("TEST_ANTHROPIC_KEY", "sk-ant-at-pace"),
        }
    }

    /// The SSE body of a reply of `text` and `calls`.
    fn sse(self, text: &str, calls: &[Call]) -> Vec<u8> {
        match self {
            Wire::OpenAi => openai_sse(text, calls),
            Wire::Anthropic => anthropic_sse(text, calls),
        }
    }

    /// A workspace whose provider (the default one too) is this wire's
    /// mock on `port`, in `auto-edit` mode so that the read needs no answer.
    fn workspace(self, port: u16) -> Sandbox {
        let plugin = match self {
            Wire::OpenAi => openai_plugin(port, r#"model = "mock""#, ""),
            Wire::Anthropic => anthropic_plugin(port, r#"model = "mock""#, ""),
        };

        Sandbox::with_manifest(&format!(
            "[agent]\nprovider = \"{}\"\n\n[policy]\nmode = \"auto-edit\"\n\n{plugin}",
            self.provider()
        ))
    }
}

/// A model on loopback that answers its requests in turn, round and round,
/// with the SSE bodies of `replies` written an event at a time at
/// [`PACE`], after [`FIRST`].
fn paced(replies: Vec<Vec<u8>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().take(16).enumerate() {
            let Ok(stream) = stream else { continue };
            let body = replies[n % replies.len()].clone();
            std::thread::spawn(move || serve(stream, &body));
        }
    });
    port
}

/// Reads one request and streams `body` back, an SSE event per write.
fn serve(stream: TcpStream, body: &[u8]) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.trim().eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut request = vec![0u8; length];
    let _ = reader.read_exact(&mut request);
    let mut out = stream;
    let _ = out.set_nodelay(true);
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                cache-control: no-cache\r\nconnection: close\r\n\r\n";
    if out.write_all(head.as_bytes()).is_err() {
        return;
    }
    std::thread::sleep(FIRST);
    let text = String::from_utf8_lossy(body);
    for event in text.split_inclusive("\n\n") {
        if out.write_all(event.as_bytes()).is_err() {
            return;
        }
        let _ = out.flush();
        std::thread::sleep(PACE);
    }
}

/// The model's two replies: the opening and a read of `hello.txt`, then
/// the closing.
fn script(wire: Wire) -> Vec<Vec<u8>> {
    vec![
        wire.sse(
            OPENING,
            &[("r1", "read_file", json!({"path": "hello.txt"}))],
        ),
        wire.sse(CLOSING, &[]),
    ]
}

/// The answer's lines as the terminal must show them: inert, each whole.
fn answer_lines() -> Vec<String> {
    format!("{OPENING}\n{CLOSING}")
        .lines()
        .map(|l| corral_protocol::terminal::inert(l).into_owned())
        .collect()
}

/// Checks that `screen` holds every line of the answer as a line of its
/// own, in order, and nothing of the progress line.
fn assert_answer_shown(screen: &str) {
    let mut rows = screen.lines();
    for line in answer_lines() {
        assert!(
            rows.any(|row| row == line),
            "the terminal does not show the line `{line}` whole (or in order):\n{screen}"
        );
    }
    assert!(
        !screen.contains("waiting for the model"),
        "the progress line was left on the screen:\n{screen}"
    );
}

/// Checks what `corral run` or `resume -p` left on the terminal: the
/// progress line was drawn (else the test proves nothing) and is gone, the
/// answer's lines are shown whole, and no escape sequence reached the
/// terminal but corral's own erasing of its progress line (a model's `ESC`
/// shows as `\x1b`).
fn assert_terminal(shown: &pty::Shown) {
    let text = String::from_utf8_lossy(&shown.bytes);
    assert!(
        text.contains("waiting for the model"),
        "the progress line was never drawn; the pause before the answer is too short for \
         this test:\n{text:?}"
    );
    assert_answer_shown(&shown.screen);
    let text = text.replace("\r\x1b[K", "\r");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{9b}'),
        "an escape sequence reached the terminal:\n{text:?}"
    );
}

/// `corral ARGS` on a pseudo-terminal against `wire`'s mock on `port`.
fn on_pty(cli: &Cli, sb: &Sandbox, wire: Wire, args: &[&str]) -> pty::Shown {
    let mut cmd = cli.command(&sb.ws(), args);
    let (k, v) = wire.key();
    cmd.env(k, v);
    let shown = pty::run(cmd);
    assert!(
        shown.status.success(),
        "{:?}:\n{}",
        shown.status,
        shown.screen
    );
    shown
}

/// One test per wire, named `$openai` and `$anthropic`, each running
/// `$scenario` over its wire.
macro_rules! on_both_wires {
    ($scenario:ident: $openai:ident, $anthropic:ident) => {
        #[test]
        fn $openai() {
            $scenario(Wire::OpenAi);
        }

        #[test]
        fn $anthropic() {
            $scenario(Wire::Anthropic);
        }
    };
}

/// A workspace whose provider is a model on `wire` that replies at pace
/// ([`paced`]) with the script's replies, and a fresh home to run it from.
fn paced_workspace(wire: Wire) -> (Sandbox, Cli) {
    let port = paced(script(wire));
    (wire.workspace(port), Cli::new())
}

fn run_at_pace(wire: Wire) {
    let (sb, cli) = paced_workspace(wire);
    let shown = on_pty(&cli, &sb, wire, &["run", "What is this project?"]);
    assert_terminal(&shown);
}

on_both_wires!(run_at_pace: run_shows_an_openai_answer_whole, run_shows_an_anthropic_answer_whole);

fn resume_at_pace(wire: Wire) {
    // The first run (off the terminal) takes the script's two replies; the
    // resumed turn gets them again.
    let (sb, cli) = paced_workspace(wire);
    let o = cli.run_env(&sb.ws(), &["run", "--json", "hello"], &[wire.key()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shown = on_pty(
        &cli,
        &sb,
        wire,
        &["resume", "--last", "-p", "What is this project?"],
    );
    has(&shown.screen, "resuming session");
    assert_terminal(&shown);
}

on_both_wires!(resume_at_pace: resume_shows_an_openai_answer_whole, resume_shows_an_anthropic_answer_whole);

fn json_at_pace(wire: Wire) {
    let (sb, cli) = paced_workspace(wire);
    let shown = on_pty(&cli, &sb, wire, &["run", "--json", "What is this project?"]);
    // No progress line and no escape at all: every line on the terminal is
    // one JSON event, and the deltas put together are the answer.
    assert!(
        !shown.bytes.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&shown.bytes)
    );
    let events: Vec<Value> = shown
        .screen
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{l}` is not JSON: {e}")))
        .collect();
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, format!("{OPENING}{CLOSING}"));
    assert_eq!(
        events.last().map(|e| e["type"].clone()),
        Some(json!("result"))
    );
}

on_both_wires!(json_at_pace: json_on_a_terminal_is_only_events_openai, json_on_a_terminal_is_only_events_anthropic);

#[test]
fn run_shows_a_replayed_answer_whole() {
    // The replay provider pauses `delay_ms` after each event; a first
    // `message_started` gives the spinner its time before the text: the
    // line is drawn at the first frame tick (every 100 ms) once the model
    // has been silent 100 ms, so the pause must hold a whole tick past that
    // on a loaded machine.
    let sb = Sandbox::new();
    let words = |text: &str| -> Vec<Value> {
        std::iter::once(json!({"type": "message_started"}))
            .chain(
                text.split_inclusive(' ')
                    .map(|w| json!({"type": "text_delta", "text": w})),
            )
            .collect()
    };
    let call = json!({"id": "r1", "name": "read_file", "arguments": json!({"path": "hello.txt"}).to_string()});
    let mut opening = words(OPENING);
    opening.push(json!({"type": "tool_call_completed", "call": call}));
    let turns = json!([
        {
            "events": opening,
            "response": {"message": {"text": OPENING, "tool_calls": [call]}, "finish_reason": "tool_calls"}
        },
        {
            "events": words(CLOSING),
            "response": {"message": {"text": CLOSING, "tool_calls": []}, "finish_reason": "stop"}
        },
    ]);
    cassette::write(&sb, "c.json", &turns);
    sb.write(
        "corral.toml",
        &crate::support::tui::replay_manifest(r#"mode = "auto-edit""#, ", delay_ms = 400"),
    );
    let cli = Cli::new();
    let shown = pty::run(cli.command(&sb.ws(), &["run", "What is this project?"]));
    assert!(shown.status.success(), "{}", shown.screen);
    assert_terminal(&shown);
}

fn ui_at_pace(wire: Wire) {
    let (sb, cli) = paced_workspace(wire);
    let (k, v) = wire.key();
    let command = format!("{k}={v} {}", trusted_command(&cli, &sb, "sleep 600"));
    let Some(pane) = Pane::ready(&command) else {
        return;
    };
    pane.submit("What is this project?");
    pane.wait_for("whole.");
    let screen = pane.wait_for("ready");
    // The UI lays the answer out itself: a margin, wrapping, and a line
    // break inside a paragraph shown as a space (markdown). So each of the
    // answer's paragraphs is looked for with all its whitespace as one
    // space, in the screen's likewise.
    let flat = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let shown = flat(&screen);
    for paragraph in [OPENING, CLOSING] {
        let paragraph = flat(&corral_protocol::terminal::inert(paragraph));
        assert!(
            shown.contains(&paragraph),
            "the UI does not show `{paragraph}` whole:\n{screen}"
        );
    }
}

on_both_wires!(ui_at_pace: the_ui_shows_an_openai_answer_whole, the_ui_shows_an_anthropic_answer_whole);
