//! Step 6, `approve`: an `ask` verdict put to whoever answers: the
//! front-end through an [`Event::ApprovalRequested`] and the
//! [`Op::Approval`](crate::protocol::Op::Approval) that answers it
//! ([`OpApprover`]), `--yes` ([`YesApprover`]), an MCP client's user, the
//! user who typed the call on the command line ([`CommandLineApprover`]),
//! or nobody in a non-interactive run ([`NoApprover`]). An approval for the
//! session is kept by its [`Scope`]. What comes out is the admitted call,
//! with the origin an approval widened its grant to.

use super::egress::Routed;
use super::judge::Judgement;
use super::{CallOutcome, Checked, Dispatcher, Sink};
use crate::policy::Decision;
use crate::protocol::{ApprovalAnswer, ApprovalRequest, Effect, Event, PermissionDecision};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// What an approval for the rest of the session covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every call of a tool (one that runs no command).
    Tool(String),
    /// One command line of a tool that runs commands.
    Command {
        /// The tool.
        tool: String,
        /// The command, as the policy reads it.
        argv: Vec<String>,
    },
    /// A call the exfiltration guard held: approving it for the session
    /// covers only calls the guard holds, never the same call the policy
    /// alone would ask about.
    Guarded(Box<Scope>),
    /// An origin a plugin's `grants.net` does not name, approved for the
    /// calls of that plugin only (see [`super::egress`]).
    Origin {
        /// The plugin.
        plugin: String,
        /// `scheme://host:port`.
        origin: String,
    },
}

impl Scope {
    /// The scope of a call of `tool` with `args`.
    pub fn of(tool: &str, args: &serde_json::Value) -> Self {
        match crate::policy::subject(tool, args) {
            crate::policy::Subject::Command(argv) => Scope::Command {
                tool: tool.to_owned(),
                argv,
            },
            crate::policy::Subject::Paths(_) | crate::policy::Subject::Other(_) => {
                Scope::Tool(tool.to_owned())
            }
        }
    }

    /// What the approval request says an approval for the session covers.
    fn covers(&self) -> String {
        match self {
            Scope::Tool(tool) => format!("every {tool} call"),
            Scope::Command { .. } | Scope::Guarded(_) => "this command".to_owned(),
            Scope::Origin { plugin, origin } => format!("{plugin} reaching {origin}"),
        }
    }
}

impl Dispatcher {
    /// Carries out the judgement of `routed`: logs the decision, and for an
    /// `ask` puts the call to the approver (unless approved for the session
    /// already). `Ok` is the admitted call, granted the origin it asked
    /// about; `Err` its refusal.
    pub(super) async fn approve(
        &self,
        routed: Routed,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Result<Checked, CallOutcome>> {
        let Routed {
            mut checked,
            judgement,
            widening,
        } = routed;
        Ok(
            match self.decide_ask(&checked, judgement, sink, cancel).await? {
                Some(refused) => Err(refused),
                None => {
                    checked.widened = widening.map(|w| w.grant);
                    Ok(checked)
                }
            },
        )
    }

    /// Logs the decision of `judged` on `checked`, asking the approver when
    /// it is an ask; `None` lets the call run.
    async fn decide_ask(
        &self,
        checked: &Checked,
        judged: Judgement,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Option<CallOutcome>> {
        let call = &checked.call;
        let record = |decision: PermissionDecision, reason: String| Event::Permission {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            decision,
            reason,
        };
        let Judgement {
            verdict,
            scope,
            guard,
            also,
            hint,
            tainted,
        } = judged;
        match verdict.decision {
            Decision::Allow => {
                sink.emit(record(PermissionDecision::Allow, verdict.reason))?;
                return Ok(None);
            }
            Decision::Deny { stop } => {
                let decision = if stop {
                    PermissionDecision::DenyAndStop
                } else {
                    PermissionDecision::Deny
                };
                sink.emit(record(decision, verdict.reason.clone()))?;
                return Ok(Some(CallOutcome::Refused {
                    message: format!("denied by the permission policy: {}", verdict.reason),
                    stop,
                }));
            }
            Decision::Ask if !tainted.is_empty() && !self.approver.is_person() => {
                let held = guard.unwrap_or_default();
                sink.emit(record(
                    PermissionDecision::Refused,
                    format!("{held}; no person can approve it in this run"),
                ))?;
                return Ok(Some(nobody_to_approve(&held)));
            }
            Decision::Ask
                if tainted.is_empty()
                    && self.approved_for_session(&scope)
                    && also.as_ref().is_none_or(|s| self.approved_for_session(s)) =>
            {
                sink.emit(record(
                    PermissionDecision::ApprovedForSession,
                    format!("{}; approved earlier in this session", verdict.reason),
                ))?;
                return Ok(None);
            }
            Decision::Ask => {}
        }
        let covers = match &also {
            Some(more) => format!("{}, and {}", scope.covers(), more.covers()),
            None => scope.covers(),
        };
        let request = ApprovalRequest::new(
            call.clone(),
            verdict.reason.clone(),
            self.preview(checked, cancel).await,
            covers,
            guard.clone(),
        );
        let answer = self.ask(request, sink, cancel).await?;
        let by = self.approver.approved_by();
        match answer {
            ApprovalAnswer::Approve => {
                self.approve_values(&tainted);
                sink.emit(record(
                    PermissionDecision::Approved,
                    format!("{}; {by}", verdict.reason),
                ))?;
                Ok(None)
            }
            ApprovalAnswer::ApproveForSession => {
                self.approve_values(&tainted);
                if let Ok(mut approved) = self.approved.lock() {
                    approved.insert(scope);
                    approved.extend(also);
                }
                sink.emit(record(
                    PermissionDecision::ApprovedForSession,
                    format!("{}; {by} for this session", verdict.reason),
                ))?;
                Ok(None)
            }
            ApprovalAnswer::Deny { reason } => {
                let why = reason.unwrap_or_else(|| "the user declined".into());
                sink.emit(record(
                    PermissionDecision::Refused,
                    format!("{}; {why}", verdict.reason),
                ))?;
                let mut message = match &guard {
                    Some(held) => format!("not run: {why}; {held}"),
                    None => format!("not run: {why}"),
                };
                if let Some(hint) = hint {
                    message.push_str("; ");
                    message.push_str(&hint);
                }
                Ok(Some(CallOutcome::Refused {
                    message,
                    stop: false,
                }))
            }
        }
    }

    /// Puts `request` to the approver (and the front-end, when it answers)
    /// and waits for the answer; an interrupt declines.
    async fn ask(
        &self,
        request: ApprovalRequest,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<ApprovalAnswer> {
        let pending = self.approver.approve(&request);
        if self.approver.asks_front_end() {
            sink.emit(Event::ApprovalRequested(request))?;
        }
        Ok(tokio::select! {
            biased;
            () = cancel.cancelled() => ApprovalAnswer::Deny { reason: Some("interrupted by the user".into()) },
            a = pending => a,
        })
    }

    /// The diff a write would apply, for an approver someone reads.
    async fn preview(&self, checked: &Checked, cancel: &CancellationToken) -> Option<String> {
        let call = &checked.call;
        let plugin = checked.plugin().filter(|_| {
            checked.spec.effects.contains(&Effect::Write) && self.approver.wants_preview()
        })?;
        tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            r = plugin.preview(&call.name, &call.arguments, &call.id) => r.ok().flatten(),
        }
    }

    /// Lets `values` pass the injection guard for the rest of the session:
    /// a person approved a call that carried them.
    fn approve_values(&self, values: &[String]) {
        if let (Some(tracker), false) = (&self.tracker, values.is_empty()) {
            tracker.approve(values);
        }
    }

    /// Whether the user approved `scope` for the rest of the session. A
    /// poisoned table approves nothing: the user is asked again.
    pub(super) fn approved_for_session(&self, scope: &Scope) -> bool {
        self.approved
            .lock()
            .is_ok_and(|approved| approved.contains(scope))
    }
}

/// The refusal of a call the injection guard holds (`held` says why)
/// where no person can approve it.
fn nobody_to_approve(held: &str) -> CallOutcome {
    CallOutcome::Refused {
        message: format!(
            "not run: {held}. No person can approve it in this run: the injection guard holds \
             such a call in every mode and with --yes. If the user wants it, they can run \
             interactively and approve it, or name the tool in `injection_exempt` of [guard]"
        ),
        stop: false,
    }
}

/// Answers approval requests. The library never prompts by itself.
pub trait Approver: Send + Sync {
    /// Asks about one call. Whatever must be in place before the front-end
    /// sees the request (e.g. a slot for its answer) happens before this
    /// returns; the future then waits for the answer.
    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, ApprovalAnswer>;

    /// Whether an approval may let a call reach an origin its plugin's
    /// `grants.net` does not name (the `egress` step). Typing a call on the
    /// command line approves what the policy asks, never a reach the
    /// manifest does not grant: there the call runs within its grant.
    fn widens_grants(&self) -> bool {
        true
    }

    /// Whether the front-end answers: then the dispatcher sends an
    /// [`Event::ApprovalRequested`](crate::protocol::Event::ApprovalRequested)
    /// for each request.
    fn asks_front_end(&self) -> bool {
        false
    }

    /// Whether someone will read the diff a write would apply: only then is
    /// the tool's `preview` run.
    fn wants_preview(&self) -> bool {
        self.asks_front_end()
    }

    /// What approved calls are said to be approved by, in the permission log.
    fn approved_by(&self) -> &'static str {
        "approved by the user"
    }

    /// Whether a person answers (a front-end, an MCP client's user, the
    /// command line): only a person may let through a call the injection
    /// guard holds; `--yes` and a run nobody answers refuse it.
    fn is_person(&self) -> bool {
        true
    }
}

/// Non-interactive runs: every `ask` becomes a denial the model can read.
#[derive(Debug, Default)]
pub struct NoApprover;

impl Approver for NoApprover {
    fn is_person(&self) -> bool {
        false
    }

    fn approve(&self, _: &ApprovalRequest) -> BoxFuture<'static, ApprovalAnswer> {
        Box::pin(async {
            ApprovalAnswer::Deny {
                reason: Some(
                    "this call needs the user's approval and the run is not interactive; the user can allow it \
                     with --yes, a permission mode (--mode auto-edit or full-auto), an allow rule, or by \
                     answering approvals (--approvals stdin with --json)"
                        .into(),
                ),
            }
        })
    }
}

/// `--yes`: every `ask` is approved (deny rules and read-only mode still hold).
#[derive(Debug, Default)]
pub struct YesApprover;

impl Approver for YesApprover {
    fn is_person(&self) -> bool {
        false
    }

    fn approve(&self, _: &ApprovalRequest) -> BoxFuture<'static, ApprovalAnswer> {
        Box::pin(async { ApprovalAnswer::Approve })
    }

    fn approved_by(&self) -> &'static str {
        "approved by --yes"
    }
}

/// `corral tool call`: the user typed the call, and so approved it; deny
/// rules, protected paths, hooks and read-only mode still hold.
#[derive(Debug, Default)]
pub struct CommandLineApprover;

impl Approver for CommandLineApprover {
    fn approve(&self, _: &ApprovalRequest) -> BoxFuture<'static, ApprovalAnswer> {
        Box::pin(async { ApprovalAnswer::Approve })
    }

    fn approved_by(&self) -> &'static str {
        "approved by the user, who typed this call on the command line"
    }

    fn widens_grants(&self) -> bool {
        false
    }
}

/// The front-end answers: each request waits for the
/// [`Op::Approval`](crate::protocol::Op::Approval) with its call id.
#[derive(Debug, Default, Clone)]
pub struct OpApprover {
    pending: Arc<Mutex<HashMap<String, oneshot::Sender<ApprovalAnswer>>>>,
}

impl OpApprover {
    /// Delivers an answer. `Err` when no request with that call id waits.
    pub fn answer(&self, call_id: &str, answer: ApprovalAnswer) -> Result<(), Unanswerable> {
        let slot = self
            .pending
            .lock()
            .map_err(|_| Unanswerable::Poisoned)?
            .remove(call_id);
        match slot {
            Some(tx) => tx
                .send(answer)
                .map_err(|_| Unanswerable::NoLongerWaits(call_id.to_owned())),
            None => Err(Unanswerable::NotPending(call_id.to_owned())),
        }
    }
}

/// Why [`OpApprover::answer`] delivered nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unanswerable {
    /// A thread panicked holding the table of pending approvals.
    #[error("the approval table is poisoned")]
    Poisoned,
    /// The call asked, and stopped waiting (cancelled or ended).
    #[error("the call `{0}` no longer waits for an answer")]
    NoLongerWaits(String),
    /// No call with that id asks.
    #[error(
        "no approval is pending for the call `{0}`; answer the call_id of an approval_requested event"
    )]
    NotPending(String),
}

impl Approver for OpApprover {
    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, ApprovalAnswer> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(request.call.id.clone(), tx);
        }
        Box::pin(async move {
            rx.await.unwrap_or(ApprovalAnswer::Deny {
                reason: Some("the front-end went away without answering".into()),
            })
        })
    }

    fn asks_front_end(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::Scope;
    use serde_json::json;

    #[test]
    fn a_scope_names_a_command_or_a_tool_and_the_guard_keeps_its_own() {
        let command = Scope::of("run_command", &json!({ "argv": ["git", "status"] }));
        assert_eq!(
            command,
            Scope::Command {
                tool: "run_command".into(),
                argv: vec!["git".into(), "status".into()],
            }
        );
        assert_eq!(command.covers(), "this command");
        let tool = Scope::of("write_file", &json!({ "path": "a.txt", "content": "" }));
        assert_eq!(tool, Scope::Tool("write_file".into()));
        assert_eq!(tool.covers(), "every write_file call");
        // An approval the guard asked for covers no call the policy alone asks about.
        let guarded = Scope::Guarded(Box::new(tool.clone()));
        assert_ne!(guarded, tool);
        assert_eq!(guarded.covers(), "this command");
    }
}
