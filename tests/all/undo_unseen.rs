//! Undo covers what a turn changed where `write-files` does not see it,
//! through the binary: a program run by `run_command` (`sed -i` edits a
//! file, `touch` makes one, `rm` removes one) and an MCP server's write
//! tool (the reference filesystem server) change the workspace in a
//! replayed turn; `corral undo --yes` puts every file back, and so does
//! `/rewind` in the terminal UI.

use crate::support::cassette::{self, answer_turn, calls_turn};
use crate::support::files::assert_absent;
use crate::support::log::{of_type, read_events, session_log};
use crate::support::mock::argv_call;
use crate::support::output::{assert_exit, stderr, stdout};
use crate::support::run::argv_with;
use crate::support::text::{has, lacks};
use crate::*;
use serde_json::{Value, json};

/// `[plugins.replay]` playing `turn.cassette.json`.
const REPLAY: &str = "[plugins.replay]\nsource = \"builtin:replay\"\n\
     grants.fs = [{ path = \".\", access = \"ro\" }]\n\
     config = { cassette = \"turn.cassette.json\" }\n";

fn read(sb: &Sandbox, rel: &str) -> String {
    std::fs::read_to_string(sb.ws().join(rel)).unwrap_or_else(|e| format!("<{e}>"))
}

/// Runs one replayed turn making `calls`, with `--yes`.
fn run_turn(cli: &Cli, sb: &Sandbox, calls: &[(&str, &str, Value)]) -> std::process::Output {
    cassette::write(
        sb,
        "turn.cassette.json",
        &[calls_turn(calls), answer_turn("Done.")],
    );
    let o = cli.run(
        &sb.ws(),
        &argv_with("run --provider replay --yes --json", "change the files"),
    );
    assert_exit(&o, 0);
    o
}

/// The content of each `tool_call_end` of a `--json` run.
fn results(o: &std::process::Output) -> Vec<String> {
    stdout(o)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "tool_call_end")
        .map(|e| e["outcome"]["content"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Writes the manifest: [`REPLAY`] and the shell plugin granted each of
/// `programs` with any arguments.
fn write_manifest(sb: &Sandbox, programs: &[&str]) {
    let grants: Vec<String> = programs
        .iter()
        .map(|p| format!("{{ program = \"{p}\", args = [\"**\"] }}"))
        .collect();
    sb.write(
        "corral.toml",
        &format!(
            "{REPLAY}\n[plugins.shell]\nsource = \"builtin:shell\"\ngrants.exec = [{}]\n",
            grants.join(", ")
        ),
    );
}

#[test]
fn undo_restores_what_programs_run_by_run_command_changed() {
    let sb = Sandbox::new();
    sb.write("a.txt", "one\nkeep\n");
    sb.write("sub/gone.txt", "removed by rm\n");
    write_manifest(&sb, &["sed", "touch", "rm"]);
    let cli = Cli::new();
    let o = run_turn(
        &cli,
        &sb,
        &[
            argv_call("c1", &["sed", "-i", "s/one/two/", "a.txt"]),
            ("c2", "run_command", json!({"argv": ["touch", "made.txt"]})),
            ("c3", "run_command", json!({"argv": ["rm", "sub/gone.txt"]})),
        ],
    );
    for content in results(&o) {
        assert!(content.starts_with("exit code 0"), "{content}");
        lacks(&content, "cannot be undone");
    }
    assert_eq!(read(&sb, "a.txt"), "two\nkeep\n", "sed ran");
    assert!(sb.ws().join("made.txt").exists(), "touch ran");
    assert!(!sb.ws().join("sub/gone.txt").exists(), "rm ran");

    let o = cli.run(&sb.ws(), &["undo", "--yes"]);
    assert_exit(&o, 0);
    let diff = stdout(&o);
    assert!(diff.contains("-two") && diff.contains("+one"), "{diff}");
    assert_eq!(read(&sb, "a.txt"), "one\nkeep\n", "the edit is undone");
    assert_absent(&sb, "made.txt", "the file the program made is removed");
    assert_eq!(
        read(&sb, "sub/gone.txt"),
        "removed by rm\n",
        "the file the program removed is back"
    );
    let events = read_events(&session_log(&cli));
    assert_eq!(of_type(&events, "undone").len(), 1, "the undo is logged");
    let again = cli.run(&sb.ws(), &["undo", "--yes"]);
    has(&stderr(&again), "nothing to undo");
}

#[test]
fn a_read_only_call_records_nothing_and_an_unchanged_workspace_has_nothing_to_undo() {
    let sb = Sandbox::new();
    sb.write("a.txt", "one\n");
    write_manifest(&sb, &["cat"]);
    let cli = Cli::new();
    run_turn(
        &cli,
        &sb,
        &[("c1", "run_command", json!({"argv": ["cat", "a.txt"]}))],
    );
    let o = cli.run(&sb.ws(), &["undo", "--yes"]);
    assert!(!o.status.success(), "{}", stdout(&o));
    has(&stderr(&o), "nothing to undo");
}

#[test]
fn undo_restores_what_an_mcp_servers_write_tool_changed() {
    let Some((server, sb, ws)) = crate::support::servers::filesystem_in_sandbox() else {
        return;
    };
    sb.write("notes.txt", "TODO\n");
    sb.write(
        "corral.toml",
        &format!(
            "{REPLAY}\n[mcp.files]\ncommand = {:?}\nargs = [{:?}]\n\
             grants = {{ fs = [\".\"] }}\ntimeout_ms = 20000\n",
            server.display().to_string(),
            ws.display().to_string(),
        ),
    );
    let cli = Cli::new();
    let o = run_turn(
        &cli,
        &sb,
        &[
            (
                "m1",
                "files__write_file",
                json!({"path": ws.join("notes.txt"), "content": "DONE\n"}),
            ),
            (
                "m2",
                "files__write_file",
                json!({"path": ws.join("new.txt"), "content": "made by the server\n"}),
            ),
        ],
    );
    for content in results(&o) {
        lacks(&content, "cannot be undone");
    }
    assert_eq!(read(&sb, "notes.txt"), "DONE\n", "{}", stdout(&o));
    assert_eq!(read(&sb, "new.txt"), "made by the server\n");

    let o = cli.run(&sb.ws(), &["undo", "--yes"]);
    assert_exit(&o, 0);
    assert_eq!(
        read(&sb, "notes.txt"),
        "TODO\n",
        "the server's write is undone"
    );
    assert_absent(&sb, "new.txt", "the file the server made is removed");
}

/// `/rewind` in the terminal UI (tmux) takes back what a program changed:
/// it shares the plan of `corral undo`, so one test is enough for it.
#[test]
fn rewind_in_the_ui_restores_what_a_program_changed() {
    use crate::support::tui::{Pane, quote, ui_command};
    let sb = Sandbox::new();
    sb.write("a.txt", "one\n");
    write_manifest(&sb, &["sed"]);
    cassette::write(
        &sb,
        "turn.cassette.json",
        &[
            calls_turn(&[argv_call("c1", &["sed", "-i", "s/one/two/", "a.txt"])]),
            answer_turn("Edited it."),
        ],
    );
    let cli = Cli::new();
    crate::support::tui::trust(&cli, &sb);
    let command = ui_command(&cli, &sb.ws(), "sleep 600").replacen(
        &format!("--workspace {}", quote(&sb.ws())),
        &format!(
            "--provider replay --mode full-auto --workspace {}",
            quote(&sb.ws())
        ),
        1,
    );
    let Some(pane) = Pane::ready(&command) else {
        return;
    };
    pane.submit("edit a.txt");
    pane.wait_for("Edited it.");
    pane.wait_for(" ready ");
    assert_eq!(read(&sb, "a.txt"), "two\n", "sed ran");

    pane.press("Escape");
    std::thread::sleep(std::time::Duration::from_millis(150));
    pane.press("Escape");
    pane.wait_for("rewind to before which message?");
    pane.press("Enter");
    pane.wait_for("restore code and conversation");
    pane.press("Enter");
    pane.wait_for("restore these files?");
    let screen = pane.wait_for("+one");
    has(&screen, "-two");
    pane.press("y");
    pane.wait_for("rewound the conversation");
    assert_eq!(
        read(&sb, "a.txt"),
        "one\n",
        "the program's edit is taken back"
    );
}
