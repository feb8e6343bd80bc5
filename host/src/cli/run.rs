//! `corral run` and `corral resume`: open a session through the library's
//! handle, submit the prompt, render its events (as text, or as JSON lines),
//! and answer approvals from the terminal or from JSON lines on stdin.

use super::fail;
use super::render::{FLUSH_AT, FRAME, Renderer, ask_terminal, write_held};
use corral_core::manifest::{Manifest, Overrides};
use corral_core::session::{self, Approvals, Resume, SessionConfig};
use corral_protocol::{ApprovalAnswer, Event, Mode, Op, StopReason};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead as _, IsTerminal as _, Read as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit codes of `run` and `resume`.
const EXIT_PROVIDER: u8 = 3;
const EXIT_INCOMPLETE: u8 = 4;
pub(crate) const EXIT_INTERRUPTED: u8 = 130;
const EXIT_DENIED: u8 = 5;

/// Where approval answers come from besides the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApprovalSource {
    /// JSON lines on stdin, one op each (needs --json).
    Stdin,
}

/// Flags shared by `run` and `resume`.
pub struct Flags {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub max_iterations: Option<u32>,
    pub json: bool,
    pub mode: Option<Mode>,
    pub yes: bool,
    pub approvals: Option<ApprovalSource>,
    /// `--profile` and `-c`.
    pub overrides: Overrides,
    /// `--output-schema FILE`.
    pub output_schema: Option<PathBuf>,
    /// `--max-cost-usd X`.
    pub max_cost_usd: Option<f64>,
}

/// How approvals are answered in this process.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answering {
    /// By the library (`--yes`), or refused (non-interactive).
    Library,
    /// A prompt on the terminal.
    Terminal,
    /// JSON ops on stdin.
    Stdin,
}

fn config(
    workspace: &Path,
    flags: &Flags,
    manifest: Option<Manifest>,
) -> Result<(SessionConfig, Answering), ExitCode> {
    let answering = if flags.yes {
        Answering::Library
    } else if flags.approvals == Some(ApprovalSource::Stdin) {
        Answering::Stdin
    } else if std::io::stdin().is_terminal() && !flags.json {
        Answering::Terminal
    } else {
        Answering::Library
    };
    let approvals = match (flags.yes, answering) {
        (true, _) => Approvals::Approve,
        (false, Answering::Library) => Approvals::Refuse,
        (false, _) => Approvals::FrontEnd,
    };
    // Loaded here rather than by the session so that the run knows the
    // prices its result reports, and so that `--profile` and `-c` apply.
    let manifest = match manifest {
        Some(m) => m,
        None => corral_core::manifest::load_with(workspace, &flags.overrides)
            .map_err(|e| fail(&e.to_string()))?,
    };
    let output_schema = match &flags.output_schema {
        Some(path) => Some(answer_schema(path).map_err(|e| fail(&e))?),
        None => None,
    };
    if let Some(usd) = flags.max_cost_usd
        && !(usd.is_finite() && usd > 0.0)
    {
        return Err(fail(&format!(
            "--max-cost-usd {usd}: give a positive amount in US dollars, e.g. --max-cost-usd 0.50"
        )));
    }
    let config = SessionConfig {
        workspace: workspace.to_path_buf(),
        provider: flags.provider.clone(),
        model: flags.model.clone(),
        max_iterations: flags.max_iterations,
        output_schema,
        max_cost_usd: flags.max_cost_usd,
        mode: flags.mode,
        approvals,
        manifest: Some(manifest),
        ..SessionConfig::default()
    };
    Ok((config, answering))
}

/// The schema of `--output-schema PATH`, or what is wrong with the file.
fn answer_schema(path: &Path) -> Result<corral_core::AnswerSchema, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "--output-schema {shown}: cannot read it: {}",
            corral_core::words::io(&e)
        )
    })?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("--output-schema {shown}: not JSON: {e}"))?;
    corral_core::AnswerSchema::new(value).map_err(|e| format!("--output-schema {shown}: {e}"))
}

/// Why `corral run -` has no prompt; its text is the message for the user.
#[derive(Debug, thiserror::Error)]
pub enum StdinPromptError {
    /// `--approvals stdin` needs stdin for the answers.
    #[error(
        "`corral run -` reads the prompt from stdin, which --approvals stdin needs \
         for the answers; pass the prompt as an argument instead"
    )]
    ApprovalsOnStdin,
    /// stdin cannot be read.
    #[error("cannot read the prompt from stdin: {0}")]
    Read(String),
    /// stdin holds only white space.
    #[error(
        "`corral run -` read no prompt from stdin; pipe one in, e.g. \
         `echo \"What does this project do?\" | corral run -`"
    )]
    Empty,
}

/// The prompt of `corral run -`: all of stdin.
pub fn prompt_from_stdin(approvals_on_stdin: bool) -> Result<String, StdinPromptError> {
    if approvals_on_stdin {
        return Err(StdinPromptError::ApprovalsOnStdin);
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| StdinPromptError::Read(e.to_string()))?;
    if text.trim().is_empty() {
        return Err(StdinPromptError::Empty);
    }
    Ok(text)
}

pub async fn run(
    workspace: &Path,
    prompt: String,
    record: Option<PathBuf>,
    flags: Flags,
) -> ExitCode {
    let (mut config, answering) = match config(workspace, &flags, None) {
        Ok(c) => c,
        Err(code) => return code,
    };
    config.record = record.is_some();
    drive(
        config,
        Op::UserTurn { text: prompt },
        record,
        flags.json,
        answering,
    )
    .await
}

/// `run --worktree NAME`: the session works in a git worktree of the
/// workspace; afterwards its diff is put to the user (`--yes` applies it, a
/// non-interactive run keeps it as a patch file and says where), and the
/// worktree is removed.
pub async fn run_in_worktree(
    workspace: &Path,
    name: &str,
    prompt: String,
    record: Option<PathBuf>,
    flags: Flags,
) -> ExitCode {
    let sessions = match session::sessions_dir(workspace) {
        Ok(d) => d,
        Err(e) => return fail(&e.to_string()),
    };
    let mut manifest = match corral_core::manifest::load_with(workspace, &flags.overrides) {
        Ok(m) => m,
        Err(e) => return fail(&e.to_string()),
    };
    let tag = session::new_id();
    let ws = manifest.workspace.clone();
    let wt = {
        let (ws, tag, name) = (ws.clone(), tag.clone(), name.to_owned());
        match tokio::task::spawn_blocking(move || corral_core::worktree::create(&ws, &tag, &name))
            .await
        {
            Ok(Ok(wt)) => wt,
            Ok(Err(e)) => return fail(&e.to_string()),
            Err(e) => return fail(&e.to_string()),
        }
    };
    if !flags.json {
        eprintln!("working in the worktree {}", wt.path().display());
    }
    manifest = corral_core::worktree::rebase(&manifest, wt.path());
    let (mut config, answering) = match config(wt.path(), &flags, Some(manifest)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    config.record = record.is_some();
    config.sessions_dir = Some(sessions.clone());
    config.cwd = Some(wt.path().to_path_buf());
    let code = drive(
        config,
        Op::UserTurn { text: prompt },
        record,
        flags.json,
        answering,
    )
    .await;
    let (wt, diff) = match tokio::task::spawn_blocking(move || {
        let d = wt.diff();
        (wt, d)
    })
    .await
    {
        Ok(r) => r,
        Err(e) => return fail(&e.to_string()),
    };
    let note = match diff {
        Err(e) => Err(format!("the worktree's changes could not be read: {e}")),
        Ok(diff) if diff.is_empty() => Ok("the worktree has no changes".to_owned()),
        Ok(diff) => {
            let answer = if flags.yes {
                ApprovalAnswer::Approve
            } else if answering == Answering::Terminal {
                let request = corral_protocol::ApprovalRequest::new(
                    corral_protocol::ToolCall {
                        id: "worktree".into(),
                        name: "worktree".into(),
                        arguments: serde_json::json!({ "name": wt.name() }).to_string(),
                        model_id: None,
                    },
                    "apply the run's changes to the workspace".into(),
                    Some(diff.clone()),
                    "this change".into(),
                    None,
                );
                ask_terminal(&request).await
            } else {
                ApprovalAnswer::Deny {
                    reason: Some("the run is not interactive".into()),
                }
            };
            match answer {
                ApprovalAnswer::Deny { reason } => {
                    let path = sessions.join(format!("{tag}-{}.patch", wt.name()));
                    let why = reason.unwrap_or_else(|| "declined".into());
                    match std::fs::write(&path, &diff) {
                        Ok(()) => Ok(format!(
                            "the changes were not applied ({why}); the diff is kept in {} (apply it with git apply)",
                            path.display()
                        )),
                        Err(e) => Err(format!(
                            "the diff could not be saved in {}: {e}",
                            path.display()
                        )),
                    }
                }
                _ => match corral_core::worktree::apply(&ws, &diff) {
                    Ok(()) => Ok("the changes were applied to the workspace".to_owned()),
                    Err(e) => Err(format!("the changes did not apply to the workspace: {e}")),
                },
            }
        }
    };
    let removed = tokio::task::spawn_blocking(move || wt.remove()).await;
    if let Ok(Err(e)) = removed {
        eprintln!(
            "warning: the worktree could not be removed: {}",
            corral_protocol::terminal::inert(&e.to_string())
        );
    }
    match note {
        Ok(note) => {
            eprintln!("{}", corral_protocol::terminal::inert(&note));
            code
        }
        Err(e) => fail(&e),
    }
}

pub async fn resume(
    workspace: &Path,
    id: Option<String>,
    last: bool,
    prompt: Option<String>,
    flags: Flags,
) -> ExitCode {
    let (mut config, answering) = match config(workspace, &flags, None) {
        Ok(c) => c,
        Err(code) => return code,
    };
    config.resume = Some(match id {
        Some(id) if !last => Resume::Id(id),
        _ => Resume::Last,
    });
    let first = match prompt.map(|p| super::commands::expand_prompt(workspace, p)) {
        Some(Ok(text)) => Op::UserTurn { text },
        Some(Err(e)) => return fail(&e),
        None => Op::Continue,
    };
    drive(config, first, None, flags.json, answering).await
}

/// SIGINT as a stream, listening from the moment it returns.
pub(super) fn interrupts() -> std::io::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
}

async fn drive(
    config: SessionConfig,
    first: Op,
    record: Option<PathBuf>,
    json: bool,
    answering: Answering,
) -> ExitCode {
    let started = std::time::Instant::now();
    let mut tally = super::tally::Tally::new(&config).keeping_answer(json);
    let mut session = match session::open(config).await {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    if let Some(n) = session.resumed_messages()
        && !json
    {
        eprintln!("resuming session {} ({n} messages)", session.id());
    }
    // SIGINT is listened for before the first op is submitted, so an
    // interrupt is never left to the default action (see `interrupts`).
    let mut interrupt = match interrupts() {
        Ok(s) => s,
        Err(e) => return fail(&format!("cannot listen for Ctrl-C: {e}")),
    };
    let ops = session.sender();
    tokio::spawn(async move {
        while interrupt.recv().await.is_some() {
            if ops.send(Op::Interrupt).is_err() {
                break;
            }
        }
    });
    session.submit(first);
    let (stdin_tx, mut stdin_rx) = tokio::sync::mpsc::unbounded_channel::<Option<Op>>();
    if answering == Answering::Stdin {
        read_ops(stdin_tx);
    }
    let mut answers = StdinAnswers::default();

    let mut out = Output {
        json,
        view: Renderer::new(),
        json_lines: String::new(),
    };
    // The progress line's frames: drawn by the renderer, between events, so
    // that nothing else writes the terminal's lines.
    let mut frames = tokio::time::interval(FRAME);
    frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_stop = None;
    loop {
        // Output is written when no event is waiting, so a burst of deltas
        // is one write, not one per delta.
        let queued = session.try_next_event();
        if queued.is_none() {
            out.flush();
        }
        let event = match queued {
            Some(event) => Some(event),
            None => tokio::select! {
                e = session.next_event() => e,
                Some(line) = stdin_rx.recv() => {
                    for op in answers.take(line) {
                        session.submit(op);
                    }
                    continue;
                }
                _ = frames.tick(), if out.waiting() => {
                    out.view.tick();
                    continue;
                }
            },
        };
        let Some(event) = event else { break };
        tally.see(&event);
        if matches!(event, Event::ShutdownComplete) {
            break;
        }
        // Shown before it is acted on: an approval's card is on the screen
        // before its prompt.
        out.show(&event);
        match &event {
            Event::Stop { reason, .. } => {
                last_stop = Some(*reason);
                session.submit(Op::Shutdown);
            }
            Event::Permission { call_id, .. } => answers.settled(call_id),
            Event::ApprovalRequested(request) => {
                answer_approval(&session, request, answering, &mut answers);
            }
            _ => {}
        }
    }
    out.view.finish();
    out.flush();
    answers.warn_unused();
    let session_id = session.id().to_owned();
    let finished = session.finish().await;
    let finished = match finished {
        Ok(f) => f,
        Err(e) => return fail(&format!("{e:#}")),
    };
    if let Some(file) = record
        && let Err(e) = corral_core::agent::write_cassette(&file, &finished.recorded)
    {
        eprintln!("error: cannot write the cassette {}: {e}", file.display());
    }
    let stop = last_stop.or(finished.last_stop);
    if json && let Some(reason) = stop {
        let result = tally.result(session_id, reason, started.elapsed());
        super::out_json(&serde_json::to_string(&Event::Result(result)).unwrap_or_default());
    } else if !json {
        // On stderr, so the answer on stdout stays the answer alone.
        eprintln!("resume with: corral resume {session_id}");
    }
    exit_code(stop)
}

/// Puts an approval request to whoever answers them: the terminal (the
/// session waits for the answer; Ctrl-C still reaches it while the prompt
/// reads the terminal), the answers read from stdin, or nobody.
fn answer_approval(
    session: &session::Session,
    request: &corral_protocol::ApprovalRequest,
    answering: Answering,
    answers: &mut StdinAnswers,
) {
    match answering {
        Answering::Terminal => {
            let ops = session.sender();
            let request = request.clone();
            tokio::spawn(async move {
                let answer = ask_terminal(&request).await;
                let _ = ops.send(Op::Approval {
                    call_id: request.call.id.clone(),
                    answer,
                });
            });
        }
        Answering::Stdin => {
            if let Some(op) = answers.requested(&request.call.id) {
                session.submit(op);
            }
        }
        Answering::Library => {}
    }
}

/// What `drive` shows: the rendered transcript, or the `--json` lines,
/// written in batches (see [`Output::show`]).
struct Output {
    json: bool,
    view: Renderer,
    /// `--json` lines not yet written, at most [`FLUSH_AT`] bytes.
    json_lines: String,
}

impl Output {
    /// Shows `event`. A delta stays held until no event is waiting or
    /// [`FLUSH_AT`] bytes are held; every other event is written at once,
    /// after what was held, so a card or a prompt is never held back (the
    /// renderer does the same for the transcript).
    fn show(&mut self, event: &Event) {
        if !self.json {
            self.view.show(event);
            return;
        }
        self.json_lines
            .push_str(&corral_protocol::terminal::inert_json(
                &serde_json::to_string(event).unwrap_or_default(),
            ));
        self.json_lines.push('\n');
        let delta = matches!(event, Event::TextDelta { .. } | Event::ToolCallDelta { .. });
        if !delta || self.json_lines.len() >= FLUSH_AT {
            write_held(&mut self.json_lines);
        }
    }

    /// Whether the progress line is to be drawn: never with `--json`.
    fn waiting(&self) -> bool {
        !self.json && self.view.waiting()
    }

    /// Writes everything shown so far.
    fn flush(&mut self) {
        self.view.flush();
        write_held(&mut self.json_lines);
    }
}

fn exit_code(stop: Option<StopReason>) -> ExitCode {
    match stop {
        Some(StopReason::FinalAnswer) => ExitCode::SUCCESS,
        Some(StopReason::ProviderError | StopReason::ContextExhausted) => {
            ExitCode::from(EXIT_PROVIDER)
        }
        Some(StopReason::Interrupted) => ExitCode::from(EXIT_INTERRUPTED),
        Some(StopReason::MaxIterations | StopReason::FatalToolError) => {
            ExitCode::from(EXIT_INCOMPLETE)
        }
        Some(StopReason::PermissionDenied) => ExitCode::from(EXIT_DENIED),
        Some(StopReason::BudgetExhausted | StopReason::InvalidOutput) => {
            ExitCode::from(EXIT_INCOMPLETE)
        }
        None => fail("the session ended before its turn stopped"),
    }
}

/// Approval answers read from stdin, matched with the requests they answer.
/// A script may answer a call before its `approval_requested` arrives (it
/// knows corral's ids are `c-1`, `c-2`, …): such an answer waits for it.
#[derive(Default)]
struct StdinAnswers {
    /// Requested calls not answered yet.
    pending: HashSet<String>,
    /// Answers that came before their request.
    early: HashMap<String, Op>,
    /// Calls answered or settled: a later line about them goes to the
    /// session as it is, which says it has no such approval.
    done: HashSet<String>,
    closed: bool,
}

impl StdinAnswers {
    /// What to submit for a line of stdin (`None`: it closed).
    fn take(&mut self, line: Option<Op>) -> Vec<Op> {
        match line {
            None => {
                self.closed = true;
                // Only calls still waiting are refused: an answer already
                // given stands.
                let mut ids: Vec<String> = self.pending.drain().collect();
                ids.sort();
                ids.into_iter()
                    .map(|id| {
                        self.done.insert(id.clone());
                        stdin_closed_answer(id)
                    })
                    .collect()
            }
            Some(Op::Approval { call_id, answer }) => {
                let op = Op::Approval {
                    call_id: call_id.clone(),
                    answer,
                };
                if self.pending.remove(&call_id) || self.done.contains(&call_id) {
                    self.done.insert(call_id);
                    vec![op]
                } else {
                    self.early.insert(call_id, op);
                    Vec::new()
                }
            }
            Some(op) => vec![op],
        }
    }

    /// A call's request arrived: its early answer, a refusal if stdin is
    /// closed, or nothing until an answer comes.
    fn requested(&mut self, call_id: &str) -> Option<Op> {
        if let Some(op) = self.early.remove(call_id) {
            self.done.insert(call_id.to_owned());
            return Some(op);
        }
        if self.closed {
            self.done.insert(call_id.to_owned());
            return Some(stdin_closed_answer(call_id.to_owned()));
        }
        self.pending.insert(call_id.to_owned());
        None
    }

    /// A call's permission was decided.
    fn settled(&mut self, call_id: &str) {
        self.pending.remove(call_id);
        self.done.insert(call_id.to_owned());
    }

    /// Says which answers on stdin matched no request.
    fn warn_unused(&self) {
        let mut ids: Vec<&String> = self.early.keys().collect();
        ids.sort();
        for id in ids {
            eprintln!(
                "warning: the answer on stdin for the call {} was not used: no approval was \
                 requested for it (ids come from approval_requested events: call.id)",
                quoted(id)
            );
        }
    }
}

fn stdin_closed_answer(call_id: String) -> Op {
    Op::Approval {
        call_id,
        answer: ApprovalAnswer::Deny {
            reason: Some("stdin closed before the approval was answered".into()),
        },
    }
}

/// How much of a rejected stdin line the error quotes.
const QUOTED_CHARS: usize = 200;

/// `text` (from stdin: anything) quoted for stderr: made inert and cut to
/// [`QUOTED_CHARS`] characters, saying how much was left out.
fn quoted(text: &str) -> String {
    let total = text.chars().count();
    let head: String = text.chars().take(QUOTED_CHARS).collect();
    let head = corral_protocol::terminal::visible(&head);
    if total > QUOTED_CHARS {
        format!("`{head}` … ({} more characters)", total - QUOTED_CHARS)
    } else {
        format!("`{head}`")
    }
}

/// Reads ops from stdin, one JSON object per line, on a thread of its own
/// (stdin has no async reader that can be abandoned). Bad lines are
/// reported on stderr and skipped; end of input is sent as `None`.
fn read_ops(ops: tokio::sync::mpsc::UnboundedSender<Option<Op>>) {
    std::thread::spawn(move || {
        for (n, line) in std::io::stdin().lock().lines().enumerate() {
            let Ok(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Op>(&line) {
                Ok(op) => {
                    if ops.send(Some(op)).is_err() {
                        return;
                    }
                }
                Err(e) => eprintln!(
                    "error: stdin line {} is not an op ({}): {}; expected e.g. \
                     {{\"op\":\"approval\",\"call_id\":\"c-1\",\"decision\":\"approve\"}} or \
                     {{\"op\":\"approval\",\"call_id\":\"c-1\",\"decision\":\"deny\",\"reason\":\"...\"}}",
                    n + 1,
                    quoted(&e.to_string()),
                    quoted(&line),
                ),
            }
        }
        let _ = ops.send(None);
    });
}
