//! Checking a parsed layer and turning it into the typed manifest: names,
//! sources, grants and limits, each error located in its file.

use super::error::line_col;
use super::origin::split_origin;
use super::raw::{Layer, RawExec, RawFile, RawFsGrant, RawLimits, RawPlugin, RawSecret};
use super::{
    DEFAULTS, DEFAULTS_NAME, FsGrant, Limits, ManifestError, NetGrant, Origin, PluginDecl, Secret,
    Source,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

pub(super) struct Checker<'a> {
    pub(super) layer: &'a Layer,
    pub(super) workspace: &'a Path,
}

impl Checker<'_> {
    pub(super) fn err(
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

    pub(super) fn plugin(&self, name: &str, raw: RawPlugin) -> Result<PluginDecl, ManifestError> {
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
        let fs = self.fs_grants(name, &raw.grants.fs)?;
        let mut net = Vec::new();
        for pattern in &raw.grants.net {
            net.push(self.net_grant(pattern)?);
        }
        let env = self.env_grants(&raw.grants.env)?;
        let secrets = self.secret_grants(name, &raw.grants.secrets, &net)?;
        let exec = self.exec_grants(name, &raw.grants.exec)?;
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
        let tool_prefix = self.tool_prefix(name, raw.tool_prefix.as_ref())?;
        // Named as the plugin names its tools; the model calls them prefixed.
        let reads_secrets = raw
            .reads_secrets
            .iter()
            .chain(&raw.sensitive)
            .map(|t| format!("{tool_prefix}{t}"))
            .collect();
        let sinks = raw
            .sinks
            .iter()
            .map(|t| format!("{tool_prefix}{t}"))
            .collect();
        let destination_args =
            self.destination_args(name, &source, &tool_prefix, raw.destination_args.as_ref())?;
        Ok(PluginDecl {
            name: name.to_owned(),
            tool_prefix,
            source,
            fs,
            net,
            env,
            secrets,
            exec,
            limits,
            config,
            origin,
            reads_secrets,
            sinks,
            destination_args,
        })
    }

    /// `destination_args`, keyed by the names the model calls the tools;
    /// `builtin:web-fetch` names its `url` unless the entry says otherwise.
    fn destination_args(
        &self,
        name: &str,
        source: &Source,
        tool_prefix: &str,
        raw: Option<&BTreeMap<String, Spanned<String>>>,
    ) -> Result<BTreeMap<String, String>, ManifestError> {
        let Some(raw) = raw else {
            return Ok(match source {
                Source::Builtin(b) if b == "web-fetch" => {
                    BTreeMap::from([(format!("{tool_prefix}web_fetch"), "url".to_owned())])
                }
                _ => BTreeMap::new(),
            });
        };
        let mut out = BTreeMap::new();
        for (tool, arg) in raw {
            let plain = |s: &str| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
            };
            if !plain(tool) || !plain(arg.get_ref()) {
                return Err(self.err(
                    arg.span(),
                    format!(
                        "destination_args of plugin `{name}`: `{}` = `{}` is not a tool name and an argument name",
                        tool.escape_debug(),
                        arg.get_ref().escape_debug()
                    ),
                    Some("write `destination_args = { TOOL = \"ARGUMENT\" }`, e.g. `{ web_fetch = \"url\" }`".into()),
                ));
            }
            out.insert(format!("{tool_prefix}{tool}"), arg.get_ref().clone());
        }
        Ok(out)
    }

    /// `grants.fs`: each directory checked, and none nested in another.
    fn fs_grants(
        &self,
        name: &str,
        grants: &[Spanned<RawFsGrant>],
    ) -> Result<Vec<FsGrant>, ManifestError> {
        let mut fs: Vec<FsGrant> = Vec::new();
        for grant in grants {
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
        Ok(fs)
    }

    /// `grants.env`: variable names.
    fn env_grants(&self, vars: &[Spanned<String>]) -> Result<Vec<String>, ManifestError> {
        let mut env = Vec::new();
        for var in vars {
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
        Ok(env)
    }

    /// `grants.secrets`: each bound to a granted destination, with a header name and well-formed placeholders.
    pub(super) fn secret_grants(
        &self,
        name: &str,
        raw: &[Spanned<RawSecret>],
        net: &[NetGrant],
    ) -> Result<Vec<Secret>, ManifestError> {
        let mut secrets = Vec::new();
        for secret in raw {
            let raw_secret = secret.get_ref();
            let (scheme, host, port) = match self.secret_destination(name, secret, net) {
                Ok(destination) => destination,
                // A built-in provider's key goes to that provider's API. A
                // profile or `-c` that points the entry at another server
                // (its base_url and grants.net) leaves that origin
                // ungranted: the key then goes nowhere, which is what the
                // user asked for, instead of failing on a line of the
                // built-in defaults nobody can edit.
                Err(_) if self.layer.name == DEFAULTS_NAME && builtin_secret(name, raw_secret) => {
                    tracing::warn!(
                        "plugin `{name}`: its built-in `{}` header is not sent: grants.net no \
                         longer allows {}; to send a key to the server you chose, bind one there, \
                         e.g. grants.secrets = [{{ origin = \"{}\", header = \"{}\", value = \
                         \"{}\" }}]",
                        raw_secret.header,
                        raw_secret.host.as_deref().unwrap_or("its API"),
                        net.first()
                            .map_or("http://HOST:PORT", |g| g.pattern.as_str()),
                        raw_secret.header,
                        raw_secret.value,
                    );
                    continue;
                }
                Err(e) => return Err(e),
            };
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
        Ok(secrets)
    }

    /// `grants.exec`: each program resolved in PATH, `**` only last.
    fn exec_grants(
        &self,
        name: &str,
        grants: &[Spanned<RawExec>],
    ) -> Result<Vec<crate::exec::ExecGrant>, ManifestError> {
        let mut exec = Vec::new();
        for grant in grants {
            let g = grant.get_ref();
            // `*` is any program, found when each command runs; it is not
            // looked up here.
            let found = if g.program == crate::exec::ANY_PROGRAM {
                Some(PathBuf::new())
            } else {
                crate::exec::resolve(&g.program)
            };
            let path = match found {
                Some(path) => path,
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
                network: self.exec_network(name, g)?,
            });
        }
        Ok(exec)
    }

    /// `network` of a `grants.exec` entry: `true`, `false`, or a list of
    /// `scheme://host:port` destinations.
    fn exec_network(&self, name: &str, g: &RawExec) -> Result<crate::exec::Network, ManifestError> {
        match &g.network {
            None => Ok(crate::exec::Network::Off),
            Some(value) => self.network(
                value,
                &format!("plugin `{name}`: `network` of program `{}`", g.program),
            ),
        }
    }

    /// A native program's network: `true` (any destination), `false`
    /// (none), or a list of `scheme://host:port` destinations, reached only
    /// through corral's proxy. `what` names the key in errors.
    pub(super) fn network(
        &self,
        value: &Spanned<toml::Value>,
        what: &str,
    ) -> Result<crate::exec::Network, ManifestError> {
        use crate::exec::{Destination, Network};
        let help = || {
            Some(
                "write `true` (any destination), `false` (none), or a list of destinations such as [\"https://crates.io:443\", \"http://127.0.0.1:8080\"]"
                    .into(),
            )
        };
        match value.get_ref() {
            toml::Value::Boolean(any) => Ok(Network::from(*any)),
            toml::Value::Array(items) => {
                let mut only = Vec::new();
                for item in items {
                    let parsed = match item {
                        toml::Value::String(text) => Destination::parse(text).map_err(|why| {
                            format!(
                                "{what}: the network destination `{}` is not valid: {why}",
                                text.escape_debug()
                            )
                        }),
                        other => Err(format!(
                            "{what}: a network destination is a {}, not a string",
                            other.type_str()
                        )),
                    };
                    only.push(parsed.map_err(|m| self.err(value.span(), m, help()))?);
                }
                Ok(if only.is_empty() {
                    Network::Off
                } else {
                    Network::Only(only)
                })
            }
            other => Err(self.err(
                value.span(),
                format!(
                    "{what} is a {}; it must be true, false or a list of destinations",
                    other.type_str()
                ),
                help(),
            )),
        }
    }

    /// `tool_prefix`: what the plugin's tool names get in front.
    fn tool_prefix(
        &self,
        name: &str,
        prefix: Option<&Spanned<String>>,
    ) -> Result<String, ManifestError> {
        let tool_prefix = match prefix {
            Some(p) => {
                let v = p.get_ref();
                let ok = !v.is_empty()
                    && v.len() <= 32
                    && v.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !ok {
                    return Err(self.err(
                        p.span(),
                        format!("plugin `{name}`: `tool_prefix` {v:?} is not allowed"),
                        Some("use 1 to 32 letters, digits, `_` or `-`, e.g. \"wc_\"".into()),
                    ));
                }
                v.clone()
            }
            None => String::new(),
        };
        Ok(tool_prefix)
    }

    fn source(
        &self,
        name: &str,
        source: &Spanned<String>,
        sha256: Option<&Spanned<String>>,
    ) -> Result<Source, ManifestError> {
        let text = source.get_ref();
        if let Some(builtin) = text.strip_prefix("builtin:") {
            if !crate::protocol::BUILTIN_PLUGINS.contains(&builtin) {
                return Err(self.err(
                    source.span(),
                    format!("plugin `{name}`: there is no built-in plugin `{builtin}`"),
                    Some(format!(
                        "built-in plugins: {}",
                        crate::protocol::BUILTIN_PLUGINS.join(", ")
                    )),
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
        if let Some(state) = crate::exec::state::user_dirs().into_iter().find(|s| {
            s.path
                .canonicalize()
                .is_ok_and(|k| host_path.starts_with(k))
        }) {
            return Err(self.err(
                grant.span(),
                format!(
                    "plugin `{name}`: granted path `{}` is in corral's own {} directory ({}), \
                     which nothing corral runs may read or change",
                    raw.path,
                    state.what,
                    state.path.display()
                ),
                Some(
                    "grant another directory; corral keeps its own state out of every grant".into(),
                ),
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

    pub(super) fn net_grant(&self, pattern: &Spanned<String>) -> Result<NetGrant, ManifestError> {
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

/// Whether `secret` is the one [`DEFAULTS`] gives the built-in plugin
/// `name`, as written there (a secret a profile or `-c` put in that entry is
/// the user's, and checked like any other).
fn builtin_secret(name: &str, secret: &RawSecret) -> bool {
    let Ok(defaults) = DEFAULTS.parse::<toml::Table>() else {
        return false;
    };
    let listed = defaults
        .get("plugins")
        .and_then(|p| p.get(name))
        .and_then(|e| e.get("grants"))
        .and_then(|g| g.get("secrets"))
        .and_then(toml::Value::as_array);
    let field =
        |t: &toml::Value, key: &str| t.get(key).and_then(toml::Value::as_str).map(str::to_owned);
    listed.into_iter().flatten().any(|t| {
        secret.origin.is_none()
            && field(t, "host") == secret.host
            && field(t, "header").as_deref() == Some(secret.header.as_str())
            && field(t, "value").as_deref() == Some(secret.value.as_str())
    })
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

pub(super) fn valid_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

impl Checker<'_> {
    /// Checks the bindings of one layer's `[hooks]` and appends them to
    /// `out`, in the order they run.
    pub(super) fn hooks(
        &self,
        raw: &super::raw::RawHooks,
        out: &mut Vec<super::HookBinding>,
    ) -> Result<(), ManifestError> {
        use crate::protocol::HookEvent as E;
        for (event, list) in [
            (E::SessionStart, &raw.session_start),
            (E::UserPrompt, &raw.user_prompt),
            (E::BeforeTool, &raw.before_tool),
            (E::AfterTool, &raw.after_tool),
            (E::AfterToolFailure, &raw.after_tool_failure),
            (E::BeforeCompact, &raw.before_compact),
            (E::Stop, &raw.stop),
            (E::SubagentStop, &raw.subagent_stop),
            (E::SessionEnd, &raw.session_end),
        ] {
            for hook in list {
                let span = hook.span();
                let key = event.as_str();
                let target = self.hook_target(key, hook)?;
                let tools = &hook.get_ref().tools;
                if !tools.is_empty() && !event.is_tool_event() {
                    return Err(self.err(
                        span,
                        format!("hooks.{key}: `tools` applies only to tool events"),
                        Some(
                            "remove `tools`, or bind the hook to before_tool, after_tool or after_tool_failure"
                                .into(),
                        ),
                    ));
                }
                if let Some(bad) = tools.iter().find(|t| t.is_empty()) {
                    return Err(self.err(
                        span,
                        format!("hooks.{key}: the tool pattern `{bad}` is empty"),
                        Some("write a tool name; `*` matches any run of characters".into()),
                    ));
                }
                out.push(super::HookBinding {
                    event,
                    target,
                    tools: tools.clone(),
                    origin: Origin {
                        file: self.layer.name.clone(),
                        line: line_col(&self.layer.text, span.start).0,
                    },
                });
            }
        }
        Ok(())
    }
}

impl Checker<'_> {
    /// What one `[hooks]` entry runs: a plugin or a command, exactly one,
    /// with the command's timeout and grants checked.
    fn hook_target(
        &self,
        key: &str,
        hook: &Spanned<super::raw::RawHook>,
    ) -> Result<super::HookTarget, ManifestError> {
        let span = hook.span();
        let raw = hook.get_ref();
        let grants = &raw.grants;
        let granted = !grants.read.is_empty()
            || !grants.write.is_empty()
            || !grants.env.is_empty()
            || grants.net.is_some();
        let command = match (&raw.plugin, &raw.command) {
            (Some(plugin), None) => {
                if !valid_name(plugin) {
                    return Err(self.err(
                        span,
                        format!("hooks.{key}: `{plugin}` is not a plugin name"),
                        Some("name a [plugins.NAME] entry that exports corral:plugin/hook".into()),
                    ));
                }
                if granted || raw.timeout.is_some() {
                    return Err(self.err(
                        span,
                        format!("hooks.{key}: `grants` and `timeout` are for a command hook"),
                        Some(format!(
                            "give the plugin its grants and limits in [plugins.{plugin}]"
                        )),
                    ));
                }
                return Ok(super::HookTarget::Plugin(plugin.clone()));
            }
            (None, Some(command)) if !command.trim().is_empty() => command,
            (None, Some(_)) => {
                return Err(self.err(
                    span,
                    format!("hooks.{key}: the command is empty"),
                    Some("write the command line the hook runs".into()),
                ));
            }
            _ => {
                return Err(self.err(
                    span,
                    format!("hooks.{key}: a hook runs either `plugin` or `command`"),
                    Some(
                        "write `plugin = \"NAME\"` for a hook plugin, or `command = \"…\"` for a \
                         command run through /bin/sh -c"
                            .into(),
                    ),
                ));
            }
        };
        let timeout_secs = match &raw.timeout {
            Some(t) if *t.get_ref() == 0 || *t.get_ref() > 3600 => {
                return Err(self.err(
                    t.span(),
                    format!("hooks.{key}: timeout = {} is out of range", t.get_ref()),
                    Some("write the seconds the command may run, 1 to 3600".into()),
                ));
            }
            Some(t) => *t.get_ref(),
            None => super::DEFAULT_COMMAND_TIMEOUT_SECS,
        };
        let net = match &grants.net {
            None => crate::exec::Network::Off,
            Some(value) => self.network(value, &format!("hooks.{key} grants.net"))?,
        };
        let dir = |d: &String| self.workspace.join(d);
        Ok(super::HookTarget::Command(Box::new(super::CommandHook {
            command: command.clone(),
            timeout_secs,
            read: grants.read.iter().map(dir).collect(),
            write: grants.write.iter().map(dir).collect(),
            env: grants.env.clone(),
            net,
            workspace: self.workspace.to_path_buf(),
            trusted_code: None,
        })))
    }
}

/// Refuses a `[hooks]` binding that names no plugin of the merged manifest.
pub(super) fn hook_plugin_exists(
    binding: &super::HookBinding,
    plugins: &std::collections::BTreeMap<String, super::PluginDecl>,
) -> Result<(), ManifestError> {
    let super::HookTarget::Plugin(plugin) = &binding.target else {
        return Ok(());
    };
    if plugins.contains_key(plugin) {
        return Ok(());
    }
    Err(ManifestError {
        file: binding.origin.file.clone(),
        line: binding.origin.line,
        column: 1,
        message: format!(
            "hooks.{}: plugin `{}` is not declared (or is disabled)",
            binding.event.as_str(),
            plugin
        ),
        help: Some(format!(
            "declare [plugins.{plugin}] with the hook's component and the grants it needs"
        )),
    })
}
