//! The manifest as written: a layer's text ([`Layer`]) and the TOML schema
//! it is parsed with, every table and key, strictly (`deny_unknown_fields`);
//! `check` turns it into the typed manifest.

use super::Access;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use toml::Spanned;

/// One manifest layer: its name for messages, its text, and the directory
/// relative `.wasm` sources are resolved against.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Shown in messages (a path, or [`super::DEFAULTS_NAME`]).
    pub name: String,
    /// The TOML text.
    pub text: String,
    /// Base directory for relative `source` paths.
    pub base: PathBuf,
}

/// A manifest file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    /// `[agent]`
    #[serde(default)]
    pub(super) agent: RawAgent,
    /// `[plugins.NAME]`
    #[serde(default)]
    pub(super) plugins: BTreeMap<String, RawPlugin>,
    /// `[sandbox]`
    #[serde(default)]
    pub(super) sandbox: RawSandbox,
    /// `[policy]`
    #[serde(default)]
    pub(super) policy: RawPolicy,
    /// `[guard]`
    #[serde(default)]
    pub(super) guard: RawGuard,
    /// `[hooks]`
    #[serde(default)]
    pub(super) hooks: RawHooks,
    /// `[trust]`
    #[serde(default)]
    pub(super) trust: RawTrust,
    /// `[mcp.NAME]`
    #[serde(default)]
    pub(super) mcp: BTreeMap<String, RawMcp>,
    /// `[profiles.NAME]`: settings `--profile NAME` applies (read from the
    /// user's file only, by `overrides`).
    #[allow(
        dead_code,
        reason = "read as TOML by the overrides, before this schema"
    )]
    #[serde(default)]
    pub(super) profiles: BTreeMap<String, toml::Table>,
}

/// Whether `text` is a manifest this schema accepts; the parser's error
/// otherwise.
pub(super) fn check_text(text: &str) -> Result<(), toml::de::Error> {
    toml::from_str::<RawFile>(text).map(drop)
}

/// `[trust]`: what the user lets a trusted project manifest do. Read from
/// the user's own file only; in a project's file it is ignored.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTrust {
    /// `project_may_loosen = true` lets a trusted project manifest loosen
    /// security settings (turn the guard off, a looser mode, `allow` rules,
    /// `require_os_sandbox = false`, …); by default it may only tighten them.
    pub(super) project_may_loosen: Option<Spanned<bool>>,
}

/// `[guard]`: the exfiltration guard. `enabled` of a later layer replaces an
/// earlier one; the lists of every layer add up.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGuard {
    /// `enabled = false` turns the guard off (default on).
    pub(super) enabled: Option<Spanned<bool>>,
    /// `allow_hosts = ["api.example.com", "127.0.0.1:8080"]`
    #[serde(default)]
    pub(super) allow_hosts: Vec<Spanned<String>>,
    /// `untrusted = ["generated/**"]`
    #[serde(default)]
    pub(super) untrusted: Vec<Spanned<String>>,
    /// `trusted = ["vendor/ours/**"]`
    #[serde(default)]
    pub(super) trusted: Vec<Spanned<String>>,
    /// `secrets = ["config/prod.yaml"]`
    #[serde(default)]
    pub(super) secrets: Vec<Spanned<String>>,
    /// `injection = false` turns the injection guard off (default on).
    pub(super) injection: Option<Spanned<bool>>,
    /// `injection_exempt = ["web_fetch"]`: tools whose arguments may carry
    /// values from untrusted content unasked.
    #[serde(default)]
    pub(super) injection_exempt: Vec<Spanned<String>>,
}

/// `[hooks]`: hook plugins bound to events, each run in the order written
/// (user layer first, then the project's). Bindings of every layer apply.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHooks {
    /// `session_start = [{ plugin = "git-context" }]`
    #[serde(default)]
    pub(super) session_start: Vec<Spanned<RawHook>>,
    /// `session_end = [{ plugin = "…" }]`
    #[serde(default)]
    pub(super) session_end: Vec<Spanned<RawHook>>,
    /// `user_prompt = [{ plugin = "…" }]`
    #[serde(default)]
    pub(super) user_prompt: Vec<Spanned<RawHook>>,
    /// `before_tool = [{ plugin = "block-commands", tools = ["run_command"] }]`
    #[serde(default)]
    pub(super) before_tool: Vec<Spanned<RawHook>>,
    /// `after_tool = [{ plugin = "format", tools = ["write_file", "edit_file"] }]`
    #[serde(default)]
    pub(super) after_tool: Vec<Spanned<RawHook>>,
    /// `after_tool_failure = [{ plugin = "…" }]`
    #[serde(default)]
    pub(super) after_tool_failure: Vec<Spanned<RawHook>>,
    /// `before_compact = [{ plugin = "…" }]`
    #[serde(default)]
    pub(super) before_compact: Vec<Spanned<RawHook>>,
    /// `stop = [{ plugin = "…" }]`
    #[serde(default)]
    pub(super) stop: Vec<Spanned<RawHook>>,
    /// `subagent_stop = [{ plugin = "…" }]`
    #[serde(default)]
    pub(super) subagent_stop: Vec<Spanned<RawHook>>,
}

/// One binding of `[hooks]`: a hook plugin, or a command line run
/// confined through `/bin/sh -c` (a Claude Code hook, unchanged).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHook {
    /// `plugin = "block-commands"`: a `[plugins.NAME]` entry exporting
    /// `corral:plugin/hook`.
    pub(super) plugin: Option<String>,
    /// `command = "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/check.sh"`: run by
    /// `/bin/sh -c` inside the confinement, the event's JSON on its input.
    pub(super) command: Option<String>,
    /// `tools = ["run_command", "git_*"]`: tool events only; `*` matches any
    /// run of characters. Empty or absent: every tool.
    #[serde(default)]
    pub(super) tools: Vec<String>,
    /// `timeout = 30`: seconds a command hook may run (default 60).
    pub(super) timeout: Option<Spanned<u64>>,
    /// `grants = { read = ["docs"], write = [".cache"], env = ["GIT_DIR"], net = ["https://api.example.com:443"] }`:
    /// what a command hook gets beyond reading the workspace.
    #[serde(default)]
    pub(super) grants: RawHookGrants,
}

/// `grants` of a command hook: nothing unless written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHookGrants {
    /// `read = ["docs", "/opt/tools"]`: directories it may read besides the
    /// workspace and the system's (relative to the workspace).
    #[serde(default)]
    pub(super) read: Vec<String>,
    /// `write = [".cache/hooks"]`: directories it may read and write.
    #[serde(default)]
    pub(super) write: Vec<String>,
    /// `env = ["GIT_AUTHOR_NAME"]`: variables passed from corral's environment.
    #[serde(default)]
    pub(super) env: Vec<String>,
    /// `net = true` (any destination), or only some through corral's proxy:
    /// `net = ["https://api.example.com:443"]`.
    pub(super) net: Option<Spanned<toml::Value>>,
}

/// `[policy]`: the permission mode and rules. Rules of every layer apply;
/// `mode` of a later layer replaces an earlier one.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    /// `mode = "ask"`: read-only, ask, auto-edit or full-auto.
    pub(super) mode: Option<Spanned<String>>,
    /// `allow = ["run_command(cargo test **)"]`
    #[serde(default)]
    pub(super) allow: Vec<Spanned<String>>,
    /// `ask = ["git_commit"]`
    #[serde(default)]
    pub(super) ask: Vec<Spanned<String>>,
    /// `deny = ["run_command(rm **)"]`: refused; the model is told.
    #[serde(default)]
    pub(super) deny: Vec<Spanned<String>>,
    /// `stop = ["run_command(git push **)"]`: refused, and the run ends.
    #[serde(default)]
    pub(super) stop: Vec<Spanned<String>>,
}

/// `[sandbox]`
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandbox {
    /// `require_os_sandbox = false` runs granted programs even where the
    /// kernel cannot confine them (default true: refuse).
    pub(super) require_os_sandbox: Option<Spanned<bool>>,
}

/// `[agent]`: how `corral run` talks to a model. Each key overrides the
/// same key of an earlier layer.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgent {
    /// `provider = "openai"`: the provider plugin to use.
    pub(super) provider: Option<Spanned<String>>,
    /// `model = "gpt-4.1"`: overrides the provider's configured model.
    pub(super) model: Option<String>,
    /// `max_iterations = 50`: provider round trips per prompt.
    pub(super) max_iterations: Option<Spanned<u32>>,
    /// `max_tokens = 8192`
    pub(super) max_tokens: Option<u32>,
    /// `temperature = 0.2`
    pub(super) temperature: Option<f32>,
    /// `max_subagent_depth = 1`: how deep `task` subagents may nest (0: no `task`).
    pub(super) max_subagent_depth: Option<u32>,
    /// `max_parallel_subagents = 4`: subagents of one agent running at once.
    pub(super) max_parallel_subagents: Option<Spanned<u32>>,
    /// `subagent_max_iterations = 20`: a subagent's round trips.
    pub(super) subagent_max_iterations: Option<Spanned<u32>>,
    /// `compact_at = 0.8`: compact the history when the next request would
    /// take more than this share of the model's context window.
    pub(super) compact_at: Option<Spanned<f64>>,
    /// `[agent.models."gpt-x"] context_window = 8000, max_output_tokens = 1000`:
    /// a model's limits, over what its provider reports.
    #[serde(default)]
    pub(super) models: BTreeMap<String, RawModel>,
}

/// `[agent.models."ID"]`
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawModel {
    /// `context_window = 8000`: tokens of one request, prompt and answer.
    pub(super) context_window: Option<Spanned<u32>>,
    /// `max_output_tokens = 1000`
    pub(super) max_output_tokens: Option<u32>,
    /// `accepts_images = true`
    pub(super) accepts_images: Option<bool>,
    /// `price = { input_per_mtok = 2.0, output_per_mtok = 8.0 }`: US dollars
    /// per million tokens, for the cost `run --json` reports.
    pub(super) price: Option<Spanned<RawPrice>>,
}

/// `price` of `[agent.models."ID"]`.
#[derive(Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrice {
    /// Dollars per million prompt tokens.
    pub(super) input_per_mtok: f64,
    /// Dollars per million generated tokens.
    pub(super) output_per_mtok: f64,
}

/// `[plugins.NAME]`
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlugin {
    /// `source = "builtin:fs"` or `source = "path/to/tool.wasm"`
    pub(super) source: Option<Spanned<String>>,
    /// `sha256 = "…"` pins a `.wasm` source.
    pub(super) sha256: Option<Spanned<String>>,
    /// `enabled = false` removes a plugin declared by an earlier layer.
    #[serde(default = "yes")]
    pub(super) enabled: bool,
    /// `grants = { fs = […], net = […], env = […] }`
    #[serde(default)]
    pub(super) grants: RawGrants,
    /// `limits = { timeout_ms = 30000, memory_mb = 256, output_kb = 1024, host_calls = 5000000 }`
    #[serde(default)]
    pub(super) limits: RawLimits,
    /// `config = { key = "value" }`
    #[serde(default)]
    pub(super) config: toml::Table,
    /// `tool_prefix = "wc_"`: put before each of its tool names (a way out
    /// of a clash with another plugin's tools).
    pub(super) tool_prefix: Option<Spanned<String>>,
    /// `from = "oci://registry/tools/wc:1.0"`: where `corral plugin add`
    /// fetched the component; `corral plugin update` fetches from there.
    #[allow(dead_code, reason = "read by `corral plugin update` from the file")]
    pub(super) from: Option<String>,
    /// `sinks = ["post_message"]`: tools of this plugin that send what they
    /// are given out (a way out to the exfiltration guard, whatever the
    /// plugin's grants).
    #[serde(default)]
    pub(super) sinks: Vec<String>,
    /// `sensitive = ["read_inbox"]`: tools of this plugin whose output is
    /// private data (as `reads_secrets`).
    #[serde(default)]
    pub(super) sensitive: Vec<String>,
    /// `reads_secrets = ["vault_get"]`: tools of this plugin whose output is
    /// sensitive to the exfiltration guard.
    #[serde(default)]
    pub(super) reads_secrets: Vec<String>,
    /// `destination_args = { web_fetch = "url" }`: the argument of a tool
    /// that holds the URL a call goes to; a call whose URL's origin is not
    /// in `grants.net` asks through the policy, and an approval lets that
    /// one call reach it.
    pub(super) destination_args: Option<BTreeMap<String, Spanned<String>>>,
    /// `denied = ["net:https://x:443"]`: what the user refused when the
    /// plugin was added or updated; `corral plugin update` keeps refusing it.
    #[allow(dead_code, reason = "read by `corral plugin update` from the file")]
    #[serde(default)]
    pub(super) denied: Vec<String>,
    /// `version = "1.0.0"`: the version the plugin declared when it was added.
    #[allow(dead_code, reason = "read by `corral plugin list` from the file")]
    pub(super) version: Option<String>,
}

fn yes() -> bool {
    true
}

/// `grants`
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGrants {
    /// `fs = [{ path = ".", access = "rw" }]`
    #[serde(default)]
    pub(super) fs: Vec<Spanned<RawFsGrant>>,
    /// `net = ["https://api.example.com:443"]`
    #[serde(default)]
    pub(super) net: Vec<Spanned<String>>,
    /// `env = ["HOME"]`
    #[serde(default)]
    pub(super) env: Vec<Spanned<String>>,
    /// `secrets = [{ origin = "https://api.openai.com:443", header = "authorization", value = "Bearer ${env:OPENAI_API_KEY}" }]`
    #[serde(default)]
    pub(super) secrets: Vec<Spanned<RawSecret>>,
    /// `exec = [{ program = "cargo", args = ["test", "**"] }]`
    #[serde(default)]
    pub(super) exec: Vec<Spanned<RawExec>>,
}

/// One entry of `grants.exec`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExec {
    /// `program = "cargo"`: a name found in `PATH`, or a path; `"*"` is any
    /// program, found in `PATH` when each command runs.
    pub(super) program: String,
    /// `args = ["test", "**"]`: literal tokens, `*` (one argument), `**` (the rest).
    pub(super) args: Vec<String>,
    /// `timeout_ms = 120000`
    pub(super) timeout_ms: Option<u64>,
    /// `network = true` lets the program open TCP connections;
    /// `network = ["https://crates.io:443"]` only to those destinations,
    /// through corral's proxy. Read by `Check::exec_network`.
    #[serde(default)]
    pub(super) network: Option<Spanned<toml::Value>>,
}

/// One entry of `grants.secrets`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSecret {
    /// `origin = "https://api.openai.com:443"`: requests to this scheme, host
    /// and port (and only to them) get the header.
    pub(super) origin: Option<String>,
    /// `host = "api.openai.com"`: the older spelling, the same as
    /// `origin = "https://api.openai.com:443"`.
    pub(super) host: Option<String>,
    /// `header = "authorization"`
    pub(super) header: String,
    /// `value = "Bearer ${env:OPENAI_API_KEY}"`: `${env:NAME}` is read from corral's environment.
    pub(super) value: String,
}

/// One entry of `grants.fs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFsGrant {
    /// `path = "docs"`, relative to the workspace root
    pub(super) path: String,
    /// `access = "ro"` or `"rw"`
    pub(super) access: Access,
    /// `outside_workspace = true` allows an absolute path or one leaving the workspace.
    #[serde(default)]
    pub(super) outside_workspace: bool,
}

/// `limits`
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) timeout_ms: Option<Spanned<u64>>,
    pub(super) memory_mb: Option<Spanned<u64>>,
    pub(super) output_kb: Option<Spanned<u64>>,
    pub(super) host_calls: Option<Spanned<u64>>,
}

/// `[mcp.NAME]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    /// `command = "npx"`: a name found in `PATH`, or a path.
    pub(super) command: Option<Spanned<String>>,
    /// `args = ["-y", "@modelcontextprotocol/server-filesystem", "."]`
    #[serde(default)]
    pub(super) args: Vec<String>,
    /// `env = { KEY = "value" }`: set for the server, besides `grants.env`.
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    /// `cwd = "sub"`: relative to the workspace (default the workspace).
    pub(super) cwd: Option<String>,
    /// `url = "http://127.0.0.1:3001/mcp"`: a streamable HTTP server, which
    /// corral connects to itself (instead of `command`).
    pub(super) url: Option<Spanned<String>>,
    /// `enabled = false` removes a server an earlier layer declared.
    #[serde(default = "yes")]
    pub(super) enabled: bool,
    /// `grants = { fs = ["data"], env = ["GITHUB_TOKEN"], net = true }`
    #[serde(default)]
    pub(super) grants: RawMcpGrants,
    /// `effects = ["read"]` (every tool) or `effects = { default = ["read"], write_file = ["write"] }`.
    /// Without it (or without `default`), a tool of a server that may write
    /// (a `grants.fs` directory, `grants.net`) is `write`, any other `read`.
    pub(super) effects: Option<Spanned<RawEffects>>,
    /// `tool_prefix = "fs__"` (default `NAME__`).
    pub(super) tool_prefix: Option<Spanned<String>>,
    /// `sensitive = ["read_inbox"]`: its tools (without the prefix) whose
    /// results are private data to the exfiltration guard.
    #[serde(default)]
    pub(super) sensitive: Vec<String>,
    /// `sinks = ["send_email"]`: its tools (without the prefix) that send
    /// what they are given out: a way out to the guards, whatever the
    /// server's grants.
    #[serde(default)]
    pub(super) sinks: Vec<String>,
    /// `timeout_ms = 60000`: per call, and the wait for the server to start.
    pub(super) timeout_ms: Option<u64>,
    /// `output_kb = 1024`: bytes kept of one result, and the largest message read.
    pub(super) output_kb: Option<usize>,
    /// `package = { store = "npm", name = "@scope/server", version = "1.2.3", sha256 = "…" }`:
    /// the install in corral's MCP package store the entry runs, checked
    /// against `sha256` before each start (written by `corral mcp import`).
    pub(super) package: Option<Spanned<RawPackage>>,
}

/// `package` of `[mcp.NAME]`, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPackage {
    /// `store = "npm"` or `"pypi"`: the registry it was installed from.
    pub(super) store: String,
    /// `name = "@modelcontextprotocol/server-filesystem"`
    pub(super) name: String,
    /// `version = "2026.8.31"`: the version installed.
    pub(super) version: String,
    /// `sha256 = "…"`: of the installed tree, as the install said it.
    pub(super) sha256: String,
}

/// `effects` of `[mcp.NAME]`.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawEffects {
    /// The same effects for every tool.
    All(Vec<String>),
    /// `default` and per-tool overrides (tool names without the prefix).
    PerTool(BTreeMap<String, Vec<String>>),
}

/// `grants` of `[mcp.NAME]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcpGrants {
    /// `fs = ["data", "/tmp/x"]`: directories the server may read and write
    /// (relative to the workspace).
    #[serde(default)]
    pub(super) fs: Vec<String>,
    /// `env = ["GITHUB_TOKEN"]`: variables passed from corral's environment.
    #[serde(default)]
    pub(super) env: Vec<String>,
    /// `net = true` (any destination), or only some through corral's
    /// proxy: `net = ["https://api.github.com:443"]`.
    pub(super) net: Option<Spanned<toml::Value>>,
    /// `secrets = [{ header = "authorization", value = "Bearer ${env:TOKEN}" }]`:
    /// headers corral adds to its requests to a `url` server's origin (and
    /// to no other), as for a provider plugin's `grants.secrets`.
    #[serde(default)]
    pub(super) secrets: Vec<Spanned<RawSecret>>,
}
