//! One ACP session: a corral [`Session`] whose events become
//! `session/update` notifications, whose approvals become
//! `session/request_permission` requests, and whose turns answer
//! `session/prompt`.

use crate::rpc::{Peer, RpcError, code};
use crate::updates::Updates;
use corral_core::session::Session;
use corral_protocol::{ApprovalAnswer, ApprovalRequest, Event, Mode, Op, StopReason};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

/// The options a permission request offers, by id: what each answers.
const OPTIONS: [(&str, &str, &str); 3] = [
    ("allow_once", "Allow once", "allow_once"),
    ("allow_always", "Allow for this session", "allow_always"),
    ("reject_once", "Reject", "reject_once"),
];

/// A running session, shared by the request handlers and its event pump.
#[derive(Debug)]
pub struct Live {
    /// corral's session id, which is the ACP session id.
    pub id: String,
    /// The workspace (the client's `cwd`).
    pub workspace: PathBuf,
    ops: UnboundedSender<Op>,
    /// The JSON-RPC id of the `session/prompt` whose turn runs.
    prompt: Mutex<Option<Value>>,
    /// Calls whose approval is put to the client and not answered yet.
    asked: Mutex<HashSet<String>>,
}

impl Live {
    /// Starts pumping `session`'s events to `peer`.
    pub fn start(session: Session, workspace: PathBuf, peer: Peer) -> Arc<Self> {
        let live = Arc::new(Self {
            id: session.id().to_owned(),
            workspace,
            ops: session.sender(),
            prompt: Mutex::new(None),
            asked: Mutex::new(HashSet::new()),
        });
        tokio::spawn(pump(session, live.clone(), peer));
        live
    }

    /// Runs a turn for `text`, answering request `id` when it stops; an
    /// error when a turn already runs.
    pub fn prompt(&self, id: Value, text: String) -> Result<(), RpcError> {
        {
            let mut running = self
                .prompt
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if running.is_some() {
                return Err(RpcError::new(
                    code::INVALID_REQUEST,
                    "a prompt is already running in this session; wait for its answer or cancel it",
                ));
            }
            *running = Some(id);
        }
        if self.ops.send(Op::UserTurn { text }).is_err() {
            self.take_prompt();
            return Err(RpcError::new(code::INTERNAL, "the session has ended"));
        }
        Ok(())
    }

    /// The JSON-RPC id of the running turn's `session/prompt`, which is
    /// answered now: no turn runs any more.
    fn take_prompt(&self) -> Option<Value> {
        self.prompt
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Changes the permission mode from the next call on.
    pub fn set_mode(&self, mode: Mode) {
        let _ = self.ops.send(Op::SetMode { mode });
    }

    /// `session/cancel`: stops the running turn and refuses every approval
    /// still put to the client.
    pub fn cancel(&self) {
        let _ = self.ops.send(Op::Interrupt);
        let asked: Vec<String> = self
            .asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain()
            .collect();
        for call_id in asked {
            let _ = self.ops.send(Op::Approval {
                call_id,
                answer: ApprovalAnswer::Deny {
                    reason: Some("the turn was cancelled in the editor".into()),
                },
            });
        }
    }

    /// Answers the approval of `call_id`, unless it was answered already.
    fn settle(&self, call_id: &str, answer: ApprovalAnswer) {
        if self
            .asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(call_id)
        {
            let _ = self.ops.send(Op::Approval {
                call_id: call_id.to_owned(),
                answer,
            });
        }
    }

    /// Shuts the session down (the client closed the connection).
    pub fn shutdown(&self) {
        self.cancel();
        let _ = self.ops.send(Op::Shutdown);
    }
}

/// Sends `session`'s events to the client until it ends.
async fn pump(mut session: Session, live: Arc<Live>, peer: Peer) {
    let mut updates = Updates::live(&live.workspace);
    let mut failure: Option<String> = None;
    while let Some(event) = session.next_event().await {
        for update in updates.of(&event) {
            peer.notify(
                "session/update",
                json!({"sessionId": live.id, "update": update}),
            )
            .await;
        }
        match event {
            Event::ApprovalRequested(request) => {
                let shown = updates.tool_call(&request.call);
                live.asked
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(request.call.id.clone());
                tokio::spawn(ask(peer.clone(), live.clone(), request, shown));
            }
            Event::ProviderFailed { error } => failure = Some(error.to_string()),
            Event::Error { message } => failure = Some(message),
            Event::Stop { reason, message } => {
                if let Some(id) = live.take_prompt() {
                    let said = message.or(failure.take());
                    peer.answer(id, stop(reason, said)).await;
                }
                failure = None;
            }
            _ => {}
        }
    }
    if let Some(id) = live.take_prompt() {
        peer.answer(
            id,
            Err(RpcError::new(
                code::INTERNAL,
                "the session ended before the turn did; see corral's messages on stderr",
            )),
        )
        .await;
    }
}

/// The answer to `session/prompt` for a turn that stopped for `reason`.
fn stop(reason: StopReason, message: Option<String>) -> Result<Value, RpcError> {
    let acp = match reason {
        StopReason::FinalAnswer | StopReason::InvalidOutput => "end_turn",
        StopReason::MaxIterations | StopReason::BudgetExhausted => "max_turn_requests",
        StopReason::ContextExhausted => "max_tokens",
        StopReason::Interrupted => "cancelled",
        StopReason::PermissionDenied => "refusal",
        _ => {
            let why = message.unwrap_or_else(|| {
                serde_json::to_value(reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            });
            return Err(RpcError::new(
                code::INTERNAL,
                format!(
                    "the turn failed: {}",
                    corral_protocol::terminal::inert(&why)
                ),
            ));
        }
    };
    Ok(json!({"stopReason": acp}))
}

/// Puts `request` to the client and hands its answer to the session. Only
/// the answer to this very request counts ([`Peer::request`] matches the
/// id corral gave it); an option corral did not offer, an error or a
/// closed connection refuses the call.
async fn ask(peer: Peer, live: Arc<Live>, request: ApprovalRequest, mut shown: Value) {
    let mut said = format!("{}\n\n{}", request.reason, request.shown);
    if let Some(guard) = &request.guard {
        said = format!("{guard}\n\n{said}");
    }
    let mut content = vec![json!({
        "type": "content",
        "content": {"type": "text", "text": corral_protocol::terminal::inert(&said)},
    })];
    if let Some(diff) = shown.get("content").and_then(Value::as_array) {
        content.extend(diff.iter().cloned());
    }
    shown["content"] = json!(content);
    shown["status"] = json!("pending");
    // A call the injection guard holds is approved once at a time.
    let options: Vec<Value> = OPTIONS
        .iter()
        .filter(|(id, _, _)| request.guard.is_none() || *id != "allow_always")
        .map(|(id, name, kind)| {
            let name = if *id == "allow_always" {
                format!("{name} ({})", request.session_covers)
            } else {
                (*name).to_owned()
            };
            json!({"optionId": id, "name": name, "kind": kind})
        })
        .collect();
    let offered: Vec<String> = options
        .iter()
        .filter_map(|o| o["optionId"].as_str().map(str::to_owned))
        .collect();
    let answer = peer
        .request(
            "session/request_permission",
            json!({"sessionId": live.id, "toolCall": shown, "options": options}),
        )
        .await;
    let chosen = answer
        .as_ref()
        .ok()
        .filter(|v| v["outcome"]["outcome"] == "selected")
        .and_then(|v| v["outcome"]["optionId"].as_str())
        .filter(|id| offered.iter().any(|o| o == id));
    let answer = match chosen {
        Some("allow_once") => ApprovalAnswer::Approve,
        Some("allow_always") => ApprovalAnswer::ApproveForSession,
        Some(_) => ApprovalAnswer::Deny {
            reason: Some("the user rejected it in the editor".into()),
        },
        None => ApprovalAnswer::Deny {
            reason: Some(match answer {
                Ok(_) => "the editor cancelled the request".into(),
                Err(e) => format!("the editor did not answer: {}", e.message),
            }),
        },
    };
    live.settle(&request.call.id, answer);
}
