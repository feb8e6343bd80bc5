//! `corral skills list`: every skill found (the user's, the project's and
//! those of the directories other agents use), with where it is and
//! whether the model is offered it, and why not.

use super::{out, out_json};
use corral_core::skills::{self, Skills};
use std::path::Path;
use std::process::ExitCode;

/// The skills of `workspace` and of the user.
pub(super) fn discover(workspace: &Path) -> Skills {
    let workspace = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    skills::discover(&workspace, skills::user_dir().as_deref())
}

/// Lists the skills, as text or as JSON.
pub(super) fn list(workspace: &Path, json: bool) -> ExitCode {
    let found = discover(workspace);
    if json {
        let list: Vec<serde_json::Value> = found
            .all
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "scope": s.scope.as_str(),
                    "description": s.description,
                    "path": s.shown,
                    "status": s.status.as_str(),
                    "reason": s.status.why(),
                })
            })
            .collect();
        let value = serde_json::json!({ "skills": list, "problems": found.problems });
        out_json(&serde_json::to_string_pretty(&value).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    if found.all.is_empty() {
        let user = skills::user_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|| "your configuration directory's skills/".into());
        out(&format!(
            "no skills: a skill is a folder NAME with a SKILL.md, in {user} or in the \
             project's .corral/skills/"
        ));
    }
    let mut text = String::new();
    for s in &found.all {
        text.push_str(&format!(
            "{}  ({}, {})  {}\n",
            s.name,
            s.scope.as_str(),
            s.status.as_str(),
            s.shown
        ));
        if !s.description.is_empty() {
            text.push_str(&format!("    {}\n", s.description));
        }
        if let Some(why) = s.status.why() {
            text.push_str(&format!("    not offered: {why}\n"));
        }
    }
    for p in &found.problems {
        text.push_str(&format!("note: {p}\n"));
    }
    if !text.is_empty() {
        out(&text);
    }
    ExitCode::SUCCESS
}
