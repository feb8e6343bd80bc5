//! The UI stays responsive to a flood, in a real terminal (a tmux pane): a
//! long streamed answer does not hang the UI, Ctrl-C interrupts it while it
//! streams, and closing the terminal ends corral with the session closed as
//! interrupted.

use crate::support::cassette::{self, streamed_turn};
use crate::support::text::{lacks, tail};
use crate::support::tui::{Pane, trusted_command};
use crate::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// A workspace whose replay provider streams `text` in `chunk`-character
/// deltas, `delay_ms` apart, and the pane running the UI on it.
fn ui_streaming(text: &str, chunk: usize, delay_ms: u64) -> Option<(Sandbox, Cli, Pane)> {
    let sb = Sandbox::new();
    sb.write(
        "c.json",
        &cassette::text(&[streamed_turn(text, vec![], chunk)]),
    );
    sb.write(
        "corral.toml",
        &format!(
            "[agent]\nprovider = \"replay\"\n\n[plugins.replay]\nsource = \"builtin:replay\"\n\
             grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
             limits = {{ timeout_ms = 600000 }}\n\
             config = {{ cassette = \"c.json\", delay_ms = {delay_ms} }}\n"
        ),
    );
    let cli = Cli::new();
    let command = trusted_command(&cli, &sb, "printf '\\nCORRAL-EXIT=%s\\n' $?; sleep 600");
    let pane = Pane::ready(&command)?;
    Some((sb, cli, pane))
}

/// An answer of about `bytes`: numbered lines in paragraphs, then `last`.
fn long_answer(bytes: usize, last: &str) -> String {
    let mut text = String::from("ANSWER-STARTS here.\n\n");
    let mut n = 0;
    while text.len() < bytes {
        n += 1;
        text.push_str(&format!(
            "Line {n:06} of a long answer, with *some* words that wrap at the edge of the pane.\n"
        ));
        if n % 8 == 0 {
            text.push('\n');
        }
    }
    text.push_str(last);
    text.push('\n');
    text
}

/// Every session log's text under the test's data directory.
fn logs(cli: &Cli) -> String {
    fn walk(dir: &Path, out: &mut String) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    let mut out = String::new();
    walk(&cli.home.path().join("data"), &mut out);
    out
}

#[test]
fn a_two_mib_streamed_answer_finishes_in_the_ui() {
    let text = long_answer(2 << 20, "END-OF-THE-LONG-ANSWER");
    let Some((_sb, _cli, pane)) = ui_streaming(&text, 1024, 0) else {
        return;
    };
    pane.submit("go");
    let started = Instant::now();
    let limit = Duration::from_secs(20);
    loop {
        let screen = pane.screen();
        if screen.contains("END-OF-THE-LONG-ANSWER") && screen.contains("ready") {
            break;
        }
        assert!(
            started.elapsed() < limit,
            "a 2 MiB answer was not shown whole within {limit:?}; the screen:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("2 MiB streamed and shown in {:?}", started.elapsed());
    // The UI still answers keys at once.
    pane.type_text("still here");
    pane.wait_for("still here");
}

#[test]
fn ctrl_c_interrupts_a_long_stream() {
    // 8 MiB at about 400 KB/s: still streaming when Ctrl-C comes.
    let text = long_answer(8 << 20, "NEVER-SHOWN-END");
    let Some((_sb, cli, pane)) = ui_streaming(&text, 4096, 10) else {
        return;
    };
    pane.submit("go");
    pane.wait_for("of a long answer");
    std::thread::sleep(Duration::from_secs(3));
    let pressed = Instant::now();
    pane.press("C-c");
    let limit = Duration::from_secs(10);
    loop {
        let screen = pane.screen();
        if screen.contains("stopped: interrupted") {
            lacks(&screen, "NEVER-SHOWN-END");
            break;
        }
        assert!(
            pressed.elapsed() < limit,
            "Ctrl-C did not interrupt the stream within {limit:?}; the screen:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(logs(&cli).contains("\"interrupted\""));
}

#[test]
fn closing_the_terminal_ends_corral_and_closes_the_session() {
    let text = long_answer(8 << 20, "NEVER-SHOWN-END");
    let Some((_sb, cli, pane)) = ui_streaming(&text, 4096, 10) else {
        return;
    };
    pane.submit("go");
    pane.wait_for("of a long answer");
    std::thread::sleep(Duration::from_secs(2));
    let pid = pane.corral_pid();
    let ok = pane
        .tmux()
        .args(["kill-session", "-t", "ui"])
        .status()
        .expect("kill-session");
    assert!(ok.success());
    let killed = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .contains("(zombie)")
    {
        assert!(
            killed.elapsed() < Duration::from_secs(15),
            "corral (pid {pid}) still runs 15 s after its terminal closed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = logs(&cli);
    assert!(
        log.contains("\"interrupted\""),
        "the session was not closed as interrupted: {}",
        tail(&log, 2000)
    );
}
