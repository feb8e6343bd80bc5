//! The habits people bring from Claude Code and Codex hold, through the
//! binary: `CLAUDE.md` read, `-y` everywhere there is a `--yes`, `--last`
//! on `show` and `compact`, the way back into a session said on exit, no
//! note about a cassette's context window, no empty prompt sent, no empty
//! session left behind by the UI, no stray stop marker after a `!` command,
//! and a help line that says what `mcp` does.
//!
//! Each test failed before its fix; the comment on each says how.

use crate::support::log::session_log;
use crate::support::mock::{MockServer, Reply, openai_sse};
use crate::support::output::assert_exit;
use crate::support::output::{stderr, stdout};
use crate::support::run::openai_workspace;
use crate::support::text::{has, lacks};
use crate::support::tui::{Pane, trusted_command};
use crate::*;

/// The system prompt of the first request a run sent.
fn system_prompt(mock: &MockServer) -> String {
    let requests = mock.requests();
    let first = requests.first().expect("a request");
    first.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `corral run --provider openai hi` in `sb`, whose manifest points the
/// provider at a mock.
fn run_openai(cli: &Cli, sb: &Sandbox) -> std::process::Output {
    cli.run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "hi"],
        &[("TEST_OPENAI_KEY", "k-1")],
    )
}

// Before: only `AGENTS.md` was read; a project's `CLAUDE.md` never reached
// the model.
#[test]
fn claude_md_is_read_where_there_is_no_agents_md() {
    let mock = MockServer::start(|_, _| Reply::Sse(openai_sse("Done.", &[])));
    let sb = openai_workspace(mock.port, "");
    sb.write("CLAUDE.md", "Always answer in haiku (from CLAUDE.md).\n");
    let cli = Cli::new();
    let o = run_openai(&cli, &sb);
    assert!(o.status.success(), "{}", stderr(&o));
    let system = system_prompt(&mock);
    has(
        &system,
        "# Instructions from CLAUDE.md\nAlways answer in haiku",
    );

    // Where both are, AGENTS.md is the one read: the project is not told
    // the same thing twice.
    let mock = MockServer::start(|_, _| Reply::Sse(openai_sse("Done.", &[])));
    let sb = openai_workspace(mock.port, "");
    sb.write("CLAUDE.md", "Always answer in haiku (from CLAUDE.md).\n");
    sb.write("AGENTS.md", "Answer in prose (from AGENTS.md).\n");
    let o = run_openai(&cli, &sb);
    assert!(o.status.success(), "{}", stderr(&o));
    let system = system_prompt(&mock);
    has(&system, "from AGENTS.md");
    lacks(&system, "from CLAUDE.md");
}

// Before: `undo -y` and `trust -y` were usage errors (only `--yes`).
#[test]
fn yes_has_its_short_form_on_undo_and_trust() {
    let sb = Sandbox::with_manifest("[agent]\nmax_iterations = 3\n");
    let cli = Cli::untrusting();
    let o = cli.run(&sb.ws(), &["trust", "-y"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cli.run(&sb.ws(), &["run", "--provider", "replay", "What is this?"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The demo only reads files: nothing to undo, said as such, not as a
    // usage error.
    let o = cli.run(&sb.ws(), &["undo", "-y"]);
    has(&stderr(&o), "nothing to undo");
}

// Before: `show` and `compact` needed an id; `--last` was a usage error.
#[test]
fn show_and_compact_take_last() {
    let (sb, cli) = workspace_and_cli();
    let o = cli.run(&sb.ws(), &["run", "--provider", "replay", "What is this?"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cli.run(&sb.ws(), &["show", "--last"]);
    assert!(o.status.success(), "{}", stderr(&o));
    has(&stdout(&o), "> What is this?");
    let o = cli.run(&sb.ws(), &["compact", "--last"]);
    assert!(o.status.success(), "{}", stderr(&o));
    has(&stdout(&o), "compacted");
    // Neither an id nor --last: clap says which is missing.
    let o = cli.run(&sb.ws(), &["show"]);
    assert_eq!(o.status.code(), Some(2));
    has(&stderr(&o), "<ID|--last>");
}

// Before: a run ended without a word on how to go on; the replay demo ended
// with a note asking to configure the context window of a cassette; and
// `corral show` ended each answered turn with `[final_answer]`.
#[test]
fn a_run_says_how_to_resume_and_the_demo_says_nothing_of_windows() {
    let (sb, cli) = workspace_and_cli();
    let o = cli.run(&sb.ws(), &["run", "--provider", "replay", "What is this?"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let id = session_log(&cli)
        .file_stem()
        .expect("stem")
        .to_string_lossy()
        .into_owned();
    has(&err, format!("resume with: corral resume {id}"));
    lacks(&stdout(&o), "resume with");
    lacks(&err, "context window");
    let o = cli.run(&sb.ws(), &["show", &id]);
    lacks(&stdout(&o), "[final_answer]");

    // With --json, stdout is JSON lines only and stderr stays quiet about it.
    let o = cli.run(
        &sb.ws(),
        &["run", "--provider", "replay", "--json", "What is this?"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    lacks(&stderr(&o), "resume with");
    for line in stdout(&o).lines() {
        assert!(
            serde_json::from_str::<serde_json::Value>(line).is_ok(),
            "{line}"
        );
    }
}

// Before: `corral run ""` opened a session and sent the empty prompt.
#[test]
fn an_empty_prompt_is_refused() {
    let (sb, cli) = workspace_and_cli();
    for prompt in ["", "  \n\t"] {
        let o = cli.run(&sb.ws(), &["run", "--provider", "replay", prompt]);
        assert_exit(&o, 2);
        has(&stderr(&o), "empty prompt");
    }
    assert!(crate::support::log::try_session_logs(&cli).is_empty());
}

// Before: the help said only "Serve the tools to MCP clients".
#[test]
fn the_help_says_mcp_also_manages_servers() {
    let sb = Sandbox::new();
    let o = Cli::new().run(&sb.ws(), &["--help"]);
    let help = stdout(&o);
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("mcp "))
        .expect("an mcp line");
    for word in ["serve", "add", "import", "list"] {
        has(line, word);
    }
}

// Before: opening the UI and leaving listed an `incomplete` session with
// no prompt; a `!` command's transcript ended with `[final_answer]`; and
// nothing said how to resume.
#[test]
fn the_ui_leaves_no_empty_session_and_says_how_to_resume() {
    let sb = Sandbox::with_manifest(
        "[agent]\nprovider = \"replay\"\n\n[policy]\nmode = \"full-auto\"\n",
    );
    let cli = Cli::new();
    let command = trusted_command(&cli, &sb, "echo CORRAL-EXIT=$?; sleep 600");

    let Some(pane) = Pane::ready(&command) else {
        return;
    };
    pane.press("C-d");
    let screen = pane.wait_for("CORRAL-EXIT=");
    has(&screen, "CORRAL-EXIT=0");
    lacks(&screen, "resume with");
    drop(pane);
    let o = cli.run(&sb.ws(), &["sessions"]);
    has(&stdout(&o), "no sessions");

    let pane = Pane::ready(&command).expect("tmux");
    pane.submit("!echo bang-says-hi");
    pane.wait("the command's output", |s| {
        s.matches("bang-says-hi").count() >= 2
    });
    pane.press("C-d");
    let screen = pane.wait_for("CORRAL-EXIT=");
    let id = session_log(&cli)
        .file_stem()
        .expect("stem")
        .to_string_lossy()
        .into_owned();
    let all = pane.scrollback();
    lacks(&all, "[final_answer]");
    assert!(
        all.contains(&format!("resume with: corral resume {id}")),
        "{screen}"
    );
}
