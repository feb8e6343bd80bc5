//! A tool plugin whose tools follow a file: `describe` reads `tools.txt` at
//! the root of its first granted directory (through `wasi:filesystem`) and
//! exports one tool per line, each returning its own name; a line
//! `name|text` gives the tool the description `text`. Without the file it
//! exports `no_tools_file`. Its tools change when the file does, so the
//! host must not cache what it answered.
use corral_sdk::__bindings::corral::plugin::types::Effect;
use corral_sdk::__private::{Guest, ToolCall, ToolError, ToolOutput, ToolSpec};

fn names() -> Vec<String> {
    match std::fs::read_to_string("tools.txt") {
        Ok(text) => text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        Err(_) => vec!["no_tools_file".into()],
    }
}

struct FromFile;

impl Guest for FromFile {
    fn describe() -> Vec<ToolSpec> {
        names()
            .into_iter()
            .map(|line| {
                let (name, description) = line
                    .split_once('|')
                    .unwrap_or((line.as_str(), "Returns its own name."));
                (name.to_owned(), description.to_owned())
            })
            .map(|(name, description)| ToolSpec {
                name,
                description,
                input_schema: r#"{"type":"object","properties":{}}"#.into(),
                effects: vec![Effect::Read],
            })
            .collect()
    }

    fn invoke(call: ToolCall) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput {
            content: call.name,
            is_error: false,
            data: None,
        })
    }

    fn preview(_call: ToolCall) -> Result<Option<String>, ToolError> {
        Ok(None)
    }
}

corral_sdk::__bindings::__export_tool_plugin!(FromFile with_types_in corral_sdk::__bindings);
