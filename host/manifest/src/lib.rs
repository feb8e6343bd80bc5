//! # corral-manifest
//!
//! Above the policy: exports [`Manifest`], [`load`], the layers, checked
//! grants, [`HookBinding`]s and [`trust`].
//!
//! The plugin manifest: which plugins to load and what each may touch.
//!
//! Three layers, later ones replacing earlier entries of the same name:
//! the built-in defaults, the user's `$XDG_CONFIG_HOME/corral/corral.toml`,
//! and the project's `corral.toml` at the workspace root. A plugin entry is
//! replaced as a whole (so a layer that changes a plugin restates its grants);
//! `enabled = false` removes it.
//!
//! Parsing is strict: unknown keys, malformed grants and grants that leave the
//! workspace without `outside_workspace = true` are errors that name the file,
//! the line and the fix. Everything is checked before any plugin is compiled.
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![warn(missing_docs)]

use corral_exec as exec;
use corral_exec::fsread;
use corral_policy as policy;
use corral_protocol as protocol;
use corral_protocol::terminal;

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

mod check;
mod error;
mod hook;
mod layers;
mod loosen;
mod mcp;
mod origin;
mod overrides;
mod raw;
pub mod reviewed;
mod secret;
pub mod trust;

pub use error::{ManifestError, Origin, SecretError};
pub use hook::{CommandHook, DEFAULT_COMMAND_TIMEOUT_SECS, HookBinding, HookTarget, command_name};
pub use layers::{from_layers, layers, load, load_adding, load_with, read_manifest, user_file};
pub use loosen::{Loosening, MAY_LOOSEN_KEY, wide_grants};
pub use mcp::{
    DEFAULT_MCP_OUTPUT_KB, DEFAULT_MCP_TIMEOUT_MS, McpPackage, McpServerDecl, PackageStore,
    url_origin as mcp_url_origin,
};
pub use overrides::{OVERRIDES_NAME, Overrides};
pub use raw::Layer;

/// Whether `name` can name a plugin: lowercase letters, digits, `-` and
/// `_`, starting with a letter.
pub fn valid_plugin_name(name: &str) -> bool {
    check::valid_name(name)
}

/// The layer every manifest starts from.
// Its entries look alike because they are data: one TOML table a plugin.
pub const DEFAULTS: &str = r#"
[plugins.fs]
source = "builtin:fs"
grants.fs = [{ path = ".", access = "rw" }]

[plugins.search]
source = "builtin:search"
grants.fs = [{ path = ".", access = "ro" }]

[plugins.replay]
source = "builtin:replay"
config = { delay_ms = 15 }

[plugins.openai]
source = "builtin:openai"
grants.net = ["https://api.openai.com:443"]
grants.secrets = [{ host = "api.openai.com", header = "authorization", value = "Bearer ${env:OPENAI_API_KEY}" }]
config = { base_url = "https://api.openai.com/v1", model = "gpt-4.1" }
limits = { timeout_ms = 600000 }

[plugins.anthropic]
source = "builtin:anthropic"
grants.net = ["https://api.anthropic.com:443"]
grants.secrets = [{ host = "api.anthropic.com", header = "x-api-key", value = "${env:ANTHROPIC_API_KEY}" }]
config = { base_url = "https://api.anthropic.com/v1", model = "claude-sonnet-4-5" }
limits = { timeout_ms = 600000 }

[plugins.shell]
source = "builtin:shell"
grants.exec = [{ program = "*", args = ["**"] }]
limits = { timeout_ms = 600000 }

[plugins.git]
source = "builtin:git"
grants.exec = [{ program = "git", args = ["**"] }]

# No origin is granted: the user adds the hosts it may fetch from.
[plugins.web-fetch]
source = "builtin:web-fetch"
"#;

/// Name given to the built-in layer in messages.
pub const DEFAULTS_NAME: &str = "<built-in defaults>";

/// Default wall-clock budget of one call.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Default linear-memory cap of one call.
pub const DEFAULT_MEMORY_MB: u64 = 256;
/// Default cap on the size of one call's output.
pub const DEFAULT_OUTPUT_KB: u64 = 1024;
/// Default number of host calls (WASI and corral imports) one call may make.
pub const DEFAULT_HOST_CALLS: u64 = 5_000_000;

/// Where a plugin's component comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Embedded in the `corral` binary (`source = "builtin:fs"`).
    Builtin(String),
    /// A `.wasm` file (`source = "plugins/tool.wasm"`, relative to the manifest),
    /// optionally pinned by `sha256 = "…"`.
    File {
        /// Absolute path of the component.
        path: PathBuf,
        /// The expected SHA-256 of the file, lowercase hex.
        sha256: Option<String>,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Builtin(name) => write!(f, "builtin:{name}"),
            Source::File { path, .. } => write!(f, "{}", path.display()),
        }
    }
}

/// Read-only or read-write access to a granted directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// `access = "ro"`
    Ro,
    /// `access = "rw"`
    Rw,
}

/// A directory the plugin may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsGrant {
    /// The path as written in the manifest (`"."`, `"docs"`).
    pub path: String,
    /// The canonical host directory.
    pub host_path: PathBuf,
    /// The path the plugin opens it by: workspace-relative (`.`, `docs`), or the
    /// absolute host path for grants outside the workspace.
    pub guest_path: String,
    /// What the plugin may do there.
    pub access: Access,
}

/// An allowed network destination, `scheme://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetGrant {
    /// `http` or `https`.
    pub scheme: String,
    /// A host name or address; `*.example.com` matches any subdomain.
    pub host: String,
    /// The port (the scheme's default when omitted).
    pub port: u16,
    /// The pattern as written.
    pub pattern: String,
    /// Where it was written.
    pub origin: Origin,
}

impl NetGrant {
    /// Whether a request to `scheme://host:port` is allowed by this grant.
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        if !self.scheme.eq_ignore_ascii_case(scheme) || self.port != port {
            return false;
        }
        let host = host.trim_end_matches('.');
        match self.host.strip_prefix("*.") {
            Some(suffix) => host.len().checked_sub(suffix.len() + 1).is_some_and(|at| {
                host.as_bytes()[at] == b'.' && host[at + 1..].eq_ignore_ascii_case(suffix)
            }),
            None => host.eq_ignore_ascii_case(&self.host),
        }
    }
}

/// Per-call limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call (`limits.timeout_ms`).
    pub timeout_ms: u64,
    /// Linear-memory cap (`limits.memory_mb`).
    pub memory_mb: u64,
    /// Cap on the output returned by one call (`limits.output_kb`).
    pub output_kb: u64,
    /// Calls into the host (WASI and corral imports) allowed per call
    /// (`limits.host_calls`).
    pub host_calls: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout_ms: DEFAULT_TIMEOUT_MS,
            memory_mb: DEFAULT_MEMORY_MB,
            output_kb: DEFAULT_OUTPUT_KB,
            host_calls: DEFAULT_HOST_CALLS,
        }
    }
}

/// One plugin, checked and ready to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginDecl {
    /// The plugin's name, the key of `[plugins.NAME]`.
    pub name: String,
    /// Where its component comes from.
    pub source: Source,
    /// Directories it may see.
    pub fs: Vec<FsGrant>,
    /// Hosts it may reach over HTTP.
    pub net: Vec<NetGrant>,
    /// Environment variables it may read (their values come from corral's own
    /// environment at call time).
    pub env: Vec<String>,
    /// Credentials the host adds on egress.
    pub secrets: Vec<Secret>,
    /// Programs it may run through the host.
    pub exec: Vec<crate::exec::ExecGrant>,
    /// Per-call limits.
    pub limits: Limits,
    /// Its own settings, read through `host.config`.
    pub config: BTreeMap<String, String>,
    /// Put before each of its tool names (`tool_prefix`); the plugin itself
    /// sees its own names.
    pub tool_prefix: String,
    /// Where it was declared.
    pub origin: Origin,
    /// Its tools whose output is sensitive (`reads_secrets`), by the names
    /// the model calls them.
    pub reads_secrets: Vec<String>,
    /// Its tools that send what they are given out (`sinks`), by the names
    /// the model calls them: a way out to the guards whatever its grants.
    pub sinks: Vec<String>,
    /// Its tools whose calls name their destination (`destination_args`):
    /// the tool, by the name the model calls it, and the argument holding
    /// the URL. Such a call to an origin `net` does not name asks first.
    pub destination_args: BTreeMap<String, String>,
}

/// The checked manifest of one workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The canonical workspace root.
    pub workspace: PathBuf,
    /// The plugins to load, by name.
    pub plugins: Vec<PluginDecl>,
    /// `[agent]` settings.
    pub agent: AgentSettings,
    /// `[sandbox] require_os_sandbox` (default true).
    pub require_os_sandbox: bool,
    /// `[policy]`: mode and rules.
    pub policy: crate::policy::Policy,
    /// `[guard]`: the exfiltration guard's settings.
    pub guard: crate::policy::GuardSettings,
    /// `[hooks]`: hook plugins bound to events, in the order they run.
    pub hooks: Vec<HookBinding>,
    /// `[mcp.NAME]`: the MCP servers whose tools join the session.
    pub mcp: Vec<McpServerDecl>,
    /// For each plugin of a trusted project manifest that loads an unpinned
    /// `.wasm` file: what `corral trust` approved of that file, which the
    /// runtime checks before compiling it. Filled by [`load`] only.
    pub trusted_files: BTreeMap<String, crate::trust::PluginFile>,
    /// Every line of the project manifest that loosens the security
    /// settings of the layers under it, and whether it took effect (see
    /// [`Loosening`]): `corral trust` lists them, a load warns about the
    /// ignored ones.
    pub loosening: Vec<Loosening>,
    /// Where the reviewed tools of this workspace's plugins are kept; a
    /// plugin whose tools differ is withheld at load (see [`reviewed`]).
    /// Set by [`load`] only.
    pub tool_reviews: Option<reviewed::ToolReviews>,
    /// Provider plugins that may not start, and why: their base URL came
    /// from `OPENAI_BASE_URL` or `ANTHROPIC_BASE_URL` but their grants do not
    /// reach it (see [`Overrides`]). Set by [`load`] only.
    pub provider_errors: BTreeMap<String, String>,
}

impl Manifest {
    /// A note for each grant that covers corral's own state (a plugin or an
    /// MCP server granted `~` or `/`, or a workspace that holds the user's
    /// corral directories): what stays out of reach of it anyway. Shown
    /// where grants are written (`plugin add`, `mcp add`, `-c`, `corral
    /// trust`), so that the user knows the grant is narrower than it reads.
    pub fn state_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if let Some(note) = crate::exec::state::grant_note("workspace", &self.workspace) {
            notes.push(format!(
                "the workspace {}: {note}",
                self.workspace.display()
            ));
        }
        for p in &self.plugins {
            for g in &p.fs {
                if g.host_path == self.workspace {
                    continue;
                }
                if let Some(note) = crate::exec::state::grant_note(&g.path, &g.host_path) {
                    notes.push(format!("plugin `{}`: {note}", p.name));
                }
            }
        }
        for m in &self.mcp {
            for dir in &m.fs {
                if *dir == self.workspace {
                    continue;
                }
                let shown = dir.display().to_string();
                if let Some(note) = crate::exec::state::grant_note(&shown, dir) {
                    notes.push(format!("MCP server `{}`: {note}", m.name));
                }
            }
        }
        notes
    }
}

/// A credential the host adds to requests to one destination (scheme, host
/// and port); the plugin never sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    /// `http` or `https`.
    pub scheme: String,
    /// The host whose requests get the header: a name or an address,
    /// lowercase, without brackets.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The header name, lowercase.
    pub header: String,
    /// The value template; `${env:NAME}` is replaced at request time.
    pub value: String,
}

impl Secret {
    /// Whether a request to `scheme://host:port` gets this header: only one to
    /// the very destination it is bound to, so neither a cleartext request nor
    /// one to another port of the same host carries it.
    pub fn applies_to(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.scheme.eq_ignore_ascii_case(scheme)
            && self.port == port
            && self.host.eq_ignore_ascii_case(host.trim_end_matches('.'))
    }

    /// `scheme://host:port`, as a manifest would write it.
    pub fn origin(&self) -> String {
        if self.host.contains(':') {
            format!("{}://[{}]:{}", self.scheme, self.host, self.port)
        } else {
            format!("{}://{}:{}", self.scheme, self.host, self.port)
        }
    }

    /// Environment variables the value reads.
    pub fn env_vars(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = self.value.as_str();
        while let Some(at) = rest.find("${env:") {
            let after = &rest[at + 6..];
            match after.find('}') {
                Some(end) => {
                    out.push(after[..end].to_owned());
                    rest = &after[end + 1..];
                }
                None => break,
            }
        }
        out
    }

    /// The header value with every `${env:NAME}` replaced, or the first
    /// variable that is not set.
    pub fn resolve(&self) -> Result<String, SecretError> {
        let mut value = self.value.clone();
        for var in self.env_vars() {
            let v = std::env::var(&var).map_err(|_| SecretError::Unset(var.clone()))?;
            value = value.replace(&format!("${{env:{var}}}"), &v);
        }
        Ok(value)
    }
}

/// Settings of the agent loop (`[agent]`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentSettings {
    /// The provider plugin's name, if one is chosen.
    pub provider: Option<String>,
    /// The model, if it overrides the provider's default.
    pub model: Option<String>,
    /// Provider round trips per prompt (default 50).
    pub max_iterations: Option<u32>,
    /// Upper bound of generated tokens per request.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// How deep `task` subagents may nest (default 1; 0 offers no `task`).
    pub max_subagent_depth: Option<u32>,
    /// Subagents of one agent running at once (default 4).
    pub max_parallel_subagents: Option<u32>,
    /// A subagent's round trips (default 20, never more than its parent's).
    pub subagent_max_iterations: Option<u32>,
    /// Share of the context window past which the history is compacted
    /// (`compact_at`, default 0.8).
    pub compact_at: Option<f64>,
    /// Model limits that override the provider's (`[agent.models."ID"]`).
    pub models: BTreeMap<String, ModelOverride>,
}

/// A model's limits as the manifest sets them; unset fields keep what the
/// provider reports.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelOverride {
    /// Tokens of one request, prompt and answer together.
    pub context_window: Option<u32>,
    /// The most tokens of one answer.
    pub max_output_tokens: Option<u32>,
    /// Whether it takes images.
    pub accepts_images: Option<bool>,
    /// What its tokens cost (`price`), when the manifest says.
    pub price: Option<Price>,
}

/// A model's price in US dollars per million tokens (`[agent.models."ID"]
/// price = { input_per_mtok = 2.0, output_per_mtok = 8.0 }`). corral ships
/// no price list: prices change, and a made-up cost is worse than none.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Price {
    /// Dollars per million prompt tokens.
    pub input_per_mtok: f64,
    /// Dollars per million generated tokens.
    pub output_per_mtok: f64,
}

impl Price {
    /// The cost of `input` prompt and `output` generated tokens, in dollars.
    pub fn cost(&self, input: u64, output: u64) -> f64 {
        // Token counts stay far below 2^53, where f64 is exact.
        (input as f64 * self.input_per_mtok + output as f64 * self.output_per_mtok) / 1e6
    }
}
