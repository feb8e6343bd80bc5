//! One binding of the manifest's `[hooks]` table: which plugin or command
//! runs at which event, for which tools.

use super::Origin;
use crate::exec::Network;
use crate::protocol::HookEvent;
use std::path::{Path, PathBuf};

/// Seconds a command hook may run unless its entry says `timeout`, as in
/// Claude Code.
pub const DEFAULT_COMMAND_TIMEOUT_SECS: u64 = 60;

/// One binding of the manifest's `[hooks]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookBinding {
    /// The event (`[hooks] before_tool = […]`).
    pub event: HookEvent,
    /// What runs: a plugin or a command.
    pub target: HookTarget,
    /// Tool-name patterns (`tools = ["run_command"]`); empty matches every
    /// tool. Only for tool events.
    pub tools: Vec<String>,
    /// Where it was written.
    pub origin: Origin,
}

/// What a `[hooks]` binding runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookTarget {
    /// A hook plugin (`plugin = "block-commands"`).
    Plugin(String),
    /// A command line (`command = "…"`), run confined through `/bin/sh -c`.
    Command(Box<CommandHook>),
}

/// A command hook: a command line written for Claude Code's hooks, which
/// corral runs through `/bin/sh -c` inside the confinement of every native
/// program, with only the grants its entry writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandHook {
    /// The command line, as written.
    pub command: String,
    /// Seconds it may run (`timeout`, default
    /// [`DEFAULT_COMMAND_TIMEOUT_SECS`]).
    pub timeout_secs: u64,
    /// Directories it may read besides the workspace and the system's
    /// (`grants.read`), absolute.
    pub read: Vec<PathBuf>,
    /// Directories it may read and write (`grants.write`), absolute.
    pub write: Vec<PathBuf>,
    /// Variables passed from corral's environment (`grants.env`).
    pub env: Vec<String>,
    /// Its network (`grants.net`): none unless written.
    pub net: Network,
    /// The workspace: its working directory, which it may read.
    pub workspace: PathBuf,
    /// For a hook of the project's manifest: each file of its code (by
    /// path) and its SHA-256 as trusting the manifest approved them (see
    /// `trust::hook_code`); a hook whose files differ does not run. `None`
    /// for the user's own hooks.
    pub trusted_code: Option<std::collections::BTreeMap<String, Option<String>>>,
}

impl CommandHook {
    /// The names a command line may reach the workspace by, as Claude
    /// Code's hooks spell them; each is set to the workspace when it runs.
    pub const PROJECT_DIR_VARS: [&'static str; 2] = ["CLAUDE_PROJECT_DIR", "CORRAL_PROJECT_DIR"];

    /// The command line with the project-directory variables replaced by
    /// `workspace`: what the shell will see, for finding the files it names.
    pub fn expanded(&self, workspace: &Path) -> String {
        let dir = workspace.display().to_string();
        let mut line = self.command.clone();
        for var in Self::PROJECT_DIR_VARS {
            line = line
                .replace(&format!("${{{var}}}"), &dir)
                .replace(&format!("${var}"), &dir);
        }
        line
    }
}

impl HookBinding {
    /// Whether this binding applies to a call of `tool` (always, for events
    /// that are not about a tool).
    pub fn matches(&self, tool: Option<&str>) -> bool {
        match tool {
            Some(tool) if !self.tools.is_empty() => {
                self.tools.iter().any(|pattern| glob_match(pattern, tool))
            }
            _ => true,
        }
    }

    /// The hook's name in messages and the log: the plugin's name, or
    /// `$ ` and the command's first line (at most 80 characters; not yet
    /// made safe for a terminal).
    pub fn name(&self) -> String {
        match &self.target {
            HookTarget::Plugin(name) => name.clone(),
            HookTarget::Command(c) => command_name(&c.command),
        }
    }
}

/// How a command hook is named in messages and the log.
pub fn command_name(command: &str) -> String {
    let first = command.trim().lines().next().unwrap_or_default();
    let mut name: String = first.chars().take(80).collect();
    if name.len() < command.trim().len() {
        name.push('…');
    }
    format!("$ {name}")
}

/// Whether `name` matches `pattern`, where `*` stands for any run of
/// characters and everything else for itself: the policy's matcher.
fn glob_match(pattern: &str, name: &str) -> bool {
    corral_syntax::wildcard(pattern, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(tools: &[&str]) -> HookBinding {
        HookBinding {
            event: HookEvent::BeforeTool,
            target: HookTarget::Plugin("h".into()),
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            origin: Origin {
                file: "corral.toml".into(),
                line: 1,
            },
        }
    }

    #[test]
    fn tool_patterns_match_names_with_stars() {
        assert!(glob_match("run_command", "run_command"));
        assert!(!glob_match("run_command", "run_commands"));
        assert!(glob_match("git_*", "git_commit"));
        assert!(glob_match("git_*", "git_"));
        assert!(!glob_match("git_*", "xgit_commit"));
        assert!(glob_match("*_file", "write_file"));
        assert!(!glob_match("*_file", "write_files"));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("a*b*c", "aXbYc"));
        assert!(!glob_match("a*b*c", "aXcYb"));
        assert!(!glob_match("ab*ba", "aba"));
        assert!(binding(&[]).matches(Some("anything")));
        assert!(binding(&["x", "run_*"]).matches(Some("run_command")));
        assert!(!binding(&["x"]).matches(Some("run_command")));
        assert!(binding(&["x"]).matches(None));
    }
}
