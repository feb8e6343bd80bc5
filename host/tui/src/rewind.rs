//! Going back from the UI: `/undo`, and Esc Esc or `/rewind` — a picker of
//! the conversation's earlier prompts (newest first), then what to restore
//! (code and conversation, the conversation only, the code only), and the
//! diff of the files to restore, confirmed before anything changes. The
//! front-end computes that diff ([`Action::PreviewUndo`],
//! [`Action::PreviewRewind`]) and hands it to [`App::confirm`]; the session
//! carries the op out and answers with [`Event::Undone`] or
//! [`Event::Rewound`], after which the rewound transcript is cut and the
//! picked prompt is put back in the editor.

use super::app::{Action, App, Body};
use super::cards::diff_lines;
use super::text::{clean, truncate, wrap};
use crate::protocol::{Event, Op};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

/// A second Esc within this long after the first opens the rewind picker.
pub(crate) const DOUBLE_ESC_MS: u64 = 800;

/// What the user may restore for a picked prompt, in the order offered.
const CHOICES: [(&str, bool, bool); 4] = [
    ("restore code and conversation", true, true),
    ("restore conversation only", true, false),
    ("restore code only", false, true),
    ("cancel", false, false),
];

/// The overlay open for going back.
#[derive(Debug)]
pub(crate) enum Overlay {
    /// Picking the prompt to go back to: (turn, text), newest first.
    Prompts {
        items: Vec<(u32, String)>,
        selected: usize,
        force: bool,
    },
    /// What to restore for the picked prompt.
    Choice {
        turn: u32,
        text: String,
        selected: usize,
        force: bool,
    },
    /// What will be restored, to confirm.
    Confirm {
        title: String,
        diff: String,
        scroll: u16,
        op: Op,
        /// When it opened: an Enter sooner than the approval modal's guard
        /// was typed for the step before and is dropped (`y` is not).
        opened_ms: u64,
    },
}

/// A prompt of the conversation as it stands: its turn, its text, and the
/// transcript entry that shows it.
#[derive(Debug, Clone)]
pub(crate) struct Prompt {
    pub(crate) turn: u32,
    pub(crate) text: String,
    pub(crate) entry: usize,
}

/// `text` as one line a picker can show: inert, its first line only.
fn one_line(text: &str) -> String {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let more = if text.trim().lines().count() > 1 {
        " …"
    } else {
        ""
    };
    format!("{}{more}", clean(first.trim()))
}

impl App {
    /// Opens the picker of the conversation's earlier prompts (Esc Esc,
    /// `/rewind`); `force` goes on to the restore.
    pub(crate) fn open_rewind(&mut self, force: bool) {
        if self.turn_running {
            self.notice(
                "a turn is running: interrupt it (Esc) or wait for it to end, then rewind",
                true,
            );
            return;
        }
        if self.prompts.is_empty() {
            self.notice(
                "nothing to rewind: this conversation has no message yet",
                false,
            );
            return;
        }
        let items = self
            .prompts
            .iter()
            .rev()
            .map(|p| (p.turn, p.text.clone()))
            .collect();
        self.rewind = Some(Overlay::Prompts {
            items,
            selected: 0,
            force,
        });
    }

    /// Esc: closes the completion popup, or interrupts the running turn,
    /// or — pressed twice on an idle, empty prompt (`alt`: two read at
    /// once, which arrive as Alt+Esc) — opens the rewind picker. `before`
    /// is when the last key was an Esc.
    pub(crate) fn esc(&mut self, alt: bool, before: Option<u64>) {
        if !self.completion.is_empty() {
            self.completion.clear();
        } else if self.turn_running {
            self.actions.push(Action::Submit(Op::Interrupt));
            self.queued.clear();
        } else if self.input.is_empty() {
            let double =
                alt || before.is_some_and(|t| self.now_ms.saturating_sub(t) <= DOUBLE_ESC_MS);
            if double {
                self.open_rewind(false);
            } else {
                self.esc_ms = Some(self.now_ms);
            }
        }
    }

    /// `/undo`: asks the front-end for the diff first.
    pub(crate) fn start_undo(&mut self, arg: &str) {
        if self.turn_running {
            self.notice(
                "a turn is running: interrupt it (Esc) or wait for it to end, then undo",
                true,
            );
            return;
        }
        match arg {
            "" => self.actions.push(Action::PreviewUndo { force: false }),
            "--force" => self.actions.push(Action::PreviewUndo { force: true }),
            _ => self.notice(
                &format!(
                    "`/undo` takes no argument but --force, not `{}`",
                    clean(arg)
                ),
                true,
            ),
        }
    }

    /// Shows what `op` (an undo or a rewind) will restore — `diff` — and
    /// submits it once the user confirms with `y` or Enter.
    pub fn confirm(&mut self, title: &str, diff: &str, op: Op) {
        self.rewind = Some(Overlay::Confirm {
            title: title.to_owned(),
            diff: diff.to_owned(),
            scroll: 0,
            op,
            opened_ms: self.now_ms,
        });
    }

    /// Whether an undo or rewind overlay is open.
    pub fn rewind_open(&self) -> bool {
        self.rewind.is_some()
    }

    /// A key while the overlay is open.
    pub(crate) fn rewind_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if key.code == KeyCode::Esc || (ctrl && key.code == KeyCode::Char('c')) {
            self.rewind = None;
            return;
        }
        let Some(overlay) = &mut self.rewind else {
            return;
        };
        match overlay {
            Overlay::Prompts {
                items,
                selected,
                force,
            } => match key.code {
                KeyCode::Up => *selected = selected.saturating_sub(1),
                KeyCode::Down => *selected = (*selected + 1).min(items.len().saturating_sub(1)),
                KeyCode::Enter => {
                    let next = items.get(*selected).map(|(turn, text)| Overlay::Choice {
                        turn: *turn,
                        text: text.clone(),
                        selected: 0,
                        force: *force,
                    });
                    self.rewind = next;
                }
                _ => {}
            },
            Overlay::Choice {
                turn,
                selected,
                force,
                ..
            } => match key.code {
                KeyCode::Up => *selected = selected.saturating_sub(1),
                KeyCode::Down => *selected = (*selected + 1).min(CHOICES.len() - 1),
                KeyCode::Enter => {
                    let (turn, choice, force) = (*turn, CHOICES[*selected], *force);
                    self.rewind = None;
                    self.choose(turn, choice, force);
                }
                _ => {}
            },
            Overlay::Confirm {
                scroll,
                op,
                opened_ms,
                ..
            } => match key.code {
                KeyCode::Enter
                    if self.now_ms.saturating_sub(*opened_ms) < super::app::MODAL_GUARD_MS => {}
                KeyCode::Char('y') | KeyCode::Enter => {
                    let op = op.clone();
                    self.rewind = None;
                    self.actions.push(Action::Submit(op));
                }
                KeyCode::Char('n') => self.rewind = None,
                KeyCode::Up | KeyCode::Char('k') => *scroll = scroll.saturating_sub(1),
                KeyCode::Down | KeyCode::Char('j') => *scroll = scroll.saturating_add(1),
                KeyCode::PageUp => *scroll = scroll.saturating_sub(10),
                KeyCode::PageDown => *scroll = scroll.saturating_add(10),
                _ => {}
            },
        }
    }

    /// A choice for the prompt of `turn`: the conversation alone goes back
    /// at once; restoring code shows its diff first.
    fn choose(&mut self, turn: u32, (_, conversation, code): (&str, bool, bool), force: bool) {
        match (conversation, code) {
            (false, false) => {}
            (true, false) => self.actions.push(Action::Submit(Op::Rewind {
                turn,
                conversation,
                code,
                force,
            })),
            _ => self.actions.push(Action::PreviewRewind {
                turn,
                conversation,
                force,
            }),
        }
    }

    /// The prompt of `turn`, if the conversation holds it.
    pub fn prompt_of(&self, turn: u32) -> Option<&str> {
        self.prompts
            .iter()
            .find(|p| p.turn == turn)
            .map(|p| p.text.as_str())
    }

    /// The events of going back: an undo, a rewind (the transcript cut at
    /// the prompt, which goes back into the editor), an interrupted answer.
    pub(crate) fn apply_rewind(&mut self, event: &Event) {
        match event {
            Event::Undone { turn, files } => self.notice(
                &format!(
                    "undid turn {turn}: restored {}",
                    if files.is_empty() {
                        "no file".to_owned()
                    } else {
                        files.join(", ")
                    }
                ),
                false,
            ),
            Event::Rewound {
                turn,
                conversation,
                files,
            } => self.rewound(*turn, *conversation, files),
            Event::AnswerInterrupted { text } => {
                match self.streaming.take() {
                    Some(i) => {
                        if let Some(e) = self.entries.get_mut(i) {
                            e.body = Body::Assistant(text.clone());
                            e.live = None;
                            e.version += 1;
                        }
                    }
                    None => {
                        self.push(Body::Assistant(text.clone()));
                    }
                }
                self.notice(
                    "⎿ answer interrupted; kept, and the model reads it with the next message",
                    false,
                );
            }
            _ => {}
        }
    }

    fn rewound(&mut self, turn: u32, conversation: bool, files: &[String]) {
        let text = self.prompt_of(turn).map(str::to_owned);
        let restored = if files.is_empty() {
            "no file restored".to_owned()
        } else {
            format!("restored {}", files.join(", "))
        };
        let what = match &text {
            Some(t) => format!("“{}”", truncate(&one_line(t), 60)),
            None => format!("turn {turn}"),
        };
        if conversation {
            if let Some(first) = self
                .prompts
                .iter()
                .find(|p| p.turn >= turn)
                .map(|p| p.entry)
            {
                self.entries.truncate(first);
                self.cards.retain(|_, (e, _)| *e < first);
                self.streaming = None;
                self.anchor = None;
                self.scroll = 0;
            }
            self.prompts.retain(|p| p.turn < turn);
            self.notice(
                &format!("rewound the conversation to before {what}; {restored}"),
                false,
            );
        } else {
            self.notice(&format!("{restored} as before {what}"), false);
        }
        if !self.replaying
            && let Some(text) = text
        {
            self.input.clear();
            self.input.insert_str(&text);
        }
    }
}

/// Draws the overlay.
pub(crate) fn render(frame: &mut Frame<'_>, area: Rect, overlay: &Overlay) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let dim = Style::default().fg(Color::DarkGray);
    let width = area.width.saturating_sub(8).min(90);
    let inner_w = usize::from(width.saturating_sub(2)).max(1);
    let (title, lines, foot): (String, Vec<Line<'static>>, &str) = match overlay {
        Overlay::Prompts {
            items, selected, ..
        } => (
            " rewind to before which message? ".into(),
            items
                .iter()
                .enumerate()
                .map(|(i, (_, text))| pick_line(&one_line(text), i == *selected, inner_w))
                .collect(),
            "↑/↓ pick · Enter choose · Esc cancel",
        ),
        Overlay::Choice { text, selected, .. } => {
            let mut lines = vec![
                Line::styled(truncate(&one_line(text), inner_w), bold),
                Line::default(),
            ];
            lines.extend(
                CHOICES
                    .iter()
                    .enumerate()
                    .map(|(i, (label, _, _))| pick_line(label, i == *selected, inner_w)),
            );
            (
                " rewind: what to restore? ".into(),
                lines,
                "↑/↓ pick · Enter do it · Esc cancel",
            )
        }
        Overlay::Confirm {
            title,
            diff,
            scroll,
            ..
        } => {
            let mut body: Vec<Line<'static>> = Vec::new();
            for line in clean(title).lines() {
                body.extend(wrap(Line::styled(line.to_owned(), bold), inner_w, "  "));
            }
            body.push(Line::default());
            if diff.trim().is_empty() {
                body.push(Line::styled("(no file content changes)", dim));
            }
            for line in diff_lines(diff) {
                body.extend(wrap(line, inner_w, ""));
            }
            let room = usize::from(area.height.saturating_sub(6)).max(1);
            let max = body.len().saturating_sub(room);
            let skip = usize::from(*scroll).min(max);
            (
                " restore these files? ".into(),
                body.into_iter().skip(skip).take(room).collect(),
                "[y/Enter] restore · [n/Esc] cancel · ↑/↓ scroll",
            )
        }
    };
    let rows = lines.len().min(usize::from(area.height.saturating_sub(4)));
    let height = (rows as u16 + 3).min(area.height.saturating_sub(1));
    let rect = Rect::new(
        area.x + (area.width.saturating_sub(width)) / 2,
        area.y + (area.height.saturating_sub(height)) / 2,
        width,
        height,
    );
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::default().fg(Color::Yellow))
        .title(Span::styled(title, bold.fg(Color::Yellow)));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let body_h = inner.height.saturating_sub(1);
    // The picked line stays in view.
    let selected = match overlay {
        Overlay::Prompts { selected, .. } => *selected,
        _ => 0,
    };
    let first = (selected + 1).saturating_sub(usize::from(body_h));
    let shown: Vec<Line<'static>> = lines
        .into_iter()
        .skip(first)
        .take(usize::from(body_h))
        .collect();
    frame.render_widget(
        Paragraph::new(shown),
        Rect::new(inner.x, inner.y, inner.width, body_h),
    );
    frame.render_widget(
        Paragraph::new(Line::styled(foot, dim)),
        Rect::new(inner.x, inner.y + body_h, inner.width, 1),
    );
}

fn pick_line(text: &str, selected: bool, width: usize) -> Line<'static> {
    let text = truncate(&format!("  {text}"), width);
    if selected {
        Line::styled(text, Style::default().add_modifier(Modifier::REVERSED))
    } else {
        Line::raw(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Mode;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn prompt(app: &mut App, turn: u32, text: &str) {
        app.apply(&Event::TurnBegin { turn });
        app.apply(&Event::UserMessage { text: text.into() });
        app.apply(&Event::Stop {
            reason: crate::protocol::StopReason::FinalAnswer,
            message: None,
        });
    }

    #[test]
    fn esc_esc_picks_a_prompt_and_a_rewind_cuts_the_transcript() {
        let mut app = App::new("replay", Mode::Ask);
        prompt(&mut app, 1, "first\u{1b}[31m message\nsecond line");
        prompt(&mut app, 2, "later");
        app.set_clock(1000);
        app.key(key(KeyCode::Esc));
        assert!(!app.rewind_open(), "one Esc does not open it");
        app.set_clock(1300);
        app.key(key(KeyCode::Esc));
        let Some(Overlay::Prompts { items, .. }) = &app.rewind else {
            panic!("Esc Esc opens the picker: {:?}", app.rewind);
        };
        assert_eq!(items[0].1, "later", "newest first");
        let shown = one_line(&items[1].1);
        assert!(
            shown.starts_with("first") && shown.ends_with(" …") && !shown.contains('\u{1b}'),
            "one inert line: {shown}"
        );
        app.key(key(KeyCode::Down));
        app.key(key(KeyCode::Enter));
        app.key(key(KeyCode::Enter));
        assert_eq!(
            app.drain_actions(),
            vec![Action::PreviewRewind {
                turn: 1,
                conversation: true,
                force: false
            }]
        );
        app.apply(&Event::Rewound {
            turn: 1,
            conversation: true,
            files: vec!["a.txt".into()],
        });
        assert!(app.prompts.is_empty());
        assert!(
            !app.entries.iter().any(|e| matches!(&e.body, Body::User(_))),
            "the rewound prompts leave the transcript"
        );
        assert!(app.input.text.starts_with("first"), "{}", app.input.text);
    }

    #[test]
    fn a_confirmed_undo_submits_and_a_cancelled_one_does_not() {
        let mut app = App::new("replay", Mode::Ask);
        app.confirm("undo", "-a\n+b\n", Op::Undo { force: false });
        app.key(key(KeyCode::Char('n')));
        assert!(!app.rewind_open());
        assert!(app.drain_actions().is_empty());
        app.confirm("undo", "-a\n+b\n", Op::Undo { force: false });
        app.key(key(KeyCode::Char('y')));
        assert_eq!(
            app.drain_actions(),
            vec![Action::Submit(Op::Undo { force: false })]
        );
    }
}
