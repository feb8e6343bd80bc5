//! Going back from the UI: `/undo`, and Esc Esc or `/rewind` — a picker of
//! the conversation's earlier prompts (newest first), then what to restore
//! (code and conversation, the conversation only, the code only), and the
//! diff of the files to restore, confirmed before anything changes.
//!
//! The overlay holds only its own state: a key returns a [`RewindAction`]
//! for the UI to carry out (close, submit an op, or ask the front-end for
//! the diff of a rewind, which comes back through `App::confirm`). The
//! texts the transcript shows for an undo or a rewind are made here too.

use super::cards::diff_lines;
use super::modal::MODAL_GUARD_MS;
use super::text::{clean, truncate, wrap};
use super::transcript::Prompt;
use crate::protocol::Op;
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
pub(crate) enum Rewind {
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

/// What a key in the overlay asks of the UI.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RewindAction {
    /// The overlay stays open (on its next step, perhaps).
    Stay,
    /// The overlay closes and nothing is done.
    Close,
    /// The overlay closes and this op goes to the session.
    Submit(Op),
    /// The overlay closes and the front-end works out what a rewind to
    /// before the prompt of `turn` would restore, to confirm it.
    Preview {
        /// The turn whose prompt is rewound to.
        turn: u32,
        /// Whether the conversation goes back too.
        conversation: bool,
        /// Overwrite files edited since.
        force: bool,
    },
}

/// `text` as one line a picker can show: inert, its first line only.
pub(crate) fn one_line(text: &str) -> String {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let more = if text.trim().lines().count() > 1 {
        " …"
    } else {
        ""
    };
    format!("{}{more}", clean(first.trim()))
}

impl Rewind {
    /// The picker of `prompts` (oldest first), shown newest first; `force`
    /// goes on to the restore.
    pub(crate) fn pick(prompts: &[Prompt], force: bool) -> Self {
        let items = prompts
            .iter()
            .rev()
            .map(|p| (p.turn, p.text.clone()))
            .collect();
        Self::Prompts {
            items,
            selected: 0,
            force,
        }
    }

    /// What `op` (an undo or a rewind) will restore — `diff` — to confirm;
    /// `now_ms` is the UI's clock.
    pub(crate) fn confirm(title: &str, diff: &str, op: Op, now_ms: u64) -> Self {
        Self::Confirm {
            title: title.to_owned(),
            diff: diff.to_owned(),
            scroll: 0,
            op,
            opened_ms: now_ms,
        }
    }

    /// A key while the overlay is open, at `now_ms` on the UI's clock.
    pub(crate) fn key(&mut self, key: KeyEvent, now_ms: u64) -> RewindAction {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if key.code == KeyCode::Esc || (ctrl && key.code == KeyCode::Char('c')) {
            return RewindAction::Close;
        }
        match self {
            Self::Prompts {
                items,
                selected,
                force,
            } => match key.code {
                KeyCode::Up => *selected = selected.saturating_sub(1),
                KeyCode::Down => *selected = (*selected + 1).min(items.len().saturating_sub(1)),
                KeyCode::Enter => {
                    let Some((turn, text)) = items.get(*selected) else {
                        return RewindAction::Close;
                    };
                    *self = Self::Choice {
                        turn: *turn,
                        text: text.clone(),
                        selected: 0,
                        force: *force,
                    };
                }
                _ => {}
            },
            Self::Choice {
                turn,
                selected,
                force,
                ..
            } => match key.code {
                KeyCode::Up => *selected = selected.saturating_sub(1),
                KeyCode::Down => *selected = (*selected + 1).min(CHOICES.len() - 1),
                KeyCode::Enter => return choose(*turn, CHOICES[*selected], *force),
                _ => {}
            },
            Self::Confirm {
                scroll,
                op,
                opened_ms,
                ..
            } => match key.code {
                KeyCode::Enter if now_ms.saturating_sub(*opened_ms) < MODAL_GUARD_MS => {}
                KeyCode::Char('y') | KeyCode::Enter => return RewindAction::Submit(op.clone()),
                KeyCode::Char('n') => return RewindAction::Close,
                KeyCode::Up | KeyCode::Char('k') => *scroll = scroll.saturating_sub(1),
                KeyCode::Down | KeyCode::Char('j') => *scroll = scroll.saturating_add(1),
                KeyCode::PageUp => *scroll = scroll.saturating_sub(10),
                KeyCode::PageDown => *scroll = scroll.saturating_add(10),
                _ => {}
            },
        }
        RewindAction::Stay
    }
}

/// A choice for the prompt of `turn`: the conversation alone goes back at
/// once; restoring code shows its diff first.
fn choose(turn: u32, (_, conversation, code): (&str, bool, bool), force: bool) -> RewindAction {
    match (conversation, code) {
        (false, false) => RewindAction::Close,
        (true, false) => RewindAction::Submit(Op::Rewind {
            turn,
            conversation,
            code,
            force,
        }),
        _ => RewindAction::Preview {
            turn,
            conversation,
            force,
        },
    }
}

/// The force `/undo ARG` asks for, or why `arg` is wrong.
pub(crate) fn undo_force(arg: &str) -> Result<bool, String> {
    match arg {
        "" => Ok(false),
        "--force" => Ok(true),
        _ => Err(format!(
            "`/undo` takes no argument but --force, not `{}`",
            clean(arg)
        )),
    }
}

/// The transcript's line for an undo of `turn` that restored `files`.
pub(crate) fn undone_notice(turn: u32, files: &[String]) -> String {
    format!(
        "undid turn {turn}: restored {}",
        if files.is_empty() {
            "no file".to_owned()
        } else {
            files.join(", ")
        }
    )
}

/// The transcript's line for a rewind to before the prompt of `turn`
/// (`text`, when the conversation still holds it) that restored `files`.
pub(crate) fn rewound_notice(
    turn: u32,
    text: Option<&str>,
    conversation: bool,
    files: &[String],
) -> String {
    let restored = if files.is_empty() {
        "no file restored".to_owned()
    } else {
        format!("restored {}", files.join(", "))
    };
    let what = match text {
        Some(t) => format!("“{}”", truncate(&one_line(t), 60)),
        None => format!("turn {turn}"),
    };
    if conversation {
        format!("rewound the conversation to before {what}; {restored}")
    } else {
        format!("{restored} as before {what}")
    }
}

/// Draws the overlay.
pub(crate) fn render(frame: &mut Frame<'_>, area: Rect, overlay: &Rewind) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let dim = Style::default().fg(Color::DarkGray);
    let width = area.width.saturating_sub(8).min(90);
    let inner_w = usize::from(width.saturating_sub(2)).max(1);
    let (title, lines, foot): (String, Vec<Line<'static>>, &str) = match overlay {
        Rewind::Prompts {
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
        Rewind::Choice { text, selected, .. } => {
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
        Rewind::Confirm {
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
        Rewind::Prompts { selected, .. } => *selected,
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

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn prompts() -> Vec<Prompt> {
        [(1, "first"), (2, "second")]
            .into_iter()
            .map(|(turn, text)| Prompt {
                turn,
                text: text.into(),
                entry: 0,
            })
            .collect()
    }

    #[test]
    fn each_choice_asks_for_its_own_action() {
        let asked = |downs: usize| {
            let mut rewind = Rewind::pick(&prompts(), true);
            assert_eq!(rewind.key(key(KeyCode::Enter), 0), RewindAction::Stay);
            for _ in 0..downs {
                rewind.key(key(KeyCode::Down), 0);
            }
            rewind.key(key(KeyCode::Enter), 0)
        };
        assert_eq!(
            asked(0),
            RewindAction::Preview {
                turn: 2,
                conversation: true,
                force: true
            }
        );
        assert_eq!(
            asked(1),
            RewindAction::Submit(Op::Rewind {
                turn: 2,
                conversation: true,
                code: false,
                force: true
            })
        );
        assert_eq!(
            asked(2),
            RewindAction::Preview {
                turn: 2,
                conversation: false,
                force: true
            }
        );
        assert_eq!(asked(3), RewindAction::Close);
        assert_eq!(asked(9), RewindAction::Close, "the last choice is cancel");
    }

    #[test]
    fn a_confirmation_drops_an_early_enter_but_not_y() {
        let op = Op::Undo { force: false };
        let mut rewind = Rewind::confirm("undo", "-a\n+b\n", op.clone(), 1000);
        assert_eq!(rewind.key(key(KeyCode::Enter), 1100), RewindAction::Stay);
        assert_eq!(
            rewind.key(key(KeyCode::Char('y')), 1100),
            RewindAction::Submit(op.clone())
        );
        assert_eq!(
            rewind.key(key(KeyCode::Enter), 1000 + MODAL_GUARD_MS),
            RewindAction::Submit(op)
        );
        assert_eq!(rewind.key(key(KeyCode::Esc), 0), RewindAction::Close);
    }

    #[test]
    fn undo_takes_force_or_nothing() {
        assert_eq!(undo_force(""), Ok(false));
        assert_eq!(undo_force("--force"), Ok(true));
        assert!(undo_force("\u{1b}[2J").is_err_and(|e| !e.contains('\u{1b}')));
    }
}
