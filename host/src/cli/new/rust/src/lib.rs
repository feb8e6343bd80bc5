//! The tools of plugin `{{name}}`. Add a tool: a struct implementing
//! [`Tool`], listed in `tools!` at the bottom.

use corral_sdk::{Effect, Output, Result, Tool, io_error, tools, workspace_path};
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `file_stats`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The file, relative to the workspace root (e.g. `README.md`).
    pub path: String,
}

/// Lines, words and characters of a text, as `wc` counts them.
#[derive(Debug, PartialEq, Eq)]
pub struct Stats {
    /// Newline characters.
    pub lines: usize,
    /// Runs of non-whitespace.
    pub words: usize,
    /// Unicode scalar values.
    pub chars: usize,
}

/// Counts `text`.
pub fn stats(text: &str) -> Stats {
    Stats {
        lines: text.matches('\n').count(),
        words: text.split_whitespace().count(),
        chars: text.chars().count(),
    }
}

/// Counts the lines, words and characters of a text file in the workspace.
pub struct FileStats;

impl Tool for FileStats {
    type Args = Args;
    const NAME: &'static str = "file_stats";
    const DESCRIPTION: &'static str =
        "Counts the lines, words and characters of a text file in the workspace.";
    const EFFECTS: &'static [Effect] = &[Effect::Read];

    fn run(args: Args) -> Result<Output> {
        // The plugin's current directory is the workspace root.
        let path = workspace_path(&args.path)?;
        let text = std::fs::read_to_string(&path).map_err(|e| io_error(&args.path, &e))?;
        let s = stats(&text);
        Ok(Output::text(format!(
            "{}: {} lines, {} words, {} characters",
            args.path, s.lines, s.words, s.chars
        ))
        .with_data(serde_json::json!({ "lines": s.lines, "words": s.words, "chars": s.chars })))
    }
}

tools!(FileStats);

// What the plugin asks for travels inside the component; `corral plugin add`
// shows it and grants only what the user approves.
corral_sdk::requests!(include_str!("../corral-plugin.toml"));

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sdk::Error;

    #[test]
    fn counts_lines_words_and_characters() {
        assert_eq!(
            stats("one two\nthree\n"),
            Stats { lines: 2, words: 3, chars: 14 }
        );
    }

    #[test]
    fn refuses_paths_outside_the_workspace() {
        for path in ["../secret.txt", "/etc/passwd", "a/../../b"] {
            let err = FileStats::run(Args { path: path.into() }).err();
            assert!(
                matches!(&err, Some(Error::InvalidArguments(m)) if m.contains(path)),
                "{path}: {err:?}"
            );
        }
    }

    #[test]
    fn the_schema_requires_a_path() {
        let schema = corral_sdk::schema_of::<FileStats>();
        assert_eq!(schema["required"], serde_json::json!(["path"]));
        assert_eq!(schema["properties"]["path"]["type"], "string");
    }
}
