//! A `session_start` hook that runs a granted command (by default
//! `git log -5 --oneline`) and gives its output to the model as context.
//!
//! ```toml
//! [plugins.git-context]
//! source = "builtin:hook-context"
//! grants.exec = [{ program = "git", args = ["log", "**"] }]
//! config = { command = ["git", "log", "-5", "--oneline"] }
//!
//! [hooks]
//! session_start = [{ plugin = "git-context" }]
//! ```
//!
//! Without the grant the command does not run, and the context says so.

use corral_sdk::hook::{Decision, Event, Hook};
use corral_sdk::process::Command;

/// Used when `config.command` is not set.
pub const DEFAULT_COMMAND: &[&str] = &["git", "log", "-5", "--oneline"];

/// The command to run: `config.command` (a JSON list), or the default.
pub fn command(config: Option<&str>) -> Result<Vec<String>, String> {
    let argv: Vec<String> = match config {
        None => DEFAULT_COMMAND.iter().map(|a| (*a).to_owned()).collect(),
        Some(text) => serde_json::from_str(text)
            .map_err(|e| format!("config.command must be a list of strings: {e}"))?,
    };
    if argv.is_empty() {
        return Err("config.command is empty; give the program and its arguments".into());
    }
    Ok(argv)
}

/// The context for the model from what the command printed.
pub fn context(argv: &[String], output: Result<corral_sdk::process::Output, String>) -> String {
    let shown = argv.join(" ");
    match output {
        Ok(out) if out.exit_code == Some(0) => {
            format!(
                "Output of `{shown}` at the start of this session:\n{}",
                out.stdout.trim_end()
            )
        }
        Ok(out) => format!(
            "`{shown}` failed (exit {:?}): {}",
            out.exit_code,
            out.stderr.trim_end()
        ),
        Err(why) => format!("`{shown}` could not run: {why}"),
    }
}

/// The hook exported by this component.
pub struct SessionContext;

impl Hook for SessionContext {
    fn handle(event: Event) -> Decision {
        let Event::SessionStart(_) = event else {
            return Decision::Continue;
        };
        let argv = match command(corral_sdk::config("command").as_deref()) {
            Ok(argv) => argv,
            Err(why) => return Decision::AddContext(why),
        };
        let output = Command::new(&argv[0])
            .args(&argv[1..])
            .run()
            .map_err(|e| e.to_string());
        Decision::AddContext(context(&argv, output))
    }
}

corral_sdk::hook!(SessionContext);

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sdk::process::Output;

    fn out(code: i32, stdout: &str, stderr: &str) -> Output {
        Output {
            exit_code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            truncated: false,
            timed_out: false,
        }
    }

    #[test]
    fn the_command_comes_from_config_or_the_default() {
        assert_eq!(command(None).unwrap(), DEFAULT_COMMAND);
        assert_eq!(command(Some(r#"["jj", "log"]"#)).unwrap(), ["jj", "log"]);
        assert!(command(Some("[]")).is_err());
        assert!(command(Some("git log")).is_err());
    }

    #[test]
    fn the_context_shows_the_output_or_why_there_is_none() {
        let argv = command(None).unwrap();
        let ok = context(&argv, Ok(out(0, "abc123 first\n", "")));
        assert_eq!(
            ok,
            "Output of `git log -5 --oneline` at the start of this session:\nabc123 first"
        );
        let failed = context(&argv, Ok(out(128, "", "not a git repository\n")));
        assert!(
            failed.contains("failed (exit Some(128)): not a git repository"),
            "{failed}"
        );
        let denied = context(&argv, Err("not allowed: git".into()));
        assert!(
            denied.ends_with("could not run: not allowed: git"),
            "{denied}"
        );
    }
}
