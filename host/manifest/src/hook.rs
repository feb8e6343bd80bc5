//! One binding of the manifest's `[hooks]` table: which plugin runs at
//! which event, for which tools.

use super::Origin;
use crate::protocol::HookEvent;

/// One binding of the manifest's `[hooks]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookBinding {
    /// The event (`[hooks] before_tool = […]`).
    pub event: HookEvent,
    /// The plugin to run (`plugin = "block-commands"`).
    pub plugin: String,
    /// Tool-name patterns (`tools = ["run_command"]`); empty matches every
    /// tool. Only for tool events.
    pub tools: Vec<String>,
    /// Where it was written.
    pub origin: Origin,
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
            plugin: "h".into(),
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
