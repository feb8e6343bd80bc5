//! Step 6: an admitted call runs: a plugin's tool in its sandbox
//! ([`sandbox`]), a host tool through the caller's [`Runner`].

use super::{CallOutcome, Checked};
use crate::protocol::{Event, ToolCall};
use crate::runtime::ToolError;
use futures::future::BoxFuture;

/// How the calls of a batch run, and what the caller does around them: the
/// loop runs its host tools and subagents; the MCP server runs plugin tools
/// only ([`PluginRunner`]).
pub trait Runner: Sync {
    /// Runs one admitted call.
    fn run<'a>(&'a self, checked: &'a Checked) -> BoxFuture<'a, CallOutcome>;

    /// Waits for what the calls of a group started and left running (a
    /// subagent writes its own stop when interrupted), before their ends
    /// are logged.
    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// What an interrupted call ended with, when the runner knows better
    /// than "interrupted" (a subagent may say where its changes went).
    fn interrupted(&self, _call_id: &str) -> Option<CallOutcome> {
        None
    }

    /// An event to log after the call's end, from the outcome the tool
    /// gave: the loop logs the plan an `update_plan` set.
    fn note(&self, _call: &ToolCall, _outcome: &CallOutcome) -> Option<Event> {
        None
    }
}

/// Runs plugin tools only: a host tool, which needs a session, fails.
#[derive(Debug, Default, Clone, Copy)]
pub struct PluginRunner;

impl Runner for PluginRunner {
    fn run<'a>(&'a self, checked: &'a Checked) -> BoxFuture<'a, CallOutcome> {
        Box::pin(sandbox(checked))
    }
}

/// The call in its plugin's sandbox; what it touched is kept for its end.
pub async fn sandbox(checked: &Checked) -> CallOutcome {
    let call = &checked.call;
    if let Some(mcp) = &checked.mcp {
        return match mcp.call(&call.name, &checked.args).await {
            Ok((content, is_error, data)) => CallOutcome::Output {
                content,
                is_error,
                data,
            },
            Err(why) => CallOutcome::Failed(why),
        };
    }
    let Some(plugin) = &checked.plugin else {
        return CallOutcome::Failed(format!(
            "`{}` is the host's own tool and runs only in a session",
            call.name
        ));
    };
    let widened = checked.widened.iter().cloned().collect();
    let run = plugin.call_touched(&call.name, &call.arguments, &call.id, widened);
    let (result, touched) = match &checked.checkpoint {
        Some(checkpoint) => crate::runtime::checkpoint_scope(checkpoint.clone(), run).await,
        None => run.await,
    };
    if !touched.is_empty()
        && let Ok(mut all) = checked.touched.lock()
    {
        all.insert(call.id.clone(), touched);
    }
    match result {
        Ok(out) => CallOutcome::Output {
            content: out.content,
            is_error: out.is_error,
            data: out.data,
        },
        Err(ToolError::Fatal(m)) => CallOutcome::Fatal(m),
        Err(e) => CallOutcome::Failed(e.to_string()),
    }
}
