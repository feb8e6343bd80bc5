//! The example plugin from the `corral-sdk` documentation, built in CI so the
//! documented example keeps compiling and working.

use corral_sdk::{Effect, Output, Result, Tool, tools, workspace_path};
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `word_count`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// File to count, relative to the workspace root.
    pub path: String,
}

/// Counts the words in a file.
pub struct WordCount;

impl Tool for WordCount {
    type Args = Args;
    const NAME: &'static str = "word_count";
    const DESCRIPTION: &'static str = "Counts the words in a file.";
    const EFFECTS: &'static [Effect] = &[Effect::Read];

    fn run(args: Args) -> Result<Output> {
        let path = workspace_path(&args.path)?;
        let text =
            std::fs::read_to_string(&path).map_err(|e| corral_sdk::io_error(&args.path, &e))?;
        Ok(Output::text(text.split_whitespace().count().to_string()))
    }
}

tools!(WordCount);
corral_sdk::requests!(include_str!("../corral-plugin.toml"));
