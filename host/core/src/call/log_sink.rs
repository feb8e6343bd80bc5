//! The sink of a front-end without a session log.

use super::Sink;
use crate::protocol::{Event, PermissionDecision};
use std::path::PathBuf;

/// The [`Sink`] of a front-end without a session log (the MCP server,
/// `corral tool call`): each decision and each call's end go to the host
/// log (stderr) with the rule or mode that decided, and with
/// `CORRAL_LOG=corral::event=debug` every event a session would log.
#[derive(Debug, Default, Clone, Copy)]
pub struct LogSink;

impl crate::hooks::Emit for LogSink {
    fn emit(&mut self, event: Event) -> anyhow::Result<()> {
        log(&event);
        Ok(())
    }

    fn emit_ref(&mut self, event: &Event) -> anyhow::Result<()> {
        log(event);
        Ok(())
    }
}

/// Writes `event` to the host log: each decision and each call's end, and
/// with `CORRAL_LOG=corral::event=debug` the whole event.
fn log(event: &Event) {
    // What a session would log, whole, for whoever debugs a client's
    // calls (`CORRAL_LOG=corral::event=debug`).
    if event.is_logged() && tracing::enabled!(target: "corral::event", tracing::Level::DEBUG) {
        let json = serde_json::to_string(event).unwrap_or_default();
        tracing::debug!(target: "corral::event", "event {json}");
    }
    match event {
        Event::Permission {
            call_id,
            tool,
            decision,
            reason,
        } => match decision {
            PermissionDecision::Allow
            | PermissionDecision::Approved
            | PermissionDecision::ApprovedForSession => {
                tracing::info!(call = %call_id, %tool, ?decision, "{reason}")
            }
            _ => tracing::warn!(call = %call_id, %tool, ?decision, "{reason}"),
        },
        Event::ToolCallEnd {
            call_id,
            name,
            outcome,
            duration_ms,
        } => tracing::debug!(
            call = %call_id,
            tool = %name,
            is_error = outcome.is_error,
            duration_ms,
            "tool call ended"
        ),
        _ => {}
    }
}

impl Sink for LogSink {
    fn save_artifact(&self, _name: &str, _content: &str) -> Option<std::io::Result<PathBuf>> {
        None
    }
}
