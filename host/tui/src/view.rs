//! Drawing the whole screen: the transcript (only its visible part, from
//! lines cached per entry and width), queued prompts, the prompt editor,
//! the status line and the overlays.

use super::app::App;
use super::markdown::markdown;
use super::text::{clean, wrap};
use super::transcript::{Body, Entry};
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use unicode_width::UnicodeWidthChar as _;

/// Draws `app` into `frame`.
pub fn render(frame: &mut Frame<'_>, app: &mut App) {
    let area = frame.area();
    if area.width < 10 || area.height < 5 {
        return;
    }
    let inner_w = area.width as usize - 2;
    let (input_lines, cursor) = input_lines(app, inner_w);
    let input_h = (input_lines.len() as u16).clamp(1, 8);
    let queued_h = (app.queued.len() as u16).min(3);
    let status_h = 1;
    let transcript_h = area
        .height
        .saturating_sub(input_h + 1 + queued_h + status_h);
    let transcript = Rect::new(area.x, area.y, area.width, transcript_h);
    transcript_view(frame, transcript, app);

    let mut y = area.y + transcript_h;
    if queued_h > 0 {
        let lines: Vec<Line<'static>> = app
            .queued
            .iter()
            .take(3)
            .map(|q| {
                Line::styled(
                    super::text::truncate(
                        &format!("queued: {}", clean(q).replace('\n', " ")),
                        area.width as usize,
                    ),
                    Style::default().fg(Color::DarkGray),
                )
            })
            .collect();
        frame.render_widget(
            Paragraph::new(lines),
            Rect::new(area.x, y, area.width, queued_h),
        );
        y += queued_h;
    }
    let input_rect = Rect::new(area.x, y, area.width, input_h + 1);
    let skip = cursor.1.saturating_sub(input_h as usize - 1);
    let shown: Vec<Line<'static>> = input_lines.into_iter().skip(skip).collect();
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(Style::default().fg(Color::DarkGray));
    let inner = block.inner(input_rect);
    frame.render_widget(block, input_rect);
    let prompt_style = Style::default()
        .fg(Color::Cyan)
        .add_modifier(Modifier::BOLD);
    frame.render_widget(
        Paragraph::new(Line::styled("›", prompt_style)),
        Rect::new(inner.x, inner.y, 1, 1),
    );
    frame.render_widget(
        Paragraph::new(shown),
        Rect::new(
            inner.x + 2,
            inner.y,
            inner.width.saturating_sub(2),
            inner.height,
        ),
    );
    if app.modal.is_none() && app.picker.is_none() && app.rewind.is_none() {
        frame.set_cursor_position(Position::new(
            inner.x + 2 + cursor.0 as u16,
            inner.y + (cursor.1 - skip) as u16,
        ));
    }
    y += input_h + 1;
    frame.render_widget(
        Paragraph::new(super::status::status_line(app)),
        Rect::new(area.x, y.min(area.bottom() - 1), area.width, 1),
    );

    if !app.completion.is_empty() {
        super::modal::completion(frame, input_rect, &app.completion, app.completion_sel);
    }
    if let Some(picker) = &app.picker {
        super::modal::picker(frame, area, picker);
    }
    if let Some(overlay) = &app.rewind {
        super::rewind::render(frame, area, overlay);
    }
    if let Some(modal) = &app.modal {
        super::modal::approval(frame, area, modal);
    }
    if !app.color {
        for cell in frame.buffer_mut().content.iter_mut() {
            cell.set_fg(Color::Reset);
            cell.set_bg(Color::Reset);
        }
    }
}

/// The prompt's lines wrapped to `width - 2`, and the cursor (column, row).
fn input_lines(app: &App, width: usize) -> (Vec<Line<'static>>, (usize, usize)) {
    let width = width.saturating_sub(2).max(4);
    let text = &app.input.text;
    let mut lines = Vec::new();
    let mut cur = String::new();
    let mut col = 0;
    let mut cursor = (0, 0);
    for (i, c) in text.char_indices() {
        if i == app.input.cursor {
            cursor = (col, lines.len());
        }
        if c == '\n' {
            lines.push(Line::raw(std::mem::take(&mut cur)));
            col = 0;
            continue;
        }
        let shown = clean(c.encode_utf8(&mut [0; 4]));
        let w: usize = shown.chars().map(|c| c.width().unwrap_or(0)).sum();
        if col + w > width {
            lines.push(Line::raw(std::mem::take(&mut cur)));
            col = 0;
            if i == app.input.cursor {
                cursor = (0, lines.len());
            }
        }
        cur.push_str(&shown);
        col += w;
    }
    if app.input.cursor >= text.len() {
        if col >= width {
            lines.push(Line::raw(std::mem::take(&mut cur)));
            col = 0;
        }
        cursor = (col, lines.len());
    }
    lines.push(Line::raw(cur));
    if text.is_empty() {
        lines = vec![if app.quit_armed {
            Line::styled(
                "press Ctrl+C again to quit",
                Style::default().fg(Color::Yellow),
            )
        } else {
            Line::styled(
                "ask anything · / for commands · @ for files",
                Style::default().fg(Color::DarkGray),
            )
        }];
    }
    (lines, cursor)
}

/// The lines of one entry at `width`, each entry followed by a blank line.
fn entry_lines(body: &Body, width: usize, now_ms: u64, expanded: bool) -> Vec<Line<'static>> {
    let mut out = match body {
        Body::User(text) => {
            let style = Style::default()
                .fg(Color::Cyan)
                .add_modifier(Modifier::BOLD);
            let mut out = Vec::new();
            for (i, line) in clean(text).lines().enumerate() {
                let prefix = if i == 0 { "› " } else { "  " };
                out.extend(wrap(
                    Line::from(vec![
                        Span::styled(prefix, style),
                        Span::styled(
                            line.to_owned(),
                            Style::default().add_modifier(Modifier::BOLD),
                        ),
                    ]),
                    width,
                    "  ",
                ));
            }
            out
        }
        Body::Assistant(text) => markdown(text, width),
        Body::Tools(cards) => {
            let mut out = Vec::new();
            if cards.len() > 1 {
                out.push(Line::styled(
                    format!("{} reads in parallel", cards.len()),
                    Style::default().fg(Color::DarkGray),
                ));
            }
            for card in cards {
                out.extend(card.lines(width, now_ms, expanded));
            }
            out
        }
        Body::Diff(diff) => super::cards::diff_lines(diff)
            .into_iter()
            .flat_map(|l| wrap(l, width, ""))
            .collect(),
        Body::Notice { text, error } => {
            let style = if *error {
                Style::default().fg(Color::Red)
            } else {
                Style::default().fg(Color::DarkGray)
            };
            clean(text)
                .lines()
                .flat_map(|l| wrap(Line::styled(l.to_owned(), style), width, "  "))
                .collect()
        }
    };
    out.push(Line::default());
    out
}

fn is_live(entry: &Entry) -> bool {
    matches!(&entry.body, Body::Tools(cards) if cards.iter().any(|c| c.is_live()))
}

/// The lines of entry `i`, from its cache when it is fresh.
fn cached(entry: &mut Entry, width: u16, now_ms: u64, expanded: bool) -> &[Line<'static>] {
    if entry.live.is_some() && matches!(entry.body, Body::Assistant(_)) {
        if let Entry {
            live: Some(live),
            body: Body::Assistant(text),
            ..
        } = entry
        {
            return live.lines(text, width as usize);
        }
        return &[];
    }
    let fresh = matches!(&entry.cache, Some((w, v, x, _))
        if *w == width && *v == entry.version && *x == expanded)
        && !is_live(entry);
    if !fresh {
        let lines = entry_lines(&entry.body, width as usize, now_ms, expanded);
        entry.cache = Some((width, entry.version, expanded, lines));
    }
    match &entry.cache {
        Some((_, _, _, lines)) => lines,
        None => &[],
    }
}

/// The transcript: entries are laid out from the bottom up and only as far
/// as the screen (plus the scroll offset) reaches, so a frame costs the
/// same however long the session is.
fn transcript_view(frame: &mut Frame<'_>, area: Rect, app: &mut App) {
    let height = area.height as usize;
    if height == 0 {
        return;
    }
    let width = area.width.saturating_sub(1);
    let (now, expanded) = (app.now_ms, app.expanded);
    // Scrolled up, the view stays on what the user reads while lines are
    // added below it: the offset grows by what the entries from the
    // topmost one laid out last time have grown by.
    if app.scroll > 0
        && let Some((first, before, w)) = app.anchor
        && w == width
        && first < app.transcript.entries.len()
    {
        let now_len: usize = app.transcript.entries[first..]
            .iter_mut()
            .map(|e| cached(e, width, now, expanded).len())
            .sum();
        app.scroll = app.scroll.saturating_add(now_len.saturating_sub(before));
    }
    let want = app.scroll.saturating_add(height);
    let mut collected: Vec<Line<'static>> = Vec::new();
    let mut gathered = 0;
    let mut reached_top = true;
    let mut first = app.transcript.entries.len();
    for entry in app.transcript.entries.iter_mut().rev() {
        let lines = cached(entry, width, now, expanded);
        // Only the lines the screen can reach are copied: a long answer
        // costs a frame its visible part, not its length.
        let reach = want.saturating_sub(gathered);
        gathered += lines.len();
        first -= 1;
        // Newest first; reversed again below.
        collected.extend(lines.iter().rev().take(reach).cloned());
        if gathered >= want {
            reached_top = false;
            break;
        }
    }
    if reached_top {
        app.scroll = app.scroll.min(gathered.saturating_sub(height));
    }
    app.anchor = (app.scroll > 0).then_some((first, gathered, width));
    let start = app.scroll;
    let mut visible: Vec<Line<'static>> = collected.into_iter().skip(start).take(height).collect();
    visible.reverse();
    // Short transcripts sit at the top of the area.
    frame.render_widget(
        Paragraph::new(visible),
        Rect::new(area.x + 1, area.y, width, area.height),
    );
    if app.scroll > 0 {
        let text = format!(" ↓ {} more lines (End) ", app.scroll);
        let w = text.chars().count() as u16;
        frame.render_widget(
            Paragraph::new(Line::styled(
                text,
                Style::default().add_modifier(Modifier::REVERSED),
            )),
            Rect::new(
                area.right().saturating_sub(w + 1),
                area.bottom() - 1,
                w.min(area.width),
                1,
            ),
        );
    }
}
