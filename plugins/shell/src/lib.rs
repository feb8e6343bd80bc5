//! `run_command`: runs a program through the host's process interface.
//!
//! There is no shell in between: a command line is split into words the way
//! a POSIX shell would (quotes, backslashes) and the first word is the
//! program, which must be granted in the manifest (`grants.exec`). A command
//! with shell syntax (pipes, redirections, `&&`, `;`, substitutions) runs
//! through `sh -c` only when `sh` itself is granted. The split is
//! [`corral_syntax::shell::argv`], the very function whose words the host's
//! permission policy judges; a line it calls incomplete (an unclosed quote,
//! a trailing backslash) runs in no form.

use corral_sdk::process::Command;
use corral_sdk::{Effect, Error, Output, Result, Tool, tools};
use corral_syntax::shell;
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `run_command`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The command line, e.g. `cargo test -p corral`. Give either this or `argv`.
    #[serde(default)]
    pub command: Option<String>,
    /// The program and its arguments as separate strings, e.g. `["cargo", "test"]`.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// Working directory relative to the workspace root.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Time limit in milliseconds (capped by the manifest grant).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `run_command`.
pub struct RunCommand;

impl Tool for RunCommand {
    type Args = Args;
    const NAME: &'static str = "run_command";
    const DESCRIPTION: &'static str = "Run a program in the workspace, e.g. `cargo test`. No shell: \
        pipes, redirections and `&&` work only if the manifest grants `sh`. Only programs granted \
        in the manifest can run; the output (stdout, stderr, exit code) is returned.";
    const EFFECTS: &'static [Effect] = &[Effect::Execute];

    fn run(args: Args) -> Result<Output> {
        let (argv, shell_reason) = match (&args.argv, &args.command) {
            (Some(argv), None) => (argv.clone(), None),
            (None, Some(line)) => match shell::argv(line) {
                Ok(words) => (words, None),
                Err(shell::Refusal::NeedsShell(syntax)) => (
                    vec!["sh".to_owned(), "-c".to_owned(), line.clone()],
                    Some(syntax),
                ),
                Err(shell::Refusal::Incomplete(why)) => {
                    return Err(Error::InvalidArguments(format!(
                        "the command line is incomplete: {why}, so it is not run; {}",
                        why.fix()
                    )));
                }
            },
            _ => {
                return Err(Error::InvalidArguments(
                    "give exactly one of `command` and `argv`".into(),
                ));
            }
        };
        let Some((program, rest)) = argv.split_first() else {
            return Err(Error::InvalidArguments("the command is empty".into()));
        };
        let mut cmd = Command::new(program.clone()).args(rest.iter().cloned());
        if let Some(cwd) = &args.cwd {
            cmd = cmd.cwd(cwd.clone());
        }
        if let Some(ms) = args.timeout_ms {
            cmd = cmd.timeout_ms(ms);
        }
        let out = match cmd.run() {
            Ok(o) => o,
            Err(corral_sdk::process::Error::NotGranted(m)) if shell_reason.is_some() => {
                return Err(Error::Failed(format!(
                    "this command uses shell syntax ({}), which needs `sh`, and: {m}. Run the program directly with `argv`, without pipes or redirections",
                    shell_reason.unwrap_or_default()
                )));
            }
            Err(e) => return Err(e.into()),
        };
        let mut text = String::new();
        match (out.timed_out, out.exit_code) {
            (true, _) => text.push_str("timed out (the program and its children were killed)\n"),
            (false, Some(code)) => text.push_str(&format!("exit code {code}\n")),
            (false, None) => text.push_str("killed by a signal\n"),
        }
        if !out.stdout.is_empty() {
            text.push_str("--- stdout ---\n");
            text.push_str(&out.stdout);
            if !out.stdout.ends_with('\n') {
                text.push('\n');
            }
        }
        if !out.stderr.is_empty() {
            text.push_str("--- stderr ---\n");
            text.push_str(&out.stderr);
        }
        let failed = out.timed_out || out.exit_code != Some(0);
        Ok(Output {
            content: text,
            is_error: failed,
            data: Some(serde_json::json!({
                "exit_code": out.exit_code,
                "timed_out": out.timed_out,
                "truncated": out.truncated,
            })),
        })
    }
}

tools!(RunCommand);
