//! What `corral trust` shows and records of the project's custom commands
//! (`.corral/commands/*.md`) and skills (`.corral/skills/`, `.claude/skills/`,
//! `.agents/skills/`): each command file's name, description and SHA-256,
//! each skill's name, description and files with theirs. A file added or
//! changed since is not offered until trusted again.

use super::{fail, out};
use corral_core::commands::{self, Reviewed};
use corral_core::skills;
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

/// The review of the project's skills, empty when there are none.
pub(super) fn skills_text(reviewed: &[skills::Reviewed], problems: &[String]) -> String {
    if reviewed.is_empty() && problems.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "\nSkills of the project; trusting approves these exact files (the model reads a \
         skill's instructions and files when it uses the skill, and may run its scripts with \
         run_command), and a skill with a file that changes is not offered until you trust \
         again:\n",
    );
    for r in reviewed {
        let s = &r.skill;
        let mark = if r.changed { " (new or changed)" } else { "" };
        text.push_str(&format!(
            "  {}  {}{mark}\n",
            s.name,
            corral_protocol::terminal::visible(&s.shown)
        ));
        if !s.description.is_empty() {
            text.push_str(&format!("    {}\n", s.description));
        }
        match &s.status {
            skills::Status::Invalid(why) => {
                text.push_str(&format!("    not a skill ({why}); it is not offered\n"))
            }
            _ => {
                for (file, hash) in &s.files {
                    text.push_str(&format!(
                        "    {}  sha256 {hash}\n",
                        corral_protocol::terminal::visible(file)
                    ));
                }
            }
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

/// Records the reviewed command files and skills as trusted.
pub(super) fn record(
    workspace: &Path,
    reviewed: &[Reviewed],
    skills: &[skills::Reviewed],
) -> Result<(), String> {
    commands::record_trust(workspace, reviewed)
        .map_err(|e| format!("cannot record the trusted commands: {e}"))?;
    skills::record_trust(workspace, skills)
        .map_err(|e| format!("cannot record the trusted skills: {e}"))
}

/// `corral trust` in a project that has commands or skills but no
/// `corral.toml`.
pub(super) fn commands_only(workspace: &Path, yes: bool) -> ExitCode {
    let (reviewed, problems) = commands::review(workspace);
    let (found, skill_problems) = skills::review(workspace);
    if !commands::review_changes(workspace, &reviewed) && !skills::review_changes(workspace, &found)
    {
        out("the custom commands and skills of this project are already trusted");
        return ExitCode::SUCCESS;
    }
    out(&format!(
        "{}{}",
        text(&reviewed, &problems),
        skills_text(&found, &skill_problems)
    ));
    if !yes {
        if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            return fail("not trusted: confirm on a terminal, or pass --yes");
        }
        eprint!("Trust these commands and skills? [y/N] ");
        let mut answer = String::new();
        if std::io::stdin().read_line(&mut answer).is_err()
            || !answer.trim().eq_ignore_ascii_case("y")
        {
            return fail("not trusted");
        }
    }
    match record(workspace, &reviewed, &found) {
        Ok(()) => {
            out("trusted the custom commands and skills of this project");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}
