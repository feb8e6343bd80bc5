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

/// The undos and `!` lines logged after the last prompt, for the next one.
pub fn pending_undos(records: &[Record]) -> Vec<String> {
    let since = records
        .iter()
        .rposition(|r| matches!(r.event, Event::UserMessage { .. }))
        .map_or(0, |i| i + 1);
    let mut notes = Vec::new();
    let mut shell = Shell::default();
    for r in &records[since..] {
        if let Event::Undone { turn, files } = &r.event {
            notes.push(undo_note(*turn, files));
        }
        notes.extend(shell.see(&r.event));
    }
    notes
}

/// The user's own `!` calls of a log, turned into the notes the model read.
#[derive(Default)]
struct Shell {
    /// Call id → its command line and whether the policy refused it.
    open: Vec<(String, String, bool)>,
}

impl Shell {
    fn see(&mut self, event: &Event) -> Option<String> {
        match event {
            Event::ToolCallBegin { call } => {
                let command = super::shell::shell_command(call)?;
                self.open.push((call.id.clone(), command, false));
                None
            }
            Event::Permission {
                call_id, decision, ..
            } if call_id.starts_with(super::shell::USER_CALL_PREFIX)
                && super::shell::is_refusal(*decision) =>
            {
                // The permission of a refused call comes before its begin.
                self.open.push((call_id.clone(), String::new(), true));
                None
            }
            Event::ToolCallEnd {
                call_id, outcome, ..
            } => {
                let refused = self
                    .open
                    .iter()
                    .any(|(id, c, r)| id == call_id && c.is_empty() && *r);
                let command = self
                    .open
                    .iter()
                    .find(|(id, c, _)| id == call_id && !c.is_empty())
                    .map(|(_, c, _)| c.clone());
                self.open.retain(|(id, _, _)| id != call_id);
                Some(super::shell::shell_note(&command?, outcome, refused))
            }
            _ => None,
        }
    }
}

/// Rebuilds the conversation from a log: the history, the last turn number,
/// and the tool calls that have no result.
pub fn replay_history(records: &[Record]) -> (Vec<Message>, u32, Vec<ToolCall>) {
    let mut history = Vec::new();
    let mut turn = 0;
    let mut open: Vec<ToolCall> = Vec::new();
    // Context `user_prompt` hooks added to the prompt logged next.
    let mut context: Vec<String> = Vec::new();
    // Undos and `!` lines since the last prompt, told with the next one.
    let mut undone: Vec<String> = Vec::new();
    let mut shell = Shell::default();
    for r in records {
        undone.extend(shell.see(&r.event));
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
