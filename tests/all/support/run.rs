//! Starting `corral run` the ways several modules drive it.

use crate::{Cli, Sandbox};
use std::process::{Child, Output, Stdio};

/// A workspace whose `openai` provider talks to the mock on `port` (see
/// [`super::manifest::openai_project`]), with `extra` manifest lines.
pub fn openai_workspace(port: u16, extra: &str) -> Sandbox {
    let sb = Sandbox::new();
    sb.write(
        "corral.toml",
        &crate::support::manifest::openai_project(port, extra),
    );
    sb
}

/// `corral run --provider openai --json --approvals stdin PROMPT` with `key`
/// as `TEST_OPENAI_KEY`, and stdin, stdout and stderr piped.
pub fn answering(cli: &Cli, sb: &Sandbox, prompt: &str, key: &str) -> Child {
    cli.command(
        &sb.ws(),
        &[
            "run",
            "--provider",
            "openai",
            "--json",
            "--approvals",
            "stdin",
            prompt,
        ],
    )
    .env("TEST_OPENAI_KEY", key)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn")
}

/// `corral run --provider replay --json --approvals stdin PROMPT`, with
/// stdin and stdout piped and stderr dropped.
pub fn replaying(cli: &Cli, sb: &Sandbox, prompt: &str) -> Child {
    cli.command(
        &sb.ws(),
        &[
            "run",
            "--provider",
            "replay",
            "--json",
            "--approvals",
            "stdin",
            prompt,
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .expect("spawn")
}

/// `corral tool call TOOL --args ARGS` (the JSON text of `args`), run to
/// its end.
pub fn tool_call(cli: &Cli, sb: &Sandbox, tool: &str, args: impl std::fmt::Display) -> Output {
    cli.run(
        &sb.ws(),
        &["tool", "call", tool, "--args", &args.to_string()],
    )
}

/// The words of `line` (split at spaces) as a command's arguments.
pub fn argv(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The words of `line`, then `last` whole (a prompt or JSON that may hold
/// spaces) as a command's arguments.
pub fn argv_with<'a>(line: &'a str, last: &'a str) -> Vec<&'a str> {
    let mut args = argv(line);
    args.push(last);
    args
}

/// `corral run --provider replay --json PROMPT`, which must end well; its
/// events ([`crate::support::events::events`]).
pub fn replay_events(cli: &Cli, sb: &Sandbox, prompt: &str) -> Vec<serde_json::Value> {
    let o = cli.run(&sb.ws(), &["run", "--provider", "replay", "--json", prompt]);
    crate::support::output::assert_exit(&o, 0);
    crate::support::events::events(&o)
}
