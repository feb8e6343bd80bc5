//! `corral run` end to end: provider plugins against mock OpenAI and
//! Anthropic servers on loopback, real tools in their sandboxes, the session
//! log, and resume after SIGKILL.

use crate::support::log::session_log;
use crate::support::manifest::{ANTHROPIC_KEY, KEYS, OPENAI_KEY, both_providers};
use crate::support::mock::*;
use crate::support::model::calls_then;
use crate::support::run::{argv, argv_with};
use crate::support::text::{has, has_all};
use crate::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The three-step task: list, read, edit, then answer.
fn three_steps() -> Vec<(&'static str, Vec<Call>)> {
    vec![
        (
            "Let me look around. ",
            vec![("call_1", "list_files", json!({}))],
        ),
        (
            "Reading the notes. ",
            vec![("call_2", "read_file", json!({"path": "notes.txt"}))],
        ),
        (
            "Fixing the TODO. ",
            vec![(
                "call_3",
                "edit_file",
                json!({"path": "notes.txt", "old_string": "TODO", "new_string": "DONE"}),
            )],
        ),
        ("Marked the task DONE in notes.txt — héllo wörld ✓", vec![]),
    ]
}

fn setup(extra: &str) -> (Sandbox, MockServer, MockServer) {
    let steps = three_steps();
    let steps_a = three_steps();
    let openai = MockServer::start(move |n, _| match steps.get(n) {
        Some((text, calls)) => Reply::Sse(openai_sse(text, calls)),
        None => Reply::Status(500, vec![], "{}".into()),
    });
    let anthropic = MockServer::start(move |n, _| match steps_a.get(n) {
        Some((text, calls)) => Reply::Sse(anthropic_sse(text, calls)),
        None => Reply::Status(500, vec![], "{}".into()),
    });
    let sb = Sandbox::new();
    sb.write("notes.txt", "- TODO: ship it\n");
    sb.write(
        "corral.toml",
        &both_providers(openai.port, anthropic.port, extra),
    );
    (sb, openai, anthropic)
}

fn text(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn assert_three_step_run(sb: &Sandbox, o: &std::process::Output) {
    let (out, err) = text(o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    has_all(&out, &["● list_files()", "● read_file(path=notes.txt)"]);
    assert!(out.contains("● edit_file("), "{out}");
    has(&out, "Marked the task DONE in notes.txt — héllo wörld ✓");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "- DONE: ship it\n"
    );
}

#[test]
fn openai_three_step_task() {
    let (sb, openai, anthropic) = setup("");
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &argv_with("run --provider openai", "Mark the TODO in notes.txt done"),
        &KEYS,
    );
    assert_three_step_run(&sb, &o);
    let reqs = openai.requests();
    assert_eq!(reqs.len(), 4);
    for r in &reqs {
        check_openai_request(r, OPENAI_KEY);
        assert_eq!(r.body["model"], "mock-gpt");
    }
    // The file content reached the model as the result of call_2.
    assert!(openai_tool_result(&reqs[3], "call_2").contains("TODO: ship it"));
    assert_eq!(
        openai_tool_result(&reqs[3], "call_3"),
        "replaced 1 occurrence in `notes.txt`"
    );
    assert!(anthropic.requests().is_empty());
}

#[test]
fn anthropic_three_step_task_by_flag_only() {
    let (sb, openai, anthropic) = setup("");
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &argv_with(
            "run --provider anthropic",
            "Mark the TODO in notes.txt done",
        ),
        &KEYS,
    );
    assert_three_step_run(&sb, &o);
    let reqs = anthropic.requests();
    assert_eq!(reqs.len(), 4);
    for r in &reqs {
        check_anthropic_request(r, ANTHROPIC_KEY);
        assert_eq!(r.body["model"], "mock-claude");
    }
    assert!(openai.requests().is_empty());
}

#[test]
fn provider_chosen_by_manifest() {
    let (sb, openai, _anthropic) = setup("");
    let toml = std::fs::read_to_string(sb.ws().join("corral.toml")).expect("toml");
    sb.write(
        "corral.toml",
        &toml.replace(
            "max_iterations = 8",
            "max_iterations = 8\nprovider = \"openai\"",
        ),
    );
    let cli = Cli::new();
    let o = cli.run_env(&sb.ws(), &["run", "--json", "Mark the TODO done"], &KEYS);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(openai.requests().len(), 4);
    // --json: one event per line, Begin/End groups.
    let events: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().expect("type"))
        .collect();
    assert_eq!(types.first(), Some(&"session_started"));
    // A run ends with its stop, then the result that sums it up.
    assert_eq!(types[types.len() - 2..], ["stop", "result"]);
    assert_eq!(events[events.len() - 2]["reason"], "final_answer");
    assert_eq!(types.iter().filter(|t| **t == "tool_call_begin").count(), 3);
    assert_eq!(types.iter().filter(|t| **t == "tool_call_end").count(), 3);
    assert!(types.contains(&"text_delta"));
}

#[test]
fn key_is_never_visible_to_the_provider_plugin() {
    let mock = MockServer::start(|_, _| Reply::Status(200, vec![], "{\"ok\":true}".into()));
    let sb = Sandbox::with_manifest(&format!(
        "[plugins.leaky]\nsource = {:?}\ngrants.net = [\"http://127.0.0.1:{}\"]\n\
             grants.secrets = [{{ origin = \"http://127.0.0.1:{}\", header = \"authorization\", value = \"Bearer ${{env:TEST_OPENAI_KEY}}\" }}]\n\
             config = {{ url = \"http://127.0.0.1:{}/probe\" }}\n",
        corral_test_programs::ENV_PROVIDER,
        mock.port,
        mock.port,
        mock.port
    ));
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--provider", "leaky", "show me what you can see"],
        &KEYS,
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    // The plugin reports everything it could find: environment, arguments,
    // config, files, and the request headers it built.
    has_all(&out, &["env=[]", "args=[]"]);
    assert!(!out.contains(OPENAI_KEY), "the plugin saw the key: {out}");
    // ...while the request it sent carried the key, added by the host.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
}

/// `corral run --provider openai PROMPT` in `sb`'s workspace with the
/// test keys, to be spawned.
fn openai_run(cli: &Cli, sb: &Sandbox, prompt: &str) -> std::process::Command {
    let mut cmd = cli.command(&sb.ws(), &["run", "--provider", "openai", prompt]);
    cmd.envs(KEYS);
    cmd
}

fn run_with_openai_reply(
    reply: impl Fn(usize) -> Reply + Send + Sync + 'static,
) -> (std::process::Output, MockServer) {
    let openai = MockServer::start(move |n, _| reply(n));
    let sb = Sandbox::with_manifest(&both_providers(openai.port, 9, ""));
    let cli = Cli::new();
    let o = cli.run_env(&sb.ws(), &["run", "--provider", "openai", "hello"], &KEYS);
    (o, openai)
}

#[test]
fn provider_401_is_an_auth_error() {
    let (o, mock) = run_with_openai_reply(|_| {
        Reply::Status(
            401,
            vec![],
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#
                .into(),
        )
    });
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    has_all(
        &err,
        &[
            "authentication failed",
            "Incorrect API key provided",
            "[stopped: provider_error",
        ],
    );
    assert_eq!(mock.requests().len(), 1, "auth errors are not retried");
}

#[test]
fn provider_429_is_retried_after_the_wait_it_asks_for() {
    let started = Instant::now();
    let (o, mock) = run_with_openai_reply(|n| match n {
        0 => Reply::Status(
            429,
            vec![("retry-after", "1".into())],
            r#"{"error":{"message":"Rate limit reached"}}"#.into(),
        ),
        _ => Reply::Sse(openai_sse("Hello after waiting.", &[])),
    });
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    has(&out, "Hello after waiting.");
    assert_eq!(mock.requests().len(), 2);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "the retry did not wait for retry-after"
    );
}

#[test]
fn provider_500_is_retried_then_reported() {
    let (o, mock) = run_with_openai_reply(|_| {
        Reply::Status(
            500,
            vec![("retry-after-ms", "20".into())],
            r#"{"error":{"message":"The server had an error"}}"#.into(),
        )
    });
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    has(&err, "server error");
    assert_eq!(mock.requests().len(), 4, "one try and three retries");
}

#[test]
fn malformed_sse_is_a_protocol_error() {
    let (o, _) = run_with_openai_reply(|_| {
        Reply::Sse(
            b"data: {\"choices\": [{\"delta\": {\"content\": \"hi\"\n\ndata: [DONE]\n\n".to_vec(),
        )
    });
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    has(&err, "protocol error");
}

#[test]
fn stream_cut_mid_message_is_a_network_error() {
    let (o, _) = run_with_openai_reply(|_| {
        let body = openai_sse(
            "This answer will be cut off in the middle of a word",
            &[("c1", "read_file", json!({"path": "x"}))],
        );
        let half = body.len() / 2;
        Reply::SseCut(body, half)
    });
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{out}\n{err}");
    has(&err, "network error");
}

/// On a terminal stdout and stderr are one stream: a streamed answer that
/// corral holds back to write in batches must still come, with its line
/// ended, before the error printed when its stream breaks.
#[test]
fn a_broken_streams_partial_answer_is_printed_before_its_error() {
    let body = openai_sse("alpha beta gamma delta", &[]);
    let finish = String::from_utf8_lossy(&body)
        .find(r#""finish_reason":"stop""#)
        .expect("the finish chunk");
    let cut = String::from_utf8_lossy(&body[..finish])
        .rfind("data: ")
        .expect("its line");
    let openai = MockServer::start(move |_, _| Reply::SseCut(body.clone(), cut));
    let sb = Sandbox::with_manifest(&both_providers(openai.port, 9, ""));
    let cli = Cli::new();
    let mut cmd = openai_run(&cli, &sb, "hello");
    let (mut reader, writer) = std::io::pipe().expect("pipe");
    cmd.stdout(writer.try_clone().expect("pipe")).stderr(writer);
    let mut child = cmd.spawn().expect("spawn corral");
    // The command holds the pipe's writing ends until it is dropped.
    drop(cmd);
    let mut both = String::new();
    std::io::Read::read_to_string(&mut reader, &mut both).expect("read");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(3), "{both}");
    let answer = both.find("alpha beta gamma delta").expect(&both);
    let error = both.find("error: network error").expect(&both);
    assert!(
        answer < error,
        "the error came before the answer streamed ahead of it:\n{both}"
    );
    // The answer's line is ended before the error is printed.
    assert_eq!(&both[error - 1..error], "\n", "{both:?}");
}

#[test]
fn stalled_stream_is_a_network_error_not_a_hang() {
    let (o, _) = run_with_openai_reply(|_| Reply::Hang);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("network error") || err.contains("timed out"),
        "{err}"
    );
}

#[test]
fn provider_cannot_reach_an_unlisted_host() {
    let allowed = MockServer::start(|_, _| Reply::Sse(openai_sse("never", &[])));
    let other = MockServer::start(|_, _| Reply::Sse(openai_sse("never", &[])));
    let sb = Sandbox::new();
    let toml = both_providers(allowed.port, 9, "").replace(
        &format!("base_url = \"http://127.0.0.1:{}/v1\"", allowed.port),
        &format!("base_url = \"http://127.0.0.1:{}/v1\"", other.port),
    );
    sb.write("corral.toml", &toml);
    let cli = Cli::new();
    let o = cli.run_env(&sb.ws(), &["run", "--provider", "openai", "hello"], &KEYS);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    has(&err, "grants.net");
    assert!(other.requests().is_empty(), "the unlisted host was reached");
    assert!(allowed.requests().is_empty());
}

#[test]
fn no_provider_says_how_to_configure_one() {
    let (sb, cli) = workspace_and_cli();
    let o = cli.run(&sb.ws(), &["run", "hello"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    has_all(&err, &["export OPENAI_API_KEY", "--provider replay"]);
}

#[test]
fn offline_demo_runs_real_tools() {
    let sb = Sandbox::new();
    sb.write("README.md", "# A project\n\nIt does things.\n");
    let cli = Cli::new();
    let o = cli.run(
        &sb.ws(),
        &["run", "--provider", "replay", "What is this project?"],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    has(&out, "● list_files(depth=1)");
    // The tool really ran in this workspace: two entries, README.md and hello.txt.
    has(&out, "● read_file(limit=30, path=README.md)\n  ⎿ 3 lines");
}

#[test]
fn record_then_replay_gives_the_same_run() {
    let (sb, _openai, _anthropic) = setup("");
    // Keep the cassette out of the listings the recorded model asked for.
    sb.write(".gitignore", "*.cassette.json\n");
    let cli = Cli::new();
    let cassette = sb.ws().join("run.cassette.json");
    let o = cli.run_env(
        &sb.ws(),
        &[
            "run",
            "--provider",
            "openai",
            "--record",
            cassette.to_str().expect("path"),
            "Mark the TODO done",
        ],
        &KEYS,
    );
    assert_three_step_run(&sb, &o);
    sb.write("notes.txt", "- TODO: ship it\n");
    let toml = std::fs::read_to_string(sb.ws().join("corral.toml")).expect("toml");
    sb.write(
        "corral.toml",
        &format!("{toml}\n[plugins.replay]\nsource = \"builtin:replay\"\ngrants.fs = [{{ path = \".\", access = \"ro\" }}]\nconfig = {{ cassette = \"run.cassette.json\" }}\n"),
    );
    let replayed = cli.run(
        &sb.ws(),
        &["run", "--provider", "replay", "Mark the TODO done"],
    );
    assert_three_step_run(&sb, &replayed);
    // Same transcript, apart from how long each call took.
    let timeless = |s: String| {
        s.lines()
            .map(|l| l.split(" (").next().unwrap_or(l).to_owned())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(timeless(text(&o).0), timeless(text(&replayed).0));
}

#[test]
fn sigkill_mid_turn_then_resume_loses_nothing() {
    let steps = three_steps();
    let openai = MockServer::start(move |n, _| match n {
        0 => Reply::Sse(openai_sse(steps[1].0, &steps[1].1)),
        // The second request hangs: corral is killed while waiting for it.
        1 => Reply::Hang,
        _ => Reply::Sse(openai_sse("Resumed and done.", &[])),
    });
    let sb = Sandbox::new();
    sb.write("notes.txt", "- TODO: ship it\n");
    sb.write("corral.toml", &both_providers(openai.port, 9, ""));
    let cli = Cli::new();
    let mut cmd = openai_run(&cli, &sb, "Read notes.txt");
    let mut child = crate::support::process::quiet(&mut cmd);
    // corral sent its second request.
    openai.wait_requests(2, Duration::from_secs(60));
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    let log = session_log(&cli);
    let before = corral_core::session::read(&log).expect("log readable after SIGKILL");
    let kinds: Vec<String> = before
        .iter()
        .map(|r| {
            serde_json::to_value(&r.event).expect("v")["type"]
                .as_str()
                .expect("t")
                .to_owned()
        })
        .collect();
    assert!(kinds.contains(&"tool_call_end".to_owned()), "{kinds:?}");
    assert!(!kinds.contains(&"stop".to_owned()), "{kinds:?}");
    // A crash can also tear the last line; resume must tolerate it.
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("open");
        f.write_all(br#"{"seq":999,"ts_ms":1,"event":{"type":"tool_ca"#)
            .expect("torn");
    }

    let o = cli.run_env(&sb.ws(), &["resume", "--last"], &KEYS);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    has(&out, "Resumed and done.");

    // The resumed request carried the whole logged conversation.
    let reqs = openai.requests();
    assert_eq!(reqs.len(), 3);
    check_openai_request(&reqs[2], OPENAI_KEY);
    let messages = reqs[2].body["messages"].as_array().expect("messages");
    assert_eq!(messages[1]["content"], "Read notes.txt");
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_2");
    assert!(
        messages[3]["content"]
            .as_str()
            .expect("result")
            .contains("TODO: ship it")
    );

    // Nothing logged before the kill was lost or rewritten.
    let after = corral_core::session::read(&log).expect("log");
    assert_eq!(&after[..before.len()], &before[..]);
    let seqs: Vec<u64> = after.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=after.len() as u64).collect::<Vec<_>>());
    let o = cli.run(&sb.ws(), &["sessions"]);
    has(&text(&o).0, "final_answer");
    let o = cli.run(
        &sb.ws(),
        &[
            "show",
            log.file_stem().expect("id").to_str().expect("utf-8"),
        ],
    );
    has(&text(&o).0, "Resumed and done.");
}

#[test]
fn unknown_tools_and_bad_arguments_go_back_to_the_model() {
    let openai = calls_then(
        "",
        vec![
            ("c1", "no_such_tool", json!({})),
            ("c2", "read_file", json!({"path": 5})),
            (
                "c3",
                "read_file",
                json!({"path": "hello.txt", "bogus": true}),
            ),
        ],
        "ok",
    );
    let sb = Sandbox::with_manifest(&both_providers(openai.port, 9, ""));
    let cli = Cli::new();
    let o = cli.run_env(&sb.ws(), &["run", "--provider", "openai", "go"], &KEYS);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    let reqs = openai.requests();
    check_openai_request(&reqs[1], OPENAI_KEY);
    let result = |id: &str| openai_tool_result(&reqs[1], id);
    has(&result("c1"), "unknown tool `no_such_tool`");
    has(&result("c2"), "arguments.path must be string");
    has(&result("c3"), "unknown field `bogus`");
}

#[test]
fn max_iterations_is_an_explicit_stop() {
    let openai = MockServer::start(|n, _| {
        Reply::Sse(openai_sse(
            "again",
            &[(["a", "b", "c", "d"][n % 4], "list_files", json!({}))],
        ))
    });
    let sb = Sandbox::with_manifest(&both_providers(openai.port, 9, ""));
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &argv("run --provider openai --max-iterations 2 loop"),
        &KEYS,
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    has(&err, "[stopped: max_iterations");
    assert_eq!(openai.requests().len(), 2);
}

#[test]
fn ctrl_c_interrupts_and_leaves_the_log_consistent() {
    let openai = MockServer::start(|n, _| match n {
        0 => Reply::Sse(openai_sse(
            "Reading. ",
            &[("call_1", "read_file", json!({"path": "hello.txt"}))],
        )),
        _ => Reply::Hang,
    });
    let sb = Sandbox::with_manifest(&both_providers(openai.port, 9, ""));
    let cli = Cli::new();
    let mut cmd = openai_run(&cli, &sb, "read hello");
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // corral sent its second request.
    openai.wait_requests(2, Duration::from_secs(60));
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let o = child.wait_with_output().expect("wait");
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{err}");
    has(&err, "[stopped: interrupted");
    let records = corral_core::session::read(&session_log(&cli)).expect("log");
    let last = serde_json::to_value(&records.last().expect("records").event).expect("v");
    assert_eq!(last["type"], "stop");
    assert_eq!(last["reason"], "interrupted");
    let (history, _, open) = corral_core::agent::replay_history(&records);
    assert!(open.is_empty(), "{open:?}");
    assert_eq!(history.len(), 3, "{history:?}");
}

#[test]
fn long_tool_output_is_cut_for_the_model_and_saved_whole() {
    let openai = calls_then(
        "",
        vec![("call_big", "read_file", json!({"path": "big.txt"}))],
        "seen",
    );
    let sb = Sandbox::new();
    let big: String = (0..4000)
        .map(|i| format!("line number {i} of the big file\n"))
        .collect();
    sb.write("big.txt", &big);
    sb.write("corral.toml", &both_providers(openai.port, 9, ""));
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "read big"],
        &KEYS,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    let reqs = openai.requests();
    let sent = openai_tool_result(&reqs[1], "call_big");
    assert!(sent.len() < 33 * 1024, "{}", sent.len());
    assert!(
        sent.contains("[output cut at 32768 of"),
        "{}",
        &sent[sent.len() - 200..]
    );
    let records = corral_core::session::read(&session_log(&cli)).expect("log");
    let artifact = records
        .iter()
        .find_map(|r| match &r.event {
            corral_protocol::Event::ToolCallEnd { outcome, .. } => outcome.artifact.clone(),
            _ => None,
        })
        .expect("artifact recorded");
    let whole = std::fs::read_to_string(artifact).expect("artifact");
    assert!(
        whole.contains("  2000\tline number 1999 of the big file"),
        "{}",
        &whole[whole.len() - 100..]
    );
    assert!(
        whole.contains("[showing lines 1-2000 of 4000"),
        "{}",
        &whole[whole.len() - 100..]
    );
}
