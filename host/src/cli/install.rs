//! `corral plugin add | update | remove | verify | publish | pack`: getting
//! a plugin in with its capabilities reviewed, keeping it current without
//! letting it widen silently, and shipping one.

use super::{EXIT_TOOL_ERROR, fail, out};
use clap::Args;
use corral_core::install::fetch::PluginSource;
use corral_core::install::requests::{self, Requests};
use corral_core::install::review::{self, Grant, ToolDiff};
use corral_core::install::{Candidate, edit, oci, store};
use corral_core::manifest::{self, Layer, Manifest, PluginDecl, Source};
use corral_core::plugins::{ImportStatus, Runtime, RuntimeOptions};
use corral_protocol::ToolSpec;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options shared by `add` and `update`.
#[derive(Args, Clone, Default)]
pub(super) struct Approval {
    /// Approve without asking (for scripts): the requested capabilities,
    /// narrowed by --grant/--deny, are granted.
    #[arg(long, short)]
    pub(super) yes: bool,
    /// Grant only the requested capabilities this names (repeatable):
    /// `fs`, `net`, `env`, `exec`, `secret`, or one of them as
    /// `KIND:VALUE` (`net:https://api.example.com:443`, `fs:docs`, `exec:git`).
    #[arg(long, value_name = "SPEC")]
    pub(super) grant: Vec<String>,
    /// Do not grant the requested capabilities this names (repeatable; same
    /// forms as --grant).
    #[arg(long, value_name = "SPEC")]
    pub(super) deny: Vec<String>,
}

/// `corral plugin add` arguments.
#[derive(Args)]
pub(super) struct AddArgs {
    /// A `.wasm` file, an `https://` URL (with --sha256) or an OCI
    /// reference (`oci://ghcr.io/OWNER/PLUGIN:TAG` or `…@sha256:…`).
    source: String,
    /// The expected SHA-256 of the component (required for a URL).
    #[arg(long)]
    sha256: Option<String>,
    /// The name of its manifest entry (default: the name it declares, else
    /// the file's).
    #[arg(long)]
    name: Option<String>,
    /// Put this before each of its tool names (`tool_prefix`), e.g. when
    /// they clash with another plugin's.
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<String>,
    /// Write the entry to the project's corral.toml (which then needs
    /// `corral trust`) instead of the user's.
    #[arg(long)]
    project: bool,
    #[command(flatten)]
    approval: Approval,
}

/// `corral plugin update` arguments.
#[derive(Args)]
pub(super) struct UpdateArgs {
    /// The plugin's name.
    name: String,
    /// Fetch from here instead of where it was added from (e.g. a new tag).
    #[arg(long, value_name = "SOURCE")]
    from: Option<String>,
    /// The expected SHA-256 of the new component (required for a URL).
    #[arg(long)]
    sha256: Option<String>,
    #[command(flatten)]
    approval: Approval,
}

fn runtime() -> Result<Runtime, ExitCode> {
    Runtime::new(RuntimeOptions::user()).map_err(|e| fail(&format!("{e:#}")))
}

fn cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_default()
}

/// The manifest file an entry goes to.
pub(super) fn target_file(workspace: &Path, project: bool) -> Result<PathBuf, String> {
    if project {
        Ok(workspace.join("corral.toml"))
    } else {
        manifest::user_file().ok_or_else(|| {
            "no configuration directory for the user's manifest (set XDG_CONFIG_HOME or HOME)"
                .to_owned()
        })
    }
}

/// The manifest `workspace` would have with `file`'s text replaced by
/// `text`. The project file counts even if it is not trusted yet, since
/// the user is editing it now.
fn manifest_with(workspace: &Path, file: &Path, text: &str) -> Result<Manifest, String> {
    let (mut layers, _) = manifest::layers(workspace).map_err(|e| e.to_string())?;
    let name = file.display().to_string();
    let layer = Layer {
        name: name.clone(),
        text: text.to_owned(),
        base: file.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    match layers.iter_mut().find(|l| l.name == name) {
        Some(l) => *l = layer,
        None => {
            let is_user = manifest::user_file().as_deref() == Some(file);
            // The user's file sits between the defaults and the project's.
            let at = if is_user { 1 } else { layers.len() };
            layers.insert(at.min(layers.len()), layer);
        }
    }
    manifest::from_layers(workspace, &layers).map_err(|e| e.to_string())
}

/// A tool for a review: its whole description, as the model reads it.
fn tool_lines(t: &ToolSpec) -> String {
    super::toolview::tool(t)
}

/// The review of a candidate and the grants it would get.
fn review_text(c: &Candidate, name: &str, granted: &[Grant], decl: Option<&PluginDecl>) -> String {
    let mut text = format!("Plugin `{name}`");
    if let Some(v) = &c.version {
        text.push_str(&format!(" {v}"));
    }
    text.push_str(&format!(" from {}\n", c.source.record()));
    if let Some(d) = &c.requests.plugin.description {
        text.push_str(&format!("  {}\n", d));
    }
    text.push_str(&format!(
        "  sha256 {} ({} KB)\n",
        c.fetched.sha256,
        c.fetched.bytes.len().div_ceil(1024)
    ));
    if let Some(d) = &c.fetched.digest {
        text.push_str(&format!("  digest {d}\n"));
    }
    let tools = c.tools();
    text.push_str(&format!("\nTools ({}):\n", tools.len()));
    for t in tools {
        text.push_str(&tool_lines(t));
    }
    let requested = review::grants_of(&c.requests.requests);
    text.push_str("\nRequests:\n");
    if !c.has_requests {
        text.push_str("  (it declares none: it gets nothing unless you add grants by hand)\n");
    }
    for g in &requested {
        let mark = if granted.contains(g) {
            "grant"
        } else {
            "DENY "
        };
        text.push_str(&format!("  {mark} {g}\n"));
    }
    if c.has_requests && requested.is_empty() {
        text.push_str("  nothing\n");
    }
    if let Some(decl) = decl {
        text.push_str("\nImports, with these grants:\n");
        for i in &c.inspection.imports {
            let r = corral_core::plugins::review(decl, &i.name);
            let status = match r.status {
                ImportStatus::Live => "live".to_owned(),
                ImportStatus::Denied => format!("denied: {}", r.note),
                ImportStatus::Refused => format!("refused: {}", r.note),
            };
            text.push_str(&format!("  {}  {status}\n", i.name));
        }
    }
    text
}

/// Asks on the terminal; without one, only `--yes` approves.
fn approved(question: &str, yes: bool) -> Result<(), String> {
    if yes {
        return Ok(());
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(format!(
            "not approved, nothing was changed: {question} Answer on a terminal, or pass --yes \
             (narrow with --grant/--deny)"
        ));
    }
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() || !answer.trim().eq_ignore_ascii_case("y")
    {
        return Err("not approved, nothing was changed".into());
    }
    Ok(())
}

/// Tools of `c` whose names another plugin of `manifest` (other than
/// `except`) already uses, as `tool (plugin)`; then those whose names only
/// look like one of theirs (see [`corral_core::manifest::reviewed`]), as
/// `` `new` looks like `old` (plugin `p`) ``.
async fn clashes(
    rt: &Runtime,
    manifest: &Manifest,
    c: &Candidate,
    except: &str,
) -> Result<(Vec<String>, Vec<String>), String> {
    use corral_core::manifest::reviewed::lookalike_key;
    let mut others = manifest.clone();
    others.plugins.retain(|p| p.name != except);
    let plugins = rt.load(&others).await.map_err(|e| e.to_string())?;
    let same = c
        .tools()
        .iter()
        .filter_map(|t| {
            plugins
                .plugin_for(&t.name)
                .map(|p| format!("`{}` (plugin `{}`)", t.name, p.decl().name))
        })
        .collect();
    let mut alike = Vec::new();
    for t in c.tools() {
        let key = lookalike_key(&t.name);
        for (p, o) in plugins.tools() {
            if o.name != t.name && lookalike_key(&o.name) == key {
                alike.push(format!(
                    "`{}` looks like `{}` (plugin `{}`)",
                    t.name,
                    o.name,
                    p.decl().name
                ));
            }
        }
    }
    Ok((same, alike))
}

/// Refuses a plugin whose tool names imitate installed ones.
fn refuse_lookalikes(alike: &[String], name: &str) -> Result<(), String> {
    if alike.is_empty() {
        return Ok(());
    }
    Err(format!(
        "its tool names look like tools already installed: {}; a model or a person could take \
         one for the other. If you want it anyway, add it with --prefix PREFIX so its names \
         stand apart (e.g. `--prefix {}_`)",
        alike.join(", "),
        name.replace('-', "_")
    ))
}

/// Records the tools the user just approved as reviewed, so a later
/// `describe` that answers differently is caught.
fn record_reviewed(manifest: &Manifest, name: &str, c: &Candidate) {
    if let Some(reviews) = &manifest.tool_reviews
        && let Err(e) = reviews.record(name, &c.fetched.sha256, c.tools())
    {
        tracing::warn!("cannot record the reviewed tools of `{name}`: {e}");
    }
}

/// The plugin `decl` runs, described with exactly its grants: it must
/// export the tools that were reviewed, or the review meant nothing.
async fn check_same_tools(
    rt: &Runtime,
    manifest: &Manifest,
    decl: &PluginDecl,
    reviewed: &[ToolSpec],
) -> Result<(), String> {
    let loaded = rt
        .load_plugin(decl, manifest)
        .await
        .map_err(|e| e.to_string())?;
    let same = loaded.tools().len() == reviewed.len()
        && loaded.tools().iter().zip(reviewed).all(|(a, b)| {
            a.name == b.name && a.description == b.description && a.effects == b.effects
        });
    if same {
        Ok(())
    } else {
        Err(format!(
            "plugin `{}` describes different tools once granted what it asks for than it showed \
             for review; refusing it",
            decl.name
        ))
    }
}

/// What the user approved of a plugin's requests, and what they refused
/// (as `KIND:VALUE` specs, recorded so that an update keeps refusing it).
struct Approved<'a> {
    granted: &'a [Grant],
    denied: Vec<String>,
}

/// An approved entry, before anything is written.
struct Plan {
    /// The store directory the component goes to.
    dir: PathBuf,
    /// The manifest file's new text.
    text: String,
    /// The manifest that text makes.
    manifest: Manifest,
    /// The plugin's checked declaration in it.
    decl: PluginDecl,
}

impl Plan {
    /// The entry `name` for `c` with `granted`, written into the text of
    /// `file`, and checked as the whole manifest would be.
    fn new(
        workspace: &Path,
        file: &Path,
        old_text: &str,
        name: &str,
        c: &Candidate,
        approved: Approved<'_>,
        tool_prefix: Option<String>,
    ) -> Result<Self, String> {
        let Approved { granted, denied } = approved;
        let dir = store::dir()
            .ok_or("no data directory to keep plugins in (set XDG_DATA_HOME or HOME)")?;
        let entry = edit::Entry {
            source: store::path_of(&dir, &c.fetched.sha256)
                .display()
                .to_string(),
            sha256: c.fetched.sha256.clone(),
            from: c.source.record(),
            version: c.version.clone(),
            tool_prefix,
            grants: review::requested_of(granted),
            denied,
        };
        let text = edit::set_entry(old_text, file, name, &entry)?;
        let manifest = manifest_with(workspace, file, &text)
            .map_err(|e| format!("the entry for these grants would not be valid: {e}"))?;
        let decl = manifest
            .plugins
            .iter()
            .find(|p| p.name == name)
            .ok_or("the new entry is not in the manifest")?
            .clone();
        Ok(Self {
            dir,
            text,
            manifest,
            decl,
        })
    }

    /// Keeps the component, checks it describes the reviewed tools with
    /// exactly these grants, then writes the manifest.
    async fn carry_out(&self, rt: &Runtime, c: &Candidate, file: &Path) -> Result<(), String> {
        store::keep(&self.dir, &c.fetched.bytes, &c.fetched.sha256)
            .map_err(|e| format!("cannot keep the component in {}: {e}", self.dir.display()))?;
        check_same_tools(rt, &self.manifest, &self.decl, c.tools()).await?;
        Ok(edit::write(file, self.text.as_bytes())?)
    }
}

/// What stays refused after a review: `before` (kept even when this
/// version does not ask for it, so a later one that asks again is refused
/// too) and every requested grant that was not granted, as specs.
fn refused(requested: &[Grant], granted: &[Grant], mut before: Vec<String>) -> Vec<String> {
    for g in requested.iter().filter(|g| !granted.contains(g)) {
        let spec = g.spec();
        if !before.contains(&spec) {
            before.push(spec);
        }
    }
    before
}

/// `corral plugin add SOURCE`.
pub(super) async fn add(workspace: &Path, args: AddArgs) -> ExitCode {
    match add_inner(workspace, args).await {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

async fn add_inner(workspace: &Path, args: AddArgs) -> Result<ExitCode, String> {
    let rt = runtime().map_err(|_| "cannot start the runtime".to_owned())?;
    let source = PluginSource::parse(&args.source, &cwd())?;
    let mut c = Candidate::fetch(&rt, source, args.sha256.as_deref()).await?;
    if let Some(p) = &args.prefix {
        c.prefix_tools(p);
    }
    let name = match args.name.clone().or_else(|| c.default_name()) {
        Some(n) => n,
        None => return Err("cannot make a plugin name from the source; pass --name".into()),
    };
    if !manifest::valid_plugin_name(&name) {
        return Err(format!(
            "`{name}` is not a valid plugin name; use lowercase letters, digits, `-` and `_`, \
             starting with a letter (--name)"
        ));
    }
    let current = manifest::load(workspace).map_err(|e| e.to_string())?;
    if let Some(existing) = current.plugins.iter().find(|p| p.name == name) {
        return Err(format!(
            "a plugin named `{name}` is already declared ({}); use `corral plugin update {name}`, \
             or add this one under another name with --name",
            existing.origin
        ));
    }
    let requested = review::grants_of(&c.requests.requests);
    let granted = review::narrow(&requested, &args.approval.grant, &args.approval.deny)?;
    let (clashing, alike) = clashes(&rt, &current, &c, &name).await?;
    if !clashing.is_empty() {
        return Err(format!(
            "its tools {} would clash with tools already installed; add it with \
             --prefix PREFIX to rename its tools (e.g. `--name {name}-2 --prefix {}_`), or remove \
             the other plugin first (`corral plugin remove NAME`)",
            clashing.join(", "),
            name.replace('-', "_")
        ));
    }
    refuse_lookalikes(&alike, &name)?;
    let file = target_file(workspace, args.project)?;
    let old_text = edit::read(&file)?;
    let denied = refused(&requested, &granted, Vec::new());
    let plan = Plan::new(
        workspace,
        &file,
        &old_text,
        &name,
        &c,
        Approved {
            granted: &granted,
            denied,
        },
        args.prefix.clone(),
    )?;
    out(&review_text(&c, &name, &granted, Some(&plan.decl)));
    approved(
        &format!("Add `{name}` to {} with these grants?", file.display()),
        args.approval.yes,
    )?;
    plan.carry_out(&rt, &c, &file).await?;
    record_reviewed(&current, &name, &c);
    let mut done = format!(
        "Added `{name}` ({} tools) to {}, pinned to sha256 {}.",
        c.tools().len(),
        file.display(),
        c.fetched.sha256
    );
    if args.project {
        done.push_str(" The project's corral.toml changed: run `corral trust` to use it.");
    }
    out(&done);
    if let Ok(now) = manifest::load(workspace) {
        let ours = format!("plugin `{name}`: ");
        for note in now.state_notes().iter().filter(|n| n.starts_with(&ours)) {
            out(&format!("note: {note}"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `corral plugin update NAME`.
pub(super) async fn update(workspace: &Path, args: UpdateArgs) -> ExitCode {
    match update_inner(workspace, args).await {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

/// A declared plugin and the file that declares it.
fn declared(manifest: &Manifest, name: &str) -> Result<(PluginDecl, PathBuf), String> {
    let decl = manifest
        .plugins
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            format!("no plugin named `{name}` is declared here; `corral plugin list` shows them")
        })?
        .clone();
    if decl.origin.file == manifest::DEFAULTS_NAME {
        return Err(format!(
            "`{name}` is built into corral; it changes with corral itself"
        ));
    }
    let file = PathBuf::from(&decl.origin.file);
    Ok((decl, file))
}

async fn update_inner(workspace: &Path, args: UpdateArgs) -> Result<ExitCode, String> {
    let rt = runtime().map_err(|_| "cannot start the runtime".to_owned())?;
    let current = manifest::load(workspace).map_err(|e| e.to_string())?;
    let name = args.name.clone();
    let (decl, file) = declared(&current, &name)?;
    let old_text = edit::read(&file)?;
    let from = match args
        .from
        .clone()
        .or_else(|| edit::entry_string(&old_text, &name, "from"))
    {
        Some(f) => f,
        None => {
            return Err(format!(
                "`{name}` was not added with `corral plugin add`, so corral does not know where \
                 it comes from; pass --from SOURCE"
            ));
        }
    };
    let source = PluginSource::parse(&from, &cwd())?;
    let mut c = Candidate::fetch(&rt, source, args.sha256.as_deref()).await?;
    c.prefix_tools(&decl.tool_prefix);
    let old_pin = match &decl.source {
        Source::File { sha256, .. } => sha256.clone(),
        Source::Builtin(_) => None,
    };
    if old_pin.as_deref() == Some(c.fetched.sha256.as_str()) {
        out(&format!(
            "`{name}` is up to date (sha256 {}).",
            c.fetched.sha256
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let old_tools = installed_tools(&rt, &decl).await;
    let held = review::grants_held(&decl);
    let requested = review::grants_of(&c.requests.requests);
    // What the user refused before stays refused: only a `--grant` that
    // names it exactly lifts it.
    let before: Vec<String> = edit::entry_strings(&old_text, &name, "denied")
        .into_iter()
        .filter(|spec| !args.approval.grant.contains(spec))
        .collect();
    let mut deny = args.approval.deny.clone();
    deny.extend(
        before
            .iter()
            .filter(|spec| requested.iter().any(|g| g.matches(spec)))
            .cloned(),
    );
    let granted = review::narrow(&requested, &args.approval.grant, &deny)?;
    let denied = refused(&requested, &granted, before.clone());
    let wider: Vec<&Grant> = granted.iter().filter(|g| g.widens(&held)).collect();
    let dropped: Vec<&Grant> = held.iter().filter(|h| !granted.contains(h)).collect();
    let tools = match &old_tools {
        Some(old) => review::tool_diff(old, c.tools()),
        None => ToolDiff {
            added: c.tools().iter().map(|t| t.name.clone()).collect(),
            ..Default::default()
        },
    };
    let (clashing, alike) = clashes(&rt, &current, &c, &name).await?;
    refuse_lookalikes(&alike, &name)?;
    if !clashing.is_empty() {
        return Err(format!(
            "the new version's tools {} would clash with tools of other plugins",
            clashing.join(", ")
        ));
    }
    // Planned as `add` plans a new entry, but the entry keeps its prefix.
    let plan = Plan::new(
        workspace,
        &file,
        &old_text,
        &name,
        &c,
        Approved {
            granted: &granted,
            denied,
        },
        None,
    )?;
    let old_version = edit::entry_string(&old_text, &name, "version");
    let mut text = format!(
        "Update `{name}`: {} -> {}\n  sha256 {} -> {}\n",
        old_version.as_deref().unwrap_or("?"),
        c.version.as_deref().unwrap_or("?"),
        old_pin.as_deref().unwrap_or("(unpinned)"),
        c.fetched.sha256
    );
    text.push_str(&capability_changes(
        &wider, &dropped, &requested, &granted, &before,
    ));
    text.push_str(&tool_changes(&tools, c.tools()));
    out(&text);
    if let Some(what) = update_question(&wider, &tools) {
        approved(&format!("{what} Update `{name}`?"), args.approval.yes)?;
    }
    plan.carry_out(&rt, &c, &file).await?;
    record_reviewed(&current, &name, &c);
    let mut done = format!("Updated `{name}` in {}.", file.display());
    if file == workspace.join("corral.toml") {
        done.push_str(" The project's corral.toml changed: run `corral trust` to use it.");
    }
    out(&done);
    Ok(ExitCode::SUCCESS)
}

/// The tools the installed version has, named as the model calls them;
/// `None` when they cannot be read.
async fn installed_tools(rt: &Runtime, decl: &PluginDecl) -> Option<Vec<ToolSpec>> {
    let Source::File { path, .. } = &decl.source else {
        return None;
    };
    let bytes = corral_core::manifest::trust::read_plugin_file(path).ok()?;
    let tools = rt.inspect(&bytes).await.ok()?.tools.ok()?;
    Some(
        tools
            .into_iter()
            .map(|mut t| {
                t.name = format!("{}{}", decl.tool_prefix, t.name);
                t
            })
            .collect(),
    )
}

/// The update's capability changes, as `corral plugin update` shows them:
/// what it gains, what it loses, and what it asks for and does not get.
fn capability_changes(
    wider: &[&Grant],
    dropped: &[&Grant],
    requested: &[Grant],
    granted: &[Grant],
    before: &[String],
) -> String {
    let mut text = String::new();
    text.push_str("\nCapabilities:\n");
    if wider.is_empty() && dropped.is_empty() {
        text.push_str("  unchanged\n");
    }
    for g in wider {
        text.push_str(&format!("  + NEW  {g}\n"));
    }
    for g in dropped {
        text.push_str(&format!("  - gone {g}\n"));
    }
    for g in requested.iter().filter(|g| !granted.contains(g)) {
        let why = if before.iter().any(|spec| g.matches(spec)) {
            "refused before; `--grant` it by name to lift that"
        } else {
            "requested, not granted"
        };
        text.push_str(&format!("  DENY   {g} ({why})\n"));
    }
    text
}

/// The update's tool changes, and the warnings of its tools.
fn tool_changes(tools: &ToolDiff, new_tools: &[ToolSpec]) -> String {
    let mut text = String::new();
    text.push_str("\nTools:\n");
    if tools.is_empty() {
        text.push_str("  unchanged\n");
    }
    for t in &tools.added {
        text.push_str(&format!("  + {t}\n"));
    }
    for t in &tools.removed {
        text.push_str(&format!("  - {t}\n"));
    }
    for t in &tools.changed {
        text.push_str(&format!("  ~ {t}\n"));
    }
    for t in new_tools.iter().filter(|t| !t.warnings.is_empty()) {
        text.push_str(&tool_lines(t));
    }
    text
}

/// Why the update needs the user's approval, if it does: it asks for more
/// than it has, or its tools changed.
fn update_question(wider: &[&Grant], tools: &ToolDiff) -> Option<String> {
    if !wider.is_empty() {
        let asked: Vec<String> = wider
            .iter()
            .map(|g| {
                g.to_string()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        return Some(format!(
            "It asks for more than it has ({}).",
            asked.join("; ")
        ));
    }
    let changed = !tools.added.is_empty() || !tools.changed.is_empty();
    changed.then(|| "Its tools changed.".to_owned())
}

/// `corral plugin remove NAME`.
pub(super) fn remove(workspace: &Path, name: &str) -> ExitCode {
    match remove_inner(workspace, name) {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

fn remove_inner(workspace: &Path, name: &str) -> Result<ExitCode, String> {
    let current = manifest::load(workspace).map_err(|e| e.to_string())?;
    let decl = current
        .plugins
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| format!("no plugin named `{name}` is declared here"))?
        .clone();
    if decl.origin.file == manifest::DEFAULTS_NAME {
        let file = target_file(workspace, false)?;
        let text = edit::disable_entry(&edit::read(&file)?, &file, name)?;
        edit::write(&file, text.as_bytes())?;
        out(&format!(
            "`{name}` is built in; disabled it with `enabled = false` in {}.",
            file.display()
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let file = PathBuf::from(&decl.origin.file);
    let Some(text) = edit::remove_entry(&edit::read(&file)?, &file, name)? else {
        return Err(format!("{} has no entry `{name}`", file.display()));
    };
    edit::write(&file, text.as_bytes())?;
    let mut done = format!("Removed `{name}` from {}.", file.display());
    // Its component goes too when it is in the store and no entry of the
    // remaining manifest uses it.
    if let (Source::File { path, .. }, Some(dir)) = (&decl.source, store::dir())
        && store::claimed_hash(&dir, path).is_some()
    {
        let still_used = manifest::load(workspace)
            .map(|m| {
                m.plugins
                    .iter()
                    .any(|p| matches!(&p.source, Source::File { path: q, .. } if q == path))
            })
            .unwrap_or(true);
        if !still_used && std::fs::remove_file(path).is_ok() {
            done.push_str(&format!(" Deleted {}.", path.display()));
        }
    }
    out(&done);
    Ok(ExitCode::SUCCESS)
}

/// `corral plugin verify`: re-hashes every plugin file.
pub(super) fn verify(workspace: &Path, json: bool) -> ExitCode {
    let manifest = match manifest::load(workspace) {
        Ok(m) => m,
        Err(e) => return fail(&e.to_string()),
    };
    let dir = store::dir();
    let mut rows = Vec::new();
    let mut failed = false;
    for decl in &manifest.plugins {
        let Source::File { path, sha256 } = &decl.source else {
            continue;
        };
        let (status, detail) = match corral_core::manifest::trust::read_plugin_file(path) {
            Err(e) => ("missing", format!("cannot read {}: {e}", path.display())),
            Ok(bytes) => {
                let now = corral_core::manifest::trust::sha256_hex(&bytes);
                let claimed = dir.as_deref().and_then(|d| store::claimed_hash(d, path));
                match (sha256, claimed) {
                    (Some(pin), _) if *pin != now => (
                        "changed",
                        format!("sha256 {now}, but the manifest pins {pin}"),
                    ),
                    (_, Some(name)) if name != now => (
                        "changed",
                        format!("sha256 {now}, but it was stored as {name}"),
                    ),
                    (None, _) => (
                        "unpinned",
                        format!("sha256 {now}; add `sha256 = \"{now}\"`"),
                    ),
                    _ => ("ok", format!("sha256 {now}")),
                }
            }
        };
        failed |= status == "changed" || status == "missing";
        rows.push((
            decl.name.clone(),
            path.display().to_string(),
            status,
            detail,
        ));
    }
    if json {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|(n, p, s, d)| serde_json::json!({"name": n, "path": p, "status": s, "detail": d}))
            .collect();
        super::out_json(&serde_json::to_string_pretty(&list).unwrap_or_default());
    } else if rows.is_empty() {
        out("No plugin files to verify (only built-in plugins are declared).");
    } else {
        let mut text = String::new();
        for (n, p, s, d) in &rows {
            text.push_str(&format!("{s:<8} {n}  {p}\n         {d}\n"));
        }
        out(&text);
    }
    if failed {
        ExitCode::from(EXIT_TOOL_ERROR)
    } else {
        ExitCode::SUCCESS
    }
}

/// `corral plugin pack FILE --requests TOML [-o OUT]`.
pub(super) fn pack(file: &Path, requests_file: &Path, output: Option<&Path>) -> ExitCode {
    let text = match manifest::read_manifest(requests_file) {
        Ok(t) => t,
        Err(e) => return fail(&format!("cannot read {}: {e}", requests_file.display())),
    };
    let requests = match Requests::parse(&text) {
        Ok(r) => r,
        Err(e) => return fail(&format!("{}: {e}", requests_file.display())),
    };
    let bytes = match corral_core::manifest::trust::read_plugin_file(file) {
        Ok(b) => b,
        Err(e) => return fail(&format!("cannot read {}: {e}", file.display())),
    };
    let packed = match requests::embed(&bytes, &requests) {
        Ok(p) => p,
        Err(e) => return fail(&format!("{}: {e}", file.display())),
    };
    let target = output.unwrap_or(file);
    if let Err(e) = edit::write(target, &packed) {
        return fail(&e.to_string());
    }
    out(&format!(
        "Wrote {} ({} KB, sha256 {}) with its requests:\n{}",
        target.display(),
        packed.len().div_ceil(1024),
        corral_core::manifest::trust::sha256_hex(&packed),
        review::grants_of(&requests.requests)
            .iter()
            .map(|g| format!("  {g}\n"))
            .collect::<String>()
    ));
    ExitCode::SUCCESS
}

/// `corral plugin publish FILE oci://REF [--requests TOML]`.
pub(super) async fn publish(file: &Path, target: &str, requests_file: Option<&Path>) -> ExitCode {
    match publish_inner(file, target, requests_file).await {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

async fn publish_inner(
    file: &Path,
    target: &str,
    requests_file: Option<&Path>,
) -> Result<ExitCode, String> {
    let Some(reference) = target.strip_prefix("oci://") else {
        return Err(format!(
            "{target}: publish to an OCI reference, oci://REGISTRY/REPO:TAG"
        ));
    };
    let reference = oci::OciRef::parse(reference)?;
    let mut bytes = corral_core::manifest::trust::read_plugin_file(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let requests = match requests_file {
        Some(f) => {
            let text = manifest::read_manifest(f)
                .map_err(|e| format!("cannot read {}: {e}", f.display()))?;
            let r = Requests::parse(&text).map_err(|e| format!("{}: {e}", f.display()))?;
            bytes = requests::embed(&bytes, &r)?;
            Some(r)
        }
        None => requests::embedded(&bytes).map_err(|e| format!("{}: {e}", file.display()))?,
    };
    let rt = runtime().map_err(|_| "cannot start the runtime".to_owned())?;
    let inspection = rt
        .inspect(&bytes)
        .await
        .map_err(|e| format!("{}: {e}", file.display()))?;
    if let Err(e) = &inspection.tools {
        return Err(format!(
            "{}: its tools cannot be read ({e}); publish a working tool plugin",
            file.display()
        ));
    }
    let mut annotations = std::collections::BTreeMap::new();
    if let Some(r) = &requests {
        if let Some(v) = &r.plugin.version {
            annotations.insert(oci::VERSION_ANNOTATION.to_owned(), v.clone());
        }
        if let Some(n) = &r.plugin.name {
            annotations.insert(oci::TITLE_ANNOTATION.to_owned(), n.clone());
        }
        if let Some(d) = &r.plugin.description {
            annotations.insert(oci::DESCRIPTION_ANNOTATION.to_owned(), d.clone());
        }
    }
    let sha256 = corral_core::manifest::trust::sha256_hex(&bytes);
    let url = oci::push(&reference, bytes, annotations).await?;
    out(&format!(
        "Published {} (sha256 {sha256}) as oci://{reference}\n  {url}{}",
        file.display(),
        if requests.is_none() {
            "\n  It carries no requests: whoever adds it must grant everything by hand. \
             Declare them with --requests corral-plugin.toml."
        } else {
            ""
        }
    ));
    Ok(ExitCode::SUCCESS)
}
