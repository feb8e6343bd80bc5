//! Permission rules as the manifest writes them (`tool(pattern)`), and the
//! subject of a call that their patterns are matched against.

use super::command::split_or_whitespace;
use super::patterns::{canonical_json, glob, normalize_path};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a rule does to the calls it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Run without asking (unless the session is read-only).
    Allow,
    /// Ask the user first, whatever the mode.
    Ask,
    /// Refuse; the model is told and may go on.
    Deny,
    /// Refuse and end the run.
    DenyAndStop,
}

impl Action {
    /// The name used in reasons and the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Ask => "ask",
            Action::Deny => "deny",
            Action::DenyAndStop => "deny-and-stop",
        }
    }

    /// Higher wins when several rules match.
    pub(super) fn strength(self) -> u8 {
        match self {
            Action::Allow => 0,
            Action::Ask => 1,
            Action::Deny => 2,
            Action::DenyAndStop => 3,
        }
    }

    /// Restrictive rules should hold against any spelling of a call, so they
    /// match loosely; an allow rule must not grant more than it says.
    pub(super) fn loose(self) -> bool {
        self != Action::Allow
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One permission rule from the manifest, such as `run_command(cargo test *)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// What happens to a matching call.
    pub action: Action,
    /// The tool it applies to; `*` is a wildcard (`*` alone is any tool).
    pub tool: String,
    /// The argument pattern between the parentheses; `None` matches every call.
    pub pattern: Option<String>,
    /// Where the rule was written, for reasons: `corral.toml: deny[0]`.
    pub source: String,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            Some(p) => write!(f, "{}({p})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

/// Why a rule's text is not a rule: where it was written, the rule, and
/// the problem with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: rule \"{rule}\": {problem}")]
pub struct RuleError {
    /// Where the rule was written (`corral.toml: deny[0]`).
    pub at: String,
    /// The rule as written, trimmed.
    pub rule: String,
    /// What is wrong with it.
    pub problem: RuleProblem,
}

/// What is wrong with a rule's text, and how to write it instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleProblem {
    /// A `)` before any `(`.
    #[error("`)` without a matching `(`; write tool(pattern), e.g. run_command(cargo test *)")]
    StrayClose,
    /// A `(` whose pattern does not end the rule with `)`.
    #[error(
        "unbalanced parentheses: the pattern must end with `)`, e.g. run_command(cargo test *)"
    )]
    Unterminated,
    /// A `)` that closes the pattern before the rule ends.
    #[error("unbalanced parentheses: a `)` closes the pattern before the end of the rule")]
    ClosedEarly,
    /// A `(` inside the pattern that is never closed.
    #[error("unbalanced parentheses: a `(` inside the pattern is never closed")]
    NeverClosed,
    /// No tool name.
    #[error("the tool name is empty; write tool or tool(pattern), e.g. write_file(docs/**)")]
    EmptyName,
    /// A character a tool name cannot have.
    #[error(
        "bad character {0:?} in the tool name; names use letters, digits, `_`, `-`, `.`, `:` and `*`"
    )]
    NameChar(char),
    /// `tool()`: the tool is named.
    #[error("the pattern is empty; write `{0}` alone to match every call")]
    EmptyPattern(String),
    /// A control character in the pattern.
    #[error("bad character {0:?} in the pattern")]
    PatternChar(char),
    /// A pattern without whitespace, read as a glob, that is not one.
    #[error(
        "the pattern is not a valid glob ({0}); escape a literal `[`, `{{` or `}}` as `[[]`, `[{{]`, `[}}]`"
    )]
    Glob(globset::ErrorKind),
}

/// For callers whose errors are still text.
impl From<RuleError> for String {
    fn from(e: RuleError) -> Self {
        e.to_string()
    }
}

/// Parses `tool` or `tool(pattern)` into a rule.
///
/// The tool name is letters, digits, `_`, `-`, `.`, `:` and `*` wildcards;
/// the pattern is everything between the first `(` and the final `)`, which
/// must balance. A pattern without whitespace is also checked as a glob, since
/// it is most likely a path.
pub fn parse_rule(text: &str, action: Action, source: &str) -> Result<Rule, RuleError> {
    let text = text.trim();
    let fail = |problem: RuleProblem| {
        Err(RuleError {
            at: source.to_owned(),
            rule: text.to_owned(),
            problem,
        })
    };
    let (name, pattern) = match text.find(['(', ')']) {
        None => (text, None),
        Some(open) if text[open..].starts_with(')') => {
            return fail(RuleProblem::StrayClose);
        }
        Some(open) => {
            let Some(inner) = text[open + 1..].strip_suffix(')') else {
                return fail(RuleProblem::Unterminated);
            };
            let mut depth = 0usize;
            for c in inner.chars() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        return fail(RuleProblem::ClosedEarly);
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            if depth != 0 {
                return fail(RuleProblem::NeverClosed);
            }
            (text[..open].trim_end(), Some(inner.trim()))
        }
    };
    if name.is_empty() {
        return fail(RuleProblem::EmptyName);
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_-.:*".contains(*c)))
    {
        return fail(RuleProblem::NameChar(bad));
    }
    if let Some(p) = pattern {
        if p.is_empty() {
            return fail(RuleProblem::EmptyPattern(name.to_owned()));
        }
        if let Some(bad) = p.chars().find(|c| c.is_control()) {
            return fail(RuleProblem::PatternChar(bad));
        }
        if !p.contains(char::is_whitespace)
            && let Err(e) = glob(p)
        {
            return fail(RuleProblem::Glob(e.kind().clone()));
        }
    }
    Ok(Rule {
        action,
        tool: name.to_owned(),
        pattern: pattern.map(str::to_owned),
        source: source.to_owned(),
    })
}

/// What a rule pattern is matched against, taken from a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A program and its arguments (`argv`, or `command` split like a shell).
    Command(Vec<String>),
    /// The paths a call names ([`super::path_arguments`]), each lexically
    /// normalised, in argument order.
    Paths(Vec<String>),
    /// The arguments as compact JSON with sorted keys.
    Other(String),
}

/// The subject of a call: `argv` (an array of strings), else `command` (a
/// string, split like a POSIX shell without expansion), else the paths it
/// names (`path`, a `paths` array, an `apply_patch` envelope's file headers;
/// normalised), else the arguments as canonical JSON.
///
/// `_tool` is accepted so that tool-specific argument conventions can be
/// added without changing callers; today the argument names alone decide.
pub fn subject(_tool: &str, args: &serde_json::Value) -> Subject {
    if let Some(argv) = argv(args) {
        return Subject::Command(argv);
    }
    if let Some(line) = args.get("command").and_then(|v| v.as_str()) {
        return Subject::Command(split_or_whitespace(line));
    }
    let paths = super::path_arguments(args);
    if !paths.is_empty() {
        return Subject::Paths(paths.iter().map(|p| normalize_path(p)).collect());
    }
    Subject::Other(canonical_json(args).to_string())
}

/// What "yes, for the rest of this session" approves, given the call it was
/// answered for: for a call that runs a command, that exact command (a later
/// `cargo test -p other` asks again, as Codex does); for any other call,
/// the tool (every later edit by `edit_file`, say). To let a family of
/// commands run, write an `allow` rule instead.
pub fn session_scope(tool: &str, args: &serde_json::Value) -> String {
    match subject(tool, args) {
        Subject::Command(argv) => format!("{tool}({})", serde_json::Value::from(argv)),
        Subject::Paths(_) | Subject::Other(_) => tool.to_owned(),
    }
}

pub(super) fn argv(args: &serde_json::Value) -> Option<Vec<String>> {
    args.get("argv")?
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::Deny as D;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn rules_parse() {
        let rule = |tool: &str, pattern: Option<&str>| Rule {
            action: D,
            tool: tool.into(),
            pattern: pattern.map(Into::into),
            source: "corral.toml: deny[0]".into(),
        };
        let cases = [
            ("edit_file", rule("edit_file", None)),
            ("  edit_file  ", rule("edit_file", None)),
            (
                "run_command(cargo test *)",
                rule("run_command", Some("cargo test *")),
            ),
            (
                "run_command( cargo test * )",
                rule("run_command", Some("cargo test *")),
            ),
            ("write_file(docs/**)", rule("write_file", Some("docs/**"))),
            ("git(commit *)", rule("git", Some("commit *"))),
            (
                "run_command(echo (a) b)",
                rule("run_command", Some("echo (a) b")),
            ),
            ("*", rule("*", None)),
            ("*(docs/**)", rule("*", Some("docs/**"))),
            (
                "run_command(test [ -f x ])",
                rule("run_command", Some("test [ -f x ]")),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_rule(text, D, "corral.toml: deny[0]"), Ok(expected));
        }
        assert_eq!(
            rule("run_command", Some("rm *")).to_string(),
            "run_command(rm *)"
        );
    }

    #[test]
    fn rule_errors_say_what_and_how() {
        let cases = [
            (
                "",
                "the tool name is empty; write tool or tool(pattern), e.g. write_file(docs/**)",
            ),
            (
                "(docs/**)",
                "the tool name is empty; write tool or tool(pattern), e.g. write_file(docs/**)",
            ),
            (
                "run_command(rm *",
                "unbalanced parentheses: the pattern must end with `)`, e.g. run_command(cargo test *)",
            ),
            (
                "run_command)",
                "`)` without a matching `(`; write tool(pattern), e.g. run_command(cargo test *)",
            ),
            (
                "run_command(a) b)",
                "unbalanced parentheses: a `)` closes the pattern before the end of the rule",
            ),
            (
                "run_command((a)",
                "unbalanced parentheses: a `(` inside the pattern is never closed",
            ),
            (
                "run command",
                "bad character ' ' in the tool name; names use letters, digits, `_`, `-`, `.`, `:` and `*`",
            ),
            (
                "write/file(x)",
                "bad character '/' in the tool name; names use letters, digits, `_`, `-`, `.`, `:` and `*`",
            ),
            (
                "run_command()",
                "the pattern is empty; write `run_command` alone to match every call",
            ),
            (
                "run_command(rm\u{7})",
                "bad character '\\u{7}' in the pattern",
            ),
            (
                "write_file(docs/[)",
                "the pattern is not a valid glob (unclosed character class; missing ']'); escape a literal `[`, `{` or `}` as `[[]`, `[{]`, `[}]`",
            ),
        ];
        for (text, why) in cases {
            assert_eq!(
                parse_rule(text, D, "corral.toml: deny[2]").map_err(|e| e.to_string()),
                Err(format!(
                    "corral.toml: deny[2]: rule \"{}\": {why}",
                    text.trim()
                ))
            );
        }
    }

    #[test]
    fn session_approval_covers_one_command_or_one_tool() {
        let scope = |tool, args: serde_json::Value| session_scope(tool, &args);
        let cargo_test = scope("run_command", json!({"command": "cargo test"}));
        for (args, same) in [
            // The same command, however it is quoted or spaced, is one scope.
            (json!({"command": "'cargo'  test"}), true),
            (json!({"argv": ["cargo", "test"]}), true),
            // Another command, even with the same program, is not.
            (json!({"command": "cargo test; rm -rf ~"}), false),
            (json!({"command": "cargo publish"}), false),
        ] {
            assert_eq!(
                scope("run_command", args.clone()) == cargo_test,
                same,
                "{args}"
            );
        }
        // Edits: the tool, whatever the path.
        assert_eq!(
            scope(
                "edit_file",
                serde_json::json!({"path": "a.rs", "old": "x", "new": "y"})
            ),
            "edit_file"
        );
        assert_eq!(
            scope("git_commit", serde_json::json!({"message": "m"})),
            "git_commit"
        );
    }

    #[test]
    fn subjects() {
        let words = |ws: &[&str]| Subject::Command(ws.iter().map(|w| w.to_string()).collect());
        let cases = [
            (
                json!({ "argv": ["rm", "-rf", "/"], "command": "ls" }),
                words(&["rm", "-rf", "/"]),
            ),
            (
                json!({ "command": "'rm'  -rf \"/\"" }),
                words(&["rm", "-rf", "/"]),
            ),
            // Unbalanced quotes fall back to whitespace splitting.
            (
                json!({ "command": "echo 'it s" }),
                words(&["echo", "'it", "s"]),
            ),
            (
                json!({ "argv": ["rm", 1] }),
                Subject::Other(r#"{"argv":["rm",1]}"#.into()),
            ),
            (
                json!({ "path": "./docs//a/./b/../c.md" }),
                Subject::Paths(vec!["docs/a/c.md".into()]),
            ),
            (
                json!({ "path": "docs/../../x" }),
                Subject::Paths(vec!["../x".into()]),
            ),
            (
                json!({ "path": "/a/../../b/" }),
                Subject::Paths(vec!["/b".into()]),
            ),
            (json!({ "path": "./" }), Subject::Paths(vec![".".into()])),
            (json!({ "path": 3 }), Subject::Other(r#"{"path":3}"#.into())),
            (
                json!({ "paths": ["./a/b", "alias/z"], "rev": "HEAD" }),
                Subject::Paths(vec!["a/b".into(), "alias/z".into()]),
            ),
            (
                json!({ "paths": [] }),
                Subject::Other(r#"{"paths":[]}"#.into()),
            ),
            (
                json!({ "patch": "*** Begin Patch\n*** Update File: a.txt\n*** Move to: ./alias/y.txt\n@@\n-a\n+b\n*** End Patch" }),
                Subject::Paths(vec!["a.txt".into(), "alias/y.txt".into()]),
            ),
            (
                json!({ "z": { "b": 1, "a": [true, null] }, "a": "x y" }),
                Subject::Other(r#"{"a":"x y","z":{"a":[true,null],"b":1}}"#.into()),
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(subject("t", &args), expected, "{args}");
        }
    }
}
