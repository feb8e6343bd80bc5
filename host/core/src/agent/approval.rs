//! Who answers a call the permission policy puts to the user: the front-end
//! through events and [`Op::Approval`](crate::protocol::Op::Approval)
//! ([`OpApprover`]), `--yes` ([`YesApprover`]), or nobody in a
//! non-interactive run ([`NoApprover`]).

use crate::protocol::{ApprovalAnswer, ApprovalRequest};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// A pending answer.
pub type Answer<'a> = Pin<Box<dyn Future<Output = ApprovalAnswer> + Send + 'a>>;

/// Answers approval requests. The library never prompts by itself.
pub trait Approver: Send + Sync {
    /// Asks about one call. Whatever must be in place before the front-end
    /// sees the request (e.g. a slot for its answer) happens before this
    /// returns; the future then waits for the answer.
    fn approve(&self, request: &ApprovalRequest) -> Answer<'static>;

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
}

/// Non-interactive runs: every `ask` becomes a denial the model can read.
#[derive(Debug, Default)]
pub struct NoApprover;

impl Approver for NoApprover {
    fn approve(&self, _: &ApprovalRequest) -> Answer<'static> {
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
    fn approve(&self, _: &ApprovalRequest) -> Answer<'static> {
        Box::pin(async { ApprovalAnswer::Approve })
    }

    fn approved_by(&self) -> &'static str {
        "approved by --yes"
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
    pub fn answer(&self, call_id: &str, answer: ApprovalAnswer) -> Result<(), String> {
        let slot = self
            .pending
            .lock()
            .map_err(|_| "the approval table is poisoned".to_owned())?
            .remove(call_id);
        match slot {
            Some(tx) => tx
                .send(answer)
                .map_err(|_| format!("the call `{call_id}` no longer waits for an answer")),
            None => Err(format!(
                "no approval is pending for the call `{call_id}`; answer the call_id of an approval_requested event"
            )),
        }
    }
}

impl Approver for OpApprover {
    fn approve(&self, request: &ApprovalRequest) -> Answer<'static> {
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
