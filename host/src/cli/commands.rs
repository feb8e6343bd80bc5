//! Custom slash commands and `/init` for the front-ends: the UI lists and
//! expands them, `corral run "/NAME args"` expands them, both with
//! [`corral_core::commands::expand_line`].

use corral_core::commands::{self, Commands};
use std::path::Path;

/// The names custom commands may not take: the UI's built-in commands.
fn builtins() -> Vec<&'static str> {
    corral_tui::SLASH_COMMANDS
        .iter()
        .map(|(c, _)| *c)
        .chain(["/exit"])
        .collect()
}

/// The commands of `workspace` and of the user.
pub(super) fn discover(workspace: &Path) -> Commands {
    commands::discover(workspace, commands::user_dir().as_deref(), &builtins())
}

/// The prompt `prompt` sends: `/init` or a custom command expanded, any
/// other text as it is; `Err` says why a named command is not offered.
pub(super) fn expand_prompt(workspace: &Path, prompt: String) -> Result<String, String> {
    if !prompt.trim_start().starts_with('/') {
        return Ok(prompt);
    }
    let found = discover(workspace);
    Ok(commands::expand_line(&found, workspace, &prompt)?.unwrap_or(prompt))
}

/// The commands as the UI lists them, and a notice of each one refused.
pub(super) fn for_ui(
    workspace: &Path,
) -> (Vec<corral_tui::CustomCommand>, Vec<String>, Vec<String>) {
    let found = discover(workspace);
    let offered = found
        .commands
        .iter()
        .map(|c| corral_tui::CustomCommand {
            name: c.name.clone(),
            description: c.description.clone(),
            argument_hint: c.argument_hint.clone(),
        })
        .collect();
    let refused = found.refused.iter().map(|(n, _)| n.clone()).collect();
    let mut notes: Vec<String> = found
        .refused
        .iter()
        .map(|(n, why)| format!("custom command `{n}` is not offered: {why}"))
        .collect();
    notes.extend(found.problems);
    (offered, refused, notes)
}
