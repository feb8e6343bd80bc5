//! Checkpoints and `corral undo`, through the binary: a turn run against
//! the mock model writes, edits and patches files; `corral undo --yes`
//! puts them back (modes too, new files removed), refuses over an edit
//! made since unless `--force`, walks back turn by turn across a resume,
//! works after SIGKILL mid-turn, never writes through a symlink planted
//! since, and the resumed conversation is told of the undo.

use crate::support::files::assert_absent;
use crate::support::log::{of_type, read_events, session_log};
use crate::support::manifest::{KEYS, both_providers};
use crate::support::mock::*;
use crate::support::output::{assert_exit, stderr, stdout};
use crate::support::text::has;
use crate::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, Instant};

fn fs_rw() -> &'static str {
    "[plugins.fs]\nsource = \"builtin:fs\"\ngrants.fs = [{ path = \".\", access = \"rw\" }]\n"
}

/// A workspace with `a.txt` (mode 0750), `notes.txt`, `c.txt`, `sub/x.txt`,
/// and a model that runs `calls` in its first turn, then answers.
fn setup(turns: Vec<Vec<Call>>) -> (Sandbox, MockServer) {
    let n = turns.len();
    let model = MockServer::start(move |i, _| {
        // Each prompt: its calls, then an answer.
        let turn = i / 2;
        if i % 2 == 0 && turn < n {
            Reply::Sse(openai_sse("Working. ", &turns[turn]))
        } else {
            Reply::Sse(openai_sse("Done.", &[]))
        }
    });
    let sb = Sandbox::new();
    sb.write("a.txt", "one\n");
    std::fs::set_permissions(
        sb.ws().join("a.txt"),
        std::fs::Permissions::from_mode(0o750),
    )
    .expect("chmod");
    sb.write("notes.txt", "TODO\n");
    sb.write("c.txt", "version 1 of c.txt\n");
    sb.write("sub/x.txt", "x1\n");
    sb.write("corral.toml", &both_providers(model.port, 9, fs_rw()));
    (sb, model)
}

fn edits() -> Vec<Call> {
    vec![
        write_call("w1", "a.txt", "two\n"),
        write_call("w2", "--flag", "new\n"),
        write_call("w3", "sub/x.txt", "x2\n"),
        (
            "e1",
            "edit_file",
            json!({"path": "notes.txt", "old_string": "TODO", "new_string": "DONE"}),
        ),
        (
            "p1",
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Update File: c.txt\n@@\n-version 1 of c.txt\n+version 2 of c.txt\n*** End Patch\n"}),
        ),
    ]
}

fn run(cli: &Cli, sb: &Sandbox, prompt: &str) {
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--yes", "--provider", "openai", prompt],
        &KEYS,
    );
    assert_exit(&o, 0);
}

fn read(sb: &Sandbox, rel: &str) -> String {
    std::fs::read_to_string(sb.ws().join(rel)).unwrap_or_else(|e| format!("<{e}>"))
}

fn assert_edited(sb: &Sandbox) {
    assert_eq!(read(sb, "a.txt"), "two\n");
    assert_eq!(read(sb, "--flag"), "new\n");
    assert_eq!(read(sb, "notes.txt"), "DONE\n");
    assert_eq!(read(sb, "c.txt"), "version 2 of c.txt\n");
}

fn assert_restored(sb: &Sandbox) {
    assert_eq!(read(sb, "a.txt"), "one\n");
    let mode = std::fs::metadata(sb.ws().join("a.txt"))
        .expect("a.txt")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o750, "the mode is restored");
    assert_absent(sb, "--flag", "a file the turn created is removed");
    assert_eq!(read(sb, "notes.txt"), "TODO\n");
    assert_eq!(read(sb, "c.txt"), "version 1 of c.txt\n");
    assert_eq!(read(sb, "sub/x.txt"), "x1\n");
}

#[test]
fn undo_restores_a_write_an_edit_and_an_apply_patch_and_is_logged() {
    let (sb, _model) = setup(vec![edits()]);
    let cli = Cli::new();
    run(&cli, &sb, "Edit the files");
    assert_edited(&sb);
    let o = cli.run(&sb.ws(), &["undo", "--yes"]);
    assert_exit(&o, 0);
    let diff = stdout(&o);
    assert!(
        diff.contains("-DONE") && diff.contains("+TODO"),
        "the diff is shown: {diff}"
    );
    has(&diff, "-version 2 of c.txt");
    assert_restored(&sb);
    let events = read_events(&session_log(&cli));
    let undone = of_type(&events, "undone");
    assert_eq!(undone.len(), 1, "the undo is in the session log");
    crate::support::schema::check_event(undone[0]);
    // Nothing is left of that turn: a second undo says so.
    let o = cli.run(&sb.ws(), &["undo", "--yes"]);
    assert!(!o.status.success(), "{}", stderr(&o));
    has(&stderr(&o), "nothing to undo");
}

#[test]
fn undo_refuses_over_an_edit_made_since_and_force_overwrites_it() {
    let (sb, _model) = setup(vec![edits()]);
    let cli = Cli::new();
    run(&cli, &sb, "Edit the files");
    sb.write("notes.txt", "DONE, and my own line\n");
    let o = cli.run(&sb.ws(), &["undo"]);
    assert!(!o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    has(&err, "`notes.txt` changed since the turn");
    assert!(err.contains("--force"), "says how to force: {err}");
    assert_edited_except_notes(&sb);
    let o = cli.run(&sb.ws(), &["undo", "--yes", "--force"]);
    assert_exit(&o, 0);
    assert_restored(&sb);
}

fn assert_edited_except_notes(sb: &Sandbox) {
    assert_eq!(read(sb, "a.txt"), "two\n", "nothing was restored");
    assert_eq!(read(sb, "notes.txt"), "DONE, and my own line\n");
}

#[test]
fn undo_walks_back_turn_by_turn_across_a_resume_and_the_model_is_told() {
    let write = |id: &'static str, text: &str| -> Vec<Call> {
        vec![(id, "write_file", json!({"path": "a.txt", "content": text}))]
    };
    let (sb, model) = setup(vec![write("t1", "two\n"), write("t2", "three\n")]);
    let cli = Cli::new();
    run(&cli, &sb, "First");
    let o = cli.run_env(
        &sb.ws(),
        &["resume", "--last", "--yes", "-p", "Second"],
        &KEYS,
    );
    assert_exit(&o, 0);
    assert_eq!(read(&sb, "a.txt"), "three\n");
    assert_exit(&cli.run(&sb.ws(), &["undo", "--yes"]), 0);
    assert_eq!(read(&sb, "a.txt"), "two\n", "the last turn is undone first");
    assert_exit(&cli.run(&sb.ws(), &["undo", "--yes"]), 0);
    assert_eq!(read(&sb, "a.txt"), "one\n", "then the turn before");
    let o = cli.run_env(
        &sb.ws(),
        &["resume", "--last", "--yes", "-p", "Third"],
        &KEYS,
    );
    assert_exit(&o, 0);
    let reqs = model.requests();
    let last = serde_json::to_string(&reqs.last().expect("a request").body).expect("json");
    assert!(
        last.contains("The user undid the file changes of turn 2") && last.contains("turn 1"),
        "the resumed conversation honours the undo: {last}"
    );
}

#[test]
fn undo_after_sigkill_mid_turn_then_resume() {
    let model = MockServer::start(move |i, _| match i {
        0 => Reply::Sse(openai_sse(
            "Writing. ",
            &[write_call("k1", "a.txt", "two\n")],
        )),
        // The turn never ends: the process is killed while it waits.
        1 => Reply::Hang,
        _ => Reply::Sse(openai_sse("Resumed.", &[])),
    });
    let sb = Sandbox::new();
    sb.write("a.txt", "one\n");
    sb.write("corral.toml", &both_providers(model.port, 9, fs_rw()));
    let cli = Cli::new();
    let mut cmd = cli.command(&sb.ws(), &["run", "--yes", "--provider", "openai", "Write"]);
    for (k, v) in KEYS {
        cmd.env(k, v);
    }
    let mut child = crate::support::process::quiet(&mut cmd);
    let start = Instant::now();
    while model.requests().len() < 2 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        read(&sb, "a.txt"),
        "two\n",
        "the write was made before the kill"
    );
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    assert_exit(
        &cli.run_env(&sb.ws(), &["resume", "--last", "--yes"], &KEYS),
        0,
    );
    let o = cli.run(&sb.ws(), &["undo", "--yes"]);
    assert_exit(&o, 0);
    assert_eq!(read(&sb, "a.txt"), "one\n");
}

#[test]
fn undo_never_writes_through_a_symlink_or_over_a_directory_planted_since() {
    let (sb, _model) = setup(vec![edits()]);
    let cli = Cli::new();
    run(&cli, &sb, "Edit the files");
    let victim = sb.outside().join("victim.txt");
    std::fs::write(&victim, "precious\n").expect("victim");
    let a = sb.ws().join("a.txt");
    std::fs::remove_file(&a).expect("rm");
    std::os::unix::fs::symlink(&victim, &a).expect("symlink");
    let outside_dir = sb.outside().join("elsewhere");
    std::fs::create_dir_all(&outside_dir).expect("dir");
    std::fs::write(outside_dir.join("x.txt"), "x2\n").expect("x");
    std::fs::remove_dir_all(sb.ws().join("sub")).expect("rm sub");
    std::os::unix::fs::symlink(&outside_dir, sb.ws().join("sub")).expect("symlink");
    let o = cli.run(&sb.ws(), &["undo", "--yes"]);
    assert!(!o.status.success(), "{}", stderr(&o));
    has(
        &stderr(&o),
        "`a.txt` changed since the turn wrote it (it is now a symlink)",
    );
    let o = cli.run(&sb.ws(), &["undo", "--yes", "--force"]);
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious\n"
    );
    assert_eq!(
        std::fs::read_to_string(outside_dir.join("x.txt")).expect("x"),
        "x2\n",
        "nothing outside the workspace is written: {}",
        stderr(&o)
    );
    // A file replaced by a directory is refused even when forced.
    let (sb, _model) = setup(vec![edits()]);
    let cli = Cli::new();
    run(&cli, &sb, "Edit the files");
    std::fs::remove_file(sb.ws().join("notes.txt")).expect("rm");
    std::fs::create_dir(sb.ws().join("notes.txt")).expect("mkdir");
    let o = cli.run(&sb.ws(), &["undo", "--yes", "--force"]);
    assert!(!o.status.success(), "{}", stderr(&o));
    has(&stderr(&o), "a directory is there now");
    assert!(sb.ws().join("notes.txt").is_dir());
}
