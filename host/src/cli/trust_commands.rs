//! What `corral trust` shows and records of the project's custom commands
//! (`.corral/commands/*.md`): each file's name, description and SHA-256.
//! A file added or changed since is not offered until trusted again.

use super::{fail, out};
use corral_core::commands::{self, Reviewed};
use std::path::Path;
use std::process::ExitCode;

/// The review of the project's command files, empty when there are none.
pub(super) fn text(reviewed: &[Reviewed], problems: &[String]) -> String {
    if reviewed.is_empty() && problems.is_empty() {
        return String::new();
    }
    let mut text = format!(
        "\nCustom commands in {}; trusting approves these exact contents (their prompts go to \
         the model when you type the command), and a file that changes is not offered until \
         you trust again:\n",
        commands::PROJECT_DIR
    );
    for r in reviewed {
        let name = match &r.name {
            Ok(n) => n.clone(),
            Err(e) => format!("(no command: {e})"),
        };
        let mark = if r.changed { " (new or changed)" } else { "" };
        text.push_str(&format!(
            "  {name}  {}{mark}\n",
            corral_protocol::terminal::visible(&r.rel)
        ));
        if !r.description.is_empty() {
            text.push_str(&format!("    {}\n", r.description));
        }
        match &r.sha256 {
            Ok(h) => text.push_str(&format!("    sha256 {h}\n")),
            Err(e) => text.push_str(&format!("    cannot be read ({e}); it is not offered\n")),
        }
    }
    for p in problems {
        text.push_str(&format!(
            "  note: {}\n",
            corral_protocol::terminal::inert(p)
        ));
    }
    text
}

/// Records the reviewed command files as trusted.
pub(super) fn record(workspace: &Path, reviewed: &[Reviewed]) -> Result<(), String> {
    commands::record_trust(workspace, reviewed)
        .map_err(|e| format!("cannot record the trusted commands: {e}"))
}

/// `corral trust` in a project that has commands but no `corral.toml`.
pub(super) fn commands_only(workspace: &Path, yes: bool) -> ExitCode {
    let (reviewed, problems) = commands::review(workspace);
    if !commands::review_changes(workspace, &reviewed) {
        out(&format!(
            "the custom commands in {} are already trusted",
            commands::PROJECT_DIR
        ));
        return ExitCode::SUCCESS;
    }
    out(&text(&reviewed, &problems));
    if !yes {
        if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            return fail("not trusted: confirm on a terminal, or pass --yes");
        }
        eprint!("Trust these commands? [y/N] ");
        let mut answer = String::new();
        if std::io::stdin().read_line(&mut answer).is_err()
            || !answer.trim().eq_ignore_ascii_case("y")
        {
            return fail("not trusted");
        }
    }
    match record(workspace, &reviewed) {
        Ok(()) => {
            out(&format!(
                "trusted the custom commands in {}",
                commands::PROJECT_DIR
            ));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}
