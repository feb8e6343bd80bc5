//! Session-log durability by group commit and big sessions, through the
//! `corral` binary against the mock OpenAI server: no fsync before the
//! first request and one per iteration at most, nothing a front-end was
//! shown lost by a SIGKILL at any event boundary, and a replayed session
//! far larger than any window compacts instead of killing the provider.

use crate::support::log::kind;
use crate::support::manifest::{KEYS, OPENAI_KEY, both_providers};
use crate::support::mock::*;
use crate::support::text::has;
use crate::*;
use serde_json::{Value, json};
use std::io::BufRead;
use std::time::Instant;

/// The model's answer to a request, chosen by how many tool results it
/// carries (so a resumed process gets the answer the killed one would
/// have): read the notes, edit them, then answer.
fn scripted(req: &Captured) -> Reply {
    let results = req.body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    match results {
        0 => Reply::Sse(openai_sse(
            "Reading. ",
            &[("call_1", "read_file", json!({"path": "notes.txt"}))],
        )),
        1 => Reply::Sse(openai_sse(
            "Editing. ",
            &[(
                "call_2",
                "edit_file",
                json!({"path": "notes.txt", "old_string": "TODO", "new_string": "DONE"}),
            )],
        )),
        _ => Reply::Sse(openai_sse("All done.", &[])),
    }
}

/// A workspace with `notes.txt`, and a CLI whose user manifest declares
/// the provider (so no project manifest needs trusting before each run).
fn setup(port: u16) -> (Sandbox, Cli) {
    let sb = Sandbox::new();
    sb.write("notes.txt", "- TODO: ship it\n");
    let cli = Cli::new();
    let user = cli.home.path().join("config/corral/corral.toml");
    let mut text = std::fs::read_to_string(&user).expect("user manifest");
    text.push_str(&both_providers(port, 9, ""));
    std::fs::write(&user, text).expect("user manifest");
    (sb, cli)
}

/// Events that are written to the log (the others only go to the screen).
fn logged(e: &Value) -> bool {
    !matches!(
        kind(e),
        "text_delta" | "tool_call_delta" | "error" | "subagent" | "shutdown_complete" | "result"
    )
}

/// The events of a log as its lines hold them (as the front-end was sent
/// them, floats included), after checking corral reads it.
fn log_events(path: &std::path::Path) -> Vec<Value> {
    let records = corral_core::session::read(path).expect("the log reads after a kill");
    let text = std::fs::read_to_string(path).expect("log");
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|r| r["event"].clone())
        .collect();
    assert_eq!(events.len(), records.len());
    events
}

/// The debug lines saying the session log was synced, as the record count
/// each covered.
fn syncs(stderr: &str) -> Vec<u64> {
    stderr
        .lines()
        .filter(|l| l.contains("session log synced"))
        .filter_map(|l| {
            l.split("records=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

#[test]
fn no_fsync_before_the_first_request_and_at_most_one_per_iteration() {
    let server = MockServer::start(|_, req| scripted(req));
    let (sb, cli) = setup(server.port);
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "--json", "Fix the notes"],
        &[
            KEYS[0],
            KEYS[1],
            ("CORRAL_LOG", "warn,corral_core::log=debug"),
        ],
    );
    let out = crate::support::output::ok_stdout(&o, "the run");
    let err = crate::support::output::stderr(&o);
    has(&out, "All done.");
    let log = crate::support::log::session_log(&cli);
    let records = corral_core::session::read(&log).expect("log");
    let seq_of = |what: &str| {
        records
            .iter()
            .find(|r| serde_json::to_value(&r.event).expect("event")["type"] == what)
            .map(|r| r.seq)
            .unwrap_or_else(|| panic!("no {what} in the log"))
    };
    let synced = syncs(&err);
    assert!(
        !synced.is_empty(),
        "no sync of the session log was reported:\n{err}"
    );
    // The first fsync comes after the first request was on its way.
    assert!(
        synced[0] >= seq_of("request_begin"),
        "the log was synced before the first request: {synced:?}\n{err}"
    );
    // Three iterations, one of them a write: at most one sync before the
    // write's effects, one per tool result shown, one at the turn's end.
    assert!(synced.len() <= 4, "{} syncs: {synced:?}", synced.len());
    // The edit's begin was on disk before the edit ran.
    let edit_begin = records
        .iter()
        .find(|r| {
            let e = serde_json::to_value(&r.event).expect("event");
            e["type"] == "tool_call_begin" && e["call"]["name"] == "edit_file"
        })
        .map(|r| r.seq)
        .expect("the edit's begin");
    assert!(synced.iter().any(|&s| s >= edit_begin), "{synced:?}");
    // And everything is on disk at the end.
    assert_eq!(synced.last().copied(), records.last().map(|r| r.seq));
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "- DONE: ship it\n"
    );
}

/// Runs the scripted session and SIGKILLs it once it has shown its `at`-th
/// logged event; returns the events it showed.
fn run_and_kill_at(cli: &Cli, sb: &Sandbox, at: usize) -> Vec<Value> {
    let mut cmd = cli.command(
        &sb.ws(),
        &["run", "--provider", "openai", "--json", "Fix the notes"],
    );
    for (k, v) in KEYS {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let mut shown = Vec::new();
    let mut seen = 0;
    for line in std::io::BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let Ok(e) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let counts = logged(&e);
        shown.push(e);
        if counts {
            seen += 1;
            if seen == at {
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    shown
}

#[test]
fn sigkill_at_every_event_boundary_loses_nothing_shown_and_resumes() {
    // The whole session once, to count its logged events.
    let boundaries = {
        let server = MockServer::start(|_, req| scripted(req));
        let (sb, cli) = setup(server.port);
        let all = run_and_kill_at(&cli, &sb, usize::MAX);
        assert!(
            all.iter().any(|e| kind(e) == "stop"),
            "the session did not finish: {all:?}"
        );
        all.iter().filter(|e| logged(e)).count()
    };
    assert!(boundaries >= 15, "{boundaries} events");
    let started = Instant::now();
    for at in 1..=boundaries {
        // A server each (one serves 64 connections).
        let server = MockServer::start(|_, req| scripted(req));
        let (sb, cli) = setup(server.port);
        let shown = run_and_kill_at(&cli, &sb, at);
        let log = crate::support::log::session_log(&cli);
        let before = log_events(&log);
        // Everything shown that the log keeps is in it, in order: in
        // particular every result and the turn's end (what the user was
        // told is done).
        let mut rest = before.iter();
        for e in shown.iter().filter(|e| logged(e)) {
            assert!(
                rest.any(|l| l == e),
                "kill at event {at}: {} was shown but is not in the log:\n{before:#?}",
                kind(e)
            );
        }
        // The edit never ran without the log saying it began.
        let edited = std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes")
            == "- DONE: ship it\n";
        if edited {
            assert!(
                before
                    .iter()
                    .any(|e| kind(e) == "tool_call_begin" && e["call"]["name"] == "edit_file"),
                "kill at event {at}: the edit ran but the log does not say so"
            );
        }

        // Resuming goes on from the log to the answer.
        let o = cli.run_env(&sb.ws(), &["resume", "--last", "--json"], &KEYS);
        let out =
            crate::support::output::ok_stdout(&o, &format!("kill at event {at}: resume failed"));
        assert!(out.contains("All done."), "kill at event {at}:\n{out}");
        let after = log_events(&log);
        assert_eq!(&after[..before.len()], &before[..], "kill at event {at}");
        let seqs: Vec<u64> = corral_core::session::read(&log)
            .expect("log")
            .iter()
            .map(|r| r.seq)
            .collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
        // A request the kill cut off while it was being sent is not whole.
        for req in server.requests().iter().filter(|r| r.body.is_object()) {
            check_openai_request(req, OPENAI_KEY);
        }
    }
    eprintln!(
        "{boundaries} kills and resumes in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Where `corral resume` finds the log of session `id` of `ws`, its
/// directory made.
fn session_file(cli: &Cli, ws: &std::path::Path, id: &str) -> std::path::PathBuf {
    let root = cli.home.path().join("data/corral/sessions");
    let dir = corral_core::session::workspace_dir(&root, &ws.canonicalize().expect("ws"));
    std::fs::create_dir_all(&dir).expect("dir");
    dir.join(format!("{id}.jsonl"))
}

/// One record of a session log, as the log writes it.
fn log_line(seq: usize, event: &corral_protocol::Event) -> String {
    let mut l =
        serde_json::to_string(&json!({"seq": seq, "ts_ms": 1, "event": event})).expect("record");
    l.push('\n');
    l
}

/// The events a session starts with: its start, turn 1 and `prompt`.
fn session_head(id: &str, ws: &std::path::Path, prompt: &str) -> Vec<corral_protocol::Event> {
    use corral_protocol::Event;
    vec![
        Event::SessionStarted {
            session_id: id.into(),
            workspace: ws.canonicalize().expect("ws").display().to_string(),
            provider: "openai".into(),
            model: String::new(),
        },
        Event::TurnBegin { turn: 1 },
        Event::UserMessage {
            text: prompt.into(),
        },
    ]
}

/// Writes a session log of about `n` events straight to where `corral
/// resume` finds it: a prompt, then turns of one `read_file` call with a
/// 300-byte result, as a long session leaves them.
fn write_big_session(cli: &Cli, ws: &std::path::Path, n: usize) -> std::path::PathBuf {
    use corral_protocol::{AssistantMessage, Event, FinishReason, ToolCall, ToolOutcome};
    let id = "20261201-000000-b1g000";
    let path = session_file(cli, ws, id);
    let line = log_line;
    let mut out = String::with_capacity(n * 200);
    let head = session_head(id, ws, "Read main.rs again and again");
    for e in &head {
        out.push_str(&line(out.lines().count() + 1, e));
    }
    // One turn as a template; its seqs and ids are filled in per turn.
    let call = ToolCall {
        id: "c-IDX".into(),
        name: "read_file".into(),
        arguments: "{\"path\":\"src/main.rs\"}".into(),
        model_id: Some("call_IDX".into()),
    };
    let turn = [
        Event::RequestEnd {
            message: AssistantMessage {
                text: "Reading the file to see what it does.".into(),
                tool_calls: vec![call.clone()],
            },
            finish_reason: FinishReason::ToolCalls,
            usage: None,
        },
        Event::ToolCallBegin { call },
        Event::ToolCallEnd {
            call_id: "c-IDX".into(),
            name: "read_file".into(),
            outcome: ToolOutcome {
                content: "x".repeat(300),
                is_error: false,
                data: None,
                truncated_from: None,
                artifact: None,
                labels: Vec::new(),
            },
            duration_ms: 3,
        },
    ];
    let templates: Vec<String> = turn.iter().map(|e| line(0, e)).collect();
    let mut seq = head.len();
    let mut i = 0;
    while seq < n {
        i += 1;
        for t in &templates {
            seq += 1;
            out.push_str(
                &t.replacen("\"seq\":0", &format!("\"seq\":{seq}"), 1)
                    .replace("IDX", &i.to_string()),
            );
        }
    }
    std::fs::write(&path, out).expect("log");
    path
}

/// Resumes a session of `n` events against a model whose window nobody
/// reports, and checks it compacts and finishes with every request small.
fn resume_big_session_with_an_unknown_window(n: usize) {
    let server = MockServer::start(|_, req| {
        let system = req.body["messages"][0]["content"].as_str().unwrap_or("");
        if system.starts_with("You are summarising") {
            Reply::Sse(openai_sse("Task: read main.rs. Remaining: answer.", &[]))
        } else {
            Reply::Sse(openai_sse("Read it many times; done.", &[]))
        }
    });
    let (sb, cli) = setup(server.port);
    let log = write_big_session(&cli, &sb.ws(), n);
    let bytes = std::fs::metadata(&log).expect("log").len();
    let started = Instant::now();
    let o = cli.run_env(&sb.ws(), &["resume", "--last", "--json"], &KEYS);
    let took = started.elapsed();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let tail = |s: &str| s.lines().rev().take(12).collect::<Vec<_>>().join("\n");
    assert_eq!(o.status.code(), Some(0), "{}\n{}", tail(&out), tail(&err));
    let events: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let assumed: Vec<&Value> = events
        .iter()
        .filter(|e| kind(e) == "window_assumed")
        .collect();
    assert_eq!(assumed.len(), 1, "said once: {}", tail(&out));
    assert_eq!(assumed[0]["window"], corral_core::agent::DEFAULT_WINDOW);
    assert!(
        events.iter().any(|e| kind(e) == "compacted"),
        "no compaction: {}",
        tail(&out)
    );
    assert!(out.contains("Read it many times; done."), "{}", tail(&out));
    // Every request the provider built stayed within the assumed window
    // (at three bytes a token at most), far from a plugin's memory limit.
    let requests = server.requests();
    assert!(requests.len() >= 2, "{} requests", requests.len());
    for r in &requests {
        let size = r.body.to_string().len();
        assert!(
            size < 3 * corral_core::agent::DEFAULT_WINDOW as usize,
            "a {size}-byte request"
        );
        // The summary request offers no tools; the others are checked whole.
        if r.body.get("tools").is_some() {
            check_openai_request(r, OPENAI_KEY);
        }
    }
    eprintln!(
        "{n} events ({:.1} MiB) resumed and compacted in {:.1} s",
        bytes as f64 / f64::from(1 << 20),
        took.as_secs_f64()
    );
}

#[test]
fn a_replayed_200k_event_session_with_an_unknown_window_compacts_instead_of_dying() {
    resume_big_session_with_an_unknown_window(200_000);
}

/// A kill between the response that asked for a call and the call's begin
/// leaves a log whose only mention of `c-1` is that response. The resumed
/// session closes `c-1` as interrupted and must give the model's next call
/// a new id: with `c-1` handed out again, both results went to the model
/// under the second call's id.
#[test]
fn a_call_logged_only_in_its_response_keeps_its_id_after_a_resume() {
    use corral_protocol::{AssistantMessage, Event, FinishReason, ToolCall};
    let server = MockServer::start(|_, req| scripted(req));
    let (sb, cli) = setup(server.port);
    let id = "20261202-000000-k1ll00";
    let path = session_file(&cli, &sb.ws(), id);
    let mut events = session_head(id, &sb.ws(), "Fix the notes");
    events.extend([Event::RequestEnd {
        message: AssistantMessage {
            text: "Reading. ".into(),
            tool_calls: vec![ToolCall {
                id: "c-1".into(),
                name: "read_file".into(),
                arguments: "{\"path\":\"notes.txt\"}".into(),
                model_id: Some("call_1".into()),
            }],
        },
        finish_reason: FinishReason::ToolCalls,
        usage: None,
    }]);
    let log: String = events
        .iter()
        .enumerate()
        .map(|(i, e)| log_line(i + 1, e))
        .collect();
    std::fs::write(&path, log).expect("log");

    let o = cli.run_env(&sb.ws(), &["resume", "--last", "--json"], &KEYS);
    let out = crate::support::output::ok_stdout(&o, "resume --last");
    has(&out, "All done.");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "- DONE: ship it\n",
        "the edit after the resume ran"
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "after the interrupted read, the edit, then the end"
    );
    for req in &requests {
        check_openai_request(req, OPENAI_KEY);
    }
    let begun: Vec<String> = log_events(&path)
        .iter()
        .filter(|e| kind(e) == "tool_call_begin")
        .map(|e| e["call"]["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        begun,
        ["c-2"],
        "the resumed session's call has an id of its own"
    );
}
