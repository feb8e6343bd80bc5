//! `corral run`, `resume`, `sessions`, `show`: drive the agent and render its
//! events, as text for people or as JSON lines for scripts.

use crate::cli::{fail, load, out, out_json};
use corral::agent::{
    Agent, AgentOptions, Approval, ApprovalRequest, Approver, CassetteTurn, NoApprover, YesApprover,
};
use corral::manifest::Manifest;
use corral::protocol::{Event, StopReason};
use corral::runtime::{Plugin, Plugins};
use corral::session::{self, SessionLog};
use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

/// Exit codes of `run` and `resume`.
const EXIT_PROVIDER: u8 = 3;
const EXIT_INCOMPLETE: u8 = 4;
pub(crate) const EXIT_INTERRUPTED: u8 = 130;
const EXIT_DENIED: u8 = 5;

/// Flags shared by `run` and `resume`.
pub struct Flags {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub max_iterations: Option<u32>,
    pub json: bool,
    pub mode: Option<corral::policy::Mode>,
    pub yes: bool,
}

fn sessions_dir(workspace: &Path) -> Result<PathBuf, ExitCode> {
    let ws = workspace.canonicalize().map_err(|e| {
        fail(&format!(
            "the workspace {} cannot be opened: {e}",
            workspace.display()
        ))
    })?;
    let root =
        session::sessions_root().ok_or_else(|| fail("no data directory (set XDG_DATA_HOME)"))?;
    Ok(session::workspace_dir(&root, &ws))
}

/// Picks the provider: the flag, else `[agent] provider`, else the first
/// built-in provider whose key is set.
fn choose_provider(
    manifest: &Manifest,
    plugins: &Plugins,
    wanted: Option<&str>,
) -> Result<Arc<Plugin>, String> {
    let find = |name: &str| {
        plugins
            .plugins()
            .iter()
            .find(|p| p.decl().name == name)
            .cloned()
    };
    let name = match wanted
        .map(str::to_owned)
        .or_else(|| manifest.agent.provider.clone())
    {
        Some(n) => n,
        None => {
            let ready = ["openai", "anthropic"].into_iter().find(|n| {
                find(n).is_some_and(|p| p.decl().secrets.iter().all(|s| s.resolve().is_ok()))
            });
            match ready {
                Some(n) => n.to_owned(),
                None => {
                    return Err("no model provider is configured.\n  \
                        To use OpenAI: export OPENAI_API_KEY=...   (or Anthropic: export ANTHROPIC_API_KEY=...)\n  \
                        To use another server (Ollama, vLLM, LM Studio...): set [plugins.openai] config.base_url and grants.net in corral.toml, and [agent] provider = \"openai\"\n  \
                        To try corral offline: corral run --provider replay \"What is this project?\""
                        .into());
                }
            }
        }
    };
    let plugin = find(&name).ok_or_else(|| {
        let providers: Vec<String> = plugins
            .plugins()
            .iter()
            .filter(|p| p.is_provider())
            .map(|p| p.decl().name.clone())
            .collect();
        format!(
            "there is no plugin `{name}`; provider plugins: {}",
            providers.join(", ")
        )
    })?;
    if !plugin.is_provider() {
        return Err(format!("plugin `{name}` provides tools, not a model"));
    }
    for secret in &plugin.decl().secrets {
        if let Err(var) = secret.resolve() {
            return Err(format!(
                "provider `{name}` needs the environment variable {var} (its API key); export it, \
                 or try corral offline with --provider replay"
            ));
        }
    }
    Ok(plugin)
}

fn options(manifest: &Manifest, flags: &Flags) -> AgentOptions {
    let mut policy = manifest.policy.clone();
    if let Some(mode) = flags.mode {
        policy.mode = mode;
    }
    let approver: Arc<dyn Approver> = if flags.yes {
        Arc::new(YesApprover)
    } else if std::io::stdin().is_terminal() && !flags.json {
        Arc::new(TerminalApprover)
    } else {
        Arc::new(NoApprover)
    };
    AgentOptions {
        policy,
        approver,
        model: flags
            .model
            .clone()
            .or_else(|| manifest.agent.model.clone())
            .unwrap_or_default(),
        max_iterations: flags
            .max_iterations
            .or(manifest.agent.max_iterations)
            .unwrap_or(50),
        max_tokens: manifest.agent.max_tokens,
        temperature: manifest.agent.temperature,
        cwd: std::env::current_dir().unwrap_or_default(),
        ..AgentOptions::default()
    }
}

pub async fn run(
    workspace: &Path,
    prompt: String,
    record: Option<PathBuf>,
    flags: Flags,
) -> ExitCode {
    let (manifest, plugins) = match load(workspace).await {
        Ok(x) => x,
        Err(code) => return code,
    };
    let provider = match choose_provider(&manifest, &plugins, flags.provider.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let dir = match sessions_dir(workspace) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let log = match SessionLog::create(&dir) {
        Ok(l) => l,
        Err(e) => {
            return fail(&format!(
                "cannot create the session log in {}: {e}",
                dir.display()
            ));
        }
    };
    let mut opts = options(&manifest, &flags);
    opts.record = record.is_some();
    let agent = match Agent::new(
        Arc::new(plugins),
        provider,
        opts,
        manifest.workspace.clone(),
        log,
    ) {
        Ok(a) => a,
        Err(e) => return fail(&format!("{e:#}")),
    };
    drive(agent, Some(prompt), record, flags.json).await
}

pub async fn resume(
    workspace: &Path,
    id: Option<String>,
    last: bool,
    prompt: Option<String>,
    flags: Flags,
) -> ExitCode {
    let dir = match sessions_dir(workspace) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let path = match find_session(&dir, id.as_deref(), last) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let (manifest, plugins) = match load(workspace).await {
        Ok(x) => x,
        Err(code) => return code,
    };
    let (log, records) = match SessionLog::open(&path) {
        Ok(x) => x,
        Err(e) => return fail(&format!("cannot read {}: {e}", path.display())),
    };
    let logged_provider = records.iter().find_map(|r| match &r.event {
        Event::SessionStarted { provider, .. } => Some(provider.clone()),
        _ => None,
    });
    let wanted = flags.provider.clone().or(logged_provider);
    let provider = match choose_provider(&manifest, &plugins, wanted.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let opts = options(&manifest, &flags);
    let agent = match Agent::resume(
        Arc::new(plugins),
        provider,
        opts,
        manifest.workspace.clone(),
        log,
        &records,
    ) {
        Ok(a) => a,
        Err(e) => return fail(&format!("{e:#}")),
    };
    if !flags.json {
        eprintln!(
            "resuming session {} ({} messages)",
            agent.session_id(),
            agent.history().len()
        );
    }
    drive(agent, prompt, None, flags.json).await
}

fn find_session(dir: &Path, id: Option<&str>, last: bool) -> Result<PathBuf, String> {
    let all = session::list(dir).map_err(|e| format!("cannot list sessions: {e}"))?;
    if last || id.is_none() {
        return all
            .last()
            .map(|s| s.path.clone())
            .ok_or_else(|| "this workspace has no sessions yet".to_owned());
    }
    let id = id.unwrap_or_default();
    let matches: Vec<_> = all.iter().filter(|s| s.id.starts_with(id)).collect();
    match matches.as_slice() {
        [one] => Ok(one.path.clone()),
        [] => Err(format!(
            "no session `{id}` in this workspace; `corral sessions` lists them"
        )),
        many => Err(format!(
            "`{id}` matches {} sessions; give more of the id",
            many.len()
        )),
    }
}

async fn drive(
    mut agent: Agent,
    prompt: Option<String>,
    record: Option<PathBuf>,
    json: bool,
) -> ExitCode {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
        }
    });
    let waiting = Arc::new(AtomicBool::new(false));
    let spinner = spinner(waiting.clone(), json);
    let render = tokio::spawn(async move {
        let mut view = Renderer::default();
        while let Some(event) = rx.recv().await {
            if json {
                out_json(&serde_json::to_string(&event).unwrap_or_default());
            } else {
                view.show(&event, &waiting);
            }
        }
    });
    let result = agent.run(prompt.as_deref(), &tx, &cancel).await;
    drop(tx);
    let _ = render.await;
    spinner.abort();
    if let Some(file) = record
        && let Err(e) = write_cassette(&file, agent.recorded())
    {
        eprintln!("error: cannot write the cassette {}: {e}", file.display());
    }
    match result {
        Ok(StopReason::FinalAnswer) => ExitCode::SUCCESS,
        Ok(StopReason::ProviderError | StopReason::ContextExhausted) => {
            ExitCode::from(EXIT_PROVIDER)
        }
        Ok(StopReason::Interrupted) => ExitCode::from(EXIT_INTERRUPTED),
        Ok(StopReason::MaxIterations | StopReason::FatalToolError) => {
            ExitCode::from(EXIT_INCOMPLETE)
        }
        Ok(StopReason::PermissionDenied) => ExitCode::from(EXIT_DENIED),
        Err(e) => fail(&format!("{e:#}")),
    }
}

fn write_cassette(file: &Path, turns: &[CassetteTurn]) -> std::io::Result<()> {
    let doc = serde_json::json!({ "version": 1, "turns": turns });
    std::fs::write(
        file,
        serde_json::to_vec_pretty(&doc).map_err(std::io::Error::other)?,
    )
}

/// A spinner on stderr while the model is thinking (only on a terminal).
fn spinner(waiting: Arc<AtomicBool>, json: bool) -> tokio::task::JoinHandle<()> {
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

/// Asks on the terminal: the call, why it needs approval, and its diff.
struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Approval> + Send + 'a>> {
        Box::pin(async move {
            let mut text = format!(
                "\n? {}({}) needs approval: {}\n",
                request.call.name,
                short(&request.call.arguments),
                request.reason
            );
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
                eprint!("{}", corral::terminal::inert(&text));
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            })
            .await;
            let line = match answer {
                Ok(Ok(l)) => l,
                _ => {
                    return Approval::Deny {
                        reason: Some("no answer from the terminal".into()),
                    };
                }
            };
            let line = line.trim();
            let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            match word.to_ascii_lowercase().as_str() {
                "y" | "yes" => Approval::Once,
                "a" | "always" => Approval::Session,
                _ => Approval::Deny {
                    reason: Some(if rest.trim().is_empty() {
                        "the user declined".to_owned()
                    } else {
                        format!("the user declined: {}", rest.trim())
                    }),
                },
            }
        })
    }
}

/// Text rendering of the event stream.
#[derive(Default)]
struct Renderer {
    at_line_start: bool,
    /// Whether the current request streamed its text (else it is printed whole at the end).
    streamed: bool,
}

fn short(args: &str) -> String {
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
        let text = corral::terminal::inert(text);
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
        if !text.is_empty() {
            self.at_line_start = text.ends_with('\n');
        }
    }

    fn newline(&mut self) {
        if !self.at_line_start {
            self.print("\n");
        }
    }

    fn show(&mut self, event: &Event, waiting: &AtomicBool) {
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
                if *finish_reason == corral::runtime::FinishReason::ContentFilter {
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
                let first = outcome.content.lines().next().unwrap_or("").trim();
                let lines = outcome.content.lines().count();
                let first: String = first.chars().take(100).collect();
                if outcome.is_error {
                    self.print(&format!("  ⎿ error: {first}\n"));
                } else {
                    self.print(&format!("  ⎿ {lines} lines ({duration_ms} ms)\n"));
                }
            }
            Event::ProviderFailed { error } => {
                waiting.store(false, Ordering::Relaxed);
                self.newline();
                eprintln!("error: {}", corral::terminal::inert(&error.to_string()));
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
                        corral::terminal::inert(&why)
                    );
                }
            }
            _ => {}
        }
    }
}

pub fn sessions(workspace: &Path, json: bool) -> ExitCode {
    let dir = match sessions_dir(workspace) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let list = match session::list(&dir) {
        Ok(l) => l,
        Err(e) => return fail(&format!("cannot list sessions: {e}")),
    };
    if json {
        out_json(&serde_json::to_string_pretty(&list).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    if list.is_empty() {
        out("no sessions in this workspace yet; start one with `corral run \"...\"`");
        return ExitCode::SUCCESS;
    }
    let mut text = String::new();
    for s in list {
        let (y, mo, d, h, mi, _) = session::civil(s.started_ms / 1000);
        let prompt: String = s.first_prompt.chars().take(60).collect();
        text.push_str(&format!(
            "{}  {y:04}-{mo:02}-{d:02} {h:02}:{mi:02}  {:<16}  {}  {prompt}\n",
            s.id, s.status, s.workspace
        ));
    }
    out(&text);
    ExitCode::SUCCESS
}

pub fn show(workspace: &Path, id: &str, json: bool) -> ExitCode {
    let dir = match sessions_dir(workspace) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let path = match find_session(&dir, Some(id), false) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let records = match session::read(&path) {
        Ok(r) => r,
        Err(e) => return fail(&format!("cannot read {}: {e}", path.display())),
    };
    if json {
        for r in &records {
            out_json(&serde_json::to_string(r).unwrap_or_default());
        }
        return ExitCode::SUCCESS;
    }
    let mut text = String::new();
    for r in &records {
        match &r.event {
            Event::SessionStarted {
                session_id,
                workspace,
                provider,
                ..
            } => text.push_str(&format!(
                "session {session_id} in {workspace} (provider {provider})\n"
            )),
            Event::SessionResumed { closed_calls, .. } => text.push_str(&format!(
                "-- resumed ({} unfinished calls closed) --\n",
                closed_calls.len()
            )),
            Event::UserMessage { text: t } => text.push_str(&format!("\n> {t}\n\n")),
            Event::RequestEnd { message, .. } if !message.text.is_empty() => {
                text.push_str(&format!("{}\n", message.text.trim_end()));
            }
            Event::ToolCallBegin { call } => {
                text.push_str(&format!("● {}({})\n", call.name, short(&call.arguments)))
            }
            Event::ToolCallEnd { outcome, .. } => {
                let first: String = outcome
                    .content
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(100)
                    .collect();
                let tag = if outcome.is_error { "error: " } else { "" };
                text.push_str(&format!("  ⎿ {tag}{first}\n"));
            }
            Event::Stop { reason, message } => text.push_str(&format!(
                "[{}{}]\n",
                reason.as_str(),
                message
                    .as_ref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            )),
            _ => {}
        }
    }
    out(&text);
    ExitCode::SUCCESS
}
