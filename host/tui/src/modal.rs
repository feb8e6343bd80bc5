//! Overlays: the approval modal, the session picker and the completion
//! popup. The modal and the picker hold their own state: a key returns a
//! [`ModalAction`] or a [`PickerAction`] for the UI to carry out.

use super::cards::{diff_lines, summary};
use super::text::{clean, truncate, wrap};
use crate::protocol::{ApprovalAnswer, ApprovalRequest};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

/// Keys that reach an approval modal sooner than this after it opened are
/// dropped: they were typed for something else.
pub(crate) const MODAL_GUARD_MS: u64 = 300;

/// The approval modal.
#[derive(Debug)]
pub(crate) struct Modal {
    pub(crate) request: ApprovalRequest,
    pub(crate) opened_ms: u64,
    pub(crate) scroll: u16,
    /// The reason being typed after `n`, when it is.
    pub(crate) reason: Option<String>,
    /// Set by the first frame that showed the call's last line: until then
    /// `y` and `a` do nothing, since what is approved must have been seen.
    pub(crate) seen_all: std::cell::Cell<bool>,
    /// How far the call can scroll, as the last frame laid it out.
    pub(crate) max_scroll: std::cell::Cell<u16>,
    /// Whether `y` or `a` was pressed before the whole call was shown.
    pub(crate) refused: bool,
}

/// What a key in the approval modal asks of the UI.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ModalAction {
    /// The modal stays open.
    Stay,
    /// The modal closes with this answer to the call `call_id`.
    Answer {
        /// The call asked about.
        call_id: String,
        /// The user's answer.
        answer: ApprovalAnswer,
    },
    /// The running turn is interrupted (the modal stays until it ends).
    Interrupt,
}

impl Modal {
    /// The modal for `request`, opened at `opened_ms` on the UI's clock.
    pub(crate) fn new(request: ApprovalRequest, opened_ms: u64) -> Self {
        Self {
            request,
            opened_ms,
            scroll: 0,
            reason: None,
            seen_all: std::cell::Cell::new(false),
            max_scroll: std::cell::Cell::new(0),
            refused: false,
        }
    }

    /// A paste: it goes into the reason being typed, on one line.
    pub(crate) fn paste(&mut self, text: &str) {
        if let Some(reason) = &mut self.reason {
            reason.push_str(&text.replace(['\n', '\r'], " "));
        }
    }

    /// A key at `now_ms` on the UI's clock.
    pub(crate) fn key(&mut self, key: KeyEvent, now_ms: u64) -> ModalAction {
        if now_ms.saturating_sub(self.opened_ms) < MODAL_GUARD_MS {
            return ModalAction::Stay;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let call_id = self.request.call.id.clone();
        if let Some(reason) = &mut self.reason {
            match key.code {
                KeyCode::Enter => {
                    let reason = reason.trim().to_owned();
                    let answer = ApprovalAnswer::Deny {
                        reason: Some(if reason.is_empty() {
                            "the user declined".to_owned()
                        } else {
                            format!("the user declined: {reason}")
                        }),
                    };
                    return ModalAction::Answer { call_id, answer };
                }
                KeyCode::Esc => self.reason = None,
                KeyCode::Backspace => {
                    reason.pop();
                }
                KeyCode::Char(c) if !ctrl => reason.push(c),
                _ => {}
            }
            return ModalAction::Stay;
        }
        // Scrolling stops at the last line, so `↑` answers at once after `↓`s.
        let max = self.max_scroll.get();
        let answer = match key.code {
            KeyCode::Char('y' | 'a') if !self.seen_all.get() => {
                self.refused = true;
                return ModalAction::Stay;
            }
            KeyCode::Char('y') => ApprovalAnswer::Approve,
            KeyCode::Char('a') => ApprovalAnswer::ApproveForSession,
            KeyCode::Char('c') if ctrl => return ModalAction::Interrupt,
            code => {
                self.scroll_key(code, max);
                return ModalAction::Stay;
            }
        };
        ModalAction::Answer { call_id, answer }
    }

    /// `n` and the keys that scroll the call, which can go down to `max`.
    fn scroll_key(&mut self, code: KeyCode, max: u16) {
        match code {
            KeyCode::Char('n') => self.reason = Some(String::new()),
            KeyCode::Up | KeyCode::Char('k') => {
                self.scroll = self.scroll.min(max).saturating_sub(1)
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.scroll = self.scroll.saturating_add(1).min(max)
            }
            KeyCode::PageUp => self.scroll = self.scroll.min(max).saturating_sub(10),
            KeyCode::PageDown => self.scroll = self.scroll.saturating_add(10).min(max),
            _ => {}
        }
    }
}

/// A session offered by the picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picked {
    /// The session id.
    pub id: String,
    /// What the picker shows (date, first prompt…).
    pub label: String,
}

/// The session picker.
#[derive(Debug)]
pub(crate) struct Picker {
    pub(crate) items: Vec<Picked>,
    pub(crate) selected: usize,
}

/// What a key in the session picker asks of the UI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PickerAction {
    /// The picker stays open.
    Stay,
    /// The picker closes and nothing is opened.
    Close,
    /// The picker closes and this session is opened.
    Open(String),
}

impl Picker {
    /// The picker on `items`, the last one selected; none when there are
    /// none to pick.
    pub(crate) fn new(items: Vec<Picked>) -> Option<Self> {
        let selected = items.len().checked_sub(1)?;
        Some(Self { items, selected })
    }

    /// A key while the picker is open.
    pub(crate) fn key(&mut self, key: KeyEvent) -> PickerAction {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Up => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down => self.selected = (self.selected + 1).min(self.items.len() - 1),
            KeyCode::Enter => return PickerAction::Open(self.items[self.selected].id.clone()),
            KeyCode::Esc => return PickerAction::Close,
            KeyCode::Char('c') if ctrl => return PickerAction::Close,
            _ => {}
        }
        PickerAction::Stay
    }
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

/// The approval modal: the call's name and a one-line summary, why it asks,
/// then everything the call will run — its whole arguments made visible
/// ([`crate::terminal::visible_arguments`]) and its diff — wrapped to the
/// modal's width and scrolled when it cannot fit. The frame that shows the
/// last line marks the modal seen; until then `y` and `a` do nothing (see
/// [`Modal::key`]), so nothing is approved that was not on the screen. A call of
/// more rows than a `u16` counts can never be scrolled to its end, so it is
/// never marked seen and the modal says it can only be refused.
pub(crate) fn approval(frame: &mut Frame<'_>, area: Rect, modal: &Modal) {
    let req = &modal.request;
    let width = area.width.saturating_sub(4).min(100);
    let inner_w = usize::from(width.saturating_sub(2)).max(1);
    let body = approval_body(req, inner_w);
    // The guard's reason is long; room for it wrapped.
    let guard_rows = req.guard.as_deref().map_or(0, |g| {
        (g.chars().count() / usize::from(width.saturating_sub(2).max(1)) + 1) as u16
    });
    // Rows are counted and scrolled in u16: past that the end of the call
    // can never come into view, so it cannot be approved here.
    let too_long = u16::try_from(body.len()).is_err();
    let body_len = u16::try_from(body.len()).unwrap_or(u16::MAX);
    let rect = centered(
        area,
        width,
        body_len
            .saturating_add(9 + guard_rows)
            .min(area.height.saturating_sub(2)),
    );
    frame.render_widget(Clear, rect);
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let dim = Style::default().fg(Color::DarkGray);
    let mut head = approval_head(req, inner_w);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::default().fg(Color::Yellow))
        .title(Span::styled(" approve this call? ", bold.fg(Color::Yellow)));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    head.push(Line::default());
    // Rows once wrapped: a long reason takes several.
    let head_h = head
        .iter()
        .map(|l| (l.width().max(1).div_ceil(inner_w)) as u16)
        .sum::<u16>();
    let ans_h = 2;
    let body_h = inner.height.saturating_sub(head_h + ans_h + 1);
    let total = body_len;
    let max_scroll = total.saturating_sub(body_h);
    let scroll = modal.scroll.min(max_scroll);
    modal.max_scroll.set(max_scroll);
    if body_h > 0 && scroll >= max_scroll && !too_long {
        modal.seen_all.set(true);
    }
    let seen = modal.seen_all.get();
    let answers = approval_answers(modal, too_long.then_some(body.len()), seen);
    frame.render_widget(
        Paragraph::new(head).wrap(Wrap { trim: false }),
        Rect::new(inner.x, inner.y, inner.width, head_h.min(inner.height)),
    );
    if body_h > 0 {
        // Only the rows in view go to the paragraph: it counts rows in u16
        // and overflows on a body longer than that.
        let shown: Vec<Line<'static>> = body
            .into_iter()
            .skip(usize::from(scroll))
            .take(usize::from(body_h))
            .collect();
        frame.render_widget(
            Paragraph::new(shown),
            Rect::new(inner.x, inner.y + head_h, inner.width, body_h),
        );
    }
    if total > body_h && body_h > 0 {
        let more = format!(
            " lines {}-{} of {total} ",
            scroll + 1,
            (scroll + body_h).min(total)
        );
        frame.render_widget(
            Paragraph::new(Line::styled(more, dim)),
            Rect::new(inner.x, inner.y + head_h + body_h, inner.width, 1),
        );
    }
    let ans_y = inner.y + inner.height.saturating_sub(ans_h);
    frame.render_widget(
        Paragraph::new(answers),
        Rect::new(inner.x, ans_y, inner.width, ans_h.min(inner.height)),
    );
}

/// Everything the call will run: its arguments made visible, then its
/// diff, wrapped to `inner_w` columns.
fn approval_body(req: &ApprovalRequest, inner_w: usize) -> Vec<Line<'static>> {
    let mut body: Vec<Line<'static>> = Vec::new();
    for line in crate::terminal::visible_arguments(&req.call.arguments).lines() {
        body.extend(wrap(Line::raw(line.to_owned()), inner_w, ""));
    }
    if let Some(diff) = &req.preview {
        body.push(Line::default());
        for line in diff_lines(diff) {
            body.extend(wrap(line, inner_w, ""));
        }
    }
    body
}

/// The modal's first lines: the call's name and summary, and why it asks.
fn approval_head(req: &ApprovalRequest, inner_w: usize) -> Vec<Line<'static>> {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let dim = Style::default().fg(Color::DarkGray);
    vec![
        Line::from(vec![
            Span::styled(clean(&req.call.name), bold),
            Span::raw("  "),
            Span::styled(
                truncate(
                    &clean(&summary(&req.call.arguments)),
                    inner_w.saturating_sub(req.call.name.len() + 2),
                ),
                Style::default().fg(Color::Gray),
            ),
        ]),
        match &req.guard {
            // The guard's reason says what the session read and where the
            // call could send it; the policy's own verdict follows it there.
            Some(guard) => Line::from(vec![
                Span::styled("held: ", bold.fg(Color::Red)),
                Span::styled(clean(guard), Style::default().fg(Color::Red)),
            ]),
            None => Line::from(vec![
                Span::styled("why: ", dim),
                Span::raw(clean(&req.reason)),
            ]),
        },
    ]
}

/// The answers the modal offers now: none but no for a call too long to
/// review (`too_long` holds its line count), the reason being typed, a
/// request to scroll to the end, or yes, yes for the session and no.
fn approval_answers(modal: &Modal, too_long: Option<usize>, seen: bool) -> Vec<Line<'static>> {
    let req = &modal.request;
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let dim = Style::default().fg(Color::DarkGray);
    match (&modal.reason, too_long) {
        (None, Some(lines)) => vec![
            Line::from(vec![
                Span::styled(
                    format!(
                        "this call is {lines} lines, too long to review here: it cannot be approved   "
                    ),
                    bold.fg(Color::Red),
                ),
                Span::styled("[n]", bold.fg(Color::Red)),
                Span::raw(" no"),
            ]),
            Line::styled(
                "answer no, or run it yourself after reading it elsewhere",
                dim,
            ),
        ],
        (Some(reason), _) => vec![
            Line::from(vec![
                Span::styled("deny, reason: ", Style::default().fg(Color::Red)),
                Span::raw(clean(reason)),
                Span::styled("█", dim),
            ]),
            Line::styled("Enter send · Esc back", dim),
        ],
        (None, None) if !seen => vec![
            Line::from(vec![
                Span::styled(
                    "scroll to the end of the call to approve it (↓/PgDn)   ",
                    if modal.refused {
                        bold.fg(Color::Red)
                    } else {
                        bold.fg(Color::Yellow)
                    },
                ),
                Span::styled("[n]", bold.fg(Color::Red)),
                Span::raw(" no"),
            ]),
            Line::styled("↑/↓ scroll the call", dim),
        ],
        (None, None) => vec![
            Line::from(vec![
                Span::styled("[y]", bold.fg(Color::Green)),
                Span::raw(" yes once   "),
                Span::styled("[a]", bold.fg(Color::Green)),
                Span::raw(format!(
                    " yes, and {} this session   ",
                    clean(&req.session_covers)
                )),
                Span::styled("[n]", bold.fg(Color::Red)),
                Span::raw(" no"),
            ]),
            Line::styled("↑/↓ scroll the call", dim),
        ],
    }
}

/// The session picker.
pub(crate) fn picker(frame: &mut Frame<'_>, area: Rect, picker: &Picker) {
    let height = (picker.items.len() as u16 + 3).min(area.height.saturating_sub(2));
    let rect = centered(area, area.width.saturating_sub(8).min(90), height);
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" sessions · Enter open · Esc close ");
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let visible = inner.height as usize;
    let first = (picker.selected + 1).saturating_sub(visible);
    let lines: Vec<Line<'static>> = picker
        .items
        .iter()
        .enumerate()
        .skip(first)
        .take(visible)
        .map(|(i, p)| {
            let text = truncate(
                &clean(&format!("{}  {}", p.id, p.label)),
                inner.width as usize,
            );
            if i == picker.selected {
                Line::styled(text, Style::default().add_modifier(Modifier::REVERSED))
            } else {
                Line::raw(text)
            }
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The completion popup of `choices` (the word, what it is), `selected`
/// highlighted, just above the prompt at `input`.
pub(crate) fn completion(
    frame: &mut Frame<'_>,
    input: Rect,
    choices: &[(String, String)],
    selected: usize,
) {
    // As many entries as fit above the input, so that every slash command
    // is in the popup on a usual terminal; beyond that the window follows
    // the selection.
    let room = usize::from(input.y.saturating_sub(2));
    let n = choices.len().min(room) as u16;
    if n == 0 {
        return;
    }
    let first = (selected + 1).saturating_sub(usize::from(n));
    let cmd_w = choices.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    let width = choices
        .iter()
        .map(|(_, d)| cmd_w + d.len() + 3)
        .max()
        .unwrap_or(10)
        .min(input.width as usize - 2) as u16
        + 2;
    let rect = Rect::new(input.x, input.y - n - 2, width, n + 2);
    frame.render_widget(Clear, rect);
    let lines: Vec<Line<'static>> = choices
        .iter()
        .enumerate()
        .skip(first)
        .take(usize::from(n))
        .map(|(i, (c, d))| {
            let style = if i == selected {
                Style::default().add_modifier(Modifier::REVERSED)
            } else {
                Style::default()
            };
            Line::from(vec![
                Span::styled(
                    format!("{:<cmd_w$}", clean(c)),
                    style.add_modifier(Modifier::BOLD),
                ),
                Span::styled(format!("  {}", clean(d)), style.fg(Color::DarkGray)),
            ])
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL)),
        rect,
    );
}
