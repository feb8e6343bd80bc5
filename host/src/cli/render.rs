//! Rendering the event stream as text for people: streamed answers, one
//! line per tool call, a spinner while the model thinks, and the approval
//! prompt.

use corral_protocol::{ApprovalAnswer, ApprovalRequest, Event, StopReason};
use std::io::{IsTerminal as _, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A spinner on stderr while the model is thinking (only on a terminal).
pub(super) fn spinner(waiting: Arc<AtomicBool>, json: bool) -> tokio::task::JoinHandle<()> {
    let tty = std::io::stderr().is_terminal() && !json;
    tokio::spawn(async move {
        if !tty {
            return;
        }
        let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
        let mut i = 0;
        let mut shown = false;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            if waiting.load(Ordering::Relaxed) {
                eprint!("\r{} waiting for the model", frames[i % frames.len()]);
                shown = true;
                i += 1;
            } else if shown {
                eprint!("\r\x1b[K");
                shown = false;
            }
        }
    })
}

/// Asks on the terminal about one call: the call, why it needs approval,
/// everything it will run (whole, made visible: the one-line summary is cut,
/// this never is) and its diff. The answer is read on a blocking thread; the
/// caller sends it to the session.
pub(super) async fn ask_terminal(request: &ApprovalRequest) -> ApprovalAnswer {
    let mut text = format!(
        "\n? {}({}) needs approval: {}\n",
        request.call.name,
        short(&request.call.arguments),
        request.reason
    );
    text.push_str("  the whole call:\n");
    for line in corral_protocol::terminal::visible_arguments(&request.call.arguments).lines() {
        text.push_str("  │ ");
        text.push_str(line);
        text.push('\n');
    }
    if let Some(diff) = &request.preview {
        text.push_str(diff);
        if !diff.ends_with('\n') {
            text.push('\n');
        }
    }
    text.push_str(&format!(
        "  [y] yes, once   [a] yes, and {} for the rest of this session   [n] no (add a reason after it)\n> ",
        request.session_covers
    ));
    let answer = tokio::task::spawn_blocking(move || {
        eprint!("{}", corral_protocol::terminal::inert(&text));
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await;
    let line = match answer {
        Ok(Ok(l)) => l,
        _ => {
            return ApprovalAnswer::Deny {
                reason: Some("no answer from the terminal".into()),
            };
        }
    };
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => ApprovalAnswer::Approve,
        "a" | "always" => ApprovalAnswer::ApproveForSession,
        _ => ApprovalAnswer::Deny {
            reason: Some(if rest.trim().is_empty() {
                "the user declined".to_owned()
            } else {
                format!("the user declined: {}", rest.trim())
            }),
        },
    }
}

/// Text rendering of the event stream.
#[derive(Default)]
pub(super) struct Renderer {
    at_line_start: bool,
    /// Whether the current request streamed its text (else it is printed whole at the end).
    streamed: bool,
    /// Text shown but not yet written: a streamed answer arrives in
    /// thousands of deltas, and one write per delta cost more than
    /// everything else corral does with them. Never more than
    /// [`FLUSH_AT`] bytes, so a flooding provider still waits for the
    /// terminal instead of filling memory.
    pending: String,
    /// Whether the event being shown is a delta, whose text may be held.
    /// Every other event writes through, after what was held: what it
    /// prints on stderr (an error, a warning) then follows the answer on
    /// a terminal, where the two streams are one.
    hold: bool,
}

/// Bytes of output held before they are written, at most.
pub(super) const FLUSH_AT: usize = 64 << 10;

/// Writes the output held in `held` to stdout, and empties it.
pub(super) fn write_held(held: &mut String) {
    if held.is_empty() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(held.as_bytes());
    let _ = stdout.flush();
    held.clear();
}

pub(super) fn short(args: &str) -> String {
    let compact = match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(args) {
        Ok(map) => map
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Err(_) => args.to_owned(),
    };
    if compact.chars().count() > 80 {
        format!("{}…", compact.chars().take(79).collect::<String>())
    } else {
        compact
    }
}

impl Renderer {
    fn print(&mut self, text: &str) {
        let text = corral_protocol::terminal::inert(text);
        self.pending.push_str(&text);
        if !text.is_empty() {
            self.at_line_start = text.ends_with('\n');
        }
        if !self.hold || self.pending.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Writes what was held; the event loop calls it whenever no event is
    /// waiting.
    pub(super) fn flush(&mut self) {
        write_held(&mut self.pending);
    }

    fn newline(&mut self) {
        if !self.at_line_start {
            self.print("\n");
        }
    }

    /// Shows `event`: a text delta may be held (see `hold`), anything else
    /// is written at once, after what was held.
    pub(super) fn show(&mut self, event: &Event, waiting: &AtomicBool) {
        self.hold = matches!(event, Event::TextDelta { .. });
        if !self.hold {
            self.flush();
        }
        self.render(event, waiting);
    }

    /// Prints what `event` shows of the session.
    fn render(&mut self, event: &Event, waiting: &AtomicBool) {
        match event {
            Event::RequestBegin { .. } => {
                self.streamed = false;
                waiting.store(true, Ordering::Relaxed);
            }
            Event::TextDelta { text } => {
                waiting.store(false, Ordering::Relaxed);
                self.streamed = true;
                self.print(text);
            }
            Event::ToolCallDelta { .. } => waiting.store(false, Ordering::Relaxed),
            Event::RequestEnd {
                message,
                finish_reason,
                ..
            } => {
                waiting.store(false, Ordering::Relaxed);
                if !self.streamed {
                    self.print(&message.text);
                }
                self.newline();
                if *finish_reason == corral_protocol::FinishReason::ContentFilter {
                    eprintln!("[the model refused, or the provider filtered its answer]");
                }
            }
            Event::ToolCallBegin { call } => {
                self.newline();
                self.print(&format!("● {}({})\n", call.name, short(&call.arguments)));
            }
            Event::ToolCallEnd {
                outcome,
                duration_ms,
                ..
            } => {
                self.print(&result_line(outcome, *duration_ms));
            }
            Event::PlanUpdated { steps, .. } => {
                self.newline();
                self.print(&plan_lines(steps));
            }
            Event::Subagent { event, .. } => match event.as_ref() {
                Event::ToolCallBegin { call } => {
                    self.print(&format!("  ↳ {}({})\n", call.name, short(&call.arguments)));
                }
                Event::Permission {
                    tool,
                    decision,
                    reason,
                    ..
                } if !decision.runs() => {
                    self.print(&format!("  ↳ {tool}: denied: {reason}\n"));
                }
                _ => {}
            },
            Event::ProviderFailed { error } => {
                waiting.store(false, Ordering::Relaxed);
                self.newline();
                eprintln!(
                    "error: {}",
                    corral_protocol::terminal::inert(&error.to_string())
                );
            }
            Event::Error { message } => {
                self.newline();
                eprintln!("error: {}", corral_protocol::terminal::inert(message));
            }
            Event::Compacted {
                replaced,
                tokens_before,
                tokens_after,
                ..
            } => {
                self.newline();
                self.print(&format!(
                    "[history compacted: {replaced} messages summarised, about {tokens_before} → {tokens_after} tokens]\n"
                ));
            }
            Event::CompactionFailed { message } => {
                self.newline();
                eprintln!("warning: {}", corral_protocol::terminal::inert(message));
            }
            Event::WindowAssumed { model, window } => {
                self.newline();
                eprintln!(
                    "note: {}",
                    corral_protocol::terminal::inert(&corral_protocol::window_assumed(
                        model, *window
                    ))
                );
            }
            Event::Stop { reason, message } => {
                waiting.store(false, Ordering::Relaxed);
                self.newline();
                if *reason != StopReason::FinalAnswer {
                    let why = message
                        .as_ref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default();
                    eprintln!(
                        "[stopped: {}{}]",
                        reason.as_str(),
                        corral_protocol::terminal::inert(&why)
                    );
                }
            }
            Event::Hook {
                event,
                plugin,
                decision,
                detail,
                ..
            } if *decision != corral_protocol::HookDecision::Continue => {
                self.newline();
                let line = corral_protocol::summary(*event, plugin, *decision, detail);
                self.print(&format!("  ⚑ {line}\n"));
            }
            _ => {}
        }
    }
}

/// The line under a finished call: its first line when it failed, else its
/// size and time; with the labels the exfiltration guard counts.
fn result_line(outcome: &corral_protocol::ToolOutcome, duration_ms: u64) -> String {
    let first = outcome.content.lines().next().unwrap_or("").trim();
    let lines = outcome.content.lines().count();
    let first: String = first.chars().take(100).collect();
    // What the exfiltration guard counts, when the result has it.
    let held: Vec<String> = outcome
        .labels
        .iter()
        .filter(|l| l.kind != corral_protocol::LabelKind::Workspace)
        .map(|l| {
            let kind = if l.kind == corral_protocol::LabelKind::Sensitive {
                "sensitive"
            } else {
                "untrusted"
            };
            format!("{kind}: {}", l.source)
        })
        .collect();
    let held = if held.is_empty() {
        String::new()
    } else {
        format!(" [{}]", held.join(", "))
    };
    if outcome.is_error {
        format!("  ⎿ error: {first}{held}\n")
    } else {
        format!("  ⎿ {lines} lines ({duration_ms} ms){held}\n")
    }
}

/// The plan as the model last set it, a step a line.
fn plan_lines(steps: &[corral_protocol::PlanStep]) -> String {
    let mut text = String::from("plan:\n");
    for step in steps {
        let mark = corral_tui::plan_mark(step.status);
        text.push_str(&format!("  {mark} {}\n", step.step));
    }
    text
}
