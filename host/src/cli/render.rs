//! Rendering the event stream as text for people: streamed answers, one
//! line per tool call, a progress line while the model thinks, and the
//! approval prompt.
//!
//! The renderer is the one writer of the terminal's lines while a session
//! runs: the progress line is drawn by it, on a line of its own, and erased
//! by it before anything else is written. (A spinner that drew on its own
//! clock erased the first words of every streamed answer: they landed on
//! its line, and its next clear wiped them.)

use corral_protocol::{ApprovalAnswer, ApprovalRequest, Event, StopReason};
use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the progress line changes, and how long the model must be
/// silent before it is drawn (a quick answer draws none).
pub(super) const FRAME: Duration = Duration::from_millis(100);

/// The "waiting for the model" line on stderr, drawn only where it cannot
/// land on text: at the start of an empty line, with nothing held.
#[derive(Default)]
struct Progress {
    /// Whether it is drawn at all: stderr is a terminal (`--json` output
    /// does not go through the renderer).
    enabled: bool,
    /// Whether stdout is a terminal too, whose line the answer's text may
    /// be part way through; if not, stderr's lines always end whole.
    shares_lines: bool,
    /// Since when the model has been silent, while it is.
    since: Option<Instant>,
    frame: usize,
}

/// Whether the progress line is on the screen now. The log's writer reads
/// it too: a record written after a frame would share its line, so it
/// erases the frame first.
static SHOWN: AtomicBool = AtomicBool::new(false);

/// Erases the progress line if it is shown, on `err` (stderr, locked by
/// whoever writes next, so that no frame comes in between).
pub(super) fn erase_progress(err: &mut impl std::io::Write) {
    if SHOWN.swap(false, Ordering::Relaxed) {
        let _ = err.write_all(b"\r\x1b[K");
    }
}

impl Progress {
    const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

    /// Erases the line if it is shown; before anything else is written.
    fn erase(&mut self) {
        if SHOWN.load(Ordering::Relaxed) {
            let mut err = std::io::stderr().lock();
            erase_progress(&mut err);
            let _ = err.flush();
        }
    }

    /// Draws the next frame, if the model has been silent a frame's time
    /// and the cursor is at the start of an empty line (`at_line_start`).
    fn draw(&mut self, at_line_start: bool) {
        let due = self.since.is_some_and(|t| t.elapsed() >= FRAME);
        if !self.enabled || !due || (self.shares_lines && !at_line_start) {
            return;
        }
        let frame = Self::FRAMES[self.frame % Self::FRAMES.len()];
        self.frame += 1;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{frame} waiting for the model");
        let _ = err.flush();
        SHOWN.store(true, Ordering::Relaxed);
    }
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
    /// Whether anything was printed yet: until then the cursor is at the
    /// start of the line below the command, where the progress line may be
    /// drawn (though `at_line_start` starts false, which puts a blank line
    /// above a first tool call's line).
    printed: bool,
    progress: Progress,
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
    /// A renderer that draws the progress line when stderr is a terminal.
    pub(super) fn new() -> Self {
        Self {
            progress: Progress {
                enabled: std::io::stderr().is_terminal(),
                shares_lines: std::io::stdout().is_terminal(),
                ..Progress::default()
            },
            ..Self::default()
        }
    }

    fn print(&mut self, text: &str) {
        let text = corral_protocol::terminal::inert(text);
        self.pending.push_str(&text);
        if !text.is_empty() {
            self.at_line_start = text.ends_with('\n');
            self.printed = true;
        }
        if !self.hold || self.pending.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Writes what was held; the event loop calls it whenever no event is
    /// waiting.
    pub(super) fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.progress.erase();
        }
        write_held(&mut self.pending);
    }

    /// Whether the progress line wants its next frame drawn (see
    /// [`Renderer::tick`]).
    pub(super) fn waiting(&self) -> bool {
        self.progress.enabled && self.progress.since.is_some()
    }

    /// Draws the progress line's next frame, where it lands on no text; the
    /// event loop calls it every [`FRAME`] while [`Renderer::waiting`].
    pub(super) fn tick(&mut self) {
        self.flush();
        self.progress.draw(self.at_line_start || !self.printed);
    }

    /// Erases the progress line, as the session ends.
    pub(super) fn finish(&mut self) {
        self.flush();
        self.progress.erase();
    }

    fn newline(&mut self) {
        if !self.at_line_start {
            self.print("\n");
        }
    }

    /// Ends the line stdout is on before a line goes to stderr: none when
    /// nothing was printed yet, so a note before the answer leaves no
    /// blank line in the answer's text.
    fn end_stdout_line(&mut self) {
        if self.printed {
            self.newline();
        }
    }

    /// Sets whether the model is being waited for.
    fn wait(&mut self, waiting: bool) {
        self.progress.since = match (waiting, self.progress.since) {
            (true, since) => since.or_else(|| Some(Instant::now())),
            (false, _) => None,
        };
    }

    /// Shows `event`: a text delta may be held (see `hold`), anything else
    /// is written at once, after what was held. The progress line goes
    /// first, whatever the event: whatever it writes, on stdout or stderr,
    /// starts where the line was.
    pub(super) fn show(&mut self, event: &Event) {
        self.progress.erase();
        self.hold = matches!(event, Event::TextDelta { .. });
        if !self.hold {
            self.flush();
        }
        self.render(event);
    }

    /// Prints what `event` shows of the session.
    fn render(&mut self, event: &Event) {
        match event {
            Event::RequestBegin { .. } => {
                self.streamed = false;
                self.wait(true);
            }
            Event::TextDelta { text } => {
                self.wait(false);
                self.streamed = true;
                self.print(text);
            }
            Event::ToolCallDelta { .. } => self.wait(false),
            Event::RequestEnd {
                message,
                finish_reason,
                ..
            } => {
                self.wait(false);
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
                self.wait(false);
                self.end_stdout_line();
                eprintln!(
                    "error: {}",
                    corral_protocol::terminal::inert(&error.to_string())
                );
            }
            Event::Error { message } => {
                self.end_stdout_line();
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
                self.end_stdout_line();
                eprintln!("warning: {}", corral_protocol::terminal::inert(message));
            }
            Event::WindowAssumed { model, window } => {
                self.end_stdout_line();
                eprintln!(
                    "note: {}",
                    corral_protocol::terminal::inert(&corral_protocol::window_assumed(
                        model, *window
                    ))
                );
            }
            Event::Stop { reason, message } => {
                self.wait(false);
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

/// The line under a finished call: its first line when it failed (whole:
/// the terminal wraps it, and the fix an error offers is at its end), else
/// its size and time; with the labels the exfiltration guard counts.
fn result_line(outcome: &corral_protocol::ToolOutcome, duration_ms: u64) -> String {
    let first = outcome.content.lines().next().unwrap_or("").trim();
    let lines = outcome.content.lines().count();
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
