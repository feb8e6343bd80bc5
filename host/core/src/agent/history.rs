//! Rebuilding the conversation from a session log, for `resume`: the
//! projection the model saw, compactions included.

use crate::log::Record;
use crate::protocol::{Event, HookDecision, HookEvent, Message, ToolCall, ToolResult};

/// What the model reads of an undo, with the next prompt.
pub fn undo_note(turn: u32, files: &[String]) -> String {
    format!(
        "[corral] The user undid the file changes of turn {turn}: {} are back as they were \
         before that turn.",
        files.join(", ")
    )
}

/// The undos logged after the last prompt, for the next one.
pub fn pending_undos(records: &[Record]) -> Vec<String> {
    let mut notes: Vec<String> = records
        .iter()
        .rev()
        .take_while(|r| !matches!(r.event, Event::UserMessage { .. }))
        .filter_map(|r| match &r.event {
            Event::Undone { turn, files } => Some(undo_note(*turn, files)),
            _ => None,
        })
        .collect();
    notes.reverse();
    notes
}

/// Rebuilds the conversation from a log: the history, the last turn number,
/// and the tool calls that have no result.
pub fn replay_history(records: &[Record]) -> (Vec<Message>, u32, Vec<ToolCall>) {
    let mut history = Vec::new();
    let mut turn = 0;
    let mut open: Vec<ToolCall> = Vec::new();
    // Context `user_prompt` hooks added to the prompt logged next.
    let mut context: Vec<String> = Vec::new();
    // Undos since the last prompt, told with the next one.
    let mut undone: Vec<String> = Vec::new();
    for r in records {
        match &r.event {
            Event::TurnBegin { turn: t } => {
                turn = *t;
                context.clear();
            }
            Event::UserMessage { text } => {
                close_open(&mut history, &mut open);
                context.append(&mut undone);
                let text = crate::hooks::with_context(text, &context);
                context.clear();
                history.push(Message::User { text });
            }
            Event::Hook {
                event,
                plugin,
                decision,
                detail,
                ..
            } => match (event, decision) {
                (HookEvent::UserPrompt, HookDecision::AddContext) => {
                    context.push(crate::hooks::context_entry(plugin, detail));
                }
                (HookEvent::Stop, HookDecision::Block) => {
                    close_open(&mut history, &mut open);
                    history.push(Message::User {
                        text: crate::hooks::go_on(plugin, detail),
                    });
                }
                _ => {}
            },
            Event::RequestEnd { message, .. } => {
                close_open(&mut history, &mut open);
                history.push(Message::Assistant(message.clone()));
                open = message.tool_calls.clone();
            }
            Event::ToolCallEnd {
                call_id, outcome, ..
            } => {
                if let Some(pos) = open.iter().position(|c| &c.id == call_id) {
                    open.remove(pos);
                    history.push(Message::ToolResult(ToolResult {
                        call_id: call_id.clone(),
                        content: outcome.content.clone(),
                        is_error: outcome.is_error,
                    }));
                }
            }
            Event::Undone { turn, files } => undone.push(undo_note(*turn, files)),
            // The same projection the live session made: the summary in place
            // of the messages it replaced (the events stay in the log).
            Event::Compacted {
                summary, replaced, ..
            } => {
                close_open(&mut history, &mut open);
                super::compact::apply(&mut history, *replaced, summary);
            }
            _ => {}
        }
    }
    (history, turn, open)
}

/// Closes calls left open by an earlier crash before a later message, so the
/// history stays paired even in a log resumed more than once.
fn close_open(history: &mut Vec<Message>, open: &mut Vec<ToolCall>) {
    for call in open.drain(..) {
        history.push(Message::ToolResult(ToolResult {
            call_id: call.id,
            content: "interrupted: the session ended before this call finished".into(),
            is_error: true,
        }));
    }
}
