//! Command-line interface: parses arguments, calls the library, renders
//! results. Nothing here decides policy; it only shows what the library did.

use clap::{Args, Parser, Subcommand};
use corral::manifest::{self, Access, Manifest, Source};
use corral::runtime::{Capability, Plugins, Runtime, RuntimeOptions, ToolError, classify};
use corral::terminal::inert;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// corral: a coding agent whose tools are sandboxed WebAssembly components.
#[derive(Parser)]
#[command(name = "corral", version, about)]
struct Cli {
    /// The workspace root (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Log what the runtime does (compile cache, plugin log lines) to stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the agent on a prompt: streams the answer and shows each tool call.
    Run(RunArgs),
    /// List this workspace's sessions.
    Sessions(JsonFlag),
    /// Show a session's transcript.
    Show {
        /// The session id (a unique prefix is enough).
        id: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Continue a session, with a new prompt or from where it stopped.
    Resume {
        /// The session id (a unique prefix is enough).
        #[arg(required_unless_present = "last")]
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
    /// Review the project's corral.toml and trust it (it is ignored until then).
    Trust {
        /// Trust without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Installed plugins.
    #[command(subcommand)]
    Plugins(PluginsCmd),
    /// Tools the plugins provide.
    #[command(subcommand)]
    Tools(ToolsCmd),
    /// Run one tool.
    #[command(subcommand)]
    Tool(ToolCmd),
}

#[derive(Subcommand)]
enum PluginsCmd {
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
}

#[derive(Subcommand)]
enum ToolsCmd {
    /// List every tool: name, plugin, effects, description.
    List(JsonFlag),
}

#[derive(Subcommand)]
enum ToolCmd {
    /// Call one tool in its plugin's sandbox and print the output.
    Call {
        /// The tool's name.
        name: String,
        /// The arguments, a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Args)]
struct RunArgs {
    /// What to ask.
    prompt: String,
    /// Write the provider's responses to a replay cassette.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    #[command(flatten)]
    agent: AgentFlags,
}

#[derive(Args, Clone)]
struct AgentFlags {
    /// The provider plugin (default: [agent] provider, else the one whose key is set).
    #[arg(long)]
    provider: Option<String>,
    /// The model (default: the provider's configured model).
    #[arg(long)]
    model: Option<String>,
    /// Provider round trips before stopping (default 50).
    #[arg(long)]
    max_iterations: Option<u32>,
    /// Print the event stream as JSON lines instead of text.
    #[arg(long)]
    json: bool,
    /// Permission mode: read-only, ask (default), auto-edit, full-auto.
    #[arg(long)]
    mode: Option<corral::policy::Mode>,
    /// Approve every call that would ask (deny rules and read-only mode still hold).
    #[arg(long, short)]
    yes: bool,
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
    let rt = match tokio::runtime::Builder::new_multi_thread()
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
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .try_init();
}

impl From<AgentFlags> for crate::run::Flags {
    fn from(f: AgentFlags) -> Self {
        Self {
            provider: f.provider,
            model: f.model,
            max_iterations: f.max_iterations,
            json: f.json,
            mode: f.mode,
            yes: f.yes,
        }
    }
}

pub(crate) fn fail(message: &str) -> ExitCode {
    eprintln!("error: {}", inert(message));
    ExitCode::from(EXIT_USAGE)
}

async fn run(cli: Cli) -> ExitCode {
    let workspace = cli.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    match cli.command {
        Command::Run(args) => {
            crate::run::run(&workspace, args.prompt, args.record, args.agent.into()).await
        }
        Command::Resume {
            id,
            last,
            prompt,
            agent,
        } => crate::run::resume(&workspace, id, last, prompt, agent.into()).await,
        Command::Sessions(json) => crate::run::sessions(&workspace, json.json),
        Command::Trust { yes } => trust(&workspace, yes),
        Command::Show { id, json } => crate::run::show(&workspace, &id, json.json),
        Command::Plugins(PluginsCmd::Inspect { file, json }) => inspect(&file, json.json).await,
        Command::Plugins(PluginsCmd::List(json)) => match load(&workspace).await {
            Ok((manifest, plugins)) => plugins_list(&manifest, &plugins, json.json),
            Err(code) => code,
        },
        Command::Tools(ToolsCmd::List(json)) => match load(&workspace).await {
            Ok((_, plugins)) => tools_list(&plugins, json.json),
            Err(code) => code,
        },
        Command::Tool(ToolCmd::Call { name, args, json }) => match load(&workspace).await {
            Ok((_, plugins)) => tool_call(&plugins, &name, &args, json.json).await,
            Err(code) => code,
        },
    }
}

pub(crate) async fn load(workspace: &std::path::Path) -> Result<(Manifest, Plugins), ExitCode> {
    let manifest = manifest::load(workspace).map_err(|e| fail(&e.to_string()))?;
    let runtime = Runtime::new(RuntimeOptions::user()).map_err(|e| fail(&format!("{e:#}")))?;
    let plugins = runtime
        .load(&manifest)
        .await
        .map_err(|e| fail(&e.to_string()))?;
    Ok((manifest, plugins))
}

/// Prints `text` (which may hold what a plugin or a model wrote) with its
/// escape sequences made inert.
pub(crate) fn out(text: &str) {
    write_out(&inert(text));
}

/// Prints JSON text, with the characters serde_json leaves raw escaped.
pub(crate) fn out_json(text: &str) {
    write_out(&corral::terminal::inert_json(text));
}

fn write_out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = stdout.write_all(b"\n");
    }
}

fn grants_text(decl: &manifest::PluginDecl) -> String {
    let mut parts = Vec::new();
    for g in &decl.fs {
        let access = match g.access {
            Access::Ro => "ro",
            Access::Rw => "rw",
        };
        parts.push(format!("fs {} ({access})", g.path));
    }
    for n in &decl.net {
        parts.push(format!("net {}", n.pattern));
    }
    for e in &decl.env {
        parts.push(format!("env {e}"));
    }
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

fn plugins_list(manifest: &Manifest, plugins: &Plugins, json: bool) -> ExitCode {
    if json {
        let list: Vec<serde_json::Value> = plugins
            .plugins()
            .iter()
            .map(|p| {
                let d = p.decl();
                serde_json::json!({
                    "name": d.name,
                    "source": d.source.to_string(),
                    "sha256": p.sha256(),
                    "declared_in": d.origin.to_string(),
                    "grants": {
                        "fs": d.fs.iter().map(|g| serde_json::json!({"path": g.path, "access": g.access})).collect::<Vec<_>>(),
                        "net": d.net.iter().map(|n| n.pattern.clone()).collect::<Vec<_>>(),
                        "env": d.env,
                    },
                    "limits": {
                        "timeout_ms": d.limits.timeout_ms,
                        "memory_mb": d.limits.memory_mb,
                        "output_kb": d.limits.output_kb,
                        "host_calls": d.limits.host_calls,
                    },
                    "tools": p.tools().iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                    "warnings": tool_warnings(p),
                })
            })
            .collect();
        out_json(&serde_json::to_string_pretty(&list).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let mut text = format!("workspace {}\n", manifest.workspace.display());
    for p in plugins.plugins() {
        let d = p.decl();
        let pinned = match &d.source {
            Source::File {
                sha256: Some(_), ..
            } => " (pinned)",
            Source::File { .. } if manifest.trusted_files.contains_key(&d.name) => {
                " (approved by corral trust)"
            }
            _ => "",
        };
        text.push_str(&format!(
            "\n{}\n  source   {}\n  sha256   {}{pinned}\n  grants   {}\n  limits   {} ms, {} MiB, output {} KiB\n  tools    {}\n  from     {}\n",
            d.name,
            d.source,
            p.sha256(),
            grants_text(d),
            d.limits.timeout_ms,
            d.limits.memory_mb,
            d.limits.output_kb,
            p.tools().iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", "),
            d.origin,
        ));
        for w in tool_warnings(p) {
            text.push_str(&format!("  warning  {w}\n"));
        }
    }
    out(&text);
    ExitCode::SUCCESS
}

/// What is suspicious about how a plugin's tools describe themselves.
fn tool_warnings(p: &corral::runtime::Plugin) -> Vec<String> {
    p.tools()
        .iter()
        .flat_map(|t| t.warnings.iter().map(move |w| format!("`{}`: {w}", t.name)))
        .collect()
}

fn tools_list(plugins: &Plugins, json: bool) -> ExitCode {
    let tools = plugins.tools();
    if json {
        let list: Vec<serde_json::Value> = tools
            .iter()
            .map(|(p, t)| {
                serde_json::json!({
                    "name": t.name,
                    "plugin": p.decl().name,
                    "description": t.description,
                    "effects": t.effects,
                    "input_schema": t.input_schema,
                    "warnings": t.warnings,
                })
            })
            .collect();
        out_json(&serde_json::to_string_pretty(&list).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let width = tools.iter().map(|(_, t)| t.name.len()).max().unwrap_or(4);
    let pwidth = tools
        .iter()
        .map(|(p, _)| p.decl().name.len())
        .max()
        .unwrap_or(6);
    let mut text = String::new();
    for (p, t) in tools {
        let effects: Vec<String> = t
            .effects
            .iter()
            .map(|e| {
                serde_json::to_value(e)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            })
            .collect();
        let summary = t
            .description
            .split(". ")
            .next()
            .unwrap_or("")
            .trim_end_matches('.');
        text.push_str(&format!(
            "{:width$}  {:pwidth$}  {:12}  {summary}\n",
            t.name,
            p.decl().name,
            effects.join(","),
        ));
        for w in &t.warnings {
            text.push_str(&format!("{:width$}  ! warning: {w}\n", ""));
        }
    }
    out(&text);
    ExitCode::SUCCESS
}

async fn tool_call(plugins: &Plugins, name: &str, args: &str, json: bool) -> ExitCode {
    if let Err(e) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(args) {
        return fail(&format!("--args must be a JSON object: {e}"));
    }
    if plugins.plugin_for(name).is_none() {
        let known: Vec<String> = plugins
            .tools()
            .iter()
            .map(|(_, t)| t.name.clone())
            .collect();
        return fail(&format!(
            "no tool named `{name}`; available: {}",
            known.join(", ")
        ));
    }
    let result = tokio::select! {
        r = plugins.call(name, args, "cli-1") => r,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("interrupted: `{name}` was stopped");
            return ExitCode::from(crate::run::EXIT_INTERRUPTED);
        }
    };
    if json {
        let value = match &result {
            Ok(o) => serde_json::json!({"ok": o}),
            Err(e) => serde_json::json!({"error": e}),
        };
        out_json(&serde_json::to_string_pretty(&value).unwrap_or_default());
    } else {
        match &result {
            Ok(o) if o.is_error => eprint!("{}", inert(&with_newline(&o.content))),
            Ok(o) => out(&o.content),
            Err(e) => eprintln!("error: {}: {}", inert(name), inert(&describe_error(e))),
        }
    }
    match result {
        Ok(o) if !o.is_error => ExitCode::SUCCESS,
        _ => ExitCode::from(EXIT_TOOL_ERROR),
    }
}

fn trust(workspace: &std::path::Path, yes: bool) -> ExitCode {
    use corral::trust;
    let file = workspace.join("corral.toml");
    let text = match manifest::read_manifest(&file) {
        Ok(t) => t,
        Err(e) => return fail(&format!("{}: {e}", file.display())),
    };
    let canonical = file.canonicalize().unwrap_or_else(|_| file.clone());
    let Some(store) = trust::store_dir() else {
        return fail("no data directory to record trust in (set XDG_DATA_HOME)");
    };
    // Check the file parses, on top of the layers it would join, before
    // anyone trusts it; which plugin files it brings in comes from the same
    // check.
    let name = file.display().to_string();
    let mut layers = match manifest::layers(workspace) {
        Ok((layers, _)) => layers,
        Err(e) => return fail(&e.to_string()),
    };
    layers.retain(|l| l.name != name);
    layers.push(manifest::Layer {
        name: name.clone(),
        text: text.clone(),
        base: workspace.to_path_buf(),
    });
    let checked = match manifest::from_layers(workspace, &layers) {
        Ok(m) => m,
        Err(e) => return fail(&e.to_string()),
    };
    let files = trust::review_files(&checked, &name);
    let mut review = match trust::status(&store, &canonical, &text) {
        trust::Status::Trusted => {
            let recorded = trust::recorded_files(&store, &canonical, &text).unwrap_or_default();
            let changed = files_changed(&files, &recorded);
            if changed.is_empty() {
                out(&format!("{} is already trusted", file.display()));
                return ExitCode::SUCCESS;
            }
            format!(
                "{} is unchanged, but plugin files it names changed since you trusted it:\n{changed}",
                file.display()
            )
        }
        trust::Status::New => format!("{} is not trusted yet. It says:\n\n{text}", file.display()),
        trust::Status::Changed {
            previous: Some(old),
        } => format!(
            "{} changed since you trusted it:\n\n{}",
            file.display(),
            trust::diff(&old, &text)
        ),
        trust::Status::Changed { previous: None } => {
            format!(
                "{} changed since you trusted it. It now says:\n\n{text}",
                file.display()
            )
        }
    };
    review.push_str(&files_text(&files));
    out(&review);
    if !yes {
        if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            return fail("not trusted: confirm on a terminal, or pass --yes");
        }
        eprint!("Trust this file (its plugins, grants and rules take effect)? [y/N] ");
        let mut answer = String::new();
        if std::io::stdin().read_line(&mut answer).is_err()
            || !answer.trim().eq_ignore_ascii_case("y")
        {
            return fail("not trusted");
        }
    }
    let record = files
        .iter()
        .filter_map(|f| Some((f.plugin.clone(), f.record()?)))
        .collect();
    match trust::trust(&store, &canonical, &text, &record) {
        Ok(()) => {
            out(&format!("trusted {}", file.display()));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("cannot record trust: {e}")),
    }
}

/// A path for the terminal: control characters shown escaped.
fn shown(path: &std::path::Path) -> String {
    let mut text = String::new();
    for c in path.display().to_string().chars() {
        if c.is_control() {
            text.extend(c.escape_default());
        } else {
            text.push(c);
        }
    }
    text
}

/// The plugin files trusting a manifest approves, for review.
fn files_text(files: &[corral::trust::Reviewed]) -> String {
    use corral::trust::FileState;
    if files.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "\nPlugin files it names; trusting approves these exact contents, and a file that \
         changes is refused until you trust again:\n",
    );
    for f in files {
        text.push_str(&format!("  {}  {}", f.plugin, shown(&f.path)));
        if let Some(real) = &f.resolved {
            text.push_str(&format!(" -> {}", shown(real)));
        }
        if f.outside_workspace {
            text.push_str(" (outside the workspace)");
        }
        match &f.state {
            FileState::Hashed(h) => text.push_str(&format!("\n    sha256 {h}\n")),
            FileState::Pinned(h) => {
                text.push_str(&format!("\n    sha256 {h} (pinned by the manifest)\n"))
            }
            FileState::Unreadable(e) => text.push_str(&format!(
                "\n    cannot be read ({e}); it will not load until you trust again\n"
            )),
        }
    }
    text
}

/// Each unpinned plugin file whose content differs from what was approved:
/// the plugin, the file, the old and the new hash.
fn files_changed(
    files: &[corral::trust::Reviewed],
    recorded: &std::collections::BTreeMap<String, corral::trust::PluginFile>,
) -> String {
    let mut text = String::new();
    for f in files {
        let Some(now) = f.record() else { continue };
        let was = recorded.get(&f.plugin).and_then(|r| r.sha256.clone());
        if was == now.sha256 {
            continue;
        }
        let hash = |h: &Option<String>| h.clone().unwrap_or_else(|| "(none approved)".into());
        text.push_str(&format!(
            "  plugin `{}`: {}\n    was sha256 {}\n    now sha256 {}\n",
            f.plugin,
            shown(&f.path),
            hash(&was),
            match &f.state {
                corral::trust::FileState::Unreadable(e) => format!("unreadable ({e})"),
                _ => hash(&now.sha256),
            }
        ));
    }
    text
}

fn with_newline(s: &str) -> String {
    if s.ends_with('\n') {
        s.to_owned()
    } else {
        format!("{s}\n")
    }
}

fn describe_error(e: &ToolError) -> String {
    e.to_string()
}

async fn inspect(file: &std::path::Path, json: bool) -> ExitCode {
    let bytes = match corral::fsread::read_regular(file, corral::trust::MAX_PLUGIN_FILE) {
        Ok(b) => b,
        Err(e) => {
            return fail(&format!(
                "cannot read {}: {e}; give the path of a component file (.wasm)",
                file.display()
            ));
        }
    };
    let runtime = match Runtime::new(RuntimeOptions::user()) {
        Ok(r) => r,
        Err(e) => return fail(&format!("{e:#}")),
    };
    let info = match runtime.inspect(&bytes).await {
        Ok(i) => i,
        Err(e) => return fail(&format!("{}: {e}", file.display())),
    };
    if json {
        let value = serde_json::json!({
            "file": file.display().to_string(),
            "sha256": info.sha256,
            "imports": info.imports.iter().map(|i| serde_json::json!({"name": i, "capability": classify(i)})).collect::<Vec<_>>(),
            "exports": info.exports,
            "tools": match &info.tools { Ok(t) => serde_json::to_value(t).unwrap_or_default(), Err(e) => serde_json::json!({"error": e}) },
        });
        out_json(&serde_json::to_string_pretty(&value).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let mut text = format!(
        "{}\n  sha256  {}\n\nimports (what it could ask for):\n",
        file.display(),
        info.sha256
    );
    let mut by_cap: std::collections::BTreeMap<Capability, Vec<&str>> = Default::default();
    for import in &info.imports {
        by_cap.entry(classify(import)).or_default().push(import);
    }
    for (cap, names) in &by_cap {
        text.push_str(&format!("  {}\n", cap.describe()));
        for n in names {
            text.push_str(&format!("    {n}\n"));
        }
    }
    text.push_str("\nexports:\n");
    for e in &info.exports {
        text.push_str(&format!("  {e}\n"));
    }
    match &info.tools {
        Ok(tools) => {
            text.push_str("\ntools:\n");
            for t in tools {
                let effects: Vec<String> = t
                    .effects
                    .iter()
                    .map(|e| format!("{e:?}").to_lowercase())
                    .collect();
                text.push_str(&format!("  {} [{}]\n", t.name, effects.join(",")));
            }
        }
        Err(e) => text.push_str(&format!("\ntools: cannot be listed: {e}\n")),
    }
    out(&text);
    ExitCode::SUCCESS
}
