//! `[mcp.NAME]`: MCP servers whose tools join the session, each run
//! confined by its own grants (see `corral_exec::Launch::serve`).

use super::ManifestError;
use super::check::{Checker, valid_name};
use super::raw::{RawEffects, RawMcp, RawPackage};
use crate::protocol::Effect;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// Default wall-clock limit of one call of a server's tool.
pub const DEFAULT_MCP_TIMEOUT_MS: u64 = 60_000;
/// Default bytes kept of one result.
pub const DEFAULT_MCP_OUTPUT_KB: usize = 1024;

/// Effects by tool name.
type ToolEffects = BTreeMap<String, Vec<Effect>>;

/// The registry a stored package came from; also its folder in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackageStore {
    /// npm's registry: `npm/NAME@VERSION` (a scope's `/` written `+`).
    Npm,
    /// PyPI: `pypi/NAME@VERSION`.
    Pypi,
}

impl PackageStore {
    /// As the manifest and the store's folders write it.
    pub fn as_str(self) -> &'static str {
        match self {
            PackageStore::Npm => "npm",
            PackageStore::Pypi => "pypi",
        }
    }
}

/// A package installed once into corral's MCP package store, which the
/// entry runs: it is checked against `sha256` before each start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPackage {
    /// The registry it came from.
    pub store: PackageStore,
    /// Its name in that registry.
    pub name: String,
    /// The version installed.
    pub version: String,
    /// The sha256 of the installed tree (lowercase hex).
    pub sha256: String,
}

impl McpPackage {
    /// Its directory in the store whose root is `root`.
    pub fn path_in(&self, root: &Path) -> PathBuf {
        root.join(self.store.as_str()).join(format!(
            "{}@{}",
            self.name.replace('/', "+"),
            self.version
        ))
    }

    /// `name@version`, as people write it.
    pub fn shown(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}

/// A checked `[mcp.NAME]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerDecl {
    /// The entry's name.
    pub name: String,
    /// The program, as written (empty for a `url` server).
    pub command: String,
    /// A streamable HTTP server's URL: corral connects to it itself, to its
    /// origin only (no redirects), and runs no program.
    pub url: Option<String>,
    /// Headers added to the requests to the `url`'s origin, their values
    /// read from corral's environment when the server is reached; never
    /// shown to the model, a plugin or the log.
    pub secrets: Vec<super::Secret>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it, as written.
    pub env: BTreeMap<String, String>,
    /// Where it runs (canonical when it exists).
    pub cwd: PathBuf,
    /// The workspace of the manifest that declared it: its install may
    /// never be read from above it.
    pub workspace: PathBuf,
    /// Directories it may read and write.
    pub fs: Vec<PathBuf>,
    /// Variables passed through from corral's environment.
    pub env_grants: Vec<String>,
    /// The network it may reach: none, any, or only some destinations.
    pub net: crate::exec::Network,
    /// Effects of a tool with no entry of its own: as written, else
    /// `write` for a server its grants let write (a `grants.fs` directory,
    /// which it may write, or `grants.net`), else `read`.
    pub default_effects: Vec<Effect>,
    /// Effects by tool name (without the prefix).
    pub effects: BTreeMap<String, Vec<Effect>>,
    /// Tools (without the prefix) whose results are private data
    /// (`sensitive`).
    pub sensitive: Vec<String>,
    /// Tools (without the prefix) that send what they are given out
    /// (`sinks`), whatever the server's grants.
    pub sinks: Vec<String>,
    /// Put before each of its tool names.
    pub tool_prefix: String,
    /// Per call, and the wait for the server to start.
    pub timeout_ms: u64,
    /// Bytes kept of one result.
    pub output_cap: usize,
    /// The file that declared it.
    pub file: String,
    /// Whether that file is the project's `corral.toml` (which needs trust,
    /// and whose servers offer only the tools trusted).
    pub project: bool,
    /// For a server of the trusted project file: the files of its code as
    /// trusting approved them (`crate::trust::server_code`), which must
    /// match before it starts; `None` for a server of the user's file.
    pub trusted_code: Option<crate::trust::ServerCode>,
    /// The install in corral's MCP package store it runs, if any: checked
    /// before each start, and readable by it.
    pub package: Option<McpPackage>,
}

impl McpServerDecl {
    /// The effects the manifest gives the server's tool `tool`.
    pub fn effects_of(&self, tool: &str) -> Vec<Effect> {
        self.effects
            .get(tool)
            .cloned()
            .unwrap_or_else(|| self.default_effects.clone())
    }

    /// The existing files its arguments name (relative to `cwd`), in
    /// order: an interpreter's script (`python3 srv/server.py`), a file the
    /// server reads. Options (`-m`, `--flag`) are not files.
    pub fn named_files(&self) -> Vec<PathBuf> {
        self.args
            .iter()
            .filter(|a| !a.is_empty() && !a.starts_with('-'))
            .map(|a| self.cwd.join(a))
            .filter(|p| p.is_file())
            .collect()
    }
}

impl Checker<'_> {
    /// Checks one `[mcp.NAME]` entry.
    pub(super) fn mcp(&self, name: &str, mut raw: RawMcp) -> Result<McpServerDecl, ManifestError> {
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
        if let Some(url) = raw.url.take() {
            return self.mcp_url(name, &url, raw);
        }
        let Some(command) = raw.command.take() else {
            return Err(self.err(
                head,
                format!("{here} has no `command`"),
                Some(format!(
                    "add `command = \"…\"` and `args = […]`, or `url = \"http://HOST:PORT/mcp\"`, or run `corral mcp add {name} -- CMD ARGS…`"
                )),
            ));
        };
        if !raw.grants.secrets.is_empty() {
            return Err(self.err(
                command.span(),
                format!("{here}: `grants.secrets` is for a `url` server"),
                Some("pass a stdio server its key with `grants.env = [\"NAME\"]`".into()),
            ));
        }
        if command.get_ref().trim().is_empty() {
            return Err(self.err(
                command.span(),
                format!("{here}: `command` is empty"),
                Some("name the program that starts the server".into()),
            ));
        }
        let net = match &raw.grants.net {
            None => crate::exec::Network::Off,
            Some(value) => self.network(value, &format!("[mcp.{name}] grants.net"))?,
        };
        // A server that can change files or send data is not a reader
        // because it says so, nor by default: its tools ask like a write.
        let writes = !raw.grants.fs.is_empty() || net.reaches();
        let common = self.mcp_common(&here, name, &raw, writes)?;
        let package = match &raw.package {
            Some(p) => Some(self.mcp_package(&here, p)?),
            None => None,
        };
        let within = |p: &str| -> PathBuf {
            let path = self.workspace.join(p);
            path.canonicalize().unwrap_or(path)
        };
        Ok(McpServerDecl {
            command: command.into_inner(),
            args: raw.args,
            env: raw.env,
            cwd: raw
                .cwd
                .as_deref()
                .map_or_else(|| self.workspace.to_path_buf(), within),
            fs: raw.grants.fs.iter().map(|p| within(p)).collect(),
            env_grants: raw.grants.env,
            net,
            package,
            ..common
        })
    }

    /// `package` of `[mcp.NAME]`: a store corral knows, a name and a
    /// version that stay inside it (they make the install's path), and a
    /// sha256.
    fn mcp_package(
        &self,
        here: &str,
        raw: &Spanned<RawPackage>,
    ) -> Result<McpPackage, ManifestError> {
        let p = raw.get_ref();
        let bad = |why: String, help: &str| self.err(raw.span(), why, Some(help.to_owned()));
        let store = match p.store.as_str() {
            "npm" => PackageStore::Npm,
            "pypi" => PackageStore::Pypi,
            other => {
                return Err(bad(
                    format!("{here}: package store `{other}` is not one corral installs from"),
                    "write `store = \"npm\"` or `store = \"pypi\"` (or install the server again with `corral mcp import`)",
                ));
            }
        };
        // Scoped npm names have one `/`; nothing may climb out of the store.
        let word = |w: &str, slash: bool| {
            !w.is_empty()
                && !w.starts_with('.')
                && !w.contains("..")
                && w.chars().all(|c| {
                    c.is_ascii_alphanumeric()
                        || matches!(c, '-' | '_' | '.' | '+' | '~' | '!')
                        || (slash && matches!(c, '@' | '/'))
                })
                && w.matches('/').count() <= 1
        };
        if !word(&p.name, store == PackageStore::Npm) || !word(&p.version, false) {
            return Err(bad(
                format!(
                    "{here}: package `{}@{}` is not a package name and version",
                    p.name, p.version
                ),
                "write the name and version the install printed (letters, digits, `-`, `_`, `.`; an npm scope as `@scope/name`)",
            ));
        }
        if p.sha256.len() != 64 || !p.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad(
                format!("{here}: package sha256 `{}` is not a sha256", p.sha256),
                "write the 64 hex digits the install printed, or install the server again with `corral mcp import`",
            ));
        }
        Ok(McpPackage {
            store,
            name: p.name.clone(),
            version: p.version.clone(),
            sha256: p.sha256.to_ascii_lowercase(),
        })
    }

    /// `[mcp.NAME]` as far as it is the same whatever its transport: its
    /// tool prefix, effects and limits, with no program, url or grant yet
    /// (it runs in the workspace); `writes` when its grants let it write,
    /// which makes its tools `write` unless the entry says otherwise.
    fn mcp_common(
        &self,
        here: &str,
        name: &str,
        raw: &RawMcp,
        writes: bool,
    ) -> Result<McpServerDecl, ManifestError> {
        let default = if writes {
            vec![Effect::Write]
        } else {
            vec![Effect::Read]
        };
        let (default_effects, effects) = match &raw.effects {
            None => (default, BTreeMap::new()),
            Some(spanned) => self.mcp_effects(here, spanned, default)?,
        };
        let prefix = match &raw.tool_prefix {
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
                p.get_ref().clone()
            }
            None => format!("{name}__"),
        };
        Ok(McpServerDecl {
            name: name.to_owned(),
            command: String::new(),
            url: None,
            secrets: Vec::new(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: self.workspace.to_path_buf(),
            workspace: self.workspace.to_path_buf(),
            fs: Vec::new(),
            env_grants: Vec::new(),
            net: crate::exec::Network::Off,
            default_effects,
            effects,
            sensitive: raw.sensitive.clone(),
            sinks: raw.sinks.clone(),
            tool_prefix: prefix,
            timeout_ms: raw.timeout_ms.unwrap_or(DEFAULT_MCP_TIMEOUT_MS),
            output_cap: raw
                .output_kb
                .unwrap_or(DEFAULT_MCP_OUTPUT_KB)
                .saturating_mul(1024),
            file: self.layer.name.clone(),
            project: false,
            trusted_code: None,
            package: None,
        })
    }

    /// `[mcp.NAME] url = "…"`: a streamable HTTP server. corral makes the
    /// connections, so the url's origin is the one destination (no
    /// `grants.net`, no program, no files); `grants.secrets` bind headers to
    /// that origin (an entry without `origin` means it).
    fn mcp_url(
        &self,
        name: &str,
        url: &Spanned<String>,
        mut raw: RawMcp,
    ) -> Result<McpServerDecl, ManifestError> {
        let here = format!("[mcp.{name}]");
        let bad = |why: String, help: &str| self.err(url.span(), why, Some(help.to_owned()));
        if raw.command.is_some() || !raw.args.is_empty() || raw.cwd.is_some() || !raw.env.is_empty()
        {
            return Err(bad(
                format!("{here} has both `url` and a program (`command`, `args`, `cwd` or `env`)"),
                "keep `url` for a server corral connects to, or `command` for one it starts",
            ));
        }
        if raw.package.is_some() {
            return Err(bad(
                format!("{here} has both `url` and `package`"),
                "remove `package`: a `url` server runs nothing of corral's package store",
            ));
        }
        if !raw.grants.fs.is_empty() || !raw.grants.env.is_empty() || raw.grants.net.is_some() {
            return Err(bad(
                format!(
                    "{here}: `grants.fs`, `grants.env` and `grants.net` are for a program; a `url` server runs none"
                ),
                "remove them: corral connects to the url's origin and nowhere else",
            ));
        }
        let text = url.get_ref();
        let (origin, _path) = url_origin(text).map_err(|why| {
            bad(
                format!("{here}: url `{text}`: {why}"),
                "write `http://HOST:PORT/PATH` or `https://HOST/PATH`",
            )
        })?;
        let grant = self.net_grant(&Spanned::new(url.span(), origin.clone()))?;
        for secret in &mut raw.grants.secrets {
            let span = secret.span();
            let s = secret.get_mut();
            let elsewhere = match (&s.origin, &s.host) {
                (None, None) => {
                    s.origin = Some(origin.clone());
                    None
                }
                (Some(o), None) => url_origin(o)
                    .ok()
                    .filter(|(o, _)| *o == origin)
                    .is_none()
                    .then(|| o.clone()),
                (_, Some(h)) => Some(h.clone()),
            };
            if let Some(other) = elsewhere {
                return Err(self.err(
                    span,
                    format!(
                        "{here}: a secret bound to `{other}`, but this server's requests go only to {origin}"
                    ),
                    Some(format!(
                        "leave out `origin` (a url server's secrets go to its url's origin), or write `origin = \"{origin}\"`"
                    )),
                ));
            }
        }
        let secrets =
            self.secret_grants(&here, &raw.grants.secrets, std::slice::from_ref(&grant))?;
        // Reached over the network, it changes nothing on this machine.
        let common = self.mcp_common(&here, name, &raw, false)?;
        Ok(McpServerDecl {
            url: Some(text.clone()),
            secrets,
            ..common
        })
    }

    /// `effects`: one list for all, or `default` (else `default`) and
    /// tools by name.
    fn mcp_effects(
        &self,
        here: &str,
        spanned: &Spanned<RawEffects>,
        mut default: Vec<Effect>,
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

/// `scheme://authority/path` split into its origin (`scheme://host:port`,
/// as a network grant writes it) and the rest; no user, no fragment.
pub fn url_origin(url: &str) -> Result<(String, String), &'static str> {
    let (scheme, rest) = url.split_once("://").ok_or("no scheme")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.contains('@') {
        return Err("a user or password in the url is not allowed; put a key in `grants.secrets`");
    }
    if path.contains('#') || url.contains(char::is_whitespace) {
        return Err("a fragment or a space is not allowed");
    }
    let (scheme, host, port) = super::origin::split_origin(&format!("{scheme}://{authority}"))?;
    if host.contains('*') {
        return Err("the host has a `*`");
    }
    let origin = if host.contains(':') {
        format!("{scheme}://[{host}]:{port}")
    } else {
        format!("{scheme}://{host}:{port}")
    };
    Ok((origin, path.to_owned()))
}
