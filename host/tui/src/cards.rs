//! Tool cards: one block per call with its state, a one-line summary of
//! its arguments, and its output (collapsed unless expanded), a diff in
//! colour for writes and the exit code for commands.

use super::text::{clean, truncate, wrap};
use crate::protocol::{Label, LabelKind, ToolCall, ToolOutcome};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// Output lines shown while a card is collapsed.
const COLLAPSED_LINES: usize = 4;
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Where a call is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolState {
    /// Waiting for the user's answer.
    Asking,
    /// Allowed, not started yet.
    Queued,
    /// Running since the app clock read this.
    Running { since_ms: u64 },
    /// Finished.
    Done { duration_ms: u64 },
    /// Finished with an error.
    Failed { duration_ms: u64 },
    /// The policy or the user refused it.
    Denied { reason: String },
}

/// One tool call on screen.
#[derive(Debug, Clone)]
pub(crate) struct ToolCard {
    pub(crate) call: ToolCall,
    pub(crate) plugin: Option<String>,
    pub(crate) state: ToolState,
    /// What the model read, made inert.
    pub(crate) output: String,
    /// The diff of a write (from the approval preview or the result).
    pub(crate) diff: Option<String>,
    /// A command's exit code.
    pub(crate) exit_code: Option<i64>,
    /// What its result carries that the exfiltration guard counts:
    /// `sensitive`, `untrusted`, or both.
    pub(crate) provenance: Option<String>,
    /// For a `task` call: what its subagent did lately, made inert.
    pub(crate) nested: Vec<String>,
}

/// The card's provenance marker for a result's labels; `None` for content
/// from the workspace only.
pub(crate) fn provenance_marker(labels: &[Label]) -> Option<String> {
    let has = |k: LabelKind| labels.iter().any(|l| l.kind == k);
    match (has(LabelKind::Sensitive), has(LabelKind::Untrusted)) {
        (true, true) => Some("sensitive+untrusted".into()),
        (true, false) => Some("sensitive".into()),
        (false, true) => Some("untrusted".into()),
        (false, false) => None,
    }
}

/// Lines of a subagent's activity kept under its `task` card.
const NESTED_LINES: usize = 6;

impl ToolCard {
    pub(crate) fn new(call: ToolCall, plugin: Option<String>, state: ToolState) -> Self {
        Self {
            call,
            plugin,
            state,
            output: String::new(),
            diff: None,
            exit_code: None,
            provenance: None,
            nested: Vec::new(),
        }
    }

    /// The call ended with `outcome` after `duration_ms`; a denied call's
    /// card stays as it is.
    pub(crate) fn finish(&mut self, outcome: &ToolOutcome, duration_ms: u64) {
        if matches!(self.state, ToolState::Denied { .. }) {
            return;
        }
        self.state = if outcome.is_error {
            ToolState::Failed { duration_ms }
        } else {
            ToolState::Done { duration_ms }
        };
        self.output = clean(&outcome.content);
        self.provenance = provenance_marker(&outcome.labels);
        let data = outcome.data.as_ref();
        self.exit_code = data
            .and_then(|d| d.get("exit_code"))
            .and_then(serde_json::Value::as_i64);
        if let Some(diff) = data
            .and_then(|d| d.get("diff"))
            .and_then(serde_json::Value::as_str)
        {
            self.diff = Some(diff.to_owned());
        }
    }

    /// A line of a subagent's activity, under the card; the last
    /// [`NESTED_LINES`] are kept.
    pub(crate) fn nest(&mut self, line: &str) {
        self.nested.push(clean(line));
        let over = self.nested.len().saturating_sub(NESTED_LINES);
        self.nested.drain(..over);
    }

    /// Whether the card changes with the clock (spinner, elapsed time).
    pub(crate) fn is_live(&self) -> bool {
        matches!(self.state, ToolState::Running { .. })
    }

    /// The card's state as its mark, the mark's colour and a word or two.
    fn mark(&self, now_ms: u64) -> (String, Style, String) {
        match &self.state {
            ToolState::Asking => (
                "?".to_owned(),
                Style::default().fg(Color::Yellow),
                "waiting for approval".to_owned(),
            ),
            ToolState::Queued => (
                "○".to_owned(),
                Style::default().fg(Color::DarkGray),
                "queued".to_owned(),
            ),
            ToolState::Running { since_ms } => {
                let elapsed = now_ms.saturating_sub(*since_ms);
                (
                    SPINNER[(now_ms / 100) as usize % SPINNER.len()].to_string(),
                    Style::default().fg(Color::Cyan),
                    format!("running {}", seconds(elapsed)),
                )
            }
            ToolState::Done { duration_ms } => (
                "●".to_owned(),
                Style::default().fg(Color::Green),
                format!("done {}", seconds(*duration_ms)),
            ),
            ToolState::Failed { duration_ms } => (
                "✗".to_owned(),
                Style::default().fg(Color::Red),
                format!("error {}", seconds(*duration_ms)),
            ),
            ToolState::Denied { .. } => (
                "⊘".to_owned(),
                Style::default().fg(Color::Red),
                "denied".to_owned(),
            ),
        }
    }

    /// The card's lines at `width`, at app time `now_ms`.
    pub(crate) fn lines(&self, width: usize, now_ms: u64, expanded: bool) -> Vec<Line<'static>> {
        let (mark, mark_style, state) = self.mark(now_ms);
        let mut right = state;
        if let Some(code) = self.exit_code {
            right = format!("exit {code} · {right}");
        }
        if let Some(p) = &self.plugin {
            right = format!("{} · {right}", clean(p));
        }
        let name = clean(&self.call.name);
        let marker = self
            .provenance
            .as_ref()
            .map(|p| format!("◆ {p} · "))
            .unwrap_or_default();
        let fixed = 2
            + super::text::width(&name)
            + 2
            + super::text::width(&marker)
            + super::text::width(&right)
            + 2;
        let args = truncate(
            &clean(&summary(&self.call.arguments)),
            width.saturating_sub(fixed).max(8),
        );
        let pad = width.saturating_sub(fixed + super::text::width(&args));
        let mut out = vec![Line::from(vec![
            Span::styled(format!("{mark} "), mark_style),
            Span::styled(name, Style::default().add_modifier(Modifier::BOLD)),
            Span::raw("  "),
            Span::styled(args, Style::default().fg(Color::Gray)),
            Span::raw(" ".repeat(pad + 2)),
            Span::styled(marker, Style::default().fg(Color::Magenta)),
            Span::styled(right, Style::default().fg(Color::DarkGray)),
        ])];
        let dim = Style::default().fg(Color::DarkGray);
        if let ToolState::Denied { reason } = &self.state {
            out.push(Line::from(vec![
                Span::styled("  ⎿ ", dim),
                Span::styled(clean(reason), Style::default().fg(Color::Red)),
            ]));
        }
        for line in &self.nested {
            out.push(Line::from(vec![
                Span::styled("  ↳ ", dim),
                Span::styled(truncate(line, width.saturating_sub(4).max(8)), dim),
            ]));
        }
        let body: Vec<Line<'static>> = if let Some(diff) = &self.diff {
            diff_lines(diff)
        } else if self.output.is_empty() {
            Vec::new()
        } else {
            let style = if matches!(self.state, ToolState::Failed { .. }) {
                Style::default().fg(Color::Red)
            } else {
                Style::default()
            };
            self.output
                .trim_end()
                .lines()
                .map(|l| Line::styled(l.to_owned(), style))
                .collect()
        };
        let total = body.len();
        let shown = if expanded {
            total
        } else {
            total.min(COLLAPSED_LINES)
        };
        let marked = out.len() > 1;
        for (i, line) in body.into_iter().take(shown).enumerate() {
            let marker = if i == 0 && !marked { "  ⎿ " } else { "    " };
            let mut spans = vec![Span::styled(marker, dim)];
            spans.extend(line.spans);
            out.extend(wrap(Line::from(spans), width, "    "));
        }
        if shown < total {
            out.push(Line::styled(
                format!(
                    "    … {} more line{} (ctrl-o to expand)",
                    total - shown,
                    if total - shown == 1 { "" } else { "s" }
                ),
                dim,
            ));
        }
        out
    }
}

/// A plan step's mark, the same in the UI and the line renderer.
pub fn plan_mark(status: crate::protocol::PlanStatus) -> &'static str {
    match status {
        crate::protocol::PlanStatus::Done => "✓",
        crate::protocol::PlanStatus::InProgress => "▸",
        crate::protocol::PlanStatus::Pending => "○",
    }
}

/// `1.2s` or `340ms`.
fn seconds(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

/// A one-line summary of JSON arguments: `path=a.txt, content=…`.
pub(crate) fn summary(args: &str) -> String {
    match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(args) {
        Ok(map) => map
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => {
                    format!("{k}={}", s.lines().next().unwrap_or(""))
                }
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Err(_) => args.replace('\n', " "),
    }
}

/// A unified diff in colour, made inert.
pub(crate) fn diff_lines(diff: &str) -> Vec<Line<'static>> {
    clean(diff)
        .lines()
        .map(|l| {
            let style = if l.starts_with("+++") || l.starts_with("---") {
                Style::default().add_modifier(Modifier::BOLD)
            } else if l.starts_with('+') {
                Style::default().fg(Color::Green)
            } else if l.starts_with('-') {
                Style::default().fg(Color::Red)
            } else if l.starts_with("@@") {
                Style::default().fg(Color::Cyan)
            } else {
                Style::default()
            };
            Line::styled(l.to_owned(), style)
        })
        .collect()
}
