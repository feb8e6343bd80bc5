//! The permission policy end to end: approvals with a diff on a real
//! pseudo-terminal, `--yes`, modes, and deny rules that hold whatever the
//! spacing or quoting.

use crate::support::approvals::{KEY, PROMPT, run_on_pty};
use crate::support::manifest::openai_project;
use crate::support::mock::*;
use crate::support::model::{calls_then, writer};
use crate::support::output::{assert_exit, stderr};
use crate::support::run::argv_with;
use crate::support::run::openai_workspace;
use crate::support::text::{has, has_all};
use crate::*;
use serde_json::{Value, json};

/// A model that writes `new.txt` asks on a pseudo-terminal, `answer` is
/// typed, and the run must end well: the model, workspace, CLI and screen.
fn asked_on_pty(answer: &str) -> (MockServer, Sandbox, Cli, String) {
    let mock = writer();
    let sb = openai_workspace(mock.port, "");
    let cli = Cli::new();
    let (code, screen) = run_on_pty(
        &cli,
        &sb.ws(),
        &["run", "--provider", "openai", "write it"],
        &[answer],
    );
    assert_eq!(code, Some(0), "{screen}");
    (mock, sb, cli, screen)
}

/// A model that writes `new.txt` run by `corral ARGS` (no terminal): the
/// run must end well without the file; what the model was told of `w1`.
fn write_not_run(args: &[&str]) -> String {
    let mock = writer();
    let sb = openai_workspace(mock.port, "");
    let o = Cli::new().run_env(&sb.ws(), args, &[KEY]);
    assert_exit(&o, 0);
    assert!(!sb.ws().join("new.txt").exists());
    openai_tool_result(&mock.requests()[1], "w1")
}

#[test]
fn ask_mode_shows_the_diff_and_waits_for_yes() {
    let (_mock, sb, cli, screen) = asked_on_pty("y\n");
    assert!(screen.contains("write_file(content=fresh line"), "{screen}");
    has_all(
        &screen,
        &["needs approval: mode ask", "+++ b/new.txt", "+fresh line"],
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("new.txt")).expect("written"),
        "fresh line\n"
    );
    // The diff was computed without writing: the file appeared only after "y".
    let records = corral_core::session::read(&crate::support::log::session_log(&cli)).expect("log");
    let decisions: Vec<Value> = records
        .iter()
        .map(|r| serde_json::to_value(&r.event).expect("v"))
        .filter(|e| e["type"] == "permission")
        .collect();
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0]["decision"], "approved");
}

#[test]
fn saying_no_tells_the_model_why() {
    let (mock, sb, _cli, _screen) = asked_on_pty("n not in this folder\n");
    assert!(!sb.ws().join("new.txt").exists());
    assert_sent(
        &mock,
        1,
        "w1",
        "not run: the user declined: not in this folder",
    );
}

#[test]
fn non_interactive_ask_is_a_denial_the_model_sees() {
    let result = write_not_run(&["run", "--provider", "openai", "write it"]);
    has_all(
        &result,
        &[
            "needs the user's approval and the run is not interactive",
            "--yes",
        ],
    );
}

#[test]
fn yes_and_full_auto_run_the_write() {
    for flags in [
        &["--yes"][..],
        &["--mode", "full-auto"][..],
        &["--mode", "auto-edit"][..],
    ] {
        let mock = writer();
        let sb = openai_workspace(mock.port, "");
        let cli = Cli::new();
        let mut args = vec!["run", "--provider", "openai"];
        args.extend_from_slice(flags);
        args.push("write it");
        let o = cli.run_env(&sb.ws(), &args, &[KEY]);
        assert_eq!(o.status.code(), Some(0), "{flags:?}: {}", stderr(&o));
        assert_eq!(
            std::fs::read_to_string(sb.ws().join("new.txt")).expect("written"),
            "fresh line\n",
            "{flags:?}"
        );
    }
}

#[test]
fn read_only_refuses_writes_with_a_message_for_the_model() {
    let result = write_not_run(&argv_with(
        "run --provider openai --mode read-only --yes",
        "write it",
    ));
    assert!(
        result.starts_with("denied by the permission policy"),
        "{result}"
    );
    has(&result, "read-only");
}

#[test]
fn a_deny_rule_holds_whatever_the_spacing_or_quoting() {
    let attempts = [
        ("r1", json!({"command": "rm -rf victim"})),
        ("r2", json!({"command": "rm    -rf     victim"})),
        ("r3", json!({"command": "'rm' -rf victim"})),
        ("r4", json!({"command": "\"rm\" \"-rf\" \"victim\""})),
        ("r5", json!({"command": "r\\m -rf victim"})),
        ("r6", json!({"argv": ["rm", "-rf", "victim"]})),
        ("r7", json!({"argv": ["/bin/rm", "-rf", "victim"]})),
        ("r8", json!({"command": "\trm -rf victim"})),
    ];
    let calls: Vec<Call> = attempts
        .iter()
        .map(|(id, a)| (*id, "run_command", a.clone()))
        .collect();
    let mock = calls_then("Cleaning up.", calls, "Could not.");
    let sb = Sandbox::new();
    sb.write("victim/keep.txt", "precious\n");
    let rm = corral_exec::resolve("rm").expect("rm");
    sb.write(
        "corral.toml",
        &openai_project(
            mock.port,
            &format!(
                "[plugins.shell]\nsource = \"builtin:shell\"\ngrants.exec = [{{ program = \"rm\", args = [\"**\"] }}, {{ program = {:?}, args = [\"**\"] }}]\n\n[policy]\ndeny = [\"run_command(rm **)\"]\n",
                rm.display().to_string()
            ),
        ),
    );
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &argv_with("run --provider openai --mode full-auto", "clean up"),
        &[KEY],
    );
    assert_exit(&o, 0);
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("victim/keep.txt")).expect("kept"),
        "precious\n"
    );
    let req = &mock.requests()[1];
    for (id, args) in &attempts {
        let result = openai_tool_result(req, id);
        assert!(
            result.contains("denied by the permission policy: deny rule \"run_command(rm **)\""),
            "{args}: {result}"
        );
    }
}

#[test]
fn a_stop_rule_ends_the_run() {
    let mock = MockServer::start(|_, _| {
        Reply::Sse(openai_sse(
            "",
            &[
                ("s1", "write_file", json!({"path": "x.txt", "content": "x"})),
                ("s2", "list_files", json!({})),
            ],
        ))
    });
    let sb = Sandbox::with_manifest(&openai_project(
        mock.port,
        "[policy]\nstop = [\"write_file\"]\n",
    ));
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "--mode", "full-auto", "go"],
        &[KEY],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(5), "{err}");
    has(&err, "[stopped: permission_denied");
    assert!(!sb.ws().join("x.txt").exists());
    assert_eq!(mock.requests().len(), 1);
    // The log still pairs both calls with a result.
    let records = corral_core::session::read(&crate::support::log::session_log(&cli)).expect("log");
    let (_, _, open) = corral_core::agent::replay_history(&records);
    assert!(open.is_empty());
}

#[test]
fn writes_to_protected_paths_are_refused_even_in_full_auto() {
    let patch = "*** Begin Patch\n*** Update File: corral.toml\n@@\n-[plugins.openai]\n+[plugins.pwned]\n*** End Patch";
    let mock = calls_then(
        "",
        vec![
            write_call("p1", ".git/config", "[core]\n\thooksPath = evil\n"),
            ("p2", "apply_patch", json!({ "patch": patch })),
            write_call("p3", "src/../.git/HEAD", "x"),
        ],
        "ok",
    );
    let sb = Sandbox::new();
    sb.write(".git/config", "[core]\n");
    let toml = openai_project(mock.port, "");
    sb.write("corral.toml", &toml);
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "--mode", "full-auto", "go"],
        &[KEY],
    );
    assert_exit(&o, 0);
    assert_eq!(
        std::fs::read_to_string(sb.ws().join(".git/config")).expect("config"),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("corral.toml")).expect("toml"),
        toml
    );
    assert!(!sb.ws().join(".git/HEAD").exists());
    let req = &mock.requests()[1];
    for id in ["p1", "p2", "p3"] {
        let result = openai_tool_result(req, id);
        assert!(result.contains("is protected"), "{id}: {result}");
    }
}

#[test]
fn yes_for_the_session_covers_that_command_only() {
    let calls: Vec<Call> = vec![
        ("c1", "run_command", json!({"command": "echo one"})),
        ("c2", "run_command", json!({"argv": ["echo", "one"]})),
        ("c3", "run_command", json!({"command": "echo two"})),
    ];
    let mock = calls_then("Echoing.", calls, "Done.");
    let sb = Sandbox::with_manifest(&openai_project(
        mock.port,
        "[plugins.shell]\nsource = \"builtin:shell\"\ngrants.exec = [{ program = \"echo\", args = [\"**\"] }]\n",
    ));
    let cli = Cli::new();
    let (code, screen) = run_on_pty(
        &cli,
        &sb.ws(),
        &["run", "--provider", "openai", "echo things"],
        &["a\n", "n\n"],
    );
    assert_eq!(code, Some(0), "{screen}");
    has(
        &screen,
        "[a] yes, and this command for the rest of this session",
    );
    // Two prompts: `echo one` (approved for the session, so its second
    // spelling ran without asking) and `echo two` (asked again, refused).
    assert_eq!(screen.matches(PROMPT).count(), 2, "{screen}");
    let records = corral_core::session::read(&crate::support::log::session_log(&cli)).expect("log");
    let decisions = crate::support::events::decisions(&with_model_ids(
        records
            .iter()
            .map(|r| serde_json::to_value(&r.event).expect("v"))
            .collect(),
    ));
    let want = [
        ("c1", "approved_for_session"),
        ("c2", "approved_for_session"),
        ("c3", "refused"),
    ];
    assert_eq!(
        decisions,
        want.map(|(a, b)| (a.to_owned(), b.to_owned())),
        "{screen}"
    );
    let reqs = mock.requests();
    assert!(openai_tool_result(&reqs[1], "c2").contains("one"));
    assert!(openai_tool_result(&reqs[1], "c3").starts_with("not run"));
}
