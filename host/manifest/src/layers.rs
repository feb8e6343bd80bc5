//! Where a manifest comes from and how its layers merge: the built-in
//! defaults, the user's file and the trusted project file, later layers
//! replacing earlier entries of the same name.

use super::check::{Checker, valid_name};
use super::error::line_col;
use super::loosen::{self, Loosening};
use super::raw::{Layer, RawAgent, RawFile, RawGuard, RawPlugin, RawPolicy};
use super::{AgentSettings, DEFAULTS, DEFAULTS_NAME, Manifest, ManifestError, PluginDecl};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers for `workspace`: defaults, the user's file, and the project's
/// file when the user trusts it (see [`crate::trust`]). An untrusted project
/// file is reported in `untrusted` and adds nothing.
pub fn layers(workspace: &Path) -> std::io::Result<(Vec<Layer>, Option<PathBuf>)> {
    let mut out = vec![Layer {
        name: DEFAULTS_NAME.to_owned(),
        text: DEFAULTS.to_owned(),
        base: workspace.to_path_buf(),
    }];
    let user = user_file();
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

/// The user's manifest, `$XDG_CONFIG_HOME/corral/corral.toml`.
pub fn user_file() -> Option<PathBuf> {
    dirs::config_dir().map(|dir| dir.join("corral").join("corral.toml"))
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
    load_with(workspace, &super::Overrides::default())
}

/// [`load`], with a profile and `-c` overrides applied over the files (and
/// the SDKs' base-URL variables under them; see [`super::Overrides`]).
pub fn load_with(
    workspace: &Path,
    overrides: &super::Overrides,
) -> Result<Manifest, ManifestError> {
    load_adding(workspace, overrides, Vec::new())
}

/// [`load_with`], with `extra` layers after the files and before the
/// overrides: settings a front-end was given for one session (an editor's
/// MCP servers). They weigh as the user's file does, never as the
/// project's: nothing in them needs trust or loosens a grant of their own.
pub fn load_adding(
    workspace: &Path,
    overrides: &super::Overrides,
    extra: Vec<Layer>,
) -> Result<Manifest, ManifestError> {
    let (mut layers, untrusted) = layers(workspace).map_err(|e| ManifestError {
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
    layers.extend(extra);
    let project = workspace.join("corral.toml");
    let project_name = project.display().to_string();
    // Trust is bound to the project's file as written, not as overridden.
    let project_text = layers
        .iter()
        .rev()
        .find(|l| l.name == project_name)
        .map(|l| l.text.clone());
    let user = user_file().map(|f| f.display().to_string());
    let from_env = super::overrides::apply(
        &mut layers,
        user.as_deref(),
        overrides,
        &super::overrides::process_env,
    )?;
    let mut manifest = from_layers(workspace, &layers)?;
    for env in &from_env {
        if let Some(decl) = manifest.plugins.iter().find(|p| p.name == env.plugin)
            && let Some(why) = super::overrides::ungranted(env, decl, user.as_deref())
        {
            manifest.provider_errors.insert(env.plugin.clone(), why);
        }
    }
    // A grant written on the command line is shown what it leaves out.
    if overrides.settings.iter().any(|s| s.contains("grants")) {
        for note in manifest.state_notes() {
            tracing::warn!("{note}");
        }
    }
    manifest.tool_reviews = super::reviewed::ToolReviews::for_workspace(&manifest.workspace);
    for l in manifest.loosening.iter().filter(|l| !l.applied) {
        tracing::warn!("{}", l.warning());
    }
    if let Some(text) = project_text {
        crate::trust::bind(&mut manifest, &project, &text);
    }
    Ok(manifest)
}

/// Checks a manifest made of explicit layers (later layers win).
///
/// The layer named `WORKSPACE/corral.toml` (as [`layers`] names the
/// project's file) is the project's: it may only tighten the security
/// settings of the layers before it, unless one of them sets
/// `[trust] project_may_loosen = true` (see [`super::Loosening`]).
pub fn from_layers(workspace: &Path, layers: &[Layer]) -> Result<Manifest, ManifestError> {
    let project_name = workspace.join("corral.toml").display().to_string();
    let workspace = workspace.canonicalize().map_err(|e| ManifestError {
        file: workspace.display().to_string(),
        line: 0,
        column: 0,
        message: format!("the workspace directory cannot be opened: {e}"),
        help: Some("pass an existing directory with --workspace".into()),
    })?;
    let mut fold = Fold::default();
    for layer in layers {
        let mut raw: RawFile = toml::from_str(&layer.text).map_err(|e| {
            let (line, column) = e.span().map_or((0, 0), |s| line_col(&layer.text, s.start));
            ManifestError {
                file: layer.name.clone(),
                line,
                column,
                message: e.message().trim().to_owned(),
                help: Some(
                    "see the manifest reference in host/README.md (plugins.NAME: source, sha256, \
                     enabled, grants.fs/net/env, limits, config)"
                        .into(),
                ),
            }
        })?;
        let step = Step {
            at: Checker {
                layer,
                workspace: &workspace,
            },
            is_project: layer.name == project_name,
        };
        fold.trust_and_sandbox(&step, &raw);
        fold.policy(&step, &raw.policy)?;
        fold.guard(&step, &raw.guard)?;
        fold.agent(&step, &mut raw.agent)?;
        step.at.hooks(&raw.hooks, &mut fold.hooks)?;
        fold.models(&step, &mut raw.agent)?;
        fold.plugins(&step, raw.plugins)?;
        for (name, entry) in std::mem::take(&mut raw.mcp) {
            if entry.enabled {
                let mut decl = step.at.mcp(&name, entry)?;
                decl.project = step.is_project;
                fold.mcp.insert(name, decl);
            } else {
                fold.mcp.remove(&name);
            }
        }
    }
    fold.finish(workspace, layers)
}

/// What the layers folded so far add up to.
struct Fold {
    plugins: BTreeMap<String, PluginDecl>,
    agent: AgentSettings,
    require_os_sandbox: bool,
    policy: crate::policy::Policy,
    guard: crate::policy::GuardSettings,
    hooks: Vec<crate::HookBinding>,
    /// `[mcp.NAME]`, later layers replacing earlier entries.
    mcp: BTreeMap<String, crate::McpServerDecl>,
    /// Whether a layer below the project's lets it loosen settings.
    may_loosen: bool,
    loosening: Vec<Loosening>,
    /// Plugins a layer below the project's turned off with `enabled = false`.
    disabled: BTreeSet<String>,
}

impl Default for Fold {
    fn default() -> Self {
        Self {
            plugins: BTreeMap::new(),
            agent: AgentSettings::default(),
            require_os_sandbox: true,
            policy: crate::policy::Policy::default(),
            guard: crate::policy::GuardSettings::default(),
            hooks: Vec::new(),
            mcp: BTreeMap::new(),
            may_loosen: false,
            loosening: Vec::new(),
            disabled: BTreeSet::new(),
        }
    }
}

/// The layer being folded in.
struct Step<'a> {
    at: Checker<'a>,
    is_project: bool,
}

impl Fold {
    /// Whether a loosening line of this layer takes effect; each one is
    /// recorded either way, for `corral trust` to list.
    fn loosens(
        &mut self,
        step: &Step<'_>,
        span: std::ops::Range<usize>,
        setting: String,
        what: &str,
    ) -> bool {
        if !step.is_project {
            return true;
        }
        self.loosening.push(Loosening {
            file: step.at.layer.name.clone(),
            line: line_col(&step.at.layer.text, span.start).0,
            setting,
            what: what.to_owned(),
            applied: self.may_loosen,
        });
        self.may_loosen
    }

    /// `[trust]` and `[sandbox]`.
    fn trust_and_sandbox(&mut self, step: &Step<'_>, raw: &RawFile) {
        if let Some(v) = &raw.trust.project_may_loosen {
            if !step.is_project {
                self.may_loosen = *v.get_ref();
            } else if *v.get_ref() {
                self.loosens(
                    step,
                    v.span(),
                    "trust.project_may_loosen = true".into(),
                    "has no effect in a project's file: only your own config can let a project \
                     loosen your settings",
                );
            }
        }
        if let Some(r) = &raw.sandbox.require_os_sandbox {
            let off = !*r.get_ref();
            if !(off && self.require_os_sandbox)
                || self.loosens(
                    step,
                    r.span(),
                    "sandbox.require_os_sandbox = false".into(),
                    "would run granted programs even where the kernel cannot confine them",
                )
            {
                self.require_os_sandbox = *r.get_ref();
            }
        }
    }

    /// `[policy]`: the mode and the rules.
    fn policy(&mut self, step: &Step<'_>, raw: &RawPolicy) -> Result<(), ManifestError> {
        if let Some(mode) = &raw.mode {
            let m: crate::protocol::Mode = mode
                .get_ref()
                .parse()
                .map_err(|e: String| step.at.err(mode.span(), format!("policy.mode: {e}"), None))?;
            if loosen::permissiveness(m) <= loosen::permissiveness(self.policy.mode)
                || self.loosens(
                    step,
                    mode.span(),
                    format!("policy.mode = \"{}\"", m.as_str()),
                    &format!(
                        "would run more calls without asking than mode `{}`, which your \
                         settings give",
                        self.policy.mode.as_str()
                    ),
                )
            {
                self.policy.mode = m;
            }
        }
        use crate::policy::Action;
        for (key, list, action) in [
            ("allow", &raw.allow, Action::Allow),
            ("ask", &raw.ask, Action::Ask),
            ("deny", &raw.deny, Action::Deny),
            ("stop", &raw.stop, Action::DenyAndStop),
        ] {
            for (i, text) in list.iter().enumerate() {
                let source = format!("{}: policy.{key}[{i}]", step.at.layer.name);
                let rule = crate::policy::parse_rule(text.get_ref(), action, &source).map_err(|e| {
                    step.at.err(
                        text.span(),
                        format!("policy.{key}: {e}"),
                        Some("write a tool name, optionally with an argument pattern: `run_command(cargo test **)`, `write_file(docs/**)`".into()),
                    )
                })?;
                if action == Action::Allow
                    && !self.loosens(
                        step,
                        text.span(),
                        format!(
                            "policy.allow = [`{}`]",
                            crate::terminal::inert_line(text.get_ref())
                        ),
                        "would run matching calls without asking, whatever the mode",
                    )
                {
                    continue;
                }
                self.policy.rules.push(rule);
            }
        }
        Ok(())
    }

    /// `[guard]`: whether it is on, the file classes and the hosts it lets
    /// through.
    fn guard(&mut self, step: &Step<'_>, raw: &RawGuard) -> Result<(), ManifestError> {
        if let Some(enabled) = &raw.enabled
            && (*enabled.get_ref()
                || !self.guard.enabled
                || self.loosens(
                    step,
                    enabled.span(),
                    "guard.enabled = false".into(),
                    "would turn the exfiltration guard off, so a session that read secrets or \
                     untrusted text could send data out unasked",
                ))
        {
            self.guard.enabled = *enabled.get_ref();
        }
        self.injection(step, raw);
        for (key, list) in [
            ("untrusted", &raw.untrusted),
            ("trusted", &raw.trusted),
            ("secrets", &raw.secrets),
        ] {
            for pattern in list {
                crate::policy::globs(key, [pattern.get_ref().as_str()]).map_err(|e| {
                    step.at.err(
                        pattern.span(),
                        e.to_string(),
                        Some(
                            "write a glob relative to the workspace root, e.g. \"vendor/**\""
                                .into(),
                        ),
                    )
                })?;
                if key == "trusted"
                    && !self.loosens(
                        step,
                        pattern.span(),
                        format!(
                            "guard.trusted = [`{}`]",
                            crate::terminal::inert_line(pattern.get_ref())
                        ),
                        "would make what those files say count as trusted, so an instruction \
                         planted there no longer holds network calls",
                    )
                {
                    continue;
                }
                let into = match key {
                    "untrusted" => &mut self.guard.untrusted,
                    "trusted" => &mut self.guard.trusted,
                    _ => &mut self.guard.secrets,
                };
                into.push(pattern.get_ref().clone());
            }
        }
        for host in &raw.allow_hosts {
            let h = host.get_ref();
            if h.is_empty() || h.contains('/') || h.contains(char::is_whitespace) {
                return Err(step.at.err(
                    host.span(),
                    format!("guard.allow_hosts: `{h}` is not a host"),
                    Some(
                        "write a host or host:port, e.g. \"api.example.com\" or \"127.0.0.1:8080\""
                            .into(),
                    ),
                ));
            }
            if !self.loosens(
                step,
                host.span(),
                format!("guard.allow_hosts = [`{}`]", crate::terminal::inert_line(h)),
                "would let a session the guard holds send data to that host unasked",
            ) {
                continue;
            }
            self.guard.allow_hosts.push(h.to_ascii_lowercase());
        }
        Ok(())
    }

    /// `[guard]`'s `injection` and `injection_exempt`: each loosens, so a
    /// project's needs the user's leave.
    fn injection(&mut self, step: &Step<'_>, raw: &RawGuard) {
        if let Some(on) = &raw.injection
            && (*on.get_ref()
                || !self.guard.injection
                || self.loosens(
                    step,
                    on.span(),
                    "guard.injection = false".into(),
                    "would let calls carry values from untrusted content (an injected URL, \
                     address or command) unasked",
                ))
        {
            self.guard.injection = *on.get_ref();
        }
        for tool in &raw.injection_exempt {
            let name = tool.get_ref();
            if self.loosens(
                step,
                tool.span(),
                format!(
                    "guard.injection_exempt = [`{}`]",
                    crate::terminal::inert_line(name)
                ),
                "would let that tool's calls carry values from untrusted content unasked",
            ) && !self.guard.injection_exempt.contains(name)
            {
                self.guard.injection_exempt.push(name.clone());
            }
        }
    }

    /// `[agent]`'s provider, model and limits.
    fn agent(&mut self, step: &Step<'_>, raw: &mut RawAgent) -> Result<(), ManifestError> {
        let at = &step.at;
        let agent = &mut self.agent;
        if let Some(p) = raw.provider.take() {
            if !valid_name(p.get_ref()) {
                return Err(at.err(
                    p.span(),
                    format!("`{}` is not a plugin name", p.get_ref()),
                    None,
                ));
            }
            agent.provider = Some(p.into_inner());
        }
        if let Some(m) = raw.model.take() {
            agent.model = Some(m);
        }
        if let Some(t) = raw.max_tokens.take() {
            agent.max_tokens = Some(t);
        }
        if let Some(t) = raw.temperature.take() {
            agent.temperature = Some(t);
        }
        if let Some(d) = raw.max_subagent_depth.take() {
            agent.max_subagent_depth = Some(d);
        }
        for (value, key, slot) in [
            (
                raw.max_iterations.take(),
                "max_iterations",
                &mut agent.max_iterations,
            ),
            (
                raw.max_parallel_subagents.take(),
                "max_parallel_subagents",
                &mut agent.max_parallel_subagents,
            ),
            (
                raw.subagent_max_iterations.take(),
                "subagent_max_iterations",
                &mut agent.subagent_max_iterations,
            ),
        ] {
            if let Some(n) = value {
                if *n.get_ref() == 0 {
                    return Err(at.err(n.span(), format!("agent.{key} must be at least 1"), None));
                }
                *slot = Some(n.into_inner());
            }
        }
        Ok(())
    }

    /// `[agent]`'s compaction share and `[agent.models]`.
    fn models(&mut self, step: &Step<'_>, raw: &mut RawAgent) -> Result<(), ManifestError> {
        let at = &step.at;
        let agent = &mut self.agent;
        if let Some(c) = raw.compact_at.take() {
            let v = *c.get_ref();
            if !(v > 0.0 && v < 1.0) {
                return Err(at.err(
                    c.span(),
                    format!("agent.compact_at = {v} is not a share of the context window"),
                    Some("write a number between 0 and 1, e.g. `compact_at = 0.8`".into()),
                ));
            }
            agent.compact_at = Some(v);
        }
        for (id, m) in std::mem::take(&mut raw.models) {
            if let Some(w) = &m.context_window
                && *w.get_ref() < 256
            {
                return Err(at.err(
                    w.span(),
                    format!(
                        "agent.models.\"{id}\".context_window = {} is too small to hold a request",
                        w.get_ref()
                    ),
                    Some(
                        "give the model's context window in tokens, e.g. `context_window = 128000`"
                            .into(),
                    ),
                ));
            }
            let entry = agent.models.entry(id.clone()).or_default();
            if let Some(w) = m.context_window {
                entry.context_window = Some(w.into_inner());
            }
            if m.max_output_tokens.is_some() {
                entry.max_output_tokens = m.max_output_tokens;
            }
            if m.accepts_images.is_some() {
                entry.accepts_images = m.accepts_images;
            }
            if let Some(p) = m.price {
                let raw = *p.get_ref();
                if ![raw.input_per_mtok, raw.output_per_mtok]
                    .iter()
                    .all(|v| v.is_finite() && *v >= 0.0)
                {
                    return Err(at.err(
                        p.span(),
                        format!("agent.models.\"{id}\".price is not a price"),
                        Some(
                            "give US dollars per million tokens, e.g. \
                             `price = { input_per_mtok = 2.0, output_per_mtok = 8.0 }`"
                                .into(),
                        ),
                    ));
                }
                entry.price = Some(crate::Price {
                    input_per_mtok: raw.input_per_mtok,
                    output_per_mtok: raw.output_per_mtok,
                });
            }
        }
        Ok(())
    }

    /// `[plugins.NAME]`: later layers replace earlier entries; the
    /// project's may not widen or bring back what the layers below gave.
    fn plugins(
        &mut self,
        step: &Step<'_>,
        raw: BTreeMap<String, RawPlugin>,
    ) -> Result<(), ManifestError> {
        for (name, entry) in raw {
            if !entry.enabled {
                self.plugins.remove(&name);
                if !step.is_project {
                    self.disabled.insert(name);
                }
                continue;
            }
            let decl = step.at.plugin(&name, entry)?;
            if step.is_project {
                let span = line_span(&step.at.layer.text, decl.origin.line);
                if self.disabled.contains(&name)
                    && !self.loosens(
                        step,
                        span.clone(),
                        format!("[plugins.{name}]"),
                        "would bring back a plugin your settings disable",
                    )
                {
                    continue;
                }
                if let Some(old) = self.plugins.get(&name) {
                    let wider = loosen::widened(old, &decl);
                    let file = old.origin.file.clone();
                    if !wider.is_empty()
                        && !self.loosens(
                            step,
                            span,
                            format!("[plugins.{name}]"),
                            &format!(
                                "would replace the plugin `{name}` of {file} with one that gets {}",
                                wider.join(", ")
                            ),
                        )
                    {
                        continue;
                    }
                }
            }
            self.plugins.insert(name, decl);
        }
        Ok(())
    }

    /// The manifest, once every layer is in and the names they refer to
    /// are known to exist.
    fn finish(self, workspace: PathBuf, layers: &[Layer]) -> Result<Manifest, ManifestError> {
        if let Some(p) = &self.agent.provider
            && !self.plugins.contains_key(p)
        {
            return Err(ManifestError {
                file: layers.last().map(|l| l.name.clone()).unwrap_or_default(),
                line: 0,
                column: 0,
                message: format!("agent.provider = \"{p}\" names no plugin"),
                help: Some(format!(
                    "declare [plugins.{p}] or choose one of: {}",
                    self.plugins.keys().cloned().collect::<Vec<_>>().join(", ")
                )),
            });
        }
        for binding in &self.hooks {
            super::check::hook_plugin_exists(binding, &self.plugins)?;
        }
        Ok(Manifest {
            workspace,
            hooks: self.hooks,
            mcp: self.mcp.into_values().collect(),
            plugins: self.plugins.into_values().collect(),
            agent: self.agent,
            require_os_sandbox: self.require_os_sandbox,
            policy: self.policy,
            guard: self.guard,
            trusted_files: BTreeMap::new(),
            loosening: self.loosening,
            tool_reviews: None,
            provider_errors: BTreeMap::new(),
        })
    }
}

/// The byte range of the 1-based `line` of `text`, for [`line_col`].
fn line_span(text: &str, line: usize) -> std::ops::Range<usize> {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    start..start
}
