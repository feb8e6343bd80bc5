//! Step 1, `check`: the tool exists and its arguments are a JSON object its schema
//! accepts.

use super::{CallOutcome, Checked, Dispatcher, Target};
use crate::protocol::{FinishReason, ToolCall};

impl Dispatcher {
    /// Looks the tool up and validates the arguments. `finish` tells a call
    /// cut by the token limit apart.
    pub fn check(
        &self,
        call: &ToolCall,
        finish: Option<FinishReason>,
    ) -> Result<Checked, CallOutcome> {
        let host = self.host_tools.iter().find(|t| t.spec().name == call.name);
        let target = if host.is_some() {
            Target::Host
        } else if let Some(plugin) = self.plugins.plugin_for(&call.name) {
            Target::Plugin(plugin.clone())
        } else if let Some(tool) = self.mcp.get(&call.name) {
            Target::Mcp(tool)
        } else {
            return Err(self.unknown(call));
        };
        let spec = match (&target, host) {
            (Target::Host, Some(tool)) => Some(tool.spec()),
            (Target::Plugin(plugin), _) => {
                plugin.tools().iter().find(|t| t.name == call.name).cloned()
            }
            (Target::Mcp(tool), _) => Some(tool.spec.clone()),
            (Target::Host, None) => None,
        };
        let Some(mut spec) = spec else {
            return Err(CallOutcome::Invalid(format!(
                "unknown tool `{}`",
                call.name
            )));
        };
        let args = arguments(call, finish)?;
        if let Err(e) = self.schemas.validate(&call.name, &spec.input_schema, &args) {
            return Err(CallOutcome::Invalid(format!(
                "invalid arguments for `{}`: {e}",
                call.name
            )));
        }
        if let Some(tool) = host {
            spec.effects = tool.effects(&args, &self.plugins);
        }
        Ok(Checked {
            call: call.clone(),
            target,
            spec,
            args,
            checkpoint: self.checkpoint.clone(),
            watch: self.watch.clone(),
            widened: None,
        })
    }

    /// The refusal of a call of a tool nobody provides, naming those there are.
    fn unknown(&self, call: &ToolCall) -> CallOutcome {
        let known: Vec<String> = self
            .plugins
            .tools()
            .iter()
            .map(|(_, t)| t.name.clone())
            .chain(self.mcp.tools().iter().map(|t| t.spec.name.clone()))
            .chain(self.host_tools.iter().map(|t| t.spec().name))
            .collect();
        CallOutcome::Invalid(format!(
            "unknown tool `{}`; available tools: {}",
            call.name,
            known.join(", ")
        ))
    }
}

/// The call's arguments as a JSON object, or why they are not one.
fn arguments(
    call: &ToolCall,
    finish: Option<FinishReason>,
) -> Result<serde_json::Value, CallOutcome> {
    let why = match serde_json::from_str::<serde_json::Value>(&call.arguments) {
        Ok(v @ serde_json::Value::Object(_)) => return Ok(v),
        Ok(v) => format!("they are JSON but not an object: {}", json_kind(&v)),
        Err(e) => format!("they are not valid JSON ({e})"),
    };
    let mut message = format!(
        "invalid arguments for `{}`: {why}; the call was not run.",
        call.name
    );
    if finish == Some(FinishReason::Length) {
        message.push_str(
            " Your answer reached the output token limit (max_tokens) in the middle of this \
             call, so its arguments were cut off. Send the call again with less content, \
             e.g. a large file in several smaller edits.",
        );
    } else {
        message.push_str(" Send the call again with the arguments as one JSON object.");
    }
    Err(CallOutcome::Invalid(message))
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
