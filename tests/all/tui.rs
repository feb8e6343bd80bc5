//! The interactive UI, driven as a user drives it: the real `corral` binary
//! in a terminal (a tmux pane of its own server), the replay provider
//! playing a cassette, keys sent and the screen read back.

use crate::support::cassette::{self, streamed_turn};
use crate::support::text::{has, has_all, has_in_order, lacks};
use crate::support::tui::{Pane, SCREEN_TIMEOUT, assert_restored, quote};
use crate::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const PLAN: &str = "## Plan\n\nI will **write** `notes.txt`:\n\n```rust\nfn main() {}\n```\n";

/// A prompt, a streamed answer, a write approved in the modal, a second
/// message, a turn interrupted with Esc, Ctrl-C twice to leave; then the
/// log holds the whole conversation and `corral show` prints it.
#[test]
fn a_session_in_the_terminal_ui() {
    let sb = Sandbox::new();
    let write = json!({
        "id": "w1",
        "name": "write_file",
        "arguments": json!({"path": "notes.txt", "content": "new text\n"}).to_string(),
    });
    let slow = "This answer streams slowly. ".repeat(60);
    let turns = json!([
        streamed_turn(PLAN, vec![write], 3),
        streamed_turn("Wrote notes.txt.", vec![], 3),
        streamed_turn("Second answer.", vec![], 3),
        streamed_turn(&slow, vec![], 2),
    ]);
    cassette::write(&sb, "c.json", &turns);
    sb.write(
        "corral.toml",
        &crate::support::tui::replay_manifest("", ", delay_ms = 30"),
    );
    let cli = Cli::new();
    let command = crate::support::tui::trusted_command(
        &cli,
        &sb,
        "printf '\\nCORRAL-EXIT=%s\\n' $?; stty -a; sleep 600",
    );
    let Some(pane) = Pane::ready(&command) else {
        return;
    };

    pane.submit("hello there");
    pane.wait_for("I will write notes.txt");
    pane.wait_for("approve this call?");
    let modal = pane.wait_for("+new text");
    has_all(&modal, &["mode ask", "every write_file call"]);
    assert!(!sb.ws().join("notes.txt").exists());
    // Keys typed in the first moments of the modal are dropped on purpose;
    // answer until it takes.
    let start = Instant::now();
    while pane.screen().contains("approve this call?") {
        assert!(start.elapsed() < SCREEN_TIMEOUT, "the modal never took `y`");
        pane.press("y");
        std::thread::sleep(Duration::from_millis(200));
    }
    let screen = pane.wait_for("Wrote notes.txt.");
    has(&screen, "write_file");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes.txt written"),
        "new text\n"
    );
    pane.wait_for("ready");

    pane.submit("second");
    pane.wait_for("Second answer.");
    pane.wait_for("ready");

    pane.submit("slow one");
    pane.wait_for("streams slowly");
    pane.press("Escape");
    let screen = pane.wait_for("stopped: interrupted");
    // The session id is on the status line.
    let id = screen
        .lines()
        .last()
        .and_then(|l| l.split(" · ").last())
        .map(|s| s.trim().to_owned())
        .expect("a status line");
    assert!(!id.is_empty(), "{screen}");

    pane.press("C-c");
    pane.wait_for("press Ctrl+C again to quit");
    pane.press("C-c");
    let screen = pane.wait_for("CORRAL-EXIT=");
    has(&screen, "CORRAL-EXIT=0");
    // The transcript stays in the terminal after the UI's alternate screen
    // is gone, in order, above the shell's next line.
    let back = pane.scrollback();
    has_in_order(
        &back,
        &[
            "> hello there",
            "Second answer.",
            "> slow one",
            "CORRAL-EXIT=0",
        ],
    );
    drop(pane);

    // `resume --last` on a terminal opens the UI on the session, its
    // transcript shown; Ctrl-D on the empty prompt leaves.
    let resume = command.replace(
        &format!("--workspace {}", quote(&sb.ws())),
        &format!("resume --last --workspace {}", quote(&sb.ws())),
    );
    let pane = Pane::start(&resume).expect("tmux");
    let screen = pane.wait_for("resumed session");
    for shown in ["> slow one", "stopped: interrupted"] {
        let shown = shown.trim_start_matches("> ");
        assert!(screen.contains(shown), "`{shown}` missing:\n{screen}");
    }
    pane.press("C-d");
    let screen = pane.wait_for("CORRAL-EXIT=");
    has(&screen, "CORRAL-EXIT=0");
    assert_restored(&pane);
    drop(pane);

    // A new session of the same workspace recalls the earlier prompts: Up
    // puts the last one in the empty input.
    let pane = Pane::start(&command).expect("tmux");
    let screen = pane.wait_for("ask anything");
    lacks(&screen, "slow one");
    pane.press("Up");
    pane.wait_for("slow one");
    pane.press("Up");
    pane.wait_for("second");
    pane.press("C-c");
    pane.press("C-d");
    let screen = pane.wait_for("CORRAL-EXIT=");
    has(&screen, "CORRAL-EXIT=0");
    drop(pane);

    // The log is whole: every event numbered without gaps, the approval and
    // its answer, three stops.
    let o = cli.run(&sb.ws(), &["show", &id, "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect();
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r["seq"], json!(i + 1), "{records:#?}");
    }
    let events: Vec<&Value> = records.iter().map(|r| &r["event"]).collect();
    let of =
        |t: &str| -> Vec<&Value> { events.iter().copied().filter(|e| e["type"] == t).collect() };
    let prompts: Vec<&str> = of("user_message")
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["hello there", "second", "slow one"]);
    let stops: Vec<&str> = of("stop")
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(stops, ["final_answer", "final_answer", "interrupted"]);
    assert_eq!(of("approval_requested").len(), 1);
    let permission = of("permission");
    assert_eq!(permission[0]["decision"], "approved", "{permission:#?}");
    assert_eq!(of("tool_call_end").len(), 1);

    // `corral show` prints the same conversation.
    let o = cli.run(&sb.ws(), &["show", &id]);
    let shown = String::from_utf8_lossy(&o.stdout);
    has_in_order(
        &shown,
        &[
            "> hello there",
            "I will **write** `notes.txt`",
            "write_file",
            "Wrote notes.txt.",
            "> second",
            "Second answer.",
            "> slow one",
        ],
    );
}

/// SIGTERM ends the UI with the terminal restored and the session closed.
#[test]
fn sigterm_restores_the_terminal() {
    let sb = Sandbox::new();
    sb.write(
        "c.json",
        &cassette::text(&[streamed_turn("Hi.", vec![], 3)]),
    );
    sb.write("corral.toml", &crate::support::tui::replay_manifest("", ""));
    let cli = Cli::new();
    crate::support::tui::trust(&cli, &sb);
    let home = cli.home.path();
    let command = format!(
        "env XDG_CONFIG_HOME={} XDG_CACHE_HOME={} XDG_DATA_HOME={} {} --workspace {}; \
         printf '\\nCORRAL-EXIT=%s\\n' $?; stty -a; sleep 600",
        quote(&home.join("config")),
        quote(&cache_home()),
        quote(&home.join("data")),
        quote(Path::new(env!("CARGO_BIN_EXE_corral"))),
        quote(&sb.ws()),
    );
    let Some(pane) = Pane::ready(&command) else {
        return;
    };
    let corral = &pane.corral_pid();
    let ok = Command::new("kill")
        .args(["-TERM", corral])
        .status()
        .expect("kill");
    assert!(ok.success());
    let screen = pane.wait_for("CORRAL-EXIT=");
    has(&screen, "CORRAL-EXIT=143");
    assert_restored(&pane);
}
