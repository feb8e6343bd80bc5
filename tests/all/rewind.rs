//! Undo and rewind in the interactive UI, driven in a real terminal (tmux)
//! against the mock model, which keeps every request: `/undo` refused over
//! an edit made since, then confirmed from its diff; Esc Esc back to the
//! first message, code and conversation restored, the message back in the
//! editor and the next request without the later turns; the same after
//! SIGKILL and a resume. And an answer interrupted mid-stream is kept,
//! marked, in the log, `corral show` and the next request.

use crate::support::log::{of_type, read_events, session_log};
use crate::support::manifest::{KEYS, both_providers};
use crate::support::mock::*;
use crate::support::output::{assert_exit, stdout};
use crate::support::text::{has, lacks};
use crate::support::tui::{Pane, quote, ui_command};
use crate::*;
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader};
use std::process::Stdio;
use std::time::Duration;

const FS_RW: &str =
    "[plugins.fs]\nsource = \"builtin:fs\"\ngrants.fs = [{ path = \".\", access = \"rw\" }]\n";

/// The (role, text) of every message of an OpenAI request but the system
/// prompt.
fn conversation(req: &Captured) -> Vec<(String, String)> {
    req.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                match &m["content"] {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                },
            )
        })
        .collect()
}

fn user_texts(req: &Captured) -> Vec<String> {
    conversation(req)
        .into_iter()
        .filter(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .collect()
}

fn read(sb: &Sandbox, rel: &str) -> Option<String> {
    std::fs::read_to_string(sb.ws().join(rel)).ok()
}

/// The UI of the binary under test on the mock OpenAI provider, its key
/// set; `args` go before `--workspace` (e.g. `resume --last`).
fn command(cli: &Cli, sb: &Sandbox, args: &str) -> String {
    let key = KEYS[0];
    ui_command(cli, &sb.ws(), "printf '\\nCORRAL-EXIT=%s\\n' $?; sleep 600")
        .replacen("TERM=", &format!("{}={} TERM=", key.0, key.1), 1)
        .replacen(
            &format!("--workspace {}", quote(&sb.ws())),
            &format!("{args} --workspace {}", quote(&sb.ws())),
            1,
        )
}

/// The id of the workspace's last session.
fn last_id(cli: &Cli) -> String {
    session_log(cli)
        .file_stem()
        .expect("id")
        .to_string_lossy()
        .into_owned()
}

fn wait_requests(model: &MockServer, n: usize) {
    model.wait_requests(n, crate::support::tui::SCREEN_TIMEOUT);
}

/// Types `text`, sends it, and waits for `answer` and the idle status.
fn say(pane: &Pane, text: &str, answer: &str) {
    pane.submit(text);
    pane.wait_for(answer);
    pane.wait_for(" ready ");
}

#[test]
fn undo_and_rewind_in_the_ui_survive_a_kill_and_a_resume() {
    let write = |id: &'static str, text: &str| -> Vec<Call> {
        vec![(
            id,
            "write_file",
            json!({"path": "notes.txt", "content": text}),
        )]
    };
    let model = MockServer::start(move |i, _| {
        Reply::Sse(match i {
            0 => openai_sse("Writing v1. ", &write("t1", "v1\n")),
            1 => openai_sse("Wrote v1.", &[]),
            2 => openai_sse("Writing v2. ", &write("t2", "v2\n")),
            3 => openai_sse("Wrote v2.", &[]),
            4 => openai_sse("Fresh answer.", &[]),
            _ => openai_sse("Resumed answer.", &[]),
        })
    });
    let sb = Sandbox::with_manifest(&both_providers(model.port, 9, FS_RW));
    let cli = Cli::new();
    crate::support::tui::trust(&cli, &sb);
    let Some(pane) = Pane::ready(&command(&cli, &sb, "--provider openai")) else {
        return;
    };
    say(&pane, "first message", "Wrote v1.");
    say(&pane, "second message", "Wrote v2.");
    assert_eq!(read(&sb, "notes.txt").as_deref(), Some("v2\n"));

    // `/undo` over an edit made since is refused: it says which file and
    // how to force it, and nothing changes.
    sb.write("notes.txt", "my own edit\n");
    pane.submit("/undo");
    let screen = pane.wait_for("changed since the turn");
    has(&screen, "notes.txt");
    pane.wait_for("/undo --force");
    assert_eq!(read(&sb, "notes.txt").as_deref(), Some("my own edit\n"));

    // Without the edit, `/undo` shows the diff first; `y` restores.
    sb.write("notes.txt", "v2\n");
    pane.submit("/undo");
    pane.wait_for("restore these files?");
    let screen = pane.wait_for("+v1");
    has(&screen, "-v2");
    assert_eq!(read(&sb, "notes.txt").as_deref(), Some("v2\n"), "not yet");
    pane.press("y");
    pane.wait_for("undid turn 2: restored notes.txt");
    assert_eq!(read(&sb, "notes.txt").as_deref(), Some("v1\n"));

    // Esc Esc: the earlier messages, newest first; the first one, then
    // code and conversation, then its diff confirmed.
    pane.press("Escape");
    std::thread::sleep(Duration::from_millis(150));
    pane.press("Escape");
    let screen = pane.wait_for("rewind to before which message?");
    let boxed: Vec<&str> = screen.lines().filter(|l| l.contains('│')).collect();
    let at = |text: &str| boxed.iter().position(|l| l.contains(text));
    let (second, first) = (at("second message"), at("first message"));
    assert!(
        second.is_some() && first.is_some() && second < first,
        "both listed, newest first:\n{screen}"
    );
    pane.press("Down");
    pane.press("Enter");
    pane.wait_for("restore code and conversation");
    pane.press("Enter");
    pane.wait_for("restore these files?");
    pane.wait_for("-v1");
    pane.press("y");
    let screen = pane.wait_for("rewound the conversation");
    assert_eq!(read(&sb, "notes.txt"), None, "the file is back: absent");
    assert!(
        !screen.contains("second message") && !screen.contains("Wrote v1."),
        "the rewound turns leave the transcript:\n{screen}"
    );
    // The message is back in the editor, to be edited and sent.
    let input = screen
        .lines()
        .rev()
        .find(|l| l.starts_with("› "))
        .unwrap_or_default();
    assert!(input.contains("first message"), "{screen}");
    pane.submit(" again");
    pane.wait_for("Fresh answer.");
    pane.wait_for(" ready ");
    let reqs = model.requests();
    assert_eq!(
        conversation(&reqs[4]),
        vec![("user".to_owned(), "first message again".to_owned())],
        "the next request leaves the rewound turns out"
    );

    // A crash: the rewind is on disk, and the resumed session shows and
    // sends the rewound history.
    let pid: i32 = pane.corral_pid().parse().expect("pid");
    // SAFETY: kill with a valid signal on the corral the pane runs.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    pane.wait_for("CORRAL-EXIT=");
    drop(pane);
    let pane = Pane::start(&command(&cli, &sb, "resume --last")).expect("tmux");
    let screen = pane.wait_for("resumed session");
    has(&screen, "first message again");
    lacks(&screen, "second message");
    say(&pane, "after resume", "Resumed answer.");
    wait_requests(&model, 6);
    let reqs = model.requests();
    assert_eq!(
        user_texts(&reqs[5]),
        vec!["first message again".to_owned(), "after resume".to_owned()],
        "{:?}",
        conversation(&reqs[5])
    );
    pane.press("C-d");
    pane.wait_for("CORRAL-EXIT=");
    drop(pane);

    let events = read_events(&session_log(&cli));
    let rewound = of_type(&events, "rewound");
    assert_eq!(rewound.len(), 1, "the rewind is in the log");
    crate::support::schema::check_event(rewound[0]);
    assert_eq!(rewound[0]["turn"], 1);
    assert_eq!(rewound[0]["files"], json!(["notes.txt"]));
    let o = cli.run(&sb.ws(), &["show", &last_id(&cli)]);
    assert_exit(&o, 0);
    let shown = stdout(&o);
    assert!(
        shown.contains("-- rewound to before turn 1") && shown.contains("-- undone"),
        "{shown}"
    );
}

#[test]
fn an_interrupted_answer_is_kept_marked_and_sent_with_the_next_prompt() {
    let partial = "The first half of an answer that";
    let body = openai_sse(&format!("{partial} never ends"), &[]);
    let cut = String::from_utf8_lossy(&body)
        .find("never")
        .expect("the text is in the stream");
    let model = MockServer::start(move |i, _| match i {
        0 => Reply::SseStall(body.clone(), cut),
        _ => Reply::Sse(openai_sse("Going on.", &[])),
    });
    let sb = Sandbox::with_manifest(&both_providers(model.port, 9, ""));
    let cli = Cli::new();
    let mut cmd = cli.command(
        &sb.ws(),
        &["run", "--json", "--provider", "openai", "Start an answer"],
    );
    for (k, v) in KEYS {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = String::new();
    // Interrupted once the partial answer has streamed.
    while !seen.contains("answer that") {
        let line = lines
            .next()
            .expect("a line before the end")
            .expect("stdout");
        if let Ok(v) = serde_json::from_str::<Value>(&line)
            && v["type"] == "text_delta"
        {
            seen.push_str(v["text"].as_str().unwrap_or_default());
        }
    }
    // SAFETY: kill with a valid signal on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let _ = child.wait();
    let kept: Vec<Value> = rest
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "answer_interrupted")
        .collect();
    assert_eq!(kept.len(), 1, "{rest:?}");
    assert!(
        kept[0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with(partial)
    );

    let events = read_events(&session_log(&cli));
    let logged = of_type(&events, "answer_interrupted");
    assert_eq!(logged.len(), 1, "the partial answer is in the log");
    crate::support::schema::check_event(logged[0]);
    let o = cli.run(&sb.ws(), &["show", &last_id(&cli)]);
    assert_exit(&o, 0);
    let shown = stdout(&o);
    assert!(
        shown.contains(partial) && shown.contains("[answer interrupted by the user]"),
        "{shown}"
    );

    let id = last_id(&cli);
    let o = cli.run_env(&sb.ws(), &["resume", &id, "-p", "go on"], &KEYS);
    assert_exit(&o, 0);
    let reqs = model.requests();
    let next = conversation(reqs.last().expect("a request"));
    let answer = next
        .iter()
        .find(|(role, _)| role == "assistant")
        .map(|(_, t)| t.as_str())
        .unwrap_or_default();
    assert!(
        answer.starts_with(partial) && answer.contains("interrupted"),
        "the next request holds the partial answer, marked: {next:?}"
    );
    assert_eq!(next.last().map(|(_, t)| t.as_str()), Some("go on"));
}
