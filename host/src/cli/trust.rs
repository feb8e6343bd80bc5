//! `corral trust`: review the project's manifest, the plugin files it
//! names and the code its MCP servers run, then trust them.

use super::{fail, out};
use corral_core::manifest;
use std::path::Path;
use std::process::ExitCode;

// long: the review is one sequence read top to bottom: check the file, show it with
// what it brings in (plugin files, tools, commands), confirm, record.
pub(super) async fn trust(workspace: &std::path::Path, yes: bool) -> ExitCode {
    use corral_core::manifest::trust;
    let file = workspace.join("corral.toml");
    let (commands, command_problems) = corral_core::commands::review(workspace);
    let commands_changed = corral_core::commands::review_changes(workspace, &commands);
    let (skills, skill_problems) = corral_core::skills::review(workspace);
    let skills_changed = corral_core::skills::review_changes(workspace, &skills);
    if !file.exists()
        && (commands_changed || !commands.is_empty() || skills_changed || !skills.is_empty())
    {
        return super::trust_commands::commands_only(workspace, yes);
    }
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
    let code = trust::review_servers(&checked, &name);
    let hook_code = trust::review_hooks(&checked, &name);
    let reviews = manifest::reviewed::ToolReviews::for_workspace(&checked.workspace);
    // The servers of a trusted file may run now; those of any other file
    // only once it is trusted, below.
    let mut servers = None;
    let mut review = match trust::status(&store, &canonical, &text) {
        trust::Status::Trusted => {
            let recorded = trust::recorded(&store, &canonical, &text).unwrap_or_default();
            let changed = files_changed(&files, &recorded.plugins);
            let code_changed = code_changed(&code, &recorded.servers);
            let hooks_changed = super::hooks::code_changed(&hook_code, &recorded.hooks);
            // A server whose code changed runs only once the change is
            // approved (below), not to list its tools for this review.
            let tools_changed = if code_changed.is_empty() {
                let listed = super::trust_mcp::list(&checked).await;
                let tools_changed = super::trust_mcp::changes(reviews.as_ref(), &listed);
                servers = Some(listed);
                tools_changed
            } else {
                String::new()
            };
            if changed.is_empty()
                && code_changed.is_empty()
                && hooks_changed.is_empty()
                && tools_changed.is_empty()
                && !commands_changed
                && !skills_changed
            {
                out(&format!("{} is already trusted", file.display()));
                return ExitCode::SUCCESS;
            }
            let mut what = Vec::new();
            if !changed.is_empty() {
                what.push("plugin files it names");
            }
            if !code_changed.is_empty() {
                what.push("the code its MCP servers run");
            }
            if !hooks_changed.is_empty() {
                what.push("the files its command hooks run");
            }
            if !tools_changed.is_empty() {
                what.push("the tools its MCP servers list");
            }
            if commands_changed {
                what.push("its custom commands");
            }
            if skills_changed {
                what.push("its skills");
            }
            format!(
                "{} is unchanged, but {} changed since you trusted it:\n{changed}{code_changed}{hooks_changed}{tools_changed}",
                file.display(),
                what.join(" and ")
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
    review.push_str(&loosening_text(&checked, &name));
    let notes = checked.state_notes();
    if !notes.is_empty() {
        review.push_str("\nNote:\n");
        for note in notes {
            review.push_str(&format!("  - {note}\n"));
        }
    }
    review.push_str(&super::trust_mcp::describe(&checked));
    review.push_str(&files_text(&files));
    review.push_str(&code_text(&code));
    review.push_str(&super::hooks::review_text(&checked, &name, &hook_code));
    review.push_str(&super::trust_commands::text(&commands, &command_problems));
    review.push_str(&super::trust_commands::skills_text(
        &skills,
        &skill_problems,
    ));
    let described = project_tools(&checked, &name).await;
    for (plugin, tools) in &described {
        match tools {
            Ok((_, tools)) => {
                review.push_str(&format!(
                    "\nTools of plugin `{plugin}`, as the model would read them:\n"
                ));
                for t in tools {
                    review.push_str(&super::toolview::tool(t));
                }
            }
            Err(e) => review.push_str(&format!(
                "\nThe tools of plugin `{plugin}` cannot be shown: {e}\n"
            )),
        }
    }
    out(&review);
    if let Err(code) = confirm(yes) {
        return code;
    }
    let record = files
        .iter()
        .filter_map(|f| Some((f.plugin.clone(), f.record()?)))
        .collect();
    let servers = match servers {
        Some(listed) => listed,
        None => super::trust_mcp::list(&checked).await,
    };
    match super::trust_mcp::record(reviews.as_ref(), &servers) {
        Ok(text) if !text.is_empty() => out(text.trim_end()),
        Ok(_) => {}
        Err(e) => return fail(&e),
    }
    if let Some(reviews) =
        corral_core::manifest::reviewed::ToolReviews::for_workspace(&checked.workspace)
    {
        for (plugin, tools) in &described {
            if let Ok((sha256, tools)) = tools
                && let Err(e) = reviews.record(plugin, sha256, tools)
            {
                return fail(&format!("cannot record the tools of `{plugin}`: {e}"));
            }
        }
    }
    if let Err(e) = super::trust_commands::record(workspace, &commands, &skills) {
        return fail(&e);
    }
    let approved = trust::Approved {
        plugins: record,
        servers: trust::record_servers(&code),
        hooks: trust::record_servers(&hook_code),
    };
    match trust::trust_all(&store, &canonical, &text, &approved) {
        Ok(()) => {
            out(&format!("trusted {}", file.display()));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("cannot record trust: {e}")),
    }
}

/// `--yes`, or the user's answer on a terminal.
fn confirm(yes: bool) -> Result<(), ExitCode> {
    if yes {
        return Ok(());
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(fail("not trusted: confirm on a terminal, or pass --yes"));
    }
    eprint!("Trust this file (its plugins, grants and rules take effect)? [y/N] ");
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() || !answer.trim().eq_ignore_ascii_case("y")
    {
        return Err(fail("not trusted"));
    }
    Ok(())
}

/// The tools of each plugin the project file `name` declares from a file,
/// described with the grants it gives them, so that the review shows what
/// the model will read (built-in plugins are corral's own).
async fn project_tools(
    checked: &manifest::Manifest,
    name: &str,
) -> Vec<(
    String,
    Result<(String, Vec<corral_protocol::ToolSpec>), String>,
)> {
    let decls: Vec<&manifest::PluginDecl> = checked
        .plugins
        .iter()
        .filter(|d| d.origin.file == name && matches!(d.source, manifest::Source::File { .. }))
        .collect();
    if decls.is_empty() {
        return Vec::new();
    }
    let rt = match corral_core::plugins::Runtime::new(corral_core::plugins::RuntimeOptions::user())
    {
        Ok(rt) => rt,
        Err(e) => {
            return decls
                .iter()
                .map(|d| (d.name.clone(), Err(format!("{e:#}"))))
                .collect();
        }
    };
    let mut out = Vec::new();
    for d in decls {
        let tools = match rt.load_plugin(d, checked).await {
            Ok(p) if p.is_provider() => continue,
            Ok(p) => Ok((p.sha256().to_owned(), p.tools().to_vec())),
            Err(e) => Err(e.to_string()),
        };
        out.push((d.name.clone(), tools));
    }
    out
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

/// Every line of the project file `name` that loosens the user's security
/// settings, and what the plugins it brings in may do beyond reading the
/// workspace, in plain words.
fn loosening_text(checked: &manifest::Manifest, name: &str) -> String {
    let mut text = String::new();
    if !checked.loosening.is_empty() {
        text.push_str("\nLines that loosen your security settings:\n");
        for l in &checked.loosening {
            text.push_str(&format!("  line {}: {}\n    {}", l.line, l.setting, l.what));
            if l.applied {
                text.push_str(
                    "\n    TAKES EFFECT: your own config sets `[trust] project_may_loosen = true`\n",
                );
            } else {
                text.push_str(&format!(
                    "\n    IGNORED: a project may only tighten your settings; `{}` in your own \
                     corral.toml would let it\n",
                    manifest::MAY_LOOSEN_KEY
                ));
            }
        }
    }
    let mut grants = String::new();
    for decl in checked.plugins.iter().filter(|d| d.origin.file == name) {
        for g in manifest::wide_grants(decl, &checked.workspace) {
            grants.push_str(&format!(
                "  plugin `{}` (line {}): {g}\n",
                decl.name, decl.origin.line
            ));
        }
    }
    if !grants.is_empty() {
        text.push_str("\nWhat the plugins it declares may do beyond reading the workspace:\n");
        text.push_str(&grants);
    }
    if let Some(p) = &checked.agent.provider
        && checked
            .plugins
            .iter()
            .any(|d| d.name == *p && d.origin.file == name)
    {
        text.push_str(&format!(
            "\nIt makes its own plugin `{p}` the model provider: your prompts and everything the \
             model reads go through it.\n"
        ));
    }
    text
}

/// The plugin files trusting a manifest approves, for review.
fn files_text(files: &[corral_core::manifest::trust::Reviewed]) -> String {
    use corral_core::manifest::trust::FileState;
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
    files: &[corral_core::manifest::trust::Reviewed],
    recorded: &std::collections::BTreeMap<String, corral_core::manifest::trust::PluginFile>,
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
                corral_core::manifest::trust::FileState::Unreadable(e) =>
                    format!("unreadable ({e})"),
                _ => hash(&now.sha256),
            }
        ));
    }
    text
}

/// The files of its MCP servers' code that trusting a manifest approves,
/// for review.
fn code_text(code: &[(String, Vec<corral_core::manifest::trust::CodeFile>)]) -> String {
    use corral_core::manifest::trust::FileState;
    if code.iter().all(|(_, files)| files.is_empty()) {
        return String::new();
    }
    let mut text = String::from(
        "\nFiles its MCP servers run; trusting approves these exact contents, and a server \
         whose files change is not started until you trust again:\n",
    );
    for (server, files) in code {
        for f in files {
            text.push_str(&format!("  [mcp.{server}]  {}", shown(&f.path)));
            match &f.state {
                FileState::Unreadable(e) => text.push_str(&format!(
                    "\n    cannot be read ({e}); the server will not start until you trust again\n"
                )),
                FileState::Hashed(h) | FileState::Pinned(h) => {
                    text.push_str(&format!("\n    sha256 {h}\n"))
                }
            }
        }
    }
    text
}

/// Each file of the servers' code whose content differs from what was
/// approved: the server, the file, the old and the new hash.
fn code_changed(
    code: &[(String, Vec<corral_core::manifest::trust::CodeFile>)],
    approved: &std::collections::BTreeMap<String, corral_core::manifest::trust::ServerCode>,
) -> String {
    let mut text = String::new();
    for (server, files) in code {
        let was = approved.get(server).cloned().unwrap_or_default();
        for change in corral_core::manifest::trust::code_changes(files, &was) {
            text.push_str(&format!(
                "  [mcp.{server}]: {}\n",
                shown(Path::new(&change))
            ));
        }
    }
    text
}
