//! The status line: provider and model, permission mode, tokens, context
//! share, cost (when the model's price is known), session id and what the
//! session is doing.

use super::app::{App, Working};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// `12.3k` for large counts.
fn count(n: u64) -> String {
    if n >= 10_000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}

/// `$0.0123` under a dollar, `$1.23` above.
fn dollars(cost: f64) -> String {
    if cost < 1.0 {
        format!("${cost:.4}")
    } else {
        format!("${cost:.2}")
    }
}

/// The status line of `app`.
pub(crate) fn status_line(app: &App) -> Line<'static> {
    let dim = Style::default().fg(Color::DarkGray);
    let (state, style) = match app.working {
        Working::Idle => ("ready", Style::default().fg(Color::Green)),
        Working::Thinking => ("thinking", Style::default().fg(Color::Cyan)),
        Working::Answering => ("answering", Style::default().fg(Color::Cyan)),
        Working::Tools => ("running tools", Style::default().fg(Color::Cyan)),
        Working::Asking => (
            "needs approval",
            Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        ),
    };
    let model = if app.model.is_empty() {
        "default model"
    } else {
        app.model.as_str()
    };
    let ctx = match app.context_window {
        Some(w) if w > 0 => format!(
            "ctx {:.1}%",
            (f64::from(app.last_in) * 100.0 / w as f64).min(100.0)
        ),
        _ => format!("ctx {}", count(u64::from(app.last_in))),
    };
    let short_id = app.session_id.clone();
    let mut spans = vec![
        Span::styled(format!(" {state} "), style.add_modifier(Modifier::REVERSED)),
        Span::raw(" "),
        Span::styled(
            super::text::clean(&format!("{}/{model}", app.provider)),
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::styled(" · ", dim),
        Span::styled(app.mode.as_str(), Style::default().fg(Color::Yellow)),
        Span::styled(" · ", dim),
        Span::raw(format!(
            "↑{} ↓{} (last ↑{} ↓{})",
            count(app.tokens_in),
            count(app.tokens_out),
            count(u64::from(app.last_in)),
            count(u64::from(app.last_out))
        )),
        Span::styled(" · ", dim),
        Span::raw(ctx),
    ];
    if let Some(cost) = app.cost {
        spans.push(Span::styled(" · ", dim));
        spans.push(Span::raw(dollars(cost)));
    }
    if !short_id.is_empty() {
        spans.push(Span::styled(" · ", dim));
        spans.push(Span::styled(short_id, dim));
    }
    if !app.queued.is_empty() {
        spans.push(Span::styled(
            format!("  {} queued", app.queued.len()),
            Style::default().fg(Color::Yellow),
        ));
    }
    Line::from(spans)
}
