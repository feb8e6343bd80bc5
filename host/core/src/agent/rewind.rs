//! Going back: `/undo` (the files of the latest turn not undone yet),
//! a rewind to before an earlier prompt (the conversation, the files of
//! every turn from it on, or both), and an interrupted answer kept.
//!
//! The files go back through [`crate::checkpoint`], which refuses over a
//! file edited since unless forced. A rewound conversation is an event in
//! the log ([`Event::Rewound`]); the history is then replayed from the log
//! ([`super::history`]), so the live session and a resumed one see the
//! same projection.

use super::{Agent, history};
use crate::protocol::Event;
use tokio::sync::mpsc::UnboundedSender;

/// What to say when files edited since would be overwritten.
fn refused(conflicts: &[&str], force: &str) -> String {
    format!(
        "{}\nNothing was restored. Look at the file, then run {force} to overwrite it with the \
         checkpoint.",
        conflicts.join("\n")
    )
}

impl Agent {
    /// Restores the files the latest turn not undone yet changed and logs
    /// the undo (the model is told with the next prompt); an
    /// [`Event::Error`] says why not.
    pub async fn undo(&mut self, force: bool, ui: &UnboundedSender<Event>) -> anyhow::Result<()> {
        let plan = match crate::checkpoint::plan(self.log.path(), &self.workspace) {
            Ok(p) => p,
            Err(e) => {
                let message = e.to_string();
                return self.emit(ui, Event::Error { message });
            }
        };
        let conflicts = plan.conflicts();
        if !conflicts.is_empty() && !force {
            let message = refused(&conflicts, "`/undo --force` (or `corral undo --force`)");
            return self.emit(ui, Event::Error { message });
        }
        let files = match plan.apply(force) {
            Ok(files) => shown(&files),
            Err(e) => {
                let message = e.to_string();
                return self.emit(ui, Event::Error { message });
            }
        };
        self.undone.push(history::undo_note(plan.turn, &files));
        self.emit(
            ui,
            Event::Undone {
                turn: plan.turn,
                files,
            },
        )?;
        self.sync_log().await
    }

    /// Rewinds to before the prompt of `turn`: restores the files every
    /// turn from it on changed (`code`), and forgets that prompt and all
    /// after it (`conversation`); an [`Event::Error`] says why not, and
    /// then nothing changed.
    pub async fn rewind(
        &mut self,
        turn: u32,
        conversation: bool,
        code: bool,
        force: bool,
        ui: &UnboundedSender<Event>,
    ) -> anyhow::Result<()> {
        let records = crate::log::read(self.log.path())?;
        if !history::live_prompts(&records)
            .iter()
            .any(|(t, _)| *t == turn)
        {
            let message = format!(
                "there is no message of turn {turn} in the conversation to rewind to; nothing \
                 changed"
            );
            return self.emit(ui, Event::Error { message });
        }
        let mut files = Vec::new();
        if code {
            let plan = match crate::checkpoint::plan_from(self.log.path(), &self.workspace, turn) {
                Ok(p) => p,
                Err(e) => {
                    let message = e.to_string();
                    return self.emit(ui, Event::Error { message });
                }
            };
            if let Some(plan) = plan {
                let conflicts = plan.conflicts();
                if !conflicts.is_empty() && !force {
                    let message = refused(
                        &conflicts,
                        "`/rewind --force`, or `/undo --force` turn by turn",
                    );
                    return self.emit(ui, Event::Error { message });
                }
                files = match plan.apply(force) {
                    Ok(files) => shown(&files),
                    Err(e) => {
                        let message = e.to_string();
                        return self.emit(ui, Event::Error { message });
                    }
                };
            }
        }
        self.emit(
            ui,
            Event::Rewound {
                turn,
                conversation,
                files,
            },
        )?;
        // The log holds the rewind now: the history is what a resume
        // would make of it.
        let records = crate::log::read(self.log.path())?;
        let ((replayed, _, _), notes) = history::replay_with_notes(&records);
        if conversation {
            self.history = replayed;
            self.sizes.clear();
            self.frame = None;
        }
        self.undone = notes;
        self.sync_log().await
    }

    /// Keeps the answer the user interrupted, if it said anything: logged,
    /// and in the history the next request sends.
    pub(super) fn keep_interrupted(&mut self, ui: &UnboundedSender<Event>) -> anyhow::Result<()> {
        let mut text = std::mem::take(&mut self.partial);
        if text.trim().is_empty() {
            return Ok(());
        }
        if text.len() >= PARTIAL_MAX_BYTES {
            text.push_str(&format!(
                "\n[the rest of the answer is not kept: only its first {} KiB are]",
                PARTIAL_MAX_BYTES >> 10
            ));
        }
        self.history.push(history::interrupted_answer(&text));
        self.emit(ui, Event::AnswerInterrupted { text })
    }
}

/// How much of a streaming answer is kept for the case the user interrupts
/// it: an answer streamed without end must not grow the host's memory.
pub(super) const PARTIAL_MAX_BYTES: usize = 1 << 20;

/// Adds `text` to the streamed answer `partial`, up to [`PARTIAL_MAX_BYTES`]
/// (cut at a character boundary).
pub(super) fn keep_partial(partial: &mut String, text: &str) {
    let room = PARTIAL_MAX_BYTES.saturating_sub(partial.len());
    if room == 0 {
        return;
    }
    let mut end = text.len().min(room);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    partial.push_str(&text[..end]);
}

/// Restored paths as the log names them.
fn shown(files: &[std::path::PathBuf]) -> Vec<String> {
    files.iter().map(|p| p.display().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::{PARTIAL_MAX_BYTES, keep_partial};

    #[test]
    fn a_streamed_answer_is_kept_up_to_the_cap_and_cut_between_characters() {
        let mut partial = String::new();
        keep_partial(&mut partial, "héllo ");
        assert_eq!(partial, "héllo ");
        // Fill to one byte short of the cap, then offer a two-byte character:
        // it does not fit and is left out whole.
        let fill = "a".repeat(PARTIAL_MAX_BYTES - partial.len() - 1);
        keep_partial(&mut partial, &fill);
        keep_partial(&mut partial, "éz");
        assert_eq!(partial.len(), PARTIAL_MAX_BYTES - 1);
        assert!(partial.ends_with('a'));
        keep_partial(&mut partial, "zz");
        assert_eq!(partial.len(), PARTIAL_MAX_BYTES);
        keep_partial(&mut partial, "more");
        assert_eq!(partial.len(), PARTIAL_MAX_BYTES);
    }
}
