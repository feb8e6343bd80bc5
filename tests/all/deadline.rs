//! Time limits and Ctrl-C in the shipped binary: a plugin in a busy loop is
//! stopped by its deadline in `tool call` and `run`, and Ctrl-C stops it at
//! once in `tool call`, `run` and `resume`, or while an approval prompt waits,
//! with the session log left whole.

use crate::support::cassette::{answer_turn, call_turn};
use crate::support::process::wait_bounded;
use crate::support::text::has;
use crate::*;
use corral_test_programs::ADVERSARY;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest any of these commands may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(20);

fn project(timeout_ms: u64) -> String {
    format!(
        "[plugins.adversary]\nsource = {ADVERSARY:?}\nlimits = {{ timeout_ms = {timeout_ms} }}\n\n\
         [plugins.replay]\nsource = \"builtin:replay\"\n\
         grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
         config = {{ cassette = \"spin.cassette.json\" }}\n"
    )
}

fn cassette(sb: &Sandbox, turns: &[Value]) {
    crate::support::cassette::write(sb, "spin.cassette.json", turns);
    sb.write(".gitignore", "*.cassette.json\n");
}

/// Lines of a child's pipe, as they come.
fn lines(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Reads lines until one contains `needle`; every line read is kept in `seen`.
fn wait_for_line(rx: &mpsc::Receiver<String>, needle: &str, seen: &mut Vec<String>) {
    let deadline = Instant::now() + HANG;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let hit = line.contains(needle);
                seen.push(line);
                if hit {
                    return;
                }
            }
            Err(_) => panic!("no line with {needle:?}; got:\n{}", seen.join("\n")),
        }
    }
}

fn interrupt(child: &Child) {
    // SAFETY: kill with a valid signal number on our own child's pid.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0, "kill");
}

/// Which output of a command a test reads.
enum Stream {
    Stdout,
    Stderr,
}

/// `corral ARGS` run to its end (at most [`HANG`]): its exit code and the
/// text of `stream`.
fn bounded(cli: &Cli, sb: &Sandbox, args: &[&str], stream: Stream) -> (Option<i32>, String) {
    let mut child = cli
        .command(&sb.ws(), args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let code = wait_bounded(&mut child, HANG);
    let mut text = String::new();
    let read = match stream {
        Stream::Stdout => child
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut text),
        Stream::Stderr => child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut text),
    };
    read.expect("read");
    (code, text)
}

#[test]
fn tool_call_stops_a_busy_loop_at_its_deadline() {
    let sb = Sandbox::with_manifest(&project(300));
    let cli = Cli::new();
    let (code, err) = bounded(
        &cli,
        &sb,
        &["tool", "call", "spin", "--args", "{}"],
        Stream::Stderr,
    );
    assert_eq!(code, Some(1), "{err}");
    has(&err, "timed out after 300 ms (limits.timeout_ms)");
}

#[test]
fn run_stops_a_busy_loop_at_its_deadline_and_goes_on() {
    let sb = Sandbox::with_manifest(&project(300));
    cassette(
        &sb,
        &[call_turn("c1", "spin", json!({})), answer_turn("Gave up.")],
    );
    let cli = Cli::new();
    let (code, out) = bounded(
        &cli,
        &sb,
        &["run", "--provider", "replay", "--json", "spin"],
        Stream::Stdout,
    );
    assert_eq!(code, Some(0), "{out}");
    let end = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("event"))
        .find(|e| e["type"] == "tool_call_end")
        .expect("a tool_call_end");
    assert_eq!(end["outcome"]["is_error"], true, "{end}");
    let content = end["outcome"]["content"].as_str().expect("content");
    has(content, "timed out after 300 ms");
    has(&out, "Gave up.");
}

#[test]
fn ctrl_c_stops_a_tool_call_at_once() {
    let sb = Sandbox::with_manifest(&project(120_000));
    let cli = Cli::new();
    let mut child = cli
        .command(&sb.ws(), &["-vv", "tool", "call", "spin", "--args", "{}"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let err = lines(child.stderr.take().expect("stderr"));
    let mut seen = Vec::new();
    wait_for_line(&err, "call started", &mut seen);
    // Let the guest get into its loop before the signal.
    std::thread::sleep(Duration::from_millis(300));
    interrupt(&child);
    let code = wait_bounded(&mut child, HANG);
    seen.extend(err.iter());
    assert_eq!(code, Some(130), "{}", seen.join("\n"));
    assert!(
        seen.iter().any(|l| l.contains("interrupted")),
        "{}",
        seen.join("\n")
    );
}

/// Runs `args` with `--json`, waits for the `spin` call to begin, presses
/// Ctrl-C and returns the exit code and the events printed.
fn interrupt_spin(cli: &Cli, ws: &Path, args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let mut child = cli
        .command(ws, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let out = lines(child.stdout.take().expect("stdout"));
    let mut seen = Vec::new();
    wait_for_line(&out, r#""name":"spin""#, &mut seen);
    std::thread::sleep(Duration::from_millis(300));
    interrupt(&child);
    let code = wait_bounded(&mut child, HANG);
    seen.extend(out.iter());
    let events = seen
        .iter()
        .map(|l| serde_json::from_str(l).expect("event"))
        .collect();
    (code, events)
}

/// The log after an interrupted spin: the call is closed as interrupted, the
/// run stops as interrupted, and `show` reads it all.
fn assert_log_closed(cli: &Cli, ws: &Path) {
    let log = crate::support::log::session_log(cli);
    let records = corral_core::session::read(&log).expect("the log reads back");
    let events: Vec<Value> = records
        .iter()
        .map(|r| serde_json::to_value(&r.event).expect("event"))
        .collect();
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "tool_call_end")
        .expect("the spin call is closed");
    assert_eq!(end["name"], "spin", "{end}");
    assert!(
        end["outcome"]["content"]
            .as_str()
            .is_some_and(|c| c.contains("interrupted")),
        "{end}"
    );
    let stop = events.last().expect("events");
    assert_eq!(stop["type"], "stop", "{stop}");
    assert_eq!(stop["reason"], "interrupted", "{stop}");
    let (_, _, open) = corral_core::agent::replay_history(&records);
    assert!(open.is_empty(), "calls left open: {open:?}");
    let id = log
        .file_stem()
        .and_then(|s| s.to_str())
        .expect("id")
        .to_owned();
    let shown = cli.run(ws, &["show", &id]);
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
}

#[test]
fn ctrl_c_stops_a_running_tool_in_run() {
    let sb = Sandbox::with_manifest(&project(120_000));
    cassette(
        &sb,
        &[call_turn("c1", "spin", json!({})), answer_turn("never")],
    );
    let cli = Cli::new();
    let (code, events) = interrupt_spin(
        &cli,
        &sb.ws(),
        &["run", "--provider", "replay", "--json", "spin"],
    );
    assert_eq!(code, Some(130), "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "stop" && e["reason"] == "interrupted"),
        "{events:?}"
    );
    assert_log_closed(&cli, &sb.ws());
}

#[test]
fn ctrl_c_stops_a_running_tool_in_resume() {
    let sb = Sandbox::with_manifest(&project(120_000));
    cassette(
        &sb,
        &[
            answer_turn("Hello."),
            call_turn("c2", "spin", json!({})),
            answer_turn("never"),
        ],
    );
    let cli = Cli::new();
    let first = cli.run(&sb.ws(), &["run", "--provider", "replay", "hi"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let (code, events) = interrupt_spin(
        &cli,
        &sb.ws(),
        &["resume", "--last", "-p", "now spin", "--json"],
    );
    assert_eq!(code, Some(130), "{events:?}");
    assert_log_closed(&cli, &sb.ws());
}

#[test]
fn ctrl_c_at_an_approval_prompt_exits_at_once() {
    let sb = Sandbox::with_manifest(&project(30_000));
    cassette(
        &sb,
        &[
            call_turn(
                "w1",
                "write_file",
                json!({"path": "new.txt", "content": "x\n"}),
            ),
            answer_turn("never"),
        ],
    );
    let cli = Cli::new();
    let mut pty = crate::support::approvals::Pty::open();
    let mut cmd = cli.command(&sb.ws(), &["run", "--provider", "replay", "write it"]);
    pty.attach(&mut cmd);
    let mut child = cmd.spawn().expect("spawn");
    drop(cmd);
    pty.wait_for("[y] yes, once", HANG);
    interrupt(&child);
    let code = wait_bounded(&mut child, HANG);
    let screen = pty.screen();
    assert_eq!(code, Some(130), "{screen}");
    assert!(!sb.ws().join("new.txt").exists(), "{screen}");
    let records = corral_core::session::read(&crate::support::log::session_log(&cli)).expect("log");
    let (_, _, open) = corral_core::agent::replay_history(&records);
    assert!(open.is_empty(), "calls left open: {open:?}");
}
