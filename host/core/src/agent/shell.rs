//! `!cmd`: a command line the user typed, run as a `run_command` call
//! through the one call pipeline ([`crate::call::Dispatcher::run_batch`]),
//! so the rules, the mode, approvals, confinement and the log treat it as
//! they treat the model's calls. What it printed (or why it did not run)
//! reaches the model with the next prompt, as undos do.

use super::{Agent, Out};
use crate::call::{Emit, Sink};
use crate::protocol::{Event, PermissionDecision, StopReason, ToolCall, ToolOutcome};
use std::path::PathBuf;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// The tool a `!` line runs as.
pub const SHELL_TOOL: &str = "run_command";
/// How the ids of the user's own calls start (`user-c-7`): replaying a log
/// tells them from the model's, whose results pair with its messages.
pub const USER_CALL_PREFIX: &str = "user-";

/// What the model reads of a `!` line and its outcome.
pub fn shell_note(command: &str, outcome: &ToolOutcome, refused: bool) -> String {
    if refused {
        format!(
            "[corral] The user tried to run `{command}` themselves (a `!` line); it was not \
             run: {}",
            outcome.content
        )
    } else {
        format!(
            "[corral] The user ran `{command}` themselves (a `!` line){}; its output:\n{}",
            if outcome.is_error {
                ", which failed"
            } else {
                ""
            },
            outcome.content
        )
    }
}

/// The command line of a user's call, from its arguments.
pub fn shell_command(call: &ToolCall) -> Option<String> {
    if !call.id.starts_with(USER_CALL_PREFIX) {
        return None;
    }
    let args: serde_json::Value = serde_json::from_str(&call.arguments).ok()?;
    args.get("command")?.as_str().map(str::to_owned)
}

/// Whether a permission decision kept the call from running.
pub fn is_refusal(decision: PermissionDecision) -> bool {
    !matches!(
        decision,
        PermissionDecision::Allow
            | PermissionDecision::Approved
            | PermissionDecision::ApprovedForSession
    )
}

/// The session's sink, remembering whether the policy refused the call.
struct Watch<'a> {
    out: Out<'a>,
    refused: Option<String>,
}

impl Emit for Watch<'_> {
    fn emit(&mut self, event: Event) -> anyhow::Result<()> {
        if let Event::Permission {
            decision, reason, ..
        } = &event
            && is_refusal(*decision)
        {
            self.refused = Some(reason.clone());
        }
        self.out.emit(event)
    }
}

impl Sink for Watch<'_> {
    fn save_artifact(&self, name: &str, content: &str) -> Option<std::io::Result<PathBuf>> {
        self.out.save_artifact(name, content)
    }

    fn flush(&mut self) -> futures::future::BoxFuture<'_, anyhow::Result<()>> {
        self.out.flush()
    }
}

impl Agent {
    /// Runs the user's command line `command` (see the [module docs](self))
    /// to a [`Event::Stop`]: `final_answer` when it ran (whatever its exit
    /// code), `permission_denied` with the reason when it was refused.
    pub async fn run_shell(
        &mut self,
        command: &str,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<StopReason> {
        if let Some(event) = self.announce.take() {
            let _ = ui.send(event);
        }
        let offered = self
            .plugins()
            .tools()
            .iter()
            .any(|(_, t)| t.name == SHELL_TOOL);
        if !offered {
            let message = format!(
                "`!{command}` needs the `{SHELL_TOOL}` tool, which no plugin of this workspace \
                 provides; add the shell plugin (`corral plugin add builtin:shell`)"
            );
            return self.stop(ui, StopReason::PermissionDenied, Some(message));
        }
        let call = ToolCall {
            id: format!("{USER_CALL_PREFIX}{}", self.options.call_ids.next()),
            name: SHELL_TOOL.into(),
            arguments: serde_json::json!({ "command": command }).to_string(),
            model_id: None,
        };
        let host = self.host_call(ui, cancel);
        let mut watch = Watch {
            out: Out {
                log: &mut self.log,
                ui,
            },
            refused: None,
        };
        let ran = self
            .dispatcher
            .run_batch(std::slice::from_ref(&call), None, &host, &mut watch, cancel)
            .await?;
        let refused = watch.refused.take();
        let outcome = ran.outcomes.into_iter().next().unwrap_or(ToolOutcome {
            content: "it did not run".into(),
            is_error: true,
            data: None,
            truncated_from: None,
            artifact: None,
            labels: Vec::new(),
        });
        self.undone
            .push(shell_note(command, &outcome, refused.is_some()));
        let stop = match (refused, ran.stop) {
            (Some(reason), _) => self.stop(
                ui,
                StopReason::PermissionDenied,
                Some(format!("`!{command}` was not run: {reason}")),
            ),
            (None, Some((reason, message))) => self.stop(ui, reason, Some(message)),
            (None, None) => self.stop(ui, StopReason::FinalAnswer, None),
        };
        let synced = self.sync_log().await;
        let stop = stop?;
        synced?;
        Ok(stop)
    }
}
