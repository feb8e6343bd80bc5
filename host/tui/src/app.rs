//! The UI's state: the transcript, the prompt editor, the approval modal
//! and pickers, and the status figures; events in, actions out. Each part
//! with a state of its own keeps it in its own type ([`Transcript`],
//! `Modal`, `Picker`, `Rewind`); a key to an overlay comes back as that
//! overlay's action, which the [`App`] carries out.

use super::cards::ToolState;
use super::custom::{Custom, CustomCommand};
use super::input::Input;
use super::modal::{Modal, ModalAction, Picked, Picker, PickerAction};
use super::rewind::{DOUBLE_ESC_MS, Rewind, RewindAction};
use super::text::clean;
use super::transcript::{Body, Transcript};
use crate::protocol::{ApprovalAnswer, Event, Mode, Op, StopReason, window_assumed};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::collections::VecDeque;

/// The slash commands, with what each does.
pub const SLASH_COMMANDS: &[(&str, &str)] = &[
    ("/help", "keys and commands"),
    ("/new", "start a new session"),
    ("/sessions", "pick a session of this workspace to open"),
    ("/model", "NAME: use another model from the next request"),
    ("/provider", "NAME: use another provider plugin"),
    ("/mode", "MODE: read-only, ask, auto-edit or full-auto"),
    ("/tools", "list the tools"),
    ("/plugins", "list the plugins"),
    ("/diff", "show the workspace's git diff"),
    ("/quit", "end the session and leave"),
    ("/compact", "summarise the older turns to free context"),
    (
        "/init",
        "draft an AGENTS.md from the repository (or improve it)",
    ),
    ("/undo", "put back the files the last turn changed"),
    ("/rewind", "go back to an earlier message (Esc Esc)"),
];

/// What the front-end must do for the UI.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Submit this op to the session.
    Submit(Op),
    /// End the session and leave.
    Quit,
    /// Start a new session in the workspace.
    NewSession,
    /// List the sessions and call [`App::open_picker`].
    ListSessions,
    /// Open this session.
    OpenSession(String),
    /// Show the workspace's git diff ([`App::notice`]).
    Diff,
    /// Show the tools.
    Tools,
    /// Show the plugins.
    Plugins,
    /// Expand this line (`/init` or a custom command) to its prompt and
    /// give it to [`App::submit_prompt`].
    Command(String),
    /// Work out what `/undo` would restore and call [`App::confirm`] with
    /// its diff, or say why it cannot.
    PreviewUndo {
        /// Overwrite files edited since.
        force: bool,
    },
    /// Work out what a rewind to before the prompt of `turn` would restore
    /// and call [`App::confirm`] with an [`Op::Rewind`] (`code` set), or say
    /// why it cannot.
    PreviewRewind {
        /// The turn whose prompt is rewound to.
        turn: u32,
        /// Whether the conversation goes back too.
        conversation: bool,
        /// Overwrite files edited since.
        force: bool,
    },
}

/// What the user is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Working {
    Idle,
    Thinking,
    Answering,
    Tools,
    Asking,
}

/// The whole UI state. See the [module docs](crate).
#[derive(Debug)]
pub struct App {
    pub(crate) transcript: Transcript,
    /// Lines scrolled up from the bottom of the transcript.
    pub(crate) scroll: usize,
    /// While scrolled up: the topmost entry laid out in the last frame, the
    /// lines from it to the end, and the width they were laid out at.
    pub(crate) anchor: Option<(usize, usize, u16)>,
    pub(crate) input: Input,
    pub(crate) modal: Option<Modal>,
    pub(crate) picker: Option<Picker>,
    /// Completion choices for the word at the cursor, and the selected one.
    pub(crate) completion: Vec<(String, String)>,
    pub(crate) completion_sel: usize,
    pub(crate) queued: VecDeque<String>,
    pub(crate) expanded: bool,
    /// Whether colours are shown (NO_COLOR turns them off).
    pub color: bool,
    pub(crate) now_ms: u64,
    pub(crate) working: Working,
    pub(crate) turn_running: bool,
    pub(crate) session_id: String,
    pub(crate) provider: String,
    pub(crate) model: String,
    pub(crate) mode: Mode,
    pub(crate) tokens_in: u64,
    pub(crate) tokens_out: u64,
    pub(crate) last_in: u32,
    pub(crate) last_out: u32,
    /// The model's context window in tokens, when known.
    pub context_window: Option<u64>,
    /// The session's cost so far in US dollars, when the model's price is known.
    pub(crate) cost: Option<f64>,
    /// Custom slash commands offered, and those refused (see `custom.rs`).
    pub(crate) custom: Custom,
    /// Ctrl-C once on an idle, empty prompt arms quitting.
    pub(crate) quit_armed: bool,
    pub(crate) actions: Vec<Action>,
    /// The undo or rewind overlay ([`super::rewind`]).
    pub(crate) rewind: Option<Rewind>,
    /// The turn the last `turn_begin` started.
    turn_now: u32,
    /// When Esc was last pressed on an idle, empty prompt.
    pub(crate) esc_ms: Option<u64>,
    /// Workspace files offered by `@` completion.
    files: Vec<String>,
    pub(crate) replaying: bool,
}

impl App {
    /// An empty UI for a session on `provider` in permission mode `mode`.
    pub fn new(provider: &str, mode: Mode) -> Self {
        Self {
            transcript: Transcript::default(),
            scroll: 0,
            anchor: None,
            input: Input::default(),
            modal: None,
            picker: None,
            completion: Vec::new(),
            completion_sel: 0,
            queued: VecDeque::new(),
            expanded: false,
            color: true,
            now_ms: 0,
            working: Working::Idle,
            turn_running: false,
            session_id: String::new(),
            provider: provider.to_owned(),
            model: String::new(),
            mode,
            tokens_in: 0,
            tokens_out: 0,
            last_in: 0,
            last_out: 0,
            context_window: None,
            cost: None,
            custom: Custom::default(),
            quit_armed: false,
            actions: Vec::new(),
            rewind: None,
            turn_now: 0,
            esc_ms: None,
            files: Vec::new(),
            replaying: false,
        }
    }

    /// Tells the UI about the tools: `(name, plugin, read_only)`.
    pub fn set_tools(&mut self, tools: impl IntoIterator<Item = (String, String, bool)>) {
        self.transcript.set_tools(tools);
    }

    /// The prompts Up and Down walk through before any of this session's
    /// (the workspace's earlier ones, oldest first).
    pub fn set_history(&mut self, prompts: Vec<String>) {
        self.input.set_history(prompts);
    }

    /// The workspace files `@` completes to.
    pub fn set_files(&mut self, files: Vec<String>) {
        self.files = files;
    }

    /// Sets the app clock (milliseconds from any fixed start): spinners,
    /// elapsed times and the modal's input guard read it.
    pub fn set_clock(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
    }

    /// Whether the approval modal is open.
    pub fn modal_open(&self) -> bool {
        self.modal.is_some()
    }

    /// Whether something moves on screen with the clock.
    pub fn is_animating(&self) -> bool {
        self.working != Working::Idle
    }

    /// The actions asked for since the last call.
    pub fn drain_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    /// Adds a line of information (or an error) to the transcript.
    pub fn notice(&mut self, text: &str, error: bool) {
        self.transcript.push(Body::Notice {
            text: text.to_owned(),
            error,
        });
    }

    /// Adds a unified diff (of the workspace) to the transcript, in colour.
    pub fn diff(&mut self, diff: &str) {
        self.transcript.push(Body::Diff(diff.to_owned()));
    }

    /// Opens the session picker on `items`.
    pub fn open_picker(&mut self, items: Vec<Picked>) {
        self.picker = Picker::new(items);
        if self.picker.is_none() {
            self.notice("this workspace has no other sessions", false);
        }
    }

    /// Applies an event from a session log: like [`App::apply`], but no
    /// approval is put to the user.
    pub fn replay(&mut self, event: &Event) {
        self.replaying = true;
        self.apply(event);
        self.replaying = false;
        self.working = Working::Idle;
        self.turn_running = false;
    }

    /// Applies one session event.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::SessionStarted { .. }
            | Event::SessionResumed { .. }
            | Event::ModeChanged { .. }
            | Event::ModelChanged { .. }
            | Event::ProviderChanged { .. }
            | Event::Context { .. } => self.apply_session(event),
            Event::TurnBegin { .. }
            | Event::UserMessage { .. }
            | Event::RequestBegin { .. }
            | Event::TextDelta { .. }
            | Event::ToolCallDelta { .. }
            | Event::RequestEnd { .. } => self.apply_stream(event),
            Event::ApprovalRequested { .. }
            | Event::Permission { .. }
            | Event::ToolCallBegin { .. }
            | Event::ToolCallEnd { .. }
            | Event::SubagentStarted { .. }
            | Event::Subagent { .. } => self.apply_tools(event),
            Event::ProviderFailed { .. }
            | Event::Error { .. }
            | Event::PlanUpdated { .. }
            | Event::Compacted { .. }
            | Event::CompactionFailed { .. }
            | Event::WindowAssumed { .. }
            | Event::Hook { .. } => self.apply_notice(event),
            Event::Stop { reason, message } => self.apply_stop(*reason, message.as_deref()),
            Event::Undone { .. } | Event::Rewound { .. } | Event::AnswerInterrupted { .. } => {
                self.apply_rewind(event)
            }
            Event::ShutdownComplete => {}
            // Events a newer core adds are not shown until this UI knows them.
            _ => {}
        }
    }

    /// Session facts the status line shows: ids, provider, model, mode and the context.
    fn apply_session(&mut self, event: &Event) {
        match event {
            Event::SessionStarted {
                session_id,
                provider,
                model,
                ..
            } => {
                self.session_id = session_id.clone();
                self.provider = provider.clone();
                self.model = model.clone();
            }
            Event::SessionResumed { session_id, .. } => {
                self.session_id = session_id.clone();
                let text = format!("resumed session {session_id}");
                // The log read on resume and the live session both report it.
                if !self.transcript.ends_with_notice(&text) {
                    self.notice(&text, false);
                }
            }
            Event::ModeChanged { mode } => {
                self.mode = *mode;
                self.notice(&format!("mode: {mode}"), false);
            }
            Event::ModelChanged { model } => {
                self.model = model.clone();
                self.notice(&format!("model: {model}"), false);
            }
            Event::ProviderChanged { provider } => {
                self.provider = provider.clone();
                self.notice(&format!("provider: {provider}"), false);
            }
            Event::Context { tokens, window, .. } => {
                self.context_window = window.map(u64::from);
                self.last_in = *tokens;
            }
            _ => {}
        }
    }

    /// The turn and the model's answer as it streams.
    fn apply_stream(&mut self, event: &Event) {
        match event {
            Event::TurnBegin { turn } => {
                self.turn_now = *turn;
                self.turn_running = true;
                self.working = Working::Thinking;
            }
            Event::UserMessage { text } => {
                self.transcript.prompt(self.turn_now, text);
                self.scroll = 0;
            }
            Event::RequestBegin { .. } => {
                self.transcript.request_begin();
                self.working = Working::Thinking;
            }
            Event::TextDelta { text } => {
                self.working = Working::Answering;
                self.transcript.text_delta(text);
            }
            Event::ToolCallDelta { .. } => self.working = Working::Answering,
            Event::RequestEnd { message, usage, .. } => {
                self.transcript.answer(&message.text, &message.tool_calls);
                if !message.tool_calls.is_empty() {
                    self.working = Working::Tools;
                }
                if let Some(u) = usage {
                    self.last_in = u.input_tokens;
                    self.last_out = u.output_tokens;
                    self.tokens_in += u64::from(u.input_tokens);
                    self.tokens_out += u64::from(u.output_tokens);
                }
            }
            _ => {}
        }
    }

    /// Tool calls: their cards, approvals and subagents' lines.
    fn apply_tools(&mut self, event: &Event) {
        match event {
            Event::ApprovalRequested(request) => {
                if !self.transcript.has_card(&request.call.id) {
                    self.transcript
                        .add_card(request.call.clone(), ToolState::Asking);
                }
                if let Some(card) = self.transcript.card(&request.call.id) {
                    card.state = ToolState::Asking;
                    card.diff = request.preview.clone();
                }
                if !self.replaying {
                    self.working = Working::Asking;
                    self.modal = Some(Modal::new(request.clone(), self.now_ms));
                }
            }
            Event::Permission {
                call_id,
                decision,
                reason,
                ..
            } => {
                if self
                    .modal
                    .as_ref()
                    .is_some_and(|m| &m.request.call.id == call_id)
                {
                    self.modal = None;
                    self.working = Working::Tools;
                }
                if !decision.runs() {
                    if !self.transcript.has_card(call_id)
                        && let Some(call) = self.transcript.pending_calls.get(call_id).cloned()
                    {
                        self.transcript.add_card(call, ToolState::Queued);
                    }
                    let reason = reason.clone();
                    if let Some(card) = self.transcript.card(call_id) {
                        card.state = ToolState::Denied { reason };
                        // Nothing was changed: the preview of what would
                        // have been is no longer the news, the reason is.
                        card.diff = None;
                    }
                } else if let Some(card) = self.transcript.card(call_id) {
                    card.state = ToolState::Queued;
                }
            }
            Event::ToolCallBegin { call } => {
                self.working = Working::Tools;
                let since_ms = self.now_ms;
                if self.transcript.has_card(&call.id) {
                    if let Some(card) = self.transcript.card(&call.id) {
                        card.state = ToolState::Running { since_ms };
                    }
                } else {
                    self.transcript
                        .add_card(call.clone(), ToolState::Running { since_ms });
                }
            }
            Event::ToolCallEnd {
                call_id,
                outcome,
                duration_ms,
                ..
            } => {
                if let Some(card) = self.transcript.card(call_id) {
                    card.finish(outcome, *duration_ms);
                }
            }
            Event::SubagentStarted { .. } => {}
            Event::Subagent { call_id, event, .. } => {
                let line = match event.as_ref() {
                    Event::ToolCallBegin { call } => Some(format!(
                        "{} {}",
                        call.name,
                        super::cards::summary(&call.arguments)
                    )),
                    Event::Permission { decision, tool, .. } if !decision.runs() => {
                        Some(format!("{tool}: denied"))
                    }
                    Event::Stop { reason, .. } => Some(format!("stopped: {}", reason.as_str())),
                    _ => None,
                };
                if let Some(line) = line
                    && let Some(card) = self.transcript.card(call_id)
                {
                    card.nest(&line);
                }
            }
            _ => {}
        }
    }

    /// Events shown as a notice in the transcript.
    fn apply_notice(&mut self, event: &Event) {
        match event {
            Event::ProviderFailed { error } => self.notice(&error.to_string(), true),
            Event::Error { message } => self.notice(message, true),
            Event::PlanUpdated { steps, .. } => {
                let mut text = String::from("plan");
                for step in steps {
                    let mark = super::cards::plan_mark(step.status);
                    text.push_str(&format!("\n  {mark} {}", clean(&step.step)));
                }
                self.notice(&text, false);
            }
            Event::Compacted {
                replaced,
                tokens_before,
                tokens_after,
                ..
            } => self.notice(
                &format!(
                    "history compacted: {replaced} messages summarised (about {tokens_before} → {tokens_after} tokens)"
                ),
                false,
            ),
            Event::CompactionFailed { message } => self.notice(message, true),
            Event::WindowAssumed { model, window } => {
                self.notice(&window_assumed(model, *window), false);
            }
            Event::Hook {
                event,
                plugin,
                decision,
                detail,
                ..
            } if *decision != crate::protocol::HookDecision::Continue => {
                let failed = *decision == crate::protocol::HookDecision::Failed;
                self.notice(
                    &crate::protocol::summary(*event, plugin, *decision, detail),
                    failed,
                );
            }
            _ => {}
        }
    }

    /// The end of a turn, and the next queued prompt.
    fn apply_stop(&mut self, reason: StopReason, message: Option<&str>) {
        self.turn_running = false;
        self.working = Working::Idle;
        self.transcript.end_stream();
        self.modal = None;
        if reason != StopReason::FinalAnswer {
            let why = message.map(|m| format!(": {m}")).unwrap_or_default();
            self.notice(&format!("stopped: {}{why}", reason.as_str()), true);
        }
        if !self.replaying
            && let Some(next) = self.queued.pop_front()
        {
            self.turn_running = true;
            self.working = Working::Thinking;
            self.actions
                .push(Action::Submit(Op::UserTurn { text: next }));
        }
    }

    /// Scrolls the transcript by `lines` (positive = up, towards older).
    pub fn scroll_by(&mut self, lines: i64) {
        self.scroll = if lines >= 0 {
            self.scroll.saturating_add(lines as usize)
        } else {
            self.scroll.saturating_sub(lines.unsigned_abs() as usize)
        };
    }

    /// Handles a paste (bracketed paste from the terminal).
    pub fn paste(&mut self, text: &str) {
        if let Some(modal) = &mut self.modal {
            modal.paste(text);
            return;
        }
        self.input.paste(text);
        self.update_completion();
    }

    /// Handles one key.
    pub fn key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if let Some(modal) = &mut self.modal {
            let action = modal.key(key, self.now_ms);
            self.modal_action(action);
            return;
        }
        if let Some(rewind) = &mut self.rewind {
            let action = rewind.key(key, self.now_ms);
            self.rewind_action(action);
            return;
        }
        if let Some(picker) = &mut self.picker {
            match picker.key(key) {
                PickerAction::Stay => {}
                PickerAction::Close => self.picker = None,
                PickerAction::Open(id) => {
                    self.picker = None;
                    self.actions.push(Action::OpenSession(id));
                }
            }
            return;
        }
        if !(ctrl && key.code == KeyCode::Char('c')) {
            self.quit_armed = false;
        }
        let esc_before = self.esc_ms.take();
        match key.code {
            KeyCode::Char('c') if ctrl => {
                if self.turn_running {
                    self.actions.push(Action::Submit(Op::Interrupt));
                    self.queued.clear();
                } else if !self.input.is_empty() {
                    self.input.clear();
                } else if self.quit_armed {
                    self.actions.push(Action::Quit);
                } else {
                    self.quit_armed = true;
                }
            }
            KeyCode::Char('d') if ctrl => {
                if self.input.is_empty() {
                    self.actions.push(Action::Quit);
                } else {
                    self.input.delete();
                }
            }
            KeyCode::Esc => self.esc(key.modifiers.contains(KeyModifiers::ALT), esc_before),
            KeyCode::Char('o') if ctrl => {
                self.expanded = !self.expanded;
            }
            KeyCode::Char('j') if ctrl => self.input.insert('\n'),
            KeyCode::Enter
                if key
                    .modifiers
                    .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT) =>
            {
                self.input.insert('\n')
            }
            KeyCode::Enter => {
                if !self.completion.is_empty() && self.accept_completion() {
                    return;
                }
                self.send();
            }
            KeyCode::Tab if !self.completion.is_empty() => {
                self.accept_completion();
            }
            KeyCode::Char('w') if ctrl => self.input.delete_word(),
            KeyCode::Char('u') if ctrl => self.input.clear(),
            KeyCode::Char('a') if ctrl => self.input.home(),
            KeyCode::Char('e') if ctrl => self.input.end(),
            KeyCode::Char(c) if !ctrl => self.input.insert(c),
            KeyCode::Backspace => self.input.backspace(),
            KeyCode::Delete => self.input.delete(),
            KeyCode::Left => self.input.left(),
            KeyCode::Right => self.input.right(),
            KeyCode::Up if !self.completion.is_empty() => {
                self.completion_sel = self.completion_sel.saturating_sub(1);
                return;
            }
            KeyCode::Down if !self.completion.is_empty() => {
                self.completion_sel = (self.completion_sel + 1).min(self.completion.len() - 1);
                return;
            }
            KeyCode::Up if self.input.on_first_line() => self.input.history_up(),
            KeyCode::Down if self.input.on_last_line() => self.input.history_down(),
            KeyCode::Up => self.input_line_move(-1),
            KeyCode::Down => self.input_line_move(1),
            KeyCode::PageUp => self.scroll_by(10),
            KeyCode::PageDown => self.scroll_by(-10),
            KeyCode::Home if ctrl || self.input.is_empty() => self.scroll = usize::MAX,
            KeyCode::End if ctrl || self.input.is_empty() => self.scroll = 0,
            KeyCode::Home => self.input.home(),
            KeyCode::End => self.input.end(),
            _ => {}
        }
        self.update_completion();
    }

    fn input_line_move(&mut self, dir: i32) {
        if dir < 0 {
            self.input.home();
            self.input.left();
        } else {
            self.input.end();
            self.input.right();
        }
    }

    /// Carries out what a key in the approval modal asked for.
    fn modal_action(&mut self, action: ModalAction) {
        match action {
            ModalAction::Stay => {}
            ModalAction::Answer { call_id, answer } => self.answer(call_id, answer),
            ModalAction::Interrupt => self.actions.push(Action::Submit(Op::Interrupt)),
        }
    }

    /// Carries out what a key in the undo or rewind overlay asked for.
    fn rewind_action(&mut self, action: RewindAction) {
        let action = match action {
            RewindAction::Stay => return,
            RewindAction::Close => None,
            RewindAction::Submit(op) => Some(Action::Submit(op)),
            RewindAction::Preview {
                turn,
                conversation,
                force,
            } => Some(Action::PreviewRewind {
                turn,
                conversation,
                force,
            }),
        };
        self.rewind = None;
        self.actions.extend(action);
    }

    fn answer(&mut self, call_id: String, answer: ApprovalAnswer) {
        self.modal = None;
        self.working = Working::Tools;
        self.actions
            .push(Action::Submit(Op::Approval { call_id, answer }));
    }

    fn send(&mut self) {
        let text = self.input.text.trim().to_owned();
        if text.is_empty() {
            return;
        }
        if text.starts_with('/') {
            self.input.take();
            self.slash(&text);
            return;
        }
        if let Some(command) = text.strip_prefix('!') {
            self.input.take();
            self.shell(command.trim());
            return;
        }
        let text = self.input.take();
        self.submit_prompt(text);
    }

    /// Sends `text` as a prompt now, or after the running turn.
    pub fn submit_prompt(&mut self, text: String) {
        self.scroll = 0;
        if self.turn_running {
            self.queued.push_back(text);
        } else {
            self.turn_running = true;
            self.working = Working::Thinking;
            self.actions.push(Action::Submit(Op::UserTurn { text }));
        }
    }

    fn slash(&mut self, line: &str) {
        let (cmd, arg) = line.split_once(' ').unwrap_or((line, ""));
        let arg = arg.trim();
        let action = match cmd {
            "/help" => {
                self.notice(&help(&self.custom), false);
                return;
            }
            "/quit" | "/exit" => Action::Quit,
            "/new" => Action::NewSession,
            "/sessions" => Action::ListSessions,
            "/diff" => Action::Diff,
            "/tools" => Action::Tools,
            "/plugins" => Action::Plugins,
            "/compact" => Action::Submit(Op::Compact),
            "/init" => Action::Command(line.to_owned()),
            "/undo" => {
                self.start_undo(arg);
                return;
            }
            "/rewind" => {
                self.open_rewind(arg == "--force");
                return;
            }
            _ if self.custom.knows(cmd) => Action::Command(line.to_owned()),
            "/model" => Action::Submit(Op::SetModel {
                model: arg.to_owned(),
            }),
            "/provider" if !arg.is_empty() => Action::Submit(Op::SetProvider {
                provider: arg.to_owned(),
            }),
            "/mode" => match arg.parse::<Mode>() {
                Ok(mode) => Action::Submit(Op::SetMode { mode }),
                Err(e) => {
                    self.notice(&e, true);
                    return;
                }
            },
            _ => {
                self.notice(
                    &format!("unknown command `{cmd}`; /help lists them (with their arguments)"),
                    true,
                );
                return;
            }
        };
        self.actions.push(action);
    }

    fn update_completion(&mut self) {
        let old = std::mem::take(&mut self.completion);
        let text = &self.input.text;
        if text.starts_with('/') && !text.contains(' ') {
            self.completion = SLASH_COMMANDS
                .iter()
                .filter(|(c, _)| c.starts_with(text.as_str()))
                .map(|(c, d)| ((*c).to_owned(), (*d).to_owned()))
                .chain(self.custom.completions(text))
                .collect();
        } else {
            let (_, word) = self.input.current_word();
            if let Some(prefix) = word.strip_prefix('@') {
                self.completion = self
                    .files
                    .iter()
                    .filter(|f| f.contains(prefix))
                    .take(8)
                    .map(|f| (format!("@{f}"), String::new()))
                    .collect();
            }
        }
        if self.completion.len() == 1 && self.completion[0].0 == self.input.current_word().1 {
            self.completion.clear();
        }
        if old != self.completion {
            self.completion_sel = 0;
        }
    }

    /// Puts the selected completion in; false when it was already there.
    fn accept_completion(&mut self) -> bool {
        let Some((choice, _)) = self.completion.get(self.completion_sel).cloned() else {
            return false;
        };
        self.completion.clear();
        if self.input.current_word().1 == choice {
            return false;
        }
        let slash = choice.starts_with('/');
        self.input.replace_word(&choice);
        if !slash
            || ["/model", "/provider", "/mode"].contains(&choice.as_str())
            || self.custom.takes_arguments(&choice)
        {
            self.input.insert(' ');
        } else {
            return false;
        }
        true
    }
}

/// Custom commands, `!` lines and the cost.
impl App {
    /// Tells the UI about the custom commands: those `offered` (listed in
    /// the popup and `/help`) and the names of those `refused`.
    pub fn set_commands(&mut self, offered: Vec<CustomCommand>, refused: Vec<String>) {
        self.custom = Custom::new(offered, refused);
    }

    /// Sets the session's cost so far (US dollars), shown in the status
    /// line; `None` when the model's price is not known.
    pub fn set_cost(&mut self, cost: Option<f64>) {
        self.cost = cost;
    }

    /// A `!` line: the command runs through the session's call pipeline.
    fn shell(&mut self, command: &str) {
        if command.is_empty() {
            self.notice(
                "`!` runs a command line: type it after the `!`, e.g. `!git status`",
                true,
            );
            return;
        }
        if self.turn_running {
            self.notice(
                "a turn is running; run `!` commands once it ends (Esc interrupts it)",
                true,
            );
            return;
        }
        self.scroll = 0;
        self.turn_running = true;
        self.working = Working::Tools;
        self.actions.push(Action::Submit(Op::Shell {
            command: command.to_owned(),
        }));
    }
}

/// Going back: `/undo`, and Esc Esc or `/rewind` (the overlay is
/// `Rewind`). The front-end computes the diff of what would be restored
/// ([`Action::PreviewUndo`], [`Action::PreviewRewind`]) and hands it to
/// [`App::confirm`]; the session carries the op out and answers with
/// [`Event::Undone`] or [`Event::Rewound`], after which the rewound
/// transcript is cut and the picked prompt is put back in the editor.
impl App {
    /// Opens the picker of the conversation's earlier prompts (Esc Esc,
    /// `/rewind`); `force` goes on to the restore.
    fn open_rewind(&mut self, force: bool) {
        if self.turn_running {
            self.notice(
                "a turn is running: interrupt it (Esc) or wait for it to end, then rewind",
                true,
            );
            return;
        }
        if self.transcript.prompts.is_empty() {
            self.notice(
                "nothing to rewind: this conversation has no message yet",
                false,
            );
            return;
        }
        self.rewind = Some(Rewind::pick(&self.transcript.prompts, force));
    }

    /// Esc: closes the completion popup, or interrupts the running turn,
    /// or — pressed twice on an idle, empty prompt (`alt`: two read at
    /// once, which arrive as Alt+Esc) — opens the rewind picker. `before`
    /// is when the last key was an Esc.
    fn esc(&mut self, alt: bool, before: Option<u64>) {
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
    fn start_undo(&mut self, arg: &str) {
        if self.turn_running {
            self.notice(
                "a turn is running: interrupt it (Esc) or wait for it to end, then undo",
                true,
            );
            return;
        }
        match super::rewind::undo_force(arg) {
            Ok(force) => self.actions.push(Action::PreviewUndo { force }),
            Err(e) => self.notice(&e, true),
        }
    }

    /// Shows what `op` (an undo or a rewind) will restore — `diff` — and
    /// submits it once the user confirms with `y` or Enter.
    pub fn confirm(&mut self, title: &str, diff: &str, op: Op) {
        self.rewind = Some(Rewind::confirm(title, diff, op, self.now_ms));
    }

    /// Whether an undo or rewind overlay is open.
    pub fn rewind_open(&self) -> bool {
        self.rewind.is_some()
    }

    /// The prompt of `turn`, if the conversation holds it.
    pub fn prompt_of(&self, turn: u32) -> Option<&str> {
        self.transcript.prompt_of(turn)
    }

    /// The events of going back: an undo, a rewind (the transcript cut at
    /// the prompt, which goes back into the editor), an interrupted answer.
    fn apply_rewind(&mut self, event: &Event) {
        match event {
            Event::Undone { turn, files } => {
                self.notice(&super::rewind::undone_notice(*turn, files), false)
            }
            Event::Rewound {
                turn,
                conversation,
                files,
            } => self.rewound(*turn, *conversation, files),
            Event::AnswerInterrupted { text } => {
                self.transcript.interrupted(text);
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
        let notice = super::rewind::rewound_notice(turn, text.as_deref(), conversation, files);
        if conversation && self.transcript.cut(turn) {
            self.anchor = None;
            self.scroll = 0;
        }
        self.notice(&notice, false);
        if !self.replaying
            && let Some(text) = text
        {
            self.input.clear();
            self.input.insert_str(&text);
        }
    }
}

/// The text of `/help`, with the custom commands `custom` lists.
pub(crate) fn help(custom: &Custom) -> String {
    let mut text = String::from(
        "keys: Enter send · Shift+Enter or Ctrl+J newline · Up/Down history · @ complete a file\n\
         Esc or Ctrl+C interrupt · Esc Esc rewind to an earlier message · Ctrl+C twice or Ctrl+D quit · PageUp/PageDown/wheel scroll · \
         Home/End top/bottom · Ctrl+O expand tool output\n\
         approvals: y once · a for the session · n deny (type a reason, Enter)\n",
    );
    for (cmd, what) in SLASH_COMMANDS {
        text.push_str(&format!("{cmd:<10} {what}\n"));
    }
    text.push_str(&custom.help());
    text
}
