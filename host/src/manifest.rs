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

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;

mod secret;
use secret::split_origin;

/// The layer every manifest starts from.
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

/// A manifest problem, located in its file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    /// The file the problem is in.
    pub file: String,
    /// 1-based line, 0 when unknown.
    pub line: usize,
    /// 1-based column, 0 when unknown.
    pub column: usize,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "{}:{}:{}: {}",
                self.file, self.line, self.column, self.message
            )?;
        } else {
            write!(f, "{}: {}", self.file, self.message)?;
        }
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// Where a plugin entry was declared, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The manifest file.
    pub file: String,
    /// The 1-based line of the entry's `source`.
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

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
    /// Where it was declared.
    pub origin: Origin,
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
    /// For each plugin of a trusted project manifest that loads an unpinned
    /// `.wasm` file: what `corral trust` approved of that file, which the
    /// runtime checks before compiling it. Filled by [`load`] only.
    pub trusted_files: BTreeMap<String, crate::trust::PluginFile>,
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

    /// The header value with every `${env:NAME}` replaced, or the name of the
    /// first variable that is not set.
    pub fn resolve(&self) -> Result<String, String> {
        let mut value = self.value.clone();
        for var in self.env_vars() {
            let v = std::env::var(&var).map_err(|_| var.clone())?;
            value = value.replace(&format!("${{env:{var}}}"), &v);
        }
        Ok(value)
    }
}

// ---- the TOML schema ----

/// A manifest file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    /// `[agent]`
    #[serde(default)]
    agent: RawAgent,
    /// `[plugins.NAME]`
    #[serde(default)]
    plugins: BTreeMap<String, RawPlugin>,
    /// `[sandbox]`
    #[serde(default)]
    sandbox: RawSandbox,
    /// `[policy]`
    #[serde(default)]
    policy: RawPolicy,
}

/// `[policy]`: the permission mode and rules. Rules of every layer apply;
/// `mode` of a later layer replaces an earlier one.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    /// `mode = "ask"`: read-only, ask, auto-edit or full-auto.
    mode: Option<Spanned<String>>,
    /// `allow = ["run_command(cargo test **)"]`
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    /// `ask = ["git_commit"]`
    #[serde(default)]
    ask: Vec<Spanned<String>>,
    /// `deny = ["run_command(rm **)"]`: refused; the model is told.
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    /// `stop = ["run_command(git push **)"]`: refused, and the run ends.
    #[serde(default)]
    stop: Vec<Spanned<String>>,
}

/// `[sandbox]`
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    /// `require_os_sandbox = false` runs granted programs even where the
    /// kernel cannot confine them (default true: refuse).
    require_os_sandbox: Option<bool>,
}

/// `[agent]`: how `corral run` talks to a model. Each key overrides the
/// same key of an earlier layer.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    /// `provider = "openai"`: the provider plugin to use.
    provider: Option<Spanned<String>>,
    /// `model = "gpt-4.1"`: overrides the provider's configured model.
    model: Option<String>,
    /// `max_iterations = 50`: provider round trips per prompt.
    max_iterations: Option<Spanned<u32>>,
    /// `max_tokens = 8192`
    max_tokens: Option<u32>,
    /// `temperature = 0.2`
    temperature: Option<f32>,
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
}

/// `[plugins.NAME]`
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlugin {
    /// `source = "builtin:fs"` or `source = "path/to/tool.wasm"`
    source: Option<Spanned<String>>,
    /// `sha256 = "…"` pins a `.wasm` source.
    sha256: Option<Spanned<String>>,
    /// `enabled = false` removes a plugin declared by an earlier layer.
    #[serde(default = "yes")]
    enabled: bool,
    /// `grants = { fs = […], net = […], env = […] }`
    #[serde(default)]
    grants: RawGrants,
    /// `limits = { timeout_ms = 30000, memory_mb = 256, output_kb = 1024, host_calls = 5000000 }`
    #[serde(default)]
    limits: RawLimits,
    /// `config = { key = "value" }`
    #[serde(default)]
    config: toml::Table,
}

fn yes() -> bool {
    true
}

/// `grants`
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawGrants {
    /// `fs = [{ path = ".", access = "rw" }]`
    #[serde(default)]
    fs: Vec<Spanned<RawFsGrant>>,
    /// `net = ["https://api.example.com:443"]`
    #[serde(default)]
    net: Vec<Spanned<String>>,
    /// `env = ["HOME"]`
    #[serde(default)]
    env: Vec<Spanned<String>>,
    /// `secrets = [{ origin = "https://api.openai.com:443", header = "authorization", value = "Bearer ${env:OPENAI_API_KEY}" }]`
    #[serde(default)]
    secrets: Vec<Spanned<RawSecret>>,
    /// `exec = [{ program = "cargo", args = ["test", "**"] }]`
    #[serde(default)]
    exec: Vec<Spanned<RawExec>>,
}

/// One entry of `grants.exec`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExec {
    /// `program = "cargo"`: a name found in `PATH`, or a path; `"*"` is any
    /// program, found in `PATH` when each command runs.
    program: String,
    /// `args = ["test", "**"]`: literal tokens, `*` (one argument), `**` (the rest).
    args: Vec<String>,
    /// `timeout_ms = 120000`
    timeout_ms: Option<u64>,
    /// `network = true` lets the program open TCP connections.
    #[serde(default)]
    network: bool,
}

/// One entry of `grants.secrets`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSecret {
    /// `origin = "https://api.openai.com:443"`: requests to this scheme, host
    /// and port (and only to them) get the header.
    origin: Option<String>,
    /// `host = "api.openai.com"`: the older spelling, the same as
    /// `origin = "https://api.openai.com:443"`.
    host: Option<String>,
    /// `header = "authorization"`
    header: String,
    /// `value = "Bearer ${env:OPENAI_API_KEY}"`: `${env:NAME}` is read from corral's environment.
    value: String,
}

/// One entry of `grants.fs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFsGrant {
    /// `path = "docs"`, relative to the workspace root
    path: String,
    /// `access = "ro"` or `"rw"`
    access: Access,
    /// `outside_workspace = true` allows an absolute path or one leaving the workspace.
    #[serde(default)]
    outside_workspace: bool,
}

/// `limits`
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    timeout_ms: Option<Spanned<u64>>,
    memory_mb: Option<Spanned<u64>>,
    output_kb: Option<Spanned<u64>>,
    host_calls: Option<Spanned<u64>>,
}

/// One manifest layer: its name for messages, its text, and the directory
/// relative `.wasm` sources are resolved against.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Shown in messages (a path, or [`DEFAULTS_NAME`]).
    pub name: String,
    /// The TOML text.
    pub text: String,
    /// Base directory for relative `source` paths.
    pub base: PathBuf,
}

/// The layers for `workspace`: defaults, the user's file, and the project's
/// file when the user trusts it (see [`crate::trust`]). An untrusted project
/// file is reported in `untrusted` and adds nothing.
pub fn layers(workspace: &Path) -> std::io::Result<(Vec<Layer>, Option<PathBuf>)> {
    let mut out = vec![Layer {
        name: DEFAULTS_NAME.to_owned(),
        text: DEFAULTS.to_owned(),
        base: workspace.to_path_buf(),
    }];
    let user = dirs::config_dir().map(|dir| dir.join("corral").join("corral.toml"));
    let project = workspace.join("corral.toml");
    let mut untrusted = None;
    for (file, is_project) in user
        .into_iter()
        .map(|f| (f, false))
        .chain([(project, true)])
    {
        match read_manifest(&file) {
            Ok(text) => {
                if is_project {
                    let canonical = file.canonicalize().unwrap_or_else(|_| file.clone());
                    let trusted = crate::trust::store_dir().is_some_and(|d| {
                        crate::trust::status(&d, &canonical, &text) == crate::trust::Status::Trusted
                    });
                    if !trusted {
                        untrusted = Some(file);
                        continue;
                    }
                }
                out.push(Layer {
                    name: file.display().to_string(),
                    text,
                    base: file.parent().map(Path::to_path_buf).unwrap_or_default(),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", file.display()),
                ));
            }
        }
    }
    Ok((out, untrusted))
}

/// Largest manifest file read.
const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// A manifest file's text, if it is a regular UTF-8 file of a sane size; a
/// FIFO or a device in its place is an error, never a hang.
pub fn read_manifest(file: &Path) -> std::io::Result<String> {
    use crate::fsread::ReadError;
    let bytes = crate::fsread::read_regular(file, MAX_MANIFEST_BYTES).map_err(|e| match e {
        ReadError::Io(e) => e,
        other => std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{other}; a manifest must be a TOML file"),
        ),
    })?;
    String::from_utf8(bytes).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it is not UTF-8 text; a manifest must be a TOML file",
        )
    })
}

/// Loads and checks the manifest of `workspace` from its usual layers.
pub fn load(workspace: &Path) -> Result<Manifest, ManifestError> {
    let (layers, untrusted) = layers(workspace).map_err(|e| ManifestError {
        file: workspace.display().to_string(),
        line: 0,
        column: 0,
        message: format!("cannot read the manifest: {e}"),
        help: None,
    })?;
    if let Some(file) = untrusted {
        tracing::warn!(
            "{} is not trusted yet and was ignored; review it and run `corral trust` to use it",
            file.display()
        );
    }
    let mut manifest = from_layers(workspace, &layers)?;
    let project = workspace.join("corral.toml");
    let project_name = project.display().to_string();
    if let Some(layer) = layers.iter().rev().find(|l| l.name == project_name) {
        crate::trust::bind(&mut manifest, &project, &layer.text);
    }
    Ok(manifest)
}

/// Checks a manifest made of explicit layers (later layers win).
pub fn from_layers(workspace: &Path, layers: &[Layer]) -> Result<Manifest, ManifestError> {
    let workspace = workspace.canonicalize().map_err(|e| ManifestError {
        file: workspace.display().to_string(),
        line: 0,
        column: 0,
        message: format!("the workspace directory cannot be opened: {e}"),
        help: Some("pass an existing directory with --workspace".into()),
    })?;
    let mut plugins: BTreeMap<String, PluginDecl> = BTreeMap::new();
    let mut agent = AgentSettings::default();
    let mut require_os_sandbox = true;
    let mut policy = crate::policy::Policy::default();
    for layer in layers {
        let raw: RawFile = toml::from_str(&layer.text).map_err(|e| {
            let (line, column) = e.span().map_or((0, 0), |s| line_col(&layer.text, s.start));
            ManifestError {
                file: layer.name.clone(),
                line,
                column,
                message: e.message().trim().to_owned(),
                help: Some(
                    "see the manifest reference in README.md (plugins.NAME: source, sha256, \
                     enabled, grants.fs/net/env, limits, config)"
                        .into(),
                ),
            }
        })?;
        let at = Checker {
            layer,
            workspace: &workspace,
        };
        if let Some(r) = raw.sandbox.require_os_sandbox {
            require_os_sandbox = r;
        }
        if let Some(mode) = &raw.policy.mode {
            policy.mode = mode
                .get_ref()
                .parse()
                .map_err(|e: String| at.err(mode.span(), format!("policy.mode: {e}"), None))?;
        }
        use crate::policy::Action;
        for (key, list, action) in [
            ("allow", &raw.policy.allow, Action::Allow),
            ("ask", &raw.policy.ask, Action::Ask),
            ("deny", &raw.policy.deny, Action::Deny),
            ("stop", &raw.policy.stop, Action::DenyAndStop),
        ] {
            for (i, text) in list.iter().enumerate() {
                let source = format!("{}: policy.{key}[{i}]", layer.name);
                let rule = crate::policy::parse_rule(text.get_ref(), action, &source).map_err(|e| {
                    at.err(
                        text.span(),
                        format!("policy.{key}: {e}"),
                        Some("write a tool name, optionally with an argument pattern: `run_command(cargo test **)`, `write_file(docs/**)`".into()),
                    )
                })?;
                policy.rules.push(rule);
            }
        }
        if let Some(p) = raw.agent.provider {
            if !valid_name(p.get_ref()) {
                return Err(at.err(
                    p.span(),
                    format!("`{}` is not a plugin name", p.get_ref()),
                    None,
                ));
            }
            agent.provider = Some(p.into_inner());
        }
        if let Some(m) = raw.agent.model {
            agent.model = Some(m);
        }
        if let Some(n) = raw.agent.max_iterations {
            if *n.get_ref() == 0 {
                return Err(at.err(
                    n.span(),
                    "agent.max_iterations must be at least 1".into(),
                    None,
                ));
            }
            agent.max_iterations = Some(n.into_inner());
        }
        if let Some(t) = raw.agent.max_tokens {
            agent.max_tokens = Some(t);
        }
        if let Some(t) = raw.agent.temperature {
            agent.temperature = Some(t);
        }
        for (name, entry) in raw.plugins {
            let at = Checker {
                layer,
                workspace: &workspace,
            };
            if !entry.enabled {
                plugins.remove(&name);
                continue;
            }
            let decl = at.plugin(&name, entry)?;
            plugins.insert(name, decl);
        }
    }
    if let Some(p) = &agent.provider
        && !plugins.contains_key(p)
    {
        {
            return Err(ManifestError {
                file: layers.last().map(|l| l.name.clone()).unwrap_or_default(),
                line: 0,
                column: 0,
                message: format!("agent.provider = \"{p}\" names no plugin"),
                help: Some(format!(
                    "declare [plugins.{p}] or choose one of: {}",
                    plugins.keys().cloned().collect::<Vec<_>>().join(", ")
                )),
            });
        }
    }
    Ok(Manifest {
        workspace,
        plugins: plugins.into_values().collect(),
        agent,
        require_os_sandbox,
        policy,
        trusted_files: BTreeMap::new(),
    })
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

struct Checker<'a> {
    layer: &'a Layer,
    workspace: &'a Path,
}

impl Checker<'_> {
    fn err(
        &self,
        span: std::ops::Range<usize>,
        message: String,
        help: Option<String>,
    ) -> ManifestError {
        let (line, column) = line_col(&self.layer.text, span.start);
        ManifestError {
            file: self.layer.name.clone(),
            line,
            column,
            message,
            help,
        }
    }

    fn plugin(&self, name: &str, raw: RawPlugin) -> Result<PluginDecl, ManifestError> {
        let Some(source) = raw.source else {
            let at = self
                .layer
                .text
                .find(&format!("plugins.{name}"))
                .unwrap_or(0);
            return Err(self.err(
                at..at,
                format!("plugin `{name}` has no `source`"),
                Some(format!(
                    "add `source = \"builtin:{name}\"` or `source = \"path/to/{name}.wasm\"`, or `enabled = false` to remove it"
                )),
            ));
        };
        let origin_span = source.span();
        if !valid_name(name) {
            return Err(self.err(
                origin_span,
                format!("`{name}` is not a valid plugin name"),
                Some("use lowercase letters, digits, `-` and `_`, starting with a letter".into()),
            ));
        }
        let origin = Origin {
            file: self.layer.name.clone(),
            line: line_col(&self.layer.text, origin_span.start).0,
        };
        let source = self.source(name, &source, raw.sha256.as_ref())?;
        let mut fs: Vec<FsGrant> = Vec::new();
        for grant in &raw.grants.fs {
            let checked = self.fs_grant(name, grant)?;
            for other in &fs {
                let nested = checked.host_path.starts_with(&other.host_path)
                    || other.host_path.starts_with(&checked.host_path);
                if nested {
                    return Err(self.err(
                        grant.span(),
                        format!(
                            "grant `{}` overlaps grant `{}` of plugin `{name}`",
                            checked.path, other.path
                        ),
                        Some(
                            "a nested grant cannot narrow or widen its parent; grant sibling \
                             directories, or keep only the outer one"
                                .into(),
                        ),
                    ));
                }
            }
            fs.push(checked);
        }
        let mut net = Vec::new();
        for pattern in &raw.grants.net {
            net.push(self.net_grant(pattern)?);
        }
        let mut env = Vec::new();
        for var in &raw.grants.env {
            let v = var.get_ref();
            let ok = !v.is_empty()
                && !v.starts_with(|c: char| c.is_ascii_digit())
                && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(self.err(
                    var.span(),
                    format!("`{v}` is not an environment variable name"),
                    Some("grants.env lists variable names like `HOME` or `CARGO_HOME`".into()),
                ));
            }
            env.push(v.clone());
        }
        let mut secrets = Vec::new();
        for secret in &raw.grants.secrets {
            let raw_secret = secret.get_ref();
            let (scheme, host, port) = self.secret_destination(name, secret, &net)?;
            let header = raw_secret.header.to_ascii_lowercase();
            let header_ok = !header.is_empty()
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !header_ok {
                return Err(self.err(
                    secret.span(),
                    format!("plugin `{name}`: `{header}` is not a header name"),
                    None,
                ));
            }
            let parsed = Secret {
                scheme,
                host,
                port,
                header,
                value: raw_secret.value.clone(),
            };
            if raw_secret.value.matches("${").count() != parsed.env_vars().len() {
                return Err(self.err(
                    secret.span(),
                    format!("plugin `{name}`: secret value has a malformed placeholder"),
                    Some("write placeholders as ${env:NAME}".into()),
                ));
            }
            secrets.push(parsed);
        }
        let mut exec = Vec::new();
        for grant in &raw.grants.exec {
            let g = grant.get_ref();
            let path = match crate::exec::resolve(&g.program) {
                Some(path) => path,
                // Found when each command runs.
                None if g.program == crate::exec::ANY_PROGRAM => PathBuf::new(),
                // A built-in default (git) need not be installed; running it
                // says so.
                None if self.layer.name == DEFAULTS_NAME => PathBuf::from(&g.program),
                None => {
                    return Err(self.err(
                        grant.span(),
                        format!(
                            "plugin `{name}`: program `{}` is not an executable in PATH",
                            g.program
                        ),
                        Some("install it, or name it by its full path".into()),
                    ));
                }
            };
            if g.args
                .iter()
                .position(|a| a == "**")
                .is_some_and(|at| at + 1 != g.args.len())
            {
                return Err(self.err(
                    grant.span(),
                    format!("plugin `{name}`: `**` must be the last argument pattern"),
                    Some("`**` matches all remaining arguments".into()),
                ));
            }
            exec.push(crate::exec::ExecGrant {
                program: g.program.clone(),
                path,
                args: g.args.clone(),
                timeout_ms: g.timeout_ms.unwrap_or(crate::exec::DEFAULT_TIMEOUT_MS),
                network: g.network,
            });
        }
        let limits = self.limits(&raw.limits, builtin_limits(&source))?;
        let config = raw
            .config
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    toml::Value::String(s) => s,
                    other => serde_json::to_string(&other).unwrap_or_default(),
                };
                (k, v)
            })
            .collect();
        Ok(PluginDecl {
            name: name.to_owned(),
            source,
            fs,
            net,
            env,
            secrets,
            exec,
            limits,
            config,
            origin,
        })
    }

    fn source(
        &self,
        name: &str,
        source: &Spanned<String>,
        sha256: Option<&Spanned<String>>,
    ) -> Result<Source, ManifestError> {
        let text = source.get_ref();
        if let Some(builtin) = text.strip_prefix("builtin:") {
            if corral_builtin::get(builtin).is_none() {
                let known: Vec<&str> = corral_builtin::PLUGINS.iter().map(|(n, _)| *n).collect();
                return Err(self.err(
                    source.span(),
                    format!("plugin `{name}`: there is no built-in plugin `{builtin}`"),
                    Some(format!("built-in plugins: {}", known.join(", "))),
                ));
            }
            if let Some(pin) = sha256 {
                return Err(self.err(
                    pin.span(),
                    format!(
                        "plugin `{name}`: `sha256` pins a file source, but this one is built in"
                    ),
                    Some(
                        "remove `sha256`; built-in plugins are pinned by the corral binary".into(),
                    ),
                ));
            }
            return Ok(Source::Builtin(builtin.to_owned()));
        }
        let pin = match sha256 {
            Some(pin) => {
                let hex = pin.get_ref().to_ascii_lowercase();
                if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(self.err(
                        pin.span(),
                        format!("plugin `{name}`: `sha256` must be 64 hexadecimal digits"),
                        Some("compute it with `sha256sum FILE.wasm`".into()),
                    ));
                }
                Some(hex)
            }
            None => None,
        };
        Ok(Source::File {
            path: self.layer.base.join(text),
            sha256: pin,
        })
    }

    fn fs_grant(&self, name: &str, grant: &Spanned<RawFsGrant>) -> Result<FsGrant, ManifestError> {
        let raw = grant.get_ref();
        let joined = self.workspace.join(&raw.path);
        let host_path = joined.canonicalize().map_err(|e| {
            self.err(
                grant.span(),
                format!(
                    "plugin `{name}`: granted path `{}` cannot be opened: {e}",
                    raw.path
                ),
                Some("grant an existing directory, relative to the workspace root".into()),
            )
        })?;
        if !host_path.is_dir() {
            return Err(self.err(
                grant.span(),
                format!(
                    "plugin `{name}`: granted path `{}` is not a directory",
                    raw.path
                ),
                Some("grants.fs lists directories; grant the directory that holds the file".into()),
            ));
        }
        let guest_path = match host_path.strip_prefix(self.workspace) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) if raw.outside_workspace => host_path.to_string_lossy().into_owned(),
            Err(_) => {
                return Err(self.err(
                    grant.span(),
                    format!(
                        "plugin `{name}`: granted path `{}` is outside the workspace ({})",
                        raw.path,
                        host_path.display()
                    ),
                    Some(
                        "add `outside_workspace = true` to this grant if the plugin really needs it"
                            .into(),
                    ),
                ));
            }
        };
        Ok(FsGrant {
            path: raw.path.clone(),
            host_path,
            guest_path,
            access: raw.access,
        })
    }

    fn net_grant(&self, pattern: &Spanned<String>) -> Result<NetGrant, ManifestError> {
        let text = pattern.get_ref();
        let bad = |why: &str| {
            self.err(
                pattern.span(),
                format!("network grant `{text}`: {why}"),
                Some("write `scheme://host:port`, e.g. \"https://api.openai.com:443\" or \"http://127.0.0.1:8080\"".into()),
            )
        };
        let (scheme, host, port) = split_origin(text).map_err(bad)?;
        Ok(NetGrant {
            scheme,
            host,
            port,
            pattern: text.clone(),
            origin: Origin {
                file: self.layer.name.clone(),
                line: line_col(&self.layer.text, pattern.span().start).0,
            },
        })
    }

    fn limits(&self, raw: &RawLimits, mut limits: Limits) -> Result<Limits, ManifestError> {
        let fields: [(&str, &Option<Spanned<u64>>, &mut u64, u64); 4] = [
            (
                "timeout_ms",
                &raw.timeout_ms,
                &mut limits.timeout_ms,
                3_600_000,
            ),
            ("memory_mb", &raw.memory_mb, &mut limits.memory_mb, 4096),
            ("output_kb", &raw.output_kb, &mut limits.output_kb, 1 << 20),
            (
                "host_calls",
                &raw.host_calls,
                &mut limits.host_calls,
                u64::MAX,
            ),
        ];
        for (key, value, slot, max) in fields {
            if let Some(v) = value {
                if *v.get_ref() == 0 || *v.get_ref() > max {
                    return Err(self.err(
                        v.span(),
                        format!("limits.{key} = {} is out of range", v.get_ref()),
                        Some(format!("use a value from 1 to {max}")),
                    ));
                }
                *slot = *v.get_ref();
            }
        }
        Ok(limits)
    }
}

/// The limits an entry starts from. A built-in plugin's entry in
/// [`DEFAULTS`] sizes them for its work (a provider's answer can stream for
/// minutes); any entry with that `source`, such as one pointing `builtin:openai`
/// at a local server, keeps them for the keys it does not set.
fn builtin_limits(source: &Source) -> Limits {
    static BUILTIN: std::sync::OnceLock<BTreeMap<String, Limits>> = std::sync::OnceLock::new();
    let Source::Builtin(name) = source else {
        return Limits::default();
    };
    let sized = BUILTIN.get_or_init(|| {
        // DEFAULTS is ours and checked by every load; a parse failure here
        // would already have failed that layer.
        let plugins = toml::from_str::<RawFile>(DEFAULTS)
            .map(|raw| raw.plugins)
            .unwrap_or_default();
        plugins
            .into_values()
            .filter_map(|entry| {
                let name = entry
                    .source?
                    .into_inner()
                    .strip_prefix("builtin:")?
                    .to_owned();
                let get = |v: &Option<Spanned<u64>>, default| {
                    v.as_ref().map_or(default, |v| *v.get_ref())
                };
                let base = Limits::default();
                let limits = Limits {
                    timeout_ms: get(&entry.limits.timeout_ms, base.timeout_ms),
                    memory_mb: get(&entry.limits.memory_mb, base.memory_mb),
                    output_kb: get(&entry.limits.output_kb, base.output_kb),
                    host_calls: get(&entry.limits.host_calls, base.host_calls),
                };
                Some((name, limits))
            })
            .collect()
    });
    sized.get(name).copied().unwrap_or_default()
}

fn valid_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}
