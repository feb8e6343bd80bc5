//! Command-line interface: parses arguments, calls the library, renders
//! results. Nothing here decides policy; it only shows what the library did.

mod commands;
mod history;
mod hooks;
mod install;
mod logsink;
mod mcp;
mod new;
mod plugins;
mod render;
mod run;
mod sessions;
mod skills;
mod tally;
mod tool_call;
mod toolview;
mod trust;
mod trust_commands;
mod trust_mcp;
mod ui;
mod undo;

use clap::{Args, Parser, Subcommand};
use corral_core::manifest::Manifest;
use corral_core::plugins::Plugins;
use corral_protocol::terminal::inert;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// corral: a coding agent whose tools are sandboxed WebAssembly components.
#[derive(Parser)]
#[command(
    name = "corral",
    version,
    about,
    after_help = "Without a command, on a terminal, corral opens its interactive UI on a new session."
)]
struct Cli {
    /// The workspace root (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Log what the runtime does (compile cache, plugin log lines) to stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Without a subcommand, the interactive UI opens on a new session.
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    ui: UiFlags,
}

/// Flags of the interactive UI (`corral` without a subcommand).
#[derive(Args, Clone)]
struct UiFlags {
    /// The provider plugin (default: [agent] provider, else the one whose key is set).
    #[arg(long)]
    provider: Option<String>,
    /// The model (default: the provider's configured model).
    #[arg(long)]
    model: Option<String>,
    /// Provider round trips per prompt before stopping (default 50).
    #[arg(long)]
    max_iterations: Option<u32>,
    /// Permission mode: read-only, ask (default), auto-edit, full-auto.
    #[arg(long)]
    mode: Option<corral_protocol::Mode>,
    /// Apply `[profiles.NAME]` of your config (provider, model, mode, and any
    /// manifest key) over the manifest; `/new` keeps it.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Override one manifest setting for this UI, e.g. `-c model=gpt-4.1`
    /// (repeatable; the value is TOML, else text); `/new` keeps it.
    #[arg(short = 'c', long = "config", value_name = "KEY=VALUE")]
    config: Vec<String>,
}

impl UiFlags {
    /// Whether any was given (they mean nothing before a subcommand).
    fn any(&self) -> bool {
        self.provider.is_some()
            || self.model.is_some()
            || self.max_iterations.is_some()
            || self.mode.is_some()
            || self.profile.is_some()
            || !self.config.is_empty()
    }
}

impl From<UiFlags> for run::Flags {
    fn from(f: UiFlags) -> Self {
        Self {
            provider: f.provider,
            model: f.model,
            max_iterations: f.max_iterations,
            json: false,
            mode: f.mode,
            yes: false,
            approvals: None,
            overrides: corral_core::manifest::Overrides {
                profile: f.profile,
                settings: f.config,
            },
            output_schema: None,
            max_cost_usd: None,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the agent on a prompt: streams the answer and shows each tool call.
    Run(RunArgs),
    /// List this workspace's sessions.
    Sessions(JsonFlag),
    /// Show a session's transcript.
    Show {
        #[command(flatten)]
        which: Which,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Compact a session's history now: the older turns are summarised by
    /// its provider, and later requests send the summary instead.
    Compact {
        #[command(flatten)]
        which: Which,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Continue a session: in the interactive UI on a terminal, or with
    /// -p (or without a terminal) from the command line.
    Resume {
        /// The session id (a unique prefix is enough); or --last.
        id: Option<String>,
        /// Resume the most recent session of this workspace.
        #[arg(long, conflicts_with = "id")]
        last: bool,
        /// What to say next; without it the model goes on from the log.
        #[arg(long, short)]
        prompt: Option<String>,
        #[command(flatten)]
        agent: AgentFlags,
    },
    /// Put back the files the latest turn of a session changed (again: the
    /// turn before), after showing the diff.
    Undo {
        /// The session id (a unique prefix is enough); the latest session
        /// of this workspace by default.
        id: Option<String>,
        /// Restore without asking.
        #[arg(long, short)]
        yes: bool,
        /// Overwrite files edited since the turn.
        #[arg(long)]
        force: bool,
    },
    /// Review the project's corral.toml and trust it (it is ignored until then).
    Trust {
        /// Trust without asking.
        #[arg(long, short)]
        yes: bool,
    },
    /// Installed plugins and the compile cache.
    #[command(subcommand, visible_alias = "plugins")]
    Plugin(PluginsCmd),
    /// Tools the plugins provide.
    #[command(subcommand)]
    Tools(ToolsCmd),
    /// Run one tool.
    #[command(subcommand)]
    Tool(ToolCmd),
    /// Agent Skills (folders with a SKILL.md) the model is offered.
    #[command(subcommand)]
    Skills(SkillsCmd),
    /// MCP both ways: serve corral's tools to MCP clients (`serve`), and
    /// manage the MCP servers corral uses as a client (`add`, `import`,
    /// `list`, `remove`).
    #[command(subcommand)]
    Mcp(mcp::McpCmd),
    /// Serve an editor over the Agent Client Protocol on stdin/stdout (Zed,
    /// JetBrains IDEs, Neovim, Emacs): each session is a corral session of
    /// the editor's project, under its manifest, policy and log.
    Acp {
        /// The permission mode sessions start in (default: the manifest's);
        /// the editor can switch it.
        #[arg(long)]
        mode: Option<corral_protocol::Mode>,
    },
    /// Command hooks: import the hooks of a Claude Code settings.json
    /// (`import`), to run confined.
    #[command(subcommand)]
    Hooks(hooks::HooksCmd),
}

#[derive(Subcommand)]
enum PluginsCmd {
    /// Install a plugin from a file, an https:// URL or an OCI registry:
    /// shows its tools, what it requests and what it imports, asks, and
    /// writes a manifest entry pinned by sha256 with what you approved.
    Add(install::AddArgs),
    /// Fetch a plugin's new version and show what changed (grants, tools,
    /// effects, descriptions); nothing widens without approval.
    Update(install::UpdateArgs),
    /// Remove a plugin's manifest entry (a built-in one is disabled).
    Remove {
        /// The plugin's name.
        name: String,
    },
    /// Re-hash every plugin file and compare it with its pin.
    Verify(JsonFlag),
    /// Show the tools of plugins that describe themselves differently from
    /// what was reviewed (whole descriptions, as the model reads them), and
    /// record them as reviewed so they are offered again.
    Review {
        /// Only this plugin.
        name: Option<String>,
        /// Record without asking.
        #[arg(long, short)]
        yes: bool,
    },
    /// Embed a plugin's requests (a corral-plugin.toml) in its component.
    Pack {
        /// The component file.
        file: PathBuf,
        /// The requests: `[plugin]` name/version/description and `[requests]`
        /// fs/net/env/exec/secrets, as in a manifest's grants.
        #[arg(long, value_name = "TOML")]
        requests: PathBuf,
        /// Write here instead of replacing FILE.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Push a component (with its requests) to an OCI registry.
    Publish {
        /// The component file.
        file: PathBuf,
        /// Where: oci://REGISTRY/REPOSITORY:TAG.
        reference: String,
        /// Embed these requests before pushing.
        #[arg(long, value_name = "TOML")]
        requests: Option<PathBuf>,
    },
    /// List the plugins of this workspace's manifest: source, sha256, grants, tools.
    List(JsonFlag),
    /// Show what a component could ask for (its imports) and the tools it
    /// exports, without granting it anything.
    Inspect {
        /// The component file.
        file: PathBuf,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show the compile cache: its directory, entries, total size and cap
    /// (CORRAL_CACHE_MAX_MB, default 512).
    Cache {
        /// Remove the least recently used entries until the cache fits its cap.
        #[arg(long)]
        prune: bool,
        /// Remove every entry.
        #[arg(long, conflicts_with = "prune")]
        clear: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Start a tool plugin project: an example tool, its test, the WIT and
    /// the one command that builds it.
    New {
        /// The plugin's name (its `[plugins.NAME]` key in corral.toml).
        name: String,
        /// The language.
        #[arg(long, value_enum)]
        lang: new::Lang,
        /// The project directory to create (default: ./NAME).
        #[arg(long, value_name = "PATH")]
        dir: Option<PathBuf>,
    },
    /// Write the WIT this corral serves (corral:plugin and, under deps/, the
    /// WASI 0.2 packages), for building plugins against it.
    Wit {
        /// The directory to write to.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum ToolsCmd {
    /// List every tool: name, plugin, effects, description. An MCP server
    /// that has not answered within 5 s is named in a warning instead of
    /// delaying the list.
    List {
        /// Wait for every MCP server up to its own `timeout_ms`, as a
        /// session does.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Subcommand)]
enum SkillsCmd {
    /// List every skill found: name, scope (user, project, or the
    /// `.claude/skills`/`.agents/skills` directory), status (offered, needs
    /// trust, shadowed, invalid) with the reason, description and path.
    List(JsonFlag),
}

#[derive(Subcommand)]
enum ToolCmd {
    /// Call one tool in its plugin's sandbox and print the output.
    Call {
        /// The tool's name.
        name: String,
        /// The arguments, a JSON object, or `@FILE` to read them from FILE.
        #[arg(long, default_value = "{}")]
        args: String,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Args)]
struct RunArgs {
    /// What to ask; `-` reads it from stdin.
    prompt: String,
    /// Write the provider's responses to a replay cassette.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Work in a git worktree of the workspace (named NAME, default `run`):
    /// the changes come back as a diff to approve, never merged silently.
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "run")]
    worktree: Option<String>,
    #[command(flatten)]
    agent: AgentFlags,
}

// The session flags repeat `UiFlags`' rather than flatten them: the help of
// `run` and `resume` counts round trips per run, the UI's per prompt.
#[derive(Args, Clone)]
struct AgentFlags {
    /// The provider plugin (default: [agent] provider, else the one whose key is set).
    #[arg(long)]
    provider: Option<String>,
    /// The model (default: the provider's configured model).
    #[arg(long)]
    model: Option<String>,
    /// Provider round trips before stopping (default 50); `--max-turns` is
    /// the same limit under Claude Code's name.
    #[arg(long, visible_alias = "max-turns")]
    max_iterations: Option<u32>,
    /// Stop before a request once the run has spent this many US dollars,
    /// counted at the model's `[agent.models."ID"] price` (stop reason
    /// `budget_exhausted`).
    #[arg(long, value_name = "USD")]
    max_cost_usd: Option<f64>,
    /// The final answer must be JSON valid against this JSON Schema: the
    /// model is asked again with what did not fit (twice at most), and the
    /// `result` event carries the parsed value as `output`.
    #[arg(long, value_name = "FILE")]
    output_schema: Option<PathBuf>,
    /// Print the event stream as JSON lines instead of text.
    #[arg(long)]
    json: bool,
    /// Permission mode: read-only, ask (default), auto-edit, full-auto.
    #[arg(long)]
    mode: Option<corral_protocol::Mode>,
    /// Approve every call that would ask (deny rules and read-only mode still hold).
    #[arg(long, short)]
    yes: bool,
    /// Answer approvals from JSON lines on stdin (`--approvals stdin`, with
    /// --json): each `approval_requested` event waits for a line such as
    /// {"op":"approval","call_id":"…","decision":"approve"}.
    #[arg(long, value_name = "SOURCE", requires = "json", conflicts_with = "yes")]
    approvals: Option<run::ApprovalSource>,
    /// Apply `[profiles.NAME]` of your config (provider, model, mode, and any
    /// manifest key) over the manifest.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Override one manifest setting for this run, e.g. `-c model=gpt-4.1`,
    /// `-c providers.openai.base_url=http://127.0.0.1:8080/v1` (repeatable;
    /// the value is TOML, else text).
    #[arg(short = 'c', long = "config", value_name = "KEY=VALUE")]
    config: Vec<String>,
}

/// Which session a command is about: an id, or `--last`.
#[derive(Args)]
#[group(required = true, multiple = false)]
struct Which {
    /// The session id (a unique prefix is enough); or --last.
    id: Option<String>,
    /// The most recent session of this workspace.
    #[arg(long)]
    last: bool,
}

#[derive(Args)]
struct JsonFlag {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Exit codes.
const EXIT_TOOL_ERROR: u8 = 1;
const EXIT_USAGE: u8 = 2;

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    // A plugin compiled on its first use takes seconds: say so on stderr
    // (the interactive UI takes this over while it owns the terminal).
    corral_core::plugins::progress::set_sink(std::sync::Arc::new(|p| eprintln!("corral: {p}")));
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let code = rt.block_on(run(cli));
    // A thread may still sit in a blocking read of the terminal (an approval
    // prompt answered by Ctrl-C): exit without waiting for it.
    rt.shutdown_background();
    code
}

/// The async runtime's worker threads: the CPUs this process may run on,
/// at most 8 (`TOKIO_WORKER_THREADS` still decides when set). Read with
/// one `sched_getaffinity`: tokio's default reads the cgroup files and
/// mount table to find the same count, which was 6% of a whole `corral
/// tool call`. A CPU quota below the affinity only makes some workers idle.
fn worker_threads() -> usize {
    if let Some(n) = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return n;
    }
    // SAFETY: `set` is a plain bit set that sched_getaffinity fills for
    // this thread (pid 0); CPU_COUNT only reads it.
    let n = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            usize::try_from(libc::CPU_COUNT(&set)).unwrap_or(1)
        } else {
            1
        }
    };
    n.clamp(1, 8)
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CORRAL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Every record is made inert on its way out: fields carry paths,
        // names and lines that a model, a client or a plugin chose. Colour
        // would be escaped with the rest, so there is none; the UI styles
        // the records it shows.
        .with_writer(|| logsink::Record)
        .with_ansi(false)
        .with_target(false)
        .without_time()
        .try_init();
}

impl From<AgentFlags> for run::Flags {
    fn from(f: AgentFlags) -> Self {
        Self {
            provider: f.provider,
            model: f.model,
            max_iterations: f.max_iterations,
            json: f.json,
            mode: f.mode,
            yes: f.yes,
            approvals: f.approvals,
            overrides: corral_core::manifest::Overrides {
                profile: f.profile,
                settings: f.config,
            },
            output_schema: f.output_schema,
            max_cost_usd: f.max_cost_usd,
        }
    }
}

pub(crate) fn fail(message: &str) -> ExitCode {
    eprintln!("error: {}", inert(message));
    ExitCode::from(EXIT_USAGE)
}

async fn run(cli: Cli) -> ExitCode {
    let workspace = cli.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    let Some(command) = cli.command else {
        if !ui::interactive() {
            eprintln!(
                "corral opens its interactive UI on a terminal; without one, use \
                 `corral run \"PROMPT\"` (see `corral --help`)"
            );
            return ExitCode::from(EXIT_USAGE);
        }
        return ui::ui(&workspace, None, cli.ui.into()).await;
    };
    if cli.ui.any() {
        return fail(
            "--provider, --model, --max-iterations, --mode, --profile and -c before a subcommand \
             apply only to the interactive UI; put them after the subcommand (e.g. `corral run \
             --mode auto-edit ...`)",
        );
    }
    match command {
        Command::Run(mut args) => {
            if args.prompt == "-" {
                match run::prompt_from_stdin(args.agent.approvals.is_some()) {
                    Ok(p) => args.prompt = p,
                    Err(e) => return fail(&e.to_string()),
                }
            }
            if args.prompt.trim().is_empty() {
                return fail(
                    "`corral run` was given an empty prompt, which the model cannot act on; \
                     say what to do, e.g. `corral run \"What does this project do?\"` (or \
                     `corral` for the interactive UI)",
                );
            }
            run_command(&workspace, args).await
        }
        Command::Resume {
            id,
            last,
            prompt,
            agent,
        } => {
            if id.is_none() && !last {
                return fail(
                    "`corral resume` needs the session to continue: `corral resume --last` \
                     continues the most recent one of this workspace, and `corral resume ID` \
                     the one with that id (`corral sessions` lists them)",
                );
            }
            if prompt.as_deref().is_some_and(|p| p.trim().is_empty()) {
                return fail(
                    "`corral resume -p` was given an empty prompt; say what to do next, or \
                     leave -p out to let the model go on from where the session stopped",
                );
            }
            if prompt.is_none() && !agent.json && !agent.yes && ui::interactive() {
                let resume = match id {
                    Some(id) if !last => corral_core::session::Resume::Id(id),
                    _ => corral_core::session::Resume::Last,
                };
                return ui::ui(&workspace, Some(resume), agent.into()).await;
            }
            run::resume(&workspace, id, last, prompt, agent.into()).await
        }
        Command::Undo { id, yes, force } => undo::undo(&workspace, id.as_deref(), yes, force),
        Command::Sessions(json) => sessions::sessions(&workspace, json.json),
        Command::Trust { yes } => trust::trust(&workspace, yes).await,
        Command::Show { which, json } => sessions::show(&workspace, which.id.as_deref(), json.json),
        Command::Compact { which, json } => {
            sessions::compact(&workspace, which.id.as_deref(), json.json).await
        }
        Command::Plugin(PluginsCmd::Inspect { file, json }) => {
            plugins::inspect(&file, json.json).await
        }
        Command::Plugin(PluginsCmd::Add(args)) => install::add(&workspace, args).await,
        Command::Plugin(PluginsCmd::Update(args)) => install::update(&workspace, args).await,
        Command::Plugin(PluginsCmd::Remove { name }) => install::remove(&workspace, &name),
        Command::Plugin(PluginsCmd::Verify(json)) => install::verify(&workspace, json.json),
        Command::Plugin(PluginsCmd::Review { name, yes }) => {
            plugins::review(&workspace, name.as_deref(), yes).await
        }
        Command::Plugin(PluginsCmd::Pack {
            file,
            requests,
            output,
        }) => install::pack(&file, &requests, output.as_deref()),
        Command::Plugin(PluginsCmd::Publish {
            file,
            reference,
            requests,
        }) => install::publish(&file, &reference, requests.as_deref()).await,
        Command::Plugin(PluginsCmd::Cache { prune, clear, json }) => {
            plugins::cache(prune, clear, json.json)
        }
        Command::Plugin(PluginsCmd::New { name, lang, dir }) => new::new(&name, lang, dir),
        Command::Plugin(PluginsCmd::Wit { out }) => new::wit(&out),
        Command::Plugin(PluginsCmd::List(json)) => match load(&workspace).await {
            Ok((manifest, plugins)) => plugins::plugins_list(&manifest, &plugins, json.json),
            Err(code) => code,
        },
        Command::Tools(ToolsCmd::List { wait, json }) => {
            tools_list(&workspace, wait, json.json).await
        }
        Command::Tool(ToolCmd::Call { name, args, json }) => {
            tool_call(&workspace, &name, &args, json.json).await
        }
        Command::Mcp(cmd) => mcp::mcp(&workspace, cmd).await,
        Command::Acp { mode } => {
            match corral_acp::serve_stdio(corral_acp::AcpOptions { mode }).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&e.to_string()),
            }
        }
        Command::Hooks(cmd) => hooks::hooks(&workspace, cmd),
        Command::Skills(SkillsCmd::List(json)) => skills::list(&workspace, json.json),
    }
}

/// `corral tools list`: every tool; the MCP servers waited for at most
/// [`LIST_WAIT`] unless `wait`.
async fn tools_list(workspace: &std::path::Path, wait: bool, json: bool) -> ExitCode {
    match load(workspace).await {
        Ok((manifest, plugins)) => {
            let mcp = if wait {
                start_mcp(&manifest).await
            } else {
                start_mcp_within(&manifest, LIST_WAIT).await
            };
            plugins::tools_list(&plugins, &mcp, json)
        }
        Err(code) => code,
    }
}

/// `corral tool call`: only the MCP server whose prefix the name carries is
/// started (a plugin's tool needs none; an unknown name lists what every
/// server answers within the listing's wait).
async fn tool_call(workspace: &std::path::Path, name: &str, args: &str, json: bool) -> ExitCode {
    let loaded = match corral_core::load::load(workspace, None, None).await {
        Ok(loaded) => loaded,
        Err(e) => return fail(&e.to_string()),
    };
    let mut manifest = loaded.manifest.clone();
    let mcp = if loaded.plugins.plugin_for(name).is_some() {
        corral_core::mcp_client::McpTools::default()
    } else if manifest
        .mcp
        .iter()
        .any(|d| name.starts_with(&d.tool_prefix))
    {
        manifest.mcp.retain(|d| name.starts_with(&d.tool_prefix));
        start_mcp(&manifest).await
    } else {
        start_mcp_within(&manifest, LIST_WAIT).await
    };
    tool_call::tool_call(&loaded, mcp, name, args, json).await
}

/// `corral run`, in a worktree or not.
async fn run_command(workspace: &std::path::Path, args: RunArgs) -> ExitCode {
    // `/NAME args` and `/init` expand as they do in the UI.
    let prompt = match commands::expand_prompt(workspace, args.prompt) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    match args.worktree {
        Some(name) => {
            run::run_in_worktree(workspace, &name, prompt, args.record, args.agent.into()).await
        }
        None => run::run(workspace, prompt, args.record, args.agent.into()).await,
    }
}

pub(crate) async fn load(
    workspace: &std::path::Path,
) -> Result<(Manifest, std::sync::Arc<Plugins>), ExitCode> {
    let loaded = corral_core::load::load(workspace, None, None)
        .await
        .map_err(|e| fail(&e.to_string()))?;
    Ok((loaded.manifest, loaded.plugins))
}

/// How long a listing waits for the MCP servers before it goes on
/// without those that have not answered.
const LIST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The manifest's MCP servers started, their logs beside the workspace's
/// sessions.
pub(crate) async fn start_mcp(manifest: &Manifest) -> corral_core::mcp_client::McpTools {
    if manifest.mcp.is_empty() {
        return corral_core::mcp_client::McpTools::default();
    }
    corral_core::mcp_client::McpTools::start_pinned(manifest, &mcp_dir(manifest)).await
}

/// The manifest's MCP servers started as [`start_mcp`] does, but waited for
/// at most `wait`.
async fn start_mcp_within(
    manifest: &Manifest,
    wait: std::time::Duration,
) -> corral_core::mcp_client::McpTools {
    if manifest.mcp.is_empty() {
        return corral_core::mcp_client::McpTools::default();
    }
    corral_core::mcp_client::McpTools::start_within(manifest, &mcp_dir(manifest), wait).await
}

/// Where the MCP servers' logs and private directories go: beside the
/// workspace's sessions.
fn mcp_dir(manifest: &Manifest) -> std::path::PathBuf {
    corral_core::session::sessions_dir(&manifest.workspace)
        .unwrap_or_else(|_| std::env::temp_dir().join("corral-mcp"))
        .join("mcp")
}

/// Prints `text` (which may hold what a plugin or a model wrote) with its
/// escape sequences made inert.
pub(crate) fn out(text: &str) {
    write_out(&inert(text));
}

/// Prints JSON text, with the characters serde_json leaves raw escaped.
pub(crate) fn out_json(text: &str) {
    write_out(&corral_protocol::terminal::inert_json(text));
}

fn write_out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = stdout.write_all(b"\n");
    }
}

pub(crate) fn with_newline(s: &str) -> String {
    if s.ends_with('\n') {
        s.to_owned()
    } else {
        format!("{s}\n")
    }
}
