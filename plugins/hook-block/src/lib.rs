//! A `before_tool` hook that blocks calls whose command matches a list of
//! patterns, with a reason the model reads.
//!
//! ```toml
//! [plugins.block-commands]
//! source = "builtin:hook-block"
//! config = { patterns = ["git push --force", "git push -f", "rm -rf /"] }
//!
//! [hooks]
//! before_tool = [{ plugin = "block-commands", tools = ["run_command"] }]
//! ```
//!
//! A pattern is a list of words; a call matches when its command has those
//! words in that order, with anything between them: `git push --force`
//! matches `git push origin main --force`. The command is the call's
//! `command` string, or its `argv` list, or else every string in its
//! arguments. This is a convenience for the model, not a boundary: the
//! permission policy (`[policy] deny`) is what refuses a command for sure.

use corral_sdk::hook::{Decision, Event, Hook};

/// Used when `config.patterns` is not set.
pub const DEFAULT_PATTERNS: &[&str] = &[
    "git push --force",
    "git push -f",
    "git push --force-with-lease",
    "rm -rf /",
    "rm -rf ~",
];

/// The words of the command a call's arguments describe.
pub fn command_words(args: &serde_json::Value) -> Vec<String> {
    if let Some(command) = args.get("command").and_then(|c| c.as_str()) {
        // Read as `run_command` and the policy read it (quotes removed,
        // each command of a compound line), so `git push '--force'` and
        // `true;git push --force` are seen for what they run.
        return corral_syntax::shell::segments(command)
            .into_iter()
            .flat_map(|segment| {
                corral_syntax::shell::words(segment)
                    .unwrap_or_else(|_| segment.split_whitespace().map(str::to_owned).collect())
            })
            .collect();
    }
    if let Some(argv) = args.get("argv").and_then(|a| a.as_array()) {
        return argv
            .iter()
            .filter_map(|a| a.as_str())
            .flat_map(str::split_whitespace)
            .map(str::to_owned)
            .collect();
    }
    let mut words = Vec::new();
    collect_strings(args, &mut words);
    words
}

fn collect_strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.extend(s.split_whitespace().map(str::to_owned)),
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// Whether `words` has the words of `pattern` in order.
pub fn matches(pattern: &str, words: &[String]) -> bool {
    let mut rest = words.iter();
    pattern
        .split_whitespace()
        .all(|want| rest.any(|word| word == want))
}

/// The configured patterns (`config.patterns`, a JSON list), or the defaults.
fn patterns() -> Result<Vec<String>, String> {
    match corral_sdk::config("patterns") {
        None => Ok(DEFAULT_PATTERNS.iter().map(|p| (*p).to_owned()).collect()),
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| format!("config.patterns must be a list of strings: {e}")),
    }
}

/// The hook exported by this component.
pub struct BlockCommands;

impl Hook for BlockCommands {
    fn handle(event: Event) -> Decision {
        let Event::BeforeTool(before) = event else {
            return Decision::Continue;
        };
        let patterns = match patterns() {
            Ok(p) => p,
            // A broken configuration blocks: this hook exists to refuse.
            Err(why) => return Decision::Block(why),
        };
        let words = command_words(&corral_sdk::hook::arguments(&before.call));
        match patterns.iter().find(|p| matches(p, &words)) {
            Some(pattern) => Decision::Block(format!(
                "the command matches `{pattern}`, which this project does not allow; \
                 do not run it, and tell the user if the task needs it"
            )),
            None => Decision::Continue,
        }
    }
}

corral_sdk::hook!(BlockCommands);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn blocked(args: serde_json::Value) -> Option<&'static str> {
        let words = command_words(&args);
        DEFAULT_PATTERNS
            .iter()
            .copied()
            .find(|p| matches(p, &words))
    }

    #[test]
    fn patterns_match_words_in_order() {
        for (args, pattern) in [
            (
                json!({"command": "git push --force"}),
                Some("git push --force"),
            ),
            (
                json!({"command": "git  push origin main --force"}),
                Some("git push --force"),
            ),
            (
                json!({"argv": ["git", "push", "-f", "origin"]}),
                Some("git push -f"),
            ),
            (json!({"command": "rm -rf /"}), Some("rm -rf /")),
            (
                json!({"nested": {"cmd": ["rm", "-rf", "~"]}}),
                Some("rm -rf ~"),
            ),
            (
                json!({"command": "\"git\" push '--force'"}),
                Some("git push --force"),
            ),
            (
                json!({"command": "true;git push \\\n -f"}),
                Some("git push -f"),
            ),
            (json!({"command": "git push origin main"}), None),
            (json!({"command": "rm -rf /tmp/build"}), None),
            (json!({"command": "git --force push"}), None),
        ] {
            assert_eq!(blocked(args.clone()), pattern, "{args}");
        }
    }
}
