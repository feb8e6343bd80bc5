//! A session driven through the library's handle alone — no CLI: ops in,
//! events out, approvals answered with an op, an interrupt mid-stream.

use crate::support::model::calls_then;
use crate::support::run::argv;
use crate::support::run::{answering, openai_workspace};
use crate::support::text::{has, has_all};
use crate::*;
use corral_core::session::{Approvals, SessionConfig};
use corral_protocol::{ApprovalAnswer, Event, Op, PermissionDecision, StopReason};
use corral_sdk::cassette::{Call, Cassette, Event as Recorded, Message, Response, Turn};
use std::time::Duration;

fn turn(events: Vec<Recorded>, text: &str, calls: Vec<Call>) -> Turn {
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    Turn {
        summary: false,
        events,
        response: Response {
            message: Message {
                text: text.into(),
                tool_calls: calls,
            },
            finish_reason: finish.into(),
            usage: None,
        },
    }
}

/// A workspace whose replay provider plays `turns`, streaming each event
/// `delay_ms` apart.
fn workspace(turns: Vec<Turn>, delay_ms: u64) -> (Sandbox, SessionConfig, tempfile::TempDir) {
    let sb = Sandbox::new();
    sb.write(
        "c.json",
        &serde_json::to_string(&Cassette::new(turns)).unwrap(),
    );
    let manifest = sb
        .manifest_with_defaults(&format!(
            "[plugins.replay]\nsource = \"builtin:replay\"\ngrants.fs = [{{ path = \".\", access = \"ro\" }}]\nconfig = {{ cassette = \"c.json\", delay_ms = {delay_ms} }}\n"
        ))
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let config = SessionConfig {
        workspace: sb.ws(),
        cwd: Some(sb.ws()),
        provider: Some("replay".into()),
        approvals: Approvals::FrontEnd,
        runtime: Some(corral_runtime::RuntimeOptions {
            cache_dir: Some(cache_dir()),
        }),
        manifest: Some(manifest),
        sessions_dir: Some(data.path().to_path_buf()),
        ..SessionConfig::default()
    };
    (sb, config, data)
}

async fn next(session: &mut corral_core::session::Session) -> Event {
    tokio::time::timeout(Duration::from_secs(60), session.next_event())
        .await
        .expect("an event within a minute")
        .expect("the session is still open")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_is_an_event_answered_by_an_op() {
    let write = Call {
        id: "w1".into(),
        name: "write_file".into(),
        arguments: r#"{"path":"new.txt","content":"fresh line\n"}"#.into(),
    };
    let (sb, config, _data) = workspace(
        vec![
            turn(vec![], "Writing.", vec![write]),
            turn(vec![], "Done.", vec![]),
        ],
        0,
    );
    let mut session = corral_core::session::open(config).await.expect("open");
    assert!(session.submit(Op::UserTurn {
        text: "write it".into()
    }));
    let request = loop {
        match next(&mut session).await {
            Event::ApprovalRequested(request) => break request,
            Event::ToolCallBegin { .. } | Event::Stop { .. } => {
                panic!("the write started or the turn ended before any approval was asked")
            }
            _ => {}
        }
    };
    // The call is corral's; the model's id stays beside it.
    assert_eq!(request.call.model_id.as_deref(), Some("w1"));
    let own = request.call.id.clone();
    assert!(own.starts_with("c-"), "{own}");
    has(&request.reason, "mode ask");
    let diff = request.preview.expect("a diff preview");
    has_all(&diff, &["+++ b/new.txt", "+fresh line"]);
    // The diff was computed without writing.
    assert!(!sb.ws().join("new.txt").exists());

    assert!(session.submit(Op::Approval {
        call_id: own.clone(),
        answer: ApprovalAnswer::Approve,
    }));
    let mut decision = None;
    let mut ended = None;
    let stop = loop {
        match next(&mut session).await {
            Event::Permission {
                call_id,
                decision: d,
                ..
            } if call_id == own => decision = Some(d),
            Event::ToolCallEnd { outcome, .. } => ended = Some(outcome),
            Event::Stop { reason, .. } => break reason,
            _ => {}
        }
    };
    assert_eq!(stop, StopReason::FinalAnswer);
    assert_eq!(decision, Some(PermissionDecision::Approved));
    let outcome = ended.expect("the call ended");
    assert!(!outcome.is_error, "{}", outcome.content);
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("new.txt")).unwrap(),
        "fresh line\n"
    );
    let log = session.log_path().to_path_buf();
    assert!(session.submit(Op::Shutdown));
    assert_eq!(next(&mut session).await, Event::ShutdownComplete);
    let finished = session.finish().await.expect("finish");
    assert_eq!(finished.last_stop, Some(StopReason::FinalAnswer));
    // The request is in the log, before the decision that settled it.
    let events: Vec<Event> = corral_core::session::read(&log)
        .unwrap()
        .into_iter()
        .map(|r| r.event)
        .collect();
    let asked = events
        .iter()
        .position(|e| matches!(e, Event::ApprovalRequested(_)))
        .expect("logged request");
    let settled = events
        .iter()
        .position(|e| matches!(e, Event::Permission { .. }))
        .expect("logged decision");
    assert!(asked < settled);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_mid_stream_stops_the_turn_and_keeps_the_log_whole() {
    let deltas: Vec<Recorded> = (0..200)
        .map(|i| Recorded::TextDelta {
            text: format!("word{i} "),
        })
        .collect();
    let (_sb, config, _data) = workspace(
        vec![
            turn(deltas, "a long answer", vec![]),
            turn(vec![], "Second answer.", vec![]),
        ],
        50,
    );
    let mut session = corral_core::session::open(config).await.expect("open");
    session.submit(Op::UserTurn {
        text: "talk a lot".into(),
    });
    loop {
        if let Event::TextDelta { .. } = next(&mut session).await {
            break;
        }
    }
    session.submit(Op::Interrupt);
    let mut deltas_after = 0;
    let stop = loop {
        match next(&mut session).await {
            Event::Stop { reason, .. } => break reason,
            Event::TextDelta { .. } => deltas_after += 1,
            Event::RequestEnd { .. } => panic!("the answer completed despite the interrupt"),
            _ => {}
        }
    };
    assert_eq!(stop, StopReason::Interrupted);
    assert!(
        deltas_after < 150,
        "{deltas_after} deltas after the interrupt"
    );

    // The session goes on: the next turn runs.
    session.submit(Op::UserTurn {
        text: "again".into(),
    });
    let stop = loop {
        if let Event::Stop { reason, .. } = next(&mut session).await {
            break reason;
        }
    };
    assert_eq!(stop, StopReason::FinalAnswer);
    let log = session.log_path().to_path_buf();
    session.submit(Op::Shutdown);
    session.finish().await.expect("finish");

    let records = corral_core::session::read(&log).expect("the log parses whole");
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=records.len() as u64).collect::<Vec<_>>());
    let stops: Vec<StopReason> = records
        .iter()
        .filter_map(|r| match r.event {
            Event::Stop { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(stops, [StopReason::Interrupted, StopReason::FinalAnswer]);
    let (history, turns, open) = corral_core::agent::replay_history(&records);
    assert_eq!(turns, 2);
    assert!(open.is_empty());
    // The interrupted answer is not in the history; both prompts are.
    let users = history
        .iter()
        .filter(|m| matches!(m, corral_protocol::Message::User { .. }))
        .count();
    assert_eq!(users, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn ops_that_cannot_be_done_are_errors_and_the_session_goes_on() {
    let (_sb, config, _data) = workspace(vec![turn(vec![], "Hi.", vec![])], 0);
    let mut session = corral_core::session::open(config).await.expect("open");
    session.submit(Op::SetProvider {
        provider: "nope".into(),
    });
    match next(&mut session).await {
        Event::Error { message } => assert!(message.contains("nope"), "{message}"),
        other => panic!("expected an error, got {other:?}"),
    }
    session.submit(Op::Approval {
        call_id: "ghost".into(),
        answer: ApprovalAnswer::Approve,
    });
    match next(&mut session).await {
        Event::Error { message } => assert!(message.contains("ghost"), "{message}"),
        other => panic!("expected an error, got {other:?}"),
    }
    session.submit(Op::SetMode {
        mode: corral_protocol::Mode::ReadOnly,
    });
    assert_eq!(
        next(&mut session).await,
        Event::ModeChanged {
            mode: corral_protocol::Mode::ReadOnly
        }
    );
    session.submit(Op::UserTurn { text: "hi".into() });
    let stop = loop {
        if let Event::Stop { reason, .. } = next(&mut session).await {
            break reason;
        }
    };
    assert_eq!(stop, StopReason::FinalAnswer);
    session.submit(Op::Shutdown);
    session.finish().await.expect("finish");
}

/// `run --json --approvals stdin`: each `approval_requested` line is answered
/// by an op line on stdin; a denial's reason reaches the model.
#[test]
fn json_runs_answer_approvals_on_stdin() {
    use crate::support::mock::*;
    use serde_json::{Value, json};

    let mock = calls_then(
        "Writing two files. ",
        vec![
            write_call("w1", "a.txt", "first\n"),
            write_call("w2", "b.txt", "second\n"),
        ],
        "Done.",
    );
    let sb = openai_workspace(mock.port, "");
    let cli = Cli::new();
    let child = answering(&cli, &sb, "write them", "sk-test");
    let events = crate::support::run::answer_approvals(child, |event| {
        match event["call"]["model_id"].as_str() {
            Some("w1") => json!("approve"),
            Some("w2") => json!({"decision": "deny", "reason": "b.txt is not yours to write"}),
            other => panic!("unexpected approval for {other:?}"),
        }
    });

    let asked: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "approval_requested")
        .collect();
    assert_eq!(asked.len(), 2, "{events:#?}");
    assert!(asked[0]["preview"].as_str().unwrap().contains("+first"));
    assert!(asked[0]["reason"].as_str().unwrap().contains("mode ask"));
    assert_eq!(asked[0]["session_covers"], "every write_file call");
    let decisions: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"] == "permission")
        .map(|e| {
            (
                e["call_id"].as_str().unwrap(),
                e["decision"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(decisions, [("w1", "approved"), ("w2", "refused")]);
    let begins = events
        .iter()
        .filter(|e| e["type"] == "tool_call_begin")
        .count();
    let ends = events
        .iter()
        .filter(|e| e["type"] == "tool_call_end")
        .count();
    assert_eq!((begins, ends), (2, 2));

    assert_eq!(
        std::fs::read_to_string(sb.ws().join("a.txt")).unwrap(),
        "first\n"
    );
    assert!(!sb.ws().join("b.txt").exists());
    assert_sent(&mock, 1, "w2", "not run: b.txt is not yours to write");
}

/// A bad line on stdin is reported and skipped; closing stdin refuses what
/// is still waiting, so the run ends instead of hanging.
#[test]
fn json_approvals_survive_bad_lines_and_a_closed_stdin() {
    use crate::support::mock::*;
    use serde_json::Value;
    use std::io::{BufRead as _, Write as _};

    let mock = calls_then("", vec![write_call("w1", "a.txt", "x\n")], "Fine.");
    let sb = openai_workspace(mock.port, "");
    let cli = Cli::new();
    let mut child = answering(&cli, &sb, "write it", "sk-test");
    let mut stdin = Some(child.stdin.take().expect("stdin"));
    let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    for line in stdout.lines() {
        let event: Value = serde_json::from_str(&line.expect("line")).expect("a JSON event");
        if event["type"] == "approval_requested"
            && let Some(mut s) = stdin.take()
        {
            writeln!(s, "yes please").expect("write");
            // Dropping stdin closes it with the call still waiting.
        }
    }
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    has(&stderr, "stdin line 1 is not an op");
    assert!(!sb.ws().join("a.txt").exists());
    assert_sent(
        &mock,
        1,
        "w1",
        "not run: stdin closed before the approval was answered",
    );
}

/// Every call of a turn gets one `tool_call_begin` and one `tool_call_end`,
/// also those refused, invalid, or not run because a call of the turn
/// stopped the run (the calls are all decided before any runs, so the stop
/// keeps even the allowed `c1` from running).
#[test]
fn every_begin_has_exactly_one_end() {
    use crate::support::mock::*;
    use serde_json::{Value, json};

    let mock = MockServer::start(|_, _| {
        Reply::Sse(openai_sse(
            "",
            &[
                ("c1", "read_file", json!({"path": "hello.txt"})),
                ("c2", "no_such_tool", json!({})),
                ("c3", "read_file", json!({"nope": 1})),
                ("c4", "write_file", json!({"path": "x.txt", "content": "x"})),
                ("c5", "list_files", json!({})),
            ],
        ))
    });
    let sb = openai_workspace(mock.port, "[policy]\nstop = [\"write_file\"]");
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &argv("run --provider openai --json --mode full-auto go"),
        &[("TEST_OPENAI_KEY", "sk-test")],
    );
    assert_eq!(o.status.code(), Some(5));
    let events: Vec<Value> = with_model_ids(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect(),
    );
    for id in ["c1", "c2", "c3", "c4", "c5"] {
        let begins = events
            .iter()
            .filter(|e| e["type"] == "tool_call_begin" && e["call"]["id"] == id)
            .count();
        let ends: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "tool_call_end" && e["call_id"] == id)
            .collect();
        assert_eq!((begins, ends.len()), (1, 1), "{id}: {events:#?}");
        let outcome = &ends[0]["outcome"];
        match id {
            "c2" => assert!(
                outcome["content"]
                    .as_str()
                    .unwrap()
                    .contains("unknown tool")
            ),
            "c3" => assert!(
                outcome["content"]
                    .as_str()
                    .unwrap()
                    .contains("invalid arguments")
            ),
            _ => assert!(
                outcome["content"].as_str().unwrap().contains("not run")
                    || outcome["content"].as_str().unwrap().contains("denied")
            ),
        }
    }
    // Invalid calls are answered before the policy is consulted: only the
    // valid ones have a permission decision.
    let decided: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "permission")
        .map(|e| e["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(decided, ["c1", "c4"]);
}
