//! The host's own tools through `corral run` with a replayed model (a
//! script per agent in one cassette): `update_plan`, `read_output`, and
//! `task` subagents — in parallel, read-only, linked logs, Ctrl-C — and
//! subagents in git worktrees whose diff waits for the user's approval.

use crate::support::agents::{family, project};
use crate::support::cassette::{answer_turn, call_turn, calls_turn, slow_answer_turn};
use crate::support::events::assert_decided;
use crate::support::git::{git, repo};
use crate::support::log::of_type;
use crate::support::output::assert_exit;
use crate::support::process::{HANG, wait_bounded, wait_for};
use crate::support::text::has;
use crate::*;
use serde_json::{Value, json};
use std::io::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

const ASK_A: &str = "Read a.txt and say what it holds.";
const ASK_B: &str = "Read b.txt and say what it holds.";

#[test]
fn two_read_only_subagents_run_in_parallel_and_answer_in_call_order() {
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\n");
    sb.write("b.txt", "beta\n");
    project(
        &sb,
        "ask",
        0,
        json!([
            calls_turn(&[
                ("call_a", "task", json!({"prompt": ASK_A})),
                ("call_b", "task", json!({"prompt": ASK_B})),
            ]),
            // The parent itself may ask to write (and, not interactive, is refused).
            calls_turn(&[(
                "call_w",
                "write_file",
                json!({"path": "p.txt", "content": "x"})
            )]),
            answer_turn("Both read."),
        ]),
        json!([
            {"prompt": ASK_A, "turns": [
                calls_turn(&[("c1", "read_file", json!({"path": "a.txt"}))]),
                calls_turn(&[("c2", "write_file", json!({"path": "x.txt", "content": "pwned"}))]),
                calls_turn(&[("c3", "list_files", json!({}))]),
                answer_turn("a.txt holds alpha"),
            ]},
            {"prompt": ASK_B, "turns": [
                calls_turn(&[
                    ("c0", "task", json!({"prompt": "go deeper"})),
                    ("c1", "read_file", json!({"path": "b.txt"})),
                ]),
                answer_turn("b.txt holds beta"),
            ]},
        ]),
    );
    // The parent's denials hold in its children.
    let toml = std::fs::read_to_string(sb.ws().join("corral.toml")).expect("toml");
    sb.write(
        "corral.toml",
        &toml.replace(
            "mode = \"ask\"\n",
            "mode = \"ask\"\ndeny = [\"list_files\"]\n",
        ),
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["run", "--json", "read both"]);
    let out = crate::support::output::ok_stdout(&o, "the run");
    assert!(!sb.ws().join("x.txt").exists(), "the child wrote");

    let (parent, children) = family(&cli);
    let parent_id = parent[0]["session_id"].as_str().expect("id").to_owned();
    // Results come back in call order, each the child's final answer, naming its session.
    let ends = of_type(&parent, "tool_call_end");
    let task_ends: Vec<&&Value> = ends.iter().filter(|e| e["name"] == "task").collect();
    assert_eq!(task_ends.len(), 2, "{parent:#?}");
    assert_eq!(task_ends[0]["call_id"], "call_a");
    assert_eq!(task_ends[0]["outcome"]["content"], "a.txt holds alpha");
    assert_eq!(task_ends[1]["call_id"], "call_b");
    assert_eq!(task_ends[1]["outcome"]["content"], "b.txt holds beta");
    // The two ran together: both began before either ended.
    let kinds: Vec<(String, String)> = parent
        .iter()
        .filter(|e| e["type"] == "tool_call_begin" || e["type"] == "tool_call_end")
        .map(|e| {
            let id = e["call"]["id"]
                .as_str()
                .or(e["call_id"].as_str())
                .unwrap_or("");
            (e["type"].as_str().unwrap_or("").to_owned(), id.to_owned())
        })
        .collect();
    assert_eq!(
        &kinds[..4],
        &[
            ("tool_call_begin".to_owned(), "call_a".to_owned()),
            ("tool_call_begin".to_owned(), "call_b".to_owned()),
            ("tool_call_end".to_owned(), "call_a".to_owned()),
            ("tool_call_end".to_owned(), "call_b".to_owned()),
        ]
    );
    // The parent could ask to write; the child could not even ask.
    let parent_write = of_type(&parent, "permission")
        .into_iter()
        .find(|p| p["call_id"] == "call_w")
        .expect("the parent's write");
    assert_decided(parent_write, "refused", "mode ask");

    // Logs are linked both ways.
    assert_eq!(children.len(), 2);
    for ((call, log), end) in children.iter().zip(&task_ends) {
        let linked = of_type(log, "subagent_started")[0];
        assert_eq!(linked["parent"], parent_id.as_str());
        assert_eq!(&end["call_id"], call.as_str());
        assert_eq!(end["outcome"]["data"]["session_id"], log[0]["session_id"]);
        assert_eq!(linked["depth"], 1);
        let stop = of_type(log, "stop");
        assert_eq!(stop.last().expect("stop")["reason"], "final_answer");
        // Each child's calls ran in its own sandboxed calls, logged in its own log.
        let read = of_type(log, "tool_call_end")
            .into_iter()
            .find(|e| e["name"] == "read_file")
            .expect("read_file");
        let want = if call == "call_a" { "alpha" } else { "beta" };
        assert!(
            read["outcome"]["content"]
                .as_str()
                .unwrap_or("")
                .contains(want),
            "{read}"
        );
    }
    // Below the depth limit there is no `task`: no grandchildren.
    let deeper = of_type(&children[1].1, "tool_call_end")
        .into_iter()
        .find(|e| e["call_id"] == "c0")
        .expect("the child's task call");
    assert!(
        deeper["outcome"]["content"]
            .as_str()
            .unwrap_or("")
            .starts_with("unknown tool `task`"),
        "{deeper}"
    );
    let (_, a_log) = &children[0];
    let denied = of_type(a_log, "permission")
        .into_iter()
        .find(|p| p["tool"] == "write_file")
        .expect("the child's write");
    assert_eq!(denied["decision"], "deny", "{denied}");
    assert!(
        !of_type(a_log, "tool_call_end")
            .iter()
            .any(|e| e["name"] == "write_file" && e["outcome"]["is_error"] == false),
        "the child's write ran"
    );
    let listed = of_type(a_log, "permission")
        .into_iter()
        .find(|p| p["tool"] == "list_files")
        .expect("the child's listing");
    assert_decided(listed, "deny", "corral.toml");
    // The children's events reached the front-end tagged with their call.
    let tagged: Vec<Value> = with_model_ids(
        out.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect(),
    )
    .into_iter()
    .filter(|e| e["type"] == "subagent")
    .collect();
    assert!(
        tagged
            .iter()
            .any(|e| e["call_id"] == "call_a" && e["event"]["type"] == "tool_call_begin"),
        "{out}"
    );
    assert!(
        tagged
            .iter()
            .any(|e| e["call_id"] == "call_b" && e["event"]["type"] == "stop"),
        "{out}"
    );
    // `show` names the child's session under the task call.
    let child_id = children[0].1[0]["session_id"].as_str().expect("id");
    let shown = cli.run(&sb.ws(), &["show", &parent_id]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    has(&shown, format!("(subagent session {child_id})"));
}

#[test]
fn a_child_asking_for_more_than_its_parent_gets_nothing() {
    let sb = Sandbox::new();
    project(
        &sb,
        "read-only",
        0,
        json!([
            // write_file is the parent's, but a read-only parent cannot hand out writes.
            calls_turn(&[(
                "call_a",
                "task",
                json!({"prompt": ASK_A, "tools": ["read_file", "write_file"]})
            )]),
            calls_turn(&[(
                "call_b",
                "task",
                json!({"prompt": ASK_B, "tools": ["no_such_tool"]})
            )]),
            answer_turn("Done."),
        ]),
        json!([]),
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["run", "--json", "go"]);
    assert_exit(&o, 0);
    let (parent, children) = family(&cli);
    assert!(children.is_empty(), "{children:?}");
    let perm = of_type(&parent, "permission")
        .into_iter()
        .find(|p| p["call_id"] == "call_a")
        .expect("permission");
    // With max_subagent_depth = 0 there is no `task` at all.
    let toml = std::fs::read_to_string(sb.ws().join("corral.toml")).expect("toml");
    sb.write(
        "corral.toml",
        &toml.replace("[agent]\n", "[agent]\nmax_subagent_depth = 0\n"),
    );
    let o = cli.run(&sb.ws(), &["run", "--json", "go"]);
    let out = String::from_utf8_lossy(&o.stdout);
    has(&out, "unknown tool `task`");
    assert_eq!(perm["decision"], "deny", "{perm}");
    assert!(
        perm["reason"].as_str().unwrap_or("").contains("write"),
        "{perm}"
    );
    let end = of_type(&parent, "tool_call_end")
        .into_iter()
        .find(|e| e["call_id"] == "call_b")
        .expect("end");
    assert!(
        end["outcome"]["content"]
            .as_str()
            .unwrap_or("")
            .contains("`no_such_tool`: it is not among this agent's tools"),
        "{end}"
    );
}

#[test]
fn ctrl_c_stops_the_parent_and_every_child() {
    let sb = Sandbox::new();
    project(
        &sb,
        "ask",
        100,
        json!([
            calls_turn(&[
                ("call_a", "task", json!({"prompt": ASK_A})),
                ("call_b", "task", json!({"prompt": ASK_B})),
            ]),
            answer_turn("never"),
        ]),
        json!([
            {"prompt": ASK_A, "turns": [slow_answer_turn("never a", 600)]},
            {"prompt": ASK_B, "turns": [slow_answer_turn("never b", 600)]},
        ]),
    );
    let cli = Cli::new();
    let (mut child, rx) =
        crate::support::process::streaming(&mut cli.command(&sb.ws(), &["run", "--json", "go"]));
    // Both children are asking their model (in whichever order they started).
    let streaming = std::cell::RefCell::new(std::collections::BTreeSet::new());
    wait_for(&rx, HANG, "both children streaming", |e| {
        if e["type"] == "subagent" && e["event"]["type"] == "request_begin" {
            streaming.borrow_mut().insert(e["call_id"].to_string());
        }
        streaming.borrow().len() == 2
    });
    // SAFETY: signalling the child we started.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
    let started = Instant::now();
    assert_eq!(wait_bounded(&mut child, HANG), Some(130));
    assert!(started.elapsed() < Duration::from_secs(30));

    let (parent, children) = family(&cli);
    assert_eq!(
        of_type(&parent, "stop").last().expect("stop")["reason"],
        "interrupted"
    );
    assert_eq!(children.len(), 2);
    for (call, log) in &children {
        let last = log.last().expect("event");
        assert_eq!(last["type"], "stop", "{call}: {last}");
        assert_eq!(last["reason"], "interrupted", "{call}: {last}");
        let end = of_type(&parent, "tool_call_end")
            .into_iter()
            .find(|e| e["call_id"] == call.as_str())
            .expect("end");
        assert_eq!(end["outcome"]["content"], "interrupted by the user");
    }
}

const FIX: &str = "Mark the TODO in notes.txt done.";

fn fixer(sb: &Sandbox) {
    project(
        sb,
        "auto-edit",
        0,
        json!([
            calls_turn(&[(
                "call_t",
                "task",
                json!({"prompt": FIX, "tools": ["read_file", "edit_file"], "worktree": "fix"})
            )]),
            answer_turn("The subagent fixed it."),
        ]),
        json!([{"prompt": FIX, "turns": [
            calls_turn(&[("e1", "edit_file", json!({"path": "notes.txt", "old_string": "TODO", "new_string": "DONE"}))]),
            answer_turn("Marked it DONE."),
        ]}]),
    );
}

#[test]
fn a_worktree_subagent_changes_the_workspace_only_once_approved() {
    let sb = Sandbox::new();
    repo(&sb);
    fixer(&sb);
    let cli = Cli::new();
    let (mut child, rx) = crate::support::process::streaming(
        cli.command(
            &sb.ws(),
            &["run", "--json", "--approvals", "stdin", "fix it"],
        )
        .stdin(Stdio::piped()),
    );
    let asked = wait_for(&rx, HANG, "the diff's approval", |e| {
        e["type"] == "approval_requested"
    });
    assert_eq!(asked["call"]["id"], "call_t");
    let diff = asked["preview"].as_str().expect("a diff");
    assert!(
        diff.contains("-- TODO: ship it") && diff.contains("+- DONE: ship it"),
        "{diff}"
    );
    // The child edited its worktree; the workspace waits for the answer.
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "- TODO: ship it\n"
    );
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(
        stdin,
        "{}",
        json!({"op": "approval", "call_id": asked["call"]["own_id"], "decision": "approve"})
    )
    .expect("answer");
    drop(stdin);
    assert_eq!(wait_bounded(&mut child, HANG), Some(0));
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "- DONE: ship it\n"
    );
    let (parent, children) = family(&cli);
    let linked = of_type(&children[0].1, "subagent_started")[0].clone();
    let tree = linked["worktree"].as_str().expect("a worktree");
    assert!(
        !std::path::Path::new(tree).exists(),
        "{tree} is left behind"
    );
    let end = of_type(&parent, "tool_call_end")
        .into_iter()
        .find(|e| e["call_id"] == "call_t")
        .expect("end");
    assert_eq!(end["outcome"]["data"]["applied"], true, "{end}");
    assert_eq!(end["outcome"]["data"]["worktree_removed"], true, "{end}");
    let listed = std::process::Command::new("git")
        .args(["worktree", "list"])
        .current_dir(sb.ws())
        .output()
        .expect("git");
    assert_eq!(String::from_utf8_lossy(&listed.stdout).lines().count(), 1);
}

#[test]
fn an_unapproved_worktree_diff_is_kept_as_a_patch() {
    let sb = Sandbox::new();
    repo(&sb);
    fixer(&sb);
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["run", "--json", "fix it"]);
    assert_exit(&o, 0);
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "- TODO: ship it\n"
    );
    let (parent, _) = family(&cli);
    let end = of_type(&parent, "tool_call_end")
        .into_iter()
        .find(|e| e["call_id"] == "call_t")
        .expect("end");
    let patch = end["outcome"]["data"]["patch"].as_str().expect("a patch");
    let content = end["outcome"]["content"].as_str().unwrap_or("");
    assert!(
        content.contains(patch) && content.contains("not applied"),
        "{content}"
    );
    assert!(
        std::fs::read_to_string(patch)
            .expect("patch")
            .contains("+- DONE: ship it")
    );
    // `run --worktree` the same way: nothing applied without --yes, then applied with it.
    let plain = json!([
        calls_turn(&[(
            "e1",
            "edit_file",
            json!({"path": "notes.txt", "old_string": "TODO", "new_string": "DONE"})
        )]),
        answer_turn("Marked it DONE."),
    ]);
    project(&sb, "auto-edit", 0, plain, json!([]));
    // The run's plugins (the replay provider too) see the worktree: only committed files.
    git(&sb.ws(), &["add", "-f", "c.cassette.json"]);
    git(&sb.ws(), &["commit", "-qm", "cassette"]);
    let o = cli.run(&sb.ws(), &["run", "--worktree", "w1", "fix it"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "- TODO: ship it\n"
    );
    assert!(
        err.contains("not applied") && err.contains(".patch"),
        "{err}"
    );
    let o = cli.run(&sb.ws(), &["run", "--worktree", "--yes", "fix it"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    has(&err, "applied to the workspace");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "- DONE: ship it\n"
    );
}

#[test]
fn the_plan_and_cut_outputs_through_the_host_tools() {
    let sb = Sandbox::new();
    let big: String = (0..3000).map(|i| format!("line {i:05}\n")).collect();
    sb.write("big.txt", &big);
    project(
        &sb,
        "ask",
        0,
        json!([
            calls_turn(&[(
                "p1",
                "update_plan",
                json!({"plan": [
                    {"step": "read big.txt", "status": "in_progress"},
                    {"step": "report", "status": "pending"}
                ]})
            )]),
            calls_turn(&[("r1", "read_file", json!({"path": "big.txt"}))]),
            calls_turn(&[
                (
                    "o1",
                    "read_output",
                    json!({"call_id": "r1", "offset": 20000, "limit": 100})
                ),
                (
                    "o2",
                    "read_output",
                    json!({"call_id": "../../../etc/passwd"})
                ),
                ("o3", "read_output", json!({"call_id": "p1"})),
            ]),
            answer_turn("Read it."),
        ]),
        json!([]),
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["run", "--json", "go"]);
    assert_exit(&o, 0);
    let (log, _) = family(&cli);
    let plan = of_type(&log, "plan_updated");
    assert_eq!(plan.len(), 1);
    assert_eq!(plan[0]["steps"][0]["status"], "in_progress");
    let end = |id: &str| {
        of_type(&log, "tool_call_end")
            .into_iter()
            .find(|e| e["call_id"] == id)
            .expect("end")
            .clone()
    };
    let read = end("r1");
    assert!(
        read["outcome"]["truncated_from"].as_u64().is_some(),
        "{read}"
    );
    let page = end("o1");
    let text = page["outcome"]["content"].as_str().expect("page");
    let whole = std::fs::read_to_string(read["outcome"]["artifact"].as_str().expect("artifact"))
        .expect("the whole output");
    assert!(whole.len() > 32 * 1024, "{}", whole.len());
    assert!(text.starts_with(&whole[20000..20100]), "{text}");
    has(text, "the next page starts at offset 20100");
    assert!(
        end("o2")["outcome"]["content"]
            .as_str()
            .unwrap_or("")
            .contains("is not a call id"),
    );
    assert!(
        end("o3")["outcome"]["content"]
            .as_str()
            .unwrap_or("")
            .contains("no saved output"),
    );
    let tools = cli.run(&sb.ws(), &["tools", "list"]);
    let tools = String::from_utf8_lossy(&tools.stdout);
    for name in ["update_plan", "read_output", "task"] {
        has(&tools, name);
    }
    let id = log[0]["session_id"].as_str().expect("id");
    let shown = cli.run(&sb.ws(), &["show", id]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    has(&shown, "[in_progress] read big.txt");
}

#[test]
fn ctrl_c_in_a_worktree_subagent_keeps_its_diff_and_removes_the_worktree() {
    let sb = Sandbox::new();
    repo(&sb);
    project(
        &sb,
        "auto-edit",
        100,
        json!([
            calls_turn(&[(
                "call_t",
                "task",
                json!({"prompt": FIX, "tools": ["edit_file"], "worktree": true})
            )]),
            answer_turn("never"),
        ]),
        json!([{"prompt": FIX, "turns": [
            calls_turn(&[("e1", "edit_file", json!({"path": "notes.txt", "old_string": "TODO", "new_string": "DONE"}))]),
            slow_answer_turn("never", 600),
        ]}]),
    );
    let cli = Cli::new();
    let (mut child, rx) = crate::support::process::streaming(
        &mut cli.command(&sb.ws(), &["run", "--json", "fix it"]),
    );
    wait_for(&rx, HANG, "the child's second request", |e| {
        e["type"] == "subagent"
            && e["event"]["type"] == "request_begin"
            && e["event"]["iteration"] == 2
    });
    // SAFETY: signalling the child we started.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
    assert_eq!(wait_bounded(&mut child, HANG), Some(130));
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "- TODO: ship it\n"
    );
    let (parent, children) = family(&cli);
    let log = &children[0].1;
    assert_eq!(log.last().expect("event")["reason"], "interrupted");
    let tree = of_type(log, "subagent_started")[0]["worktree"]
        .as_str()
        .expect("worktree")
        .to_owned();
    assert!(
        !std::path::Path::new(&tree).exists(),
        "{tree} is left behind"
    );
    let end = of_type(&parent, "tool_call_end")
        .into_iter()
        .find(|e| e["call_id"] == "call_t")
        .expect("end");
    let content = end["outcome"]["content"].as_str().unwrap_or("");
    assert!(content.starts_with("interrupted by the user"), "{content}");
    let patch = end["outcome"]["data"]["patch"].as_str().expect("a patch");
    assert!(
        std::fs::read_to_string(patch)
            .expect("patch")
            .contains("+- DONE: ship it")
    );
}

/// `--last` means the user's last session, never a subagent's log beside
/// it (which starts later than its parent): `show`, `resume` and `undo`
/// all find it the same way.
#[test]
fn last_is_the_users_session_not_one_of_its_subagents() {
    let server = crate::support::guard::collector();
    let sb = crate::support::guard::project(server.port, "");
    let child = vec![
        call_turn("s1", "read_file", json!({"path": "notes.txt"})),
        answer_turn("Nothing secret."),
    ];
    let parent = vec![
        call_turn(
            "c1",
            "task",
            json!({"prompt": "Read notes.txt", "tools": ["read_file"]}),
        ),
        answer_turn("Done."),
    ];
    crate::support::cassette::write_with_agents(
        &sb,
        "guard.cassette.json",
        &parent,
        &json!([{"prompt": "Read notes.txt", "turns": child}]),
    );
    let cli = Cli::new();
    let events = crate::support::run::replay_events(&cli, &sb, "Summarise the notes");
    let started = events
        .iter()
        .find(|e| e["type"] == "session_started")
        .expect("started");
    let id = started["session_id"].as_str().expect("id").to_owned();
    assert!(
        events.iter().any(|e| e["type"] == "subagent"),
        "no subagent ran: {events:#?}"
    );
    let o = cli.run(&sb.ws(), &["show", "--last", "--json"]);
    crate::support::output::assert_exit(&o, 0);
    // The transcript is the log's records: the first is its start.
    let stdout = String::from_utf8_lossy(&o.stdout);
    let first: Value =
        serde_json::from_str(stdout.lines().next().expect("a transcript")).expect("a JSON record");
    assert_eq!(
        first["event"]["session_id"], id,
        "--last found another log: {first}"
    );
}
