//! `[mcp.NAME]`: MCP servers whose tools join the session, each run
//! confined by its own grants (see `corral_exec::Launch::serve`).

use super::ManifestError;
use super::check::{Checker, valid_name};
use crate::protocol::Effect;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use toml::Spanned;

/// Default wall-clock limit of one call of a server's tool.
pub const DEFAULT_MCP_TIMEOUT_MS: u64 = 60_000;
/// Default bytes kept of one result.
pub const DEFAULT_MCP_OUTPUT_KB: usize = 1024;

/// Effects by tool name.
type ToolEffects = BTreeMap<String, Vec<Effect>>;

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
    /// `url = "https://…"`: a streamable HTTP server (not supported yet).
    pub(super) url: Option<Spanned<String>>,
    /// `enabled = false` removes a server an earlier layer declared.
    #[serde(default = "yes")]
    pub(super) enabled: bool,
    /// `grants = { fs = ["data"], env = ["GITHUB_TOKEN"], net = true }`
    #[serde(default)]
    pub(super) grants: RawMcpGrants,
    /// `effects = ["read"]` (every tool) or `effects = { default = ["read"], write_file = ["write"] }`.
    pub(super) effects: Option<Spanned<RawEffects>>,
    /// `tool_prefix = "fs__"` (default `NAME__`).
    pub(super) tool_prefix: Option<Spanned<String>>,
    /// `timeout_ms = 60000`: per call, and the wait for the server to start.
    pub(super) timeout_ms: Option<u64>,
    /// `output_kb = 1024`: bytes kept of one result, and the largest message read.
    pub(super) output_kb: Option<usize>,
}

fn yes() -> bool {
    true
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
}

/// A checked `[mcp.NAME]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerDecl {
    /// The entry's name.
    pub name: String,
    /// The program, as written.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it, as written.
    pub env: BTreeMap<String, String>,
    /// Where it runs (canonical when it exists).
    pub cwd: PathBuf,
    /// Directories it may read and write.
    pub fs: Vec<PathBuf>,
    /// Variables passed through from corral's environment.
    pub env_grants: Vec<String>,
    /// The network it may reach: none, any, or only some destinations.
    pub net: crate::exec::Network,
    /// Effects of a tool with no entry of its own.
    pub default_effects: Vec<Effect>,
    /// Effects by tool name (without the prefix).
    pub effects: BTreeMap<String, Vec<Effect>>,
    /// Put before each of its tool names.
    pub tool_prefix: String,
    /// Per call, and the wait for the server to start.
    pub timeout_ms: u64,
    /// Bytes kept of one result.
    pub output_cap: usize,
    /// The file that declared it.
    pub file: String,
}

impl McpServerDecl {
    /// The effects the manifest gives the server's tool `tool`.
    pub fn effects_of(&self, tool: &str) -> Vec<Effect> {
        self.effects
            .get(tool)
            .cloned()
            .unwrap_or_else(|| self.default_effects.clone())
    }
}

impl Checker<'_> {
    /// Checks one `[mcp.NAME]` entry.
    pub(super) fn mcp(&self, name: &str, raw: RawMcp) -> Result<McpServerDecl, ManifestError> {
        let here = format!("[mcp.{name}]");
        let head = raw
            .command
            .as_ref()
            .map(Spanned::span)
            .or(raw.url.as_ref().map(Spanned::span))
            .unwrap_or(0..0);
        if !valid_name(name) {
            return Err(self.err(
                head,
                format!("{here}: `{name}` is not a valid server name"),
                Some("use letters, digits, `-` and `_`".into()),
            ));
        }
        if let Some(url) = &raw.url {
            return Err(self.err(
                url.span(),
                format!("{here}: `url` (a streamable HTTP server) is not supported yet"),
                Some("run the server over stdio with `command` and `args`".into()),
            ));
        }
        let Some(command) = raw.command else {
            return Err(self.err(
                head,
                format!("{here} has no `command`"),
                Some(format!(
                    "add `command = \"…\"` and `args = […]`, or run `corral mcp add {name} -- CMD ARGS…`"
                )),
            ));
        };
        if command.get_ref().trim().is_empty() {
            return Err(self.err(
                command.span(),
                format!("{here}: `command` is empty"),
                Some("name the program that starts the server".into()),
            ));
        }
        let within = |p: &str| -> PathBuf {
            let path = self.workspace.join(p);
            path.canonicalize().unwrap_or(path)
        };
        let (default_effects, effects) = match &raw.effects {
            None => (vec![Effect::Read], BTreeMap::new()),
            Some(spanned) => self.mcp_effects(&here, spanned)?,
        };
        let prefix = match raw.tool_prefix {
            Some(p) => {
                let ok = p
                    .get_ref()
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !ok {
                    return Err(self.err(
                        p.span(),
                        format!(
                            "{here}: tool_prefix `{}` is not a valid prefix",
                            p.get_ref()
                        ),
                        Some("use letters, digits, `-` and `_`".into()),
                    ));
                }
                p.into_inner()
            }
            None => format!("{name}__"),
        };
        Ok(McpServerDecl {
            name: name.to_owned(),
            command: command.into_inner(),
            args: raw.args,
            env: raw.env,
            cwd: raw
                .cwd
                .as_deref()
                .map_or_else(|| self.workspace.to_path_buf(), within),
            fs: raw.grants.fs.iter().map(|p| within(p)).collect(),
            env_grants: raw.grants.env,
            net: match &raw.grants.net {
                None => crate::exec::Network::Off,
                Some(value) => self.network(value, &format!("[mcp.{name}] grants.net"))?,
            },
            default_effects,
            effects,
            tool_prefix: prefix,
            timeout_ms: raw.timeout_ms.unwrap_or(DEFAULT_MCP_TIMEOUT_MS),
            output_cap: raw
                .output_kb
                .unwrap_or(DEFAULT_MCP_OUTPUT_KB)
                .saturating_mul(1024),
            file: self.layer.name.clone(),
        })
    }

    /// `effects`: one list for all, or `default` and tools by name.
    fn mcp_effects(
        &self,
        here: &str,
        spanned: &Spanned<RawEffects>,
    ) -> Result<(Vec<Effect>, ToolEffects), ManifestError> {
        let parse = |list: &[String]| -> Result<Vec<Effect>, ManifestError> {
            list.iter()
                .map(|e| match e.as_str() {
                    "read" => Ok(Effect::Read),
                    "write" => Ok(Effect::Write),
                    "execute" => Ok(Effect::Execute),
                    "network" => Ok(Effect::Network),
                    other => Err(self.err(
                        spanned.span(),
                        format!("{here}: `{other}` is not an effect"),
                        Some("effects are read, write, execute and network".into()),
                    )),
                })
                .collect()
        };
        match spanned.get_ref() {
            RawEffects::All(list) => Ok((parse(list)?, BTreeMap::new())),
            RawEffects::PerTool(map) => {
                let mut out = BTreeMap::new();
                let mut default = vec![Effect::Read];
                for (tool, list) in map {
                    if tool == "default" {
                        default = parse(list)?;
                    } else {
                        out.insert(tool.clone(), parse(list)?);
                    }
                }
                Ok((default, out))
            }
        }
    }
}
