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

/// What the model reads of a rewind that restored files only, with the
/// next prompt.
pub fn restore_note(turn: u32, files: &[String]) -> String {
    format!(
        "[corral] The user restored {} to what they held before turn {turn}; the \
         conversation is unchanged.",
        files.join(", ")
    )
}

/// What the model reads of an answer the user interrupted: its text, marked.
pub fn interrupted_answer(text: &str) -> Message {
    Message::Assistant(crate::protocol::AssistantMessage {
        text: format!("{text}\n\n[corral: the user interrupted this answer here]").into(),
        tool_calls: Vec::new(),
    })
}

/// The note an undo or a file-only rewind leaves for the next prompt.
fn note(event: &Event) -> Option<String> {
    match event {
        Event::Undone { turn, files } => Some(undo_note(*turn, files)),
        Event::Rewound {
            turn,
            conversation: false,
            files,
        } if !files.is_empty() => Some(restore_note(*turn, files)),
        _ => None,
    }
}

/// The prompts of the conversation as it stands (a rewound one's later
/// prompts left out): each with its turn, oldest first.
pub fn live_prompts(records: &[Record]) -> Vec<(u32, String)> {
    let mut turn = 0;
    let mut prompts = Vec::new();
    for r in records {
        match &r.event {
            Event::TurnBegin { turn: t } => turn = *t,
            Event::UserMessage { text } => prompts.push((turn, text.clone())),
            Event::Rewound {
                turn: to,
                conversation: true,
                ..
            } => prompts.retain(|(t, _)| t < to),
            _ => {}
        }
    }
    prompts
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
    let state = replay(records);
    (state.history, state.turn, state.open)
}

/// [`replay_history`] in the same pass with the notes logged after the
/// last prompt of the conversation as it stands (undos, file-only rewinds,
/// `!` lines), told to the model with the next one.
pub fn replay_with_notes(records: &[Record]) -> ((Vec<Message>, u32, Vec<ToolCall>), Vec<String>) {
    let state = replay(records);
    ((state.history, state.turn, state.open), state.undone)
}

/// What replaying a log so far has built.
#[derive(Default)]
struct Replayed {
    history: Vec<Message>,
    turn: u32,
    open: Vec<ToolCall>,
    /// Context `user_prompt` hooks added to the prompt logged next.
    context: Vec<String>,
    /// Undos and `!` lines since the last prompt, told with the next one.
    undone: Vec<String>,
    /// The user's `!` calls seen so far.
    shell: Shell,
}

fn replay(records: &[Record]) -> Replayed {
    let mut state = Replayed::default();
    for (i, r) in records.iter().enumerate() {
        let Replayed {
            history,
            turn,
            open,
            context,
            undone,
            shell,
        } = &mut state;
        undone.extend(shell.see(&r.event));
        match &r.event {
            Event::TurnBegin { turn: t } => {
                *turn = (*turn).max(*t);
                context.clear();
            }
            Event::UserMessage { text } => {
                close_open(history, open);
                context.append(undone);
                let text = crate::hooks::with_context(text, context);
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
                    close_open(history, open);
                    history.push(Message::User {
                        text: crate::hooks::go_on(plugin, detail),
                    });
                }
                _ => {}
            },
            Event::RequestEnd { message, .. } => {
                close_open(history, open);
                history.push(Message::Assistant(message.clone()));
                *open = message.tool_calls.clone();
            }
            Event::AnswerRejected { retry, .. } => {
                close_open(history, open);
                history.push(Message::User {
                    text: retry.clone(),
                });
            }
            Event::AnswerInterrupted { text } => {
                close_open(history, open);
                history.push(interrupted_answer(text));
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
            Event::Undone { .. }
            | Event::Rewound {
                conversation: false,
                ..
            } => {
                undone.extend(note(&r.event));
            }
            // The conversation as it was before that turn began: the log
            // up to its start, replayed (its own rewinds and compactions
            // included); the turn counter goes on.
            Event::Rewound {
                turn: to,
                conversation: true,
                ..
            } => {
                let start = records[..i]
                    .iter()
                    .position(|r| matches!(r.event, Event::TurnBegin { turn } if turn == *to));
                if let Some(start) = start {
                    let last = *turn;
                    state = replay(&records[..start]);
                    state.turn = last;
                    // Undos made since, of turns the conversation keeps,
                    // are still news to the model.
                    state.undone.extend(
                        records[start..i]
                            .iter()
                            .filter(|r| {
                                matches!(r.event, Event::Undone { turn, .. }
                                    | Event::Rewound { turn, conversation: false, .. } if turn < *to)
                            })
                            .filter_map(|r| note(&r.event)),
                    );
                }
            }
            // The same projection the live session made: the summary in place
            // of the messages it replaced (the events stay in the log).
            Event::Compacted {
                summary, replaced, ..
            } => {
                close_open(history, open);
                super::compact::apply(history, *replaced, summary);
            }
            _ => {}
        }
    }
    state
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{AssistantMessage, FinishReason};

    fn turn(n: u32, prompt: &str, answer: &str) -> Vec<Event> {
        vec![
            Event::TurnBegin { turn: n },
            Event::UserMessage {
                text: prompt.into(),
            },
            Event::RequestEnd {
                message: AssistantMessage {
                    text: answer.into(),
                    tool_calls: Vec::new(),
                },
                finish_reason: FinishReason::Stop,
                usage: None,
            },
        ]
    }

    fn texts(history: &[Message]) -> Vec<String> {
        history
            .iter()
            .map(|m| match m {
                Message::User { text } => format!("user: {text}"),
                Message::Assistant(a) => format!("assistant: {}", a.text),
                Message::ToolResult(r) => format!("tool: {}", r.content),
                _ => String::new(),
            })
            .collect()
    }

    #[test]
    fn a_rewound_conversation_leaves_out_the_turns_from_the_one_rewound_to() {
        let mut events = turn(1, "a", "A");
        events.extend(turn(2, "b", "B"));
        events.extend(turn(3, "c", "C"));
        events.push(Event::Undone {
            turn: 1,
            files: vec!["x".into()],
        });
        events.push(Event::Rewound {
            turn: 2,
            conversation: true,
            files: Vec::new(),
        });
        events.extend(turn(4, "b again", "B2"));
        let records = crate::log::numbered(events);
        let (history, last, open) = replay_history(&records);
        let shown = texts(&history);
        assert_eq!(shown.len(), 4, "{shown:?}");
        assert_eq!(shown[..2], ["user: a", "assistant: A"]);
        assert!(shown[2].starts_with("user: b again"), "{shown:?}");
        // The undo of a turn the conversation keeps goes with the next prompt.
        assert!(
            shown[2].contains("undid the file changes of turn 1"),
            "{shown:?}"
        );
        assert_eq!(shown[3], "assistant: B2");
        assert_eq!(last, 4, "turn numbers go on");
        assert!(open.is_empty());
        assert_eq!(
            live_prompts(&records),
            [(1, "a".to_owned()), (4, "b again".to_owned())]
        );
        assert_eq!(replay_with_notes(&records[..records.len() - 3]).1.len(), 1);
    }

    #[test]
    fn an_interrupted_answer_and_a_file_only_rewind_reach_the_model() {
        let mut events = turn(1, "a", "A");
        events.push(Event::TurnBegin { turn: 2 });
        events.push(Event::UserMessage { text: "b".into() });
        events.push(Event::AnswerInterrupted {
            text: "half of".into(),
        });
        events.push(Event::Rewound {
            turn: 1,
            conversation: false,
            files: vec!["notes.txt".into()],
        });
        let records = crate::log::numbered(events);
        let (history, _, _) = replay_history(&records);
        let shown = texts(&history);
        assert_eq!(shown.len(), 4, "{shown:?}");
        assert!(shown[3].starts_with("assistant: half of") && shown[3].contains("interrupted"));
        let notes = replay_with_notes(&records).1;
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("notes.txt") && notes[0].contains("before turn 1"));
    }
}
