//! The interactive front-end: owns the terminal and the session, feeds
//! session events and terminal input to [`corral_tui::App`], and carries
//! out the actions it asks for. Everything shown is drawn by the library's
//! `tui` module; this file only moves data between the two.

use super::fail;
use super::run::Flags;
use corral_core::session::{self, Approvals, Resume, Session, SessionConfig};
use corral_protocol::{Event, Op};
use corral_tui::{Action, App, Picked};
use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    Event as TermEvent, KeyboardEnhancementFlags, MouseEventKind, PopKeyboardEnhancementFlags,
    PushKeyboardEnhancementFlags,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{Read as _, Seek as _, SeekFrom, Stdout, Write as _};
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// The exit code after SIGTERM (128 + 15, as a shell reports it).
const EXIT_TERMINATED: u8 = 143;
/// The exit code after SIGHUP (128 + 1).
const EXIT_HANGUP: u8 = 129;
/// How long one frame may spend taking queued events before it draws.
const FRAME_BATCH: Duration = Duration::from_millis(30);

/// Files offered by `@` completion, at most.
const MAX_FILES: usize = 5000;

/// Whether both ends are a terminal, so the UI can run.
pub fn interactive() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// The real stderr while the UI runs (-1 when not redirected): log lines
/// written meanwhile go to a file instead of over the screen, and are
/// printed once the terminal is back.
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);
/// Whether the terminal was asked to report keys unambiguously.
static ENHANCED_KEYS: AtomicBool = AtomicBool::new(false);
static STDERR_FILE: Mutex<Option<std::fs::File>> = Mutex::new(None);

fn capture_stderr() {
    let Ok(file) = tempfile::tempfile() else {
        return;
    };
    // SAFETY: dup and dup2 on descriptors this process owns; failures are
    // checked and leave stderr as it was.
    unsafe {
        let saved = libc::dup(2);
        if saved < 0 {
            return;
        }
        if libc::dup2(file.as_raw_fd(), 2) < 0 {
            libc::close(saved);
            return;
        }
        SAVED_STDERR.store(saved, Ordering::SeqCst);
    }
    if let Ok(mut slot) = STDERR_FILE.lock() {
        *slot = Some(file);
    }
}

/// Puts stderr back, and prints what was written to it meanwhile.
fn release_stderr() {
    let saved = SAVED_STDERR.swap(-1, Ordering::SeqCst);
    if saved < 0 {
        return;
    }
    // SAFETY: `saved` is the descriptor dup'ed in capture_stderr, closed once.
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
    }
    let file = STDERR_FILE.lock().ok().and_then(|mut f| f.take());
    if let Some(mut file) = file {
        let mut text = String::new();
        if file.seek(SeekFrom::Start(0)).is_ok() && file.read_to_string(&mut text).is_ok() {
            let _ = std::io::stderr().write_all(corral_protocol::terminal::inert(&text).as_bytes());
        }
    }
}

/// Puts the terminal back as it was: raw mode off, main screen, no mouse
/// reporting, stderr restored. Safe to call more than once.
fn restore() {
    let _ = disable_raw_mode();
    if ENHANCED_KEYS.swap(false, Ordering::SeqCst) {
        let _ = crossterm::execute!(std::io::stdout(), PopKeyboardEnhancementFlags);
    }
    let _ = crossterm::execute!(
        std::io::stdout(),
        DisableBracketedPaste,
        DisableMouseCapture,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    super::logsink::release();
    release_stderr();
}

/// Restores the terminal when dropped, whatever way the UI ends.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

fn setup() -> std::io::Result<(TerminalGuard, Terminal<CrosstermBackend<Stdout>>)> {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
    enable_raw_mode()?;
    let guard = TerminalGuard;
    crossterm::execute!(
        std::io::stdout(),
        EnterAlternateScreen,
        EnableMouseCapture,
        EnableBracketedPaste
    )?;
    // Where the terminal can tell Shift+Enter from Enter, ask it to.
    if matches!(
        crossterm::terminal::supports_keyboard_enhancement(),
        Ok(true)
    ) {
        crossterm::execute!(
            std::io::stdout(),
            PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
        )?;
        ENHANCED_KEYS.store(true, Ordering::SeqCst);
    }
    capture_stderr();
    let terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    Ok((guard, terminal))
}

/// Terminal input, read on a thread of its own (crossterm's reader blocks).
fn input_thread() -> UnboundedReceiver<TermEvent> {
    let (tx, rx) = unbounded_channel();
    std::thread::spawn(move || {
        while let Ok(event) = crossterm::event::read() {
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    rx
}

/// What the session is opened with.
struct Opener {
    workspace: PathBuf,
    flags: Flags,
}

impl Opener {
    /// The manifest with `--profile` and `-c` applied, read again for each
    /// session opened, so `/new` keeps them and sees the files as they are.
    fn manifest(&self) -> Result<corral_core::manifest::Manifest, String> {
        corral_core::manifest::load_with(&self.workspace, &self.flags.overrides)
            .map_err(|e| e.to_string())
    }

    fn config(
        &self,
        resume: Option<Resume>,
        manifest: Option<corral_core::manifest::Manifest>,
    ) -> SessionConfig {
        SessionConfig {
            workspace: self.workspace.clone(),
            provider: self.flags.provider.clone(),
            model: self.flags.model.clone(),
            max_iterations: self.flags.max_iterations,
            mode: self.flags.mode,
            approvals: Approvals::FrontEnd,
            resume,
            manifest,
            ..SessionConfig::default()
        }
    }

    /// Opens a session, an app showing it (with its transcript when it is
    /// resumed) and the tally of its usage and cost so far, from one read
    /// of its log.
    async fn open(
        &self,
        resume: Option<Resume>,
    ) -> Result<(Session, App, super::tally::Tally), String> {
        let manifest = self.manifest()?;
        // The session takes its mode from the flag, else from the manifest,
        // which also gives the prices.
        let mode = self.flags.mode.unwrap_or(manifest.policy.mode);
        let model = self.flags.model.clone().or(manifest.agent.model.clone());
        let resumed = resume.is_some();
        let session = session::open(self.config(resume, Some(manifest.clone()))).await?;
        let mut tally =
            super::tally::Tally::for_workspace(&self.workspace, &self.config(None, Some(manifest)));
        let mut app = App::new(self.flags.provider.as_deref().unwrap_or(""), mode);
        app.color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        app.set_history(super::history::load(&self.workspace));
        let (offered, refused, notes) = super::commands::for_ui(&self.workspace);
        app.set_commands(offered, refused);
        app.set_tools(tool_rows(&session));
        // The log already holds the session's start (its id and provider),
        // and a resumed session's whole transcript.
        let mut logged_model = None;
        if let Ok(records) = session::read(session.log_path()) {
            for record in &records {
                app.replay(&record.event);
                tally.see(&record.event);
                if let Event::SessionStarted { model, .. } | Event::ModelChanged { model } =
                    &record.event
                {
                    logged_model = Some(model.clone());
                }
            }
        }
        // A resumed session asks the model the flags and the manifest name
        // now (`-c model=…`, a profile's), not the one it was logged with:
        // the status line says so.
        if resumed
            && let Some(model) = model
            && logged_model.as_ref() != Some(&model)
        {
            app.apply(&Event::ModelChanged { model });
        }
        app.set_cost(tally.cost());
        for note in notes {
            app.notice(&note, true);
        }
        Ok((session, app, tally))
    }
}

/// The session's tools for cards and grouping: name, source, read-only.
fn tool_rows(session: &Session) -> Vec<(String, String, bool)> {
    session
        .tools()
        .iter()
        .map(|t| (t.spec.name.clone(), t.source.clone(), t.spec.is_read_only()))
        .collect()
}

/// `/tools`: what the session offers, from the session.
fn tools_text(session: &Session) -> String {
    let mut text = String::from("tools:\n");
    for t in session.tools() {
        let effects: Vec<&str> = t.spec.effects.iter().map(|e| e.as_str()).collect();
        text.push_str(&format!(
            "  {:<16} {:<10} {:<14} {}\n",
            t.spec.name,
            t.source,
            effects.join(","),
            t.spec.description.lines().next().unwrap_or("")
        ));
    }
    text
}

/// `/plugins`: the session's plugins and what each may touch.
fn plugins_text(session: &Session) -> String {
    let mut text = String::from("plugins:\n");
    for p in session.plugins().plugins() {
        let kind = if p.is_provider() {
            "provider".to_owned()
        } else {
            format!("{} tools", p.tools().len())
        };
        // What each may touch is what a user checks a plugin for.
        text.push_str(&format!(
            "  {:<16} {kind}\n    grants: {}\n",
            p.decl().name,
            super::plugins::grants_text(p.decl())
        ));
    }
    text
}

/// Workspace files for `@` completion: no hidden directories, no build
/// output, at most [`MAX_FILES`].
fn workspace_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "target" || name == "node_modules" {
                continue;
            }
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => dirs.push(path),
                Ok(t) if t.is_file() => {
                    if let Ok(rel) = path.strip_prefix(root) {
                        out.push(rel.to_string_lossy().into_owned());
                    }
                    if out.len() >= MAX_FILES {
                        return out;
                    }
                }
                _ => {}
            }
        }
    }
    out.sort();
    out
}

fn pickable(workspace: &Path) -> Result<Vec<Picked>, String> {
    let dir = session::sessions_dir(workspace)?;
    let all = session::list(&dir).map_err(|e| format!("cannot list sessions: {e}"))?;
    Ok(all
        .into_iter()
        .map(|s| {
            let (y, mo, d, h, mi, _) = session::civil(s.started_ms / 1000);
            Picked {
                label: format!(
                    "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}  {:<10}  {}",
                    s.status,
                    s.first_prompt.lines().next().unwrap_or("")
                ),
                id: s.id,
            }
        })
        .collect())
}

/// Ends `session`: asks it to shut down and waits for the last event. A
/// session nobody prompted (the UI opened and left, or `/new` right away)
/// has nothing to resume or show: its log is removed, so `corral sessions`
/// and `/resume` list only sessions that hold a conversation.
async fn close(mut session: Session) {
    session.submit(Op::Shutdown);
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = session.next_event().await {
            if event == Event::ShutdownComplete {
                break;
            }
        }
    })
    .await;
    let log = session.log_path().to_path_buf();
    let _ = session.finish().await;
    // A turn begins with a prompt; a `!` command has no turn but ends
    // with a stop.
    if let Ok(records) = session::read(&log)
        && !records
            .iter()
            .any(|r| matches!(r.event, Event::TurnBegin { .. } | Event::Stop { .. }))
    {
        let _ = std::fs::remove_file(&log);
    }
}

/// Runs the UI on a new session, or on `resume`.
pub async fn ui(workspace: &Path, resume: Option<Resume>, flags: Flags) -> ExitCode {
    let opener = Opener {
        workspace: workspace.to_path_buf(),
        flags,
    };
    // Log records raised while the session opens (a plugin's warning at
    // load) are shown in the UI once it is up: the alternate screen would
    // hide them on stderr.
    let (log_tx, log_lines) = unbounded_channel::<super::logsink::Line>();
    super::logsink::capture(log_tx);
    let (session, app, tally) = match opener.open(resume).await {
        Ok(s) => s,
        Err(e) => {
            super::logsink::release();
            said_while_opening(log_lines);
            return fail(&e);
        }
    };
    let (guard, mut terminal) = match setup() {
        Ok(t) => t,
        Err(e) => {
            restore();
            said_while_opening(log_lines);
            return fail(&format!("cannot set up the terminal: {e}"));
        }
    };
    let mut last = session.id().to_owned();
    let code = drive(
        &opener,
        session,
        app,
        tally,
        log_lines,
        &mut terminal,
        &mut last,
    )
    .await;
    drop(guard);
    // The UI drew on the alternate screen, which goes with it: the
    // transcript is printed on the normal screen, where it stays in the
    // terminal's scrollback. Not after SIGTERM or SIGHUP: nobody reads it.
    if code == ExitCode::SUCCESS && super::sessions::print_transcript(workspace, &last) {
        // Said on stderr, after the transcript: how to go on where this
        // left off, as the last thing on the screen.
        eprintln!("resume with: corral resume {last}");
    }
    code
}

/// Prints on stderr the log records taken while the session opened, when
/// no UI came up to show them.
fn said_while_opening(mut log_lines: UnboundedReceiver<super::logsink::Line>) {
    while let Ok((line, _)) = log_lines.try_recv() {
        eprintln!("{line}");
    }
}

/// Progress lines, taken into the transcript while the UI owns the
/// terminal (stderr is under it now); log records are taken from before the
/// session opens (see [`ui`]).
fn capture_progress() -> UnboundedReceiver<String> {
    // A plugin compiled on its first use (a call's, a session's) says so
    // in the transcript: stderr is under the UI now.
    let (progress_tx, progress) = tokio::sync::mpsc::unbounded_channel::<String>();
    corral_core::plugins::progress::set_sink(std::sync::Arc::new(move |p| {
        let _ = progress_tx.send(p.to_string());
    }));
    progress
}

// long: the UI's one event loop; each source it selects over (session events, keys,
// ticks, progress, log lines, signals) is handled in place, so their order stays visible.
async fn drive(
    opener: &Opener,
    mut session: Session,
    mut app: App,
    mut tally: super::tally::Tally,
    // Log records: a warning raised while the UI runs (a request denied
    // for a missing key) is shown beside what it explains.
    mut log_lines: UnboundedReceiver<super::logsink::Line>,
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    last: &mut String,
) -> ExitCode {
    let start = Instant::now();
    let mut input = input_thread();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut sigterm =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    // The terminal went away (its window closed, `tmux kill-session`):
    // nobody can see or answer the session any more, so it is closed as
    // interrupted, whatever disposition of SIGHUP corral inherited.
    let mut sighup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut progress = capture_progress();
    let ws = opener.workspace.clone();
    let files_kept = tokio::task::spawn_blocking(move || workspace_files(&ws))
        .await
        .unwrap_or_default();
    app.set_files(files_kept.clone());
    let mut dirty = true;
    loop {
        app.set_clock(start.elapsed().as_millis() as u64);
        // Idle ticks draw nothing; spinners and elapsed times need them.
        if (dirty || app.is_animating())
            && terminal.draw(|f| corral_tui::render(f, &mut app)).is_err()
        {
            break;
        }
        dirty = true;
        let had_modal = app.modal_open();
        tokio::select! {
            event = session.next_event() => {
                let Some(event) = event else { break };
                app.set_clock(start.elapsed().as_millis() as u64);
                let mut ended = event == Event::ShutdownComplete;
                tally.see(&event);
                app.apply(&event);
                // Everything already queued goes into this one frame (for a
                // while at most, so keys still get their turn): a fast
                // stream costs a frame per batch, not per delta.
                let batch = Instant::now();
                while !ended && batch.elapsed() < FRAME_BATCH {
                    let Some(event) = session.try_next_event() else { break };
                    ended = event == Event::ShutdownComplete;
                    tally.see(&event);
                    app.apply(&event);
                }
                app.set_cost(tally.cost());
                if ended {
                    break;
                }
            }
            term = input.recv() => {
                let Some(term) = term else { break };
                app.set_clock(start.elapsed().as_millis() as u64);
                match term {
                    TermEvent::Key(key) => app.key(key),
                    TermEvent::Paste(text) => app.paste(&text),
                    TermEvent::Mouse(m) => match m.kind {
                        MouseEventKind::ScrollUp => app.scroll_by(3),
                        MouseEventKind::ScrollDown => app.scroll_by(-3),
                        _ => {}
                    },
                    _ => {}
                }
            }
            _ = tick.tick() => dirty = false,
            Some(text) = progress.recv() => app.notice(&text, false),
            Some((text, alarm)) = log_lines.recv() => app.notice(&text, alarm),
            Some(()) = async { match &mut sigterm { Some(s) => s.recv().await, None => None } } => {
                close(session).await;
                return ExitCode::from(EXIT_TERMINATED);
            }
            Some(()) = async { match &mut sighup { Some(s) => s.recv().await, None => None } } => {
                close(session).await;
                return ExitCode::from(EXIT_HANGUP);
            }
        }
        if !had_modal && app.modal_open() {
            // Whatever was typed before the question appeared is not an answer.
            while input.try_recv().is_ok() {}
        }
        for action in app.drain_actions() {
            session = match act(opener, session, &mut app, &mut tally, action, &files_kept).await {
                Ok(session) => session,
                Err(code) => return code,
            };
            session.id().clone_into(last);
        }
    }
    close(session).await;
    ExitCode::SUCCESS
}

/// Carries out what the UI asked for, outside it: a turn submitted, a new
/// or another session opened, sessions, the diff, tools or plugins listed.
/// `Err` holds the exit code when the UI ends.
async fn act(
    opener: &Opener,
    session: Session,
    app: &mut App,
    tally: &mut super::tally::Tally,
    action: Action,
    files: &[String],
) -> Result<Session, ExitCode> {
    match action {
        Action::Submit(op) => {
            if let corral_protocol::Op::UserTurn { text } = &op {
                super::history::add(&opener.workspace, text);
            }
            session.submit(op);
        }
        Action::Quit => {
            close(session).await;
            return Err(ExitCode::SUCCESS);
        }
        Action::NewSession | Action::OpenSession(_) => {
            let resume = match action {
                Action::OpenSession(id) => Some(Resume::Id(id)),
                _ => None,
            };
            let color = app.color;
            close(session).await;
            match opener.open(resume).await {
                Ok((s, mut a, t)) => {
                    *tally = t;
                    a.color = color;
                    a.set_files(files.to_vec());
                    *app = a;
                    return Ok(s);
                }
                Err(e) => {
                    restore();
                    return Err(fail(&e));
                }
            }
        }
        Action::Command(line) => {
            let found = super::commands::discover(&opener.workspace);
            match corral_core::commands::expand_line(&found, &opener.workspace, &line) {
                Ok(Some(prompt)) => app.submit_prompt(prompt),
                Ok(None) => {
                    app.notice(&format!("unknown command `{line}`; /help lists them"), true)
                }
                Err(e) => app.notice(&e.to_string(), true),
            }
        }
        Action::ListSessions => match pickable(&opener.workspace) {
            Ok(items) => app.open_picker(items),
            Err(e) => app.notice(&e, true),
        },
        Action::Diff => match session.diff() {
            Ok(d) if d.trim().is_empty() => app.notice(
                "no changes (git diff is empty and nothing is untracked)",
                false,
            ),
            Ok(d) => app.diff(&d),
            Err(e) => app.notice(&e.to_string(), true),
        },
        Action::PreviewUndo { force } => {
            super::undo::preview_undo(app, session.log_path(), &opener.workspace, force);
        }
        Action::PreviewRewind {
            turn,
            conversation,
            force,
        } => super::undo::preview_rewind(
            app,
            session.log_path(),
            &opener.workspace,
            (turn, conversation, force),
        ),
        Action::Tools => app.notice(&tools_text(&session), false),
        Action::Plugins => app.notice(&plugins_text(&session), false),
    }
    Ok(session)
}
