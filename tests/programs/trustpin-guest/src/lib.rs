//! A tool plugin whose single tool is named by its settings, so one
//! component can be declared many times without a tool-name clash, and
//! which can leave a mark each time it is described, so a test can count how
//! often the host instantiated it to learn its tools.
//!
//! Settings (`config`): `tool` names the tool (default `named`); `reply` is
//! what the tool returns (default: its name); with `describe_log` set, each
//! `describe` writes `described NAME` to the host log (`describe` runs with
//! read-only directories, so the mark cannot be a file).
use corral_sdk::__bindings::corral::plugin::types::Effect;
use corral_sdk::__private::{Guest, ToolCall, ToolError, ToolOutput, ToolSpec};

fn tool_name() -> String {
    corral_sdk::config("tool").unwrap_or_else(|| "named".into())
}

struct Named;

impl Guest for Named {
    fn describe() -> Vec<ToolSpec> {
        let name = tool_name();
        if corral_sdk::config("describe_log").is_some() {
            corral_sdk::log(corral_sdk::Level::Info, &format!("described {name}"));
        }
        vec![ToolSpec {
            name,
            description: "Returns this plugin's `reply` setting.".into(),
            input_schema: r#"{"type":"object","properties":{}}"#.into(),
            effects: vec![Effect::Read],
        }]
    }

    fn invoke(call: ToolCall) -> Result<ToolOutput, ToolError> {
        if call.name != tool_name() {
            return Err(ToolError::UnknownTool(call.name));
        }
        Ok(ToolOutput {
            content: corral_sdk::config("reply").unwrap_or(call.name),
            is_error: false,
            data: None,
        })
    }

    fn preview(_call: ToolCall) -> Result<Option<String>, ToolError> {
        Ok(None)
    }
}

corral_sdk::__bindings::__export_tool_plugin!(Named with_types_in corral_sdk::__bindings);
