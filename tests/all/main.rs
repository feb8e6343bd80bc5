//! corral's integration tests: one binary, real components built from
//! source (tests/programs, plugins/), real files in temp directories, real
//! processes and real HTTP on loopback.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a test fails loudly at the first surprise"
)]

mod acp;
mod agent;
mod at_pace;
mod attack_approvals;
mod attack_exec;
mod attack_guard;
mod attack_guard_diff;
mod attack_mcp_servers;
mod attack_paths;
mod attack_tool_call;
mod attack_trust;
mod bounded_stream;
mod budgets;
mod cache;
mod calls_ahead;
mod children;
mod cli;
mod command_hooks;
mod commands;
mod compact;
mod conformance;
mod crash_writes;
mod deadline;
mod docs;
mod effects;
mod egress_address;
mod errors_ux;
mod exec;
mod exec_network;
mod fsguard;
mod function_length;
mod guard;
mod habits;
mod handle;
mod hooks;
mod injection;
mod install;
mod json_result;
mod keepalive;
mod keepalive_real;
mod layers;
mod lazy;
mod manifest;
mod mcp;
mod mcp_bounds;
mod mcp_client;
mod mcp_client_memory;
mod mcp_client_net;
mod mcp_clients;
mod mcp_http;
mod mcp_jsonrpc;
mod mcp_lifecycle;
mod mcp_packages;
mod mcp_read_only;
mod mcp_startup;
mod mcp_stdio;
mod messages;
mod own_state;
mod parsers;
mod pipeline;
mod policy;
mod registry_bounds;
mod rewind;
mod sandbox;
mod scripts;
mod settings;
mod skills;
mod speed_call;
mod speed_grep;
mod speed_provider;
mod speed_session;
mod speed_start;
mod speed_windows;
mod streamed_answer;
mod stubs;
mod subagents;
mod support;
mod templates;
mod tools;
mod trustpin;
mod tui;
mod tui_bounds;
mod typed_state;
mod ui_errors;
mod ui_habits;
mod undo;
mod undo_unseen;
mod web_fetch;

use corral_manifest::{Layer, Manifest, from_layers};
use corral_runtime::{Plugins, Runtime, RuntimeOptions, ToolError, ToolOutput};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One runtime for the whole test binary, with a compile cache kept in the
/// target directory so components are compiled once across runs.
pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        Runtime::new(RuntimeOptions {
            cache_dir: Some(cache_dir()),
        })
        .expect("runtime")
    })
}

pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// A workspace in a temp dir, with a sibling directory outside it that holds
/// a secret the plugins must never see.
pub struct Sandbox {
    pub root: tempfile::TempDir,
}

pub const SECRET: &str = "TOP-SECRET-7f3a";

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    pub fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(root.path().join("ws")).expect("ws");
        std::fs::create_dir(root.path().join("outside")).expect("outside");
        std::fs::write(root.path().join("outside/secret.txt"), SECRET).expect("secret");
        std::fs::write(
            root.path().join("ws/hello.txt"),
            "hello from the workspace\n",
        )
        .expect("hello");
        Self { root }
    }

    /// A new workspace whose project manifest (`corral.toml`) is `toml`.
    pub fn with_manifest(toml: &str) -> Self {
        let sb = Self::new();
        sb.write("corral.toml", toml);
        sb
    }

    pub fn ws(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    pub fn outside(&self) -> PathBuf {
        self.root.path().join("outside")
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.ws().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(p, content).expect("write");
    }

    /// The manifest made of the single layer `toml` (no defaults).
    pub fn manifest(&self, toml: &str) -> Result<Manifest, String> {
        from_layers(&self.ws(), &[layer(&self.ws(), toml)]).map_err(|e| e.to_string())
    }

    /// The manifest with the built-in defaults under `toml`.
    pub fn manifest_with_defaults(&self, toml: &str) -> Result<Manifest, String> {
        let defaults = Layer {
            name: corral_manifest::DEFAULTS_NAME.into(),
            text: corral_manifest::DEFAULTS.into(),
            base: self.ws(),
        };
        from_layers(&self.ws(), &[defaults, layer(&self.ws(), toml)]).map_err(|e| e.to_string())
    }

    pub async fn load(&self, toml: &str) -> Result<Plugins, String> {
        let manifest = self.manifest(toml)?;
        runtime().load(&manifest).await.map_err(|e| e.to_string())
    }

    /// [`Sandbox::load`] of one plugin's table ([`plugin_toml`]).
    pub async fn load_plugin(&self, name: &str, wasm: &str, rest: &str) -> Result<Plugins, String> {
        self.load(&plugin_toml(name, wasm, rest)).await
    }
}

/// A fresh workspace and a CLI of its own ([`Cli::new`]): where most tests
/// start.
pub fn workspace_and_cli() -> (Sandbox, Cli) {
    (Sandbox::new(), Cli::new())
}

pub fn layer(ws: &Path, toml: &str) -> Layer {
    Layer {
        name: "corral.toml".into(),
        text: toml.into(),
        base: ws.to_path_buf(),
    }
}

/// TOML for one plugin from a component path.
pub fn plugin_toml(name: &str, wasm: &str, rest: &str) -> String {
    format!("[plugins.{name}]\nsource = {wasm:?}\n{rest}\n")
}

/// [`plugin_toml`] of each of `plugins` (name, wasm, rest), in order.
pub fn plugins_toml(plugins: &[(&str, &str, &str)]) -> String {
    plugins
        .iter()
        .map(|(name, wasm, rest)| plugin_toml(name, wasm, rest))
        .collect()
}

pub async fn call(
    plugins: &Plugins,
    tool: &str,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    plugins.call(tool, &args.to_string(), "test").await
}

/// A sandbox error's message, or a panic that shows what came back instead.
pub fn sandbox_err(r: Result<ToolOutput, ToolError>) -> String {
    match r {
        Err(ToolError::Sandbox(m)) => m,
        other => panic!("expected a sandbox error, got {other:?}"),
    }
}

/// A tool failure's message (the guest saw an error), or a panic.
pub fn failed(r: Result<ToolOutput, ToolError>) -> String {
    match r {
        Err(ToolError::Failed(m)) => m,
        other => panic!("expected a tool failure, got {other:?}"),
    }
}

/// The user manifest of [`Cli::new`]: the trusted project may loosen
/// security settings.
pub const LOOSENING: &str = "[trust]\nproject_may_loosen = true\n";

/// The `corral` binary with its own config, cache and data directories.
/// Unless made with [`Cli::untrusting`], it trusts the workspace's
/// `corral.toml` (as `corral trust --yes` would) before each command, since
/// most tests are about what such a manifest does, not about trust.
pub struct Cli {
    pub home: tempfile::TempDir,
    pub trust_project: bool,
}

impl Default for Cli {
    fn default() -> Self {
        Self::new()
    }
}

impl Cli {
    /// Also lets the trusted project manifest loosen security settings
    /// (`[trust] project_may_loosen = true` in the user's file), since most
    /// tests put the settings they are about in the project's file.
    pub fn new() -> Self {
        let cli = Self::strict();
        cli.write_user_manifest(LOOSENING);
        cli
    }

    /// Writes `text` as the user's own manifest (`corral/corral.toml` in
    /// the config directory).
    pub fn write_user_manifest(&self, text: &str) {
        let config = self.home.path().join("config/corral");
        std::fs::create_dir_all(&config).expect("config dir");
        std::fs::write(config.join("corral.toml"), text).expect("user manifest");
    }

    /// Trusts the project manifest, which may only tighten the user's
    /// (empty) settings.
    pub fn strict() -> Self {
        Self {
            home: tempfile::tempdir().expect("home"),
            trust_project: true,
        }
    }

    pub fn untrusting() -> Self {
        Self {
            home: tempfile::tempdir().expect("home"),
            trust_project: false,
        }
    }

    pub fn command(&self, workspace: &Path, args: &[&str]) -> std::process::Command {
        if self.trust_project
            && args.first() != Some(&"trust")
            && workspace.join("corral.toml").exists()
        {
            support::process::run_ok(&mut self.bare(workspace, &["trust", "--yes"]), "trust");
        }
        self.bare(workspace, args)
    }

    /// Points `cmd` at this CLI's config and data directories and the
    /// shared compile cache ([`cache_home`]), without `CORRAL_LOG`.
    pub fn homes<'c>(&self, cmd: &'c mut std::process::Command) -> &'c mut std::process::Command {
        cmd.env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .env("XDG_CACHE_HOME", cache_home())
            .env("XDG_DATA_HOME", self.home.path().join("data"))
            .env_remove("CORRAL_LOG")
    }

    fn bare(&self, workspace: &Path, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(corral_binary());
        cmd.args(args)
            .arg("--workspace")
            .arg(workspace)
            .current_dir(workspace);
        self.homes(&mut cmd)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(std::process::Stdio::null());
        cmd
    }

    pub fn run(&self, workspace: &Path, args: &[&str]) -> std::process::Output {
        self.command(workspace, args).output().expect("run corral")
    }

    pub fn run_env(
        &self,
        workspace: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> std::process::Output {
        let mut cmd = self.command(workspace, args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run corral")
    }
}

/// The `corral` binary the tests drive: this build's, or the one
/// `CORRAL_TEST_BINARY` names, to play the attacks against another build
/// (an earlier commit's, say, to see that they got through there).
pub fn corral_binary() -> PathBuf {
    std::env::var_os("CORRAL_TEST_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_corral")))
}

/// A compile cache shared by the CLI tests, so each component is compiled
/// once per test run rather than once per test. The cache test uses its own.
pub fn cache_home() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-cache-home")
}

/// Puts corral's call ids in JSON events (of a run or a log) back to the
/// model's, where the model's was kept (`call.model_id`): the tests that
/// script a model name its calls by the ids they gave them. Events are
/// taken in order; an id is known from the first event that carries its call.
#[derive(Default)]
pub struct ModelIds(std::collections::HashMap<String, String>);

impl ModelIds {
    fn collect(&mut self, e: &serde_json::Value) {
        let mut note = |call: &serde_json::Value| {
            if let (Some(id), Some(model)) = (call["id"].as_str(), call["model_id"].as_str()) {
                self.0.insert(id.to_owned(), model.to_owned());
            }
        };
        note(&e["call"]);
        for call in e["message"]["tool_calls"].as_array().into_iter().flatten() {
            note(call);
        }
        if e["event"].is_object() {
            self.collect(&e["event"]);
        }
    }

    fn rewrite(&self, e: &mut serde_json::Value) {
        use serde_json::Value;
        let swap = |v: &mut Value| {
            if let Some(model) = v.as_str().and_then(|id| self.0.get(id)) {
                *v = Value::String(model.clone());
            }
        };
        for key in ["call_id", "parent_call"] {
            if let Some(v) = e.get_mut(key) {
                swap(v);
            }
        }
        // corral's id stays beside it, as `own_id`, for answering approvals.
        if let Some(call) = e.get_mut("call").filter(|c| c.is_object()) {
            let own = call["id"].clone();
            swap(&mut call["id"]);
            if call["id"] != own {
                call["own_id"] = own;
            }
        }
        if let Some(calls) = e
            .get_mut("message")
            .and_then(|m| m.get_mut("tool_calls"))
            .and_then(Value::as_array_mut)
        {
            for call in calls {
                if let Some(v) = call.get_mut("id") {
                    swap(v);
                }
            }
        }
        if let Some(closed) = e.get_mut("closed_calls").and_then(Value::as_array_mut) {
            closed.iter_mut().for_each(swap);
        }
        if let Some(inner) = e.get_mut("event").filter(|i| i.is_object()) {
            self.rewrite(inner);
        }
    }

    /// One event, with the ids known so far.
    pub fn apply(&mut self, mut e: serde_json::Value) -> serde_json::Value {
        self.collect(&e);
        self.rewrite(&mut e);
        e
    }
}

/// `events` with corral's call ids put back to the model's ([`ModelIds`]),
/// every id known from any event.
pub fn with_model_ids(mut events: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    let mut ids = ModelIds::default();
    for e in &events {
        ids.collect(e);
    }
    for e in &mut events {
        ids.rewrite(e);
    }
    events
}
