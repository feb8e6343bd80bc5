//! `corral plugin`, `corral tools` and `corral tool call`: what is
//! installed, what it may do, the compile cache, and running one tool by
//! hand.

use super::{fail, inert, out, out_json};
use corral_core::manifest::{self, Access, Manifest, Source};
use corral_core::mcp_client::McpTools;
use corral_core::plugins::{
    self as runtime, Capability, ImportReview, ImportStatus, Plugins, Runtime, RuntimeOptions,
};
use std::process::ExitCode;

/// Every grant of `decl` on one line. A secret shows where it goes and in
/// which header, never its value.
pub(super) fn grants_text(decl: &manifest::PluginDecl) -> String {
    let mut parts = Vec::new();
    for g in &decl.fs {
        let access = match g.access {
            Access::Ro => "ro",
            Access::Rw => "rw",
        };
        parts.push(format!("fs {} ({access})", g.path));
    }
    for n in &decl.net {
        parts.push(format!("net {}", n.pattern));
    }
    for e in &decl.env {
        parts.push(format!("env {e}"));
    }
    for x in &decl.exec {
        let network = match x.network.listed() {
            Some(list) => format!(", network to {}", list.join(", ")),
            None if x.network.reaches() => ", network".to_owned(),
            None => String::new(),
        };
        parts.push(format!(
            "exec {} [{}] ({} ms{network})",
            x.program,
            x.args.join(" "),
            x.timeout_ms
        ));
    }
    for secret in &decl.secrets {
        parts.push(format!("secret {} for {}", secret.header, secret.origin()));
    }
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

/// Where `corral plugin add` fetched `decl`'s component and the version it
/// declared, as its manifest entry records them.
fn installed(decl: &manifest::PluginDecl) -> (Option<String>, Option<String>) {
    if decl.origin.file == manifest::DEFAULTS_NAME {
        return (None, None);
    }
    let text = corral_core::install::edit::read(std::path::Path::new(&decl.origin.file))
        .unwrap_or_default();
    let get = |key| corral_core::install::edit::entry_string(&text, &decl.name, key);
    (get("from"), get("version"))
}

pub(super) fn plugins_list(manifest: &Manifest, plugins: &Plugins, json: bool) -> ExitCode {
    if json {
        let list: Vec<serde_json::Value> = plugins
            .plugins()
            .iter()
            .map(|p| {
                let d = p.decl();
                let (fetched, version) = installed(d);
                serde_json::json!({
                    "name": d.name,
                    "source": d.source.to_string(),
                    "fetched_from": fetched,
                    "version": version,
                    "tool_prefix": d.tool_prefix,
                    "sha256": p.sha256(),
                    "declared_in": d.origin.to_string(),
                    "grants": {
                        "fs": d.fs.iter().map(|g| serde_json::json!({"path": g.path, "access": g.access})).collect::<Vec<_>>(),
                        "net": d.net.iter().map(|n| n.pattern.clone()).collect::<Vec<_>>(),
                        "env": d.env,
                        "exec": d.exec.iter().map(|x| serde_json::json!({
                            "program": x.program,
                            "args": x.args,
                            "timeout_ms": x.timeout_ms,
                            "network": x.network.listed().map_or_else(
                                || serde_json::json!(x.network.reaches()),
                                |list| serde_json::json!(list),
                            ),
                        })).collect::<Vec<_>>(),
                        "secrets": d.secrets.iter().map(|s| serde_json::json!({
                            "origin": s.origin(),
                            "header": s.header,
                        })).collect::<Vec<_>>(),
                    },
                    "imports": p.import_reviews(),
                    "limits": {
                        "timeout_ms": d.limits.timeout_ms,
                        "memory_mb": d.limits.memory_mb,
                        "output_kb": d.limits.output_kb,
                        "host_calls": d.limits.host_calls,
                    },
                    "tools": p.tools().iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                    "warnings": tool_warnings(p),
                })
            })
            .collect();
        out_json(&serde_json::to_string_pretty(&list).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let mut text = format!("workspace {}\n", manifest.workspace.display());
    for p in plugins.plugins() {
        let d = p.decl();
        let pinned = match &d.source {
            Source::File {
                sha256: Some(_), ..
            } => " (pinned)",
            Source::File { .. } if manifest.trusted_files.contains_key(&d.name) => {
                " (approved by corral trust)"
            }
            _ => "",
        };
        text.push_str(&format!(
            "\n{}\n  source   {}\n  sha256   {}{pinned}\n  grants   {}\n  limits   {} ms, {} MiB, output {} KiB\n  tools    {}\n  from     {}\n",
            d.name,
            d.source,
            p.sha256(),
            grants_text(d),
            d.limits.timeout_ms,
            d.limits.memory_mb,
            d.limits.output_kb,
            p.tools().iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", "),
            d.origin,
        ));
        let (fetched, version) = installed(d);
        if let Some(v) = version {
            text.push_str(&format!("  version  {v}\n"));
        }
        if let Some(f) = fetched {
            text.push_str(&format!("  fetched  {f}\n"));
        }
        text.push_str(&imports_text(&p.import_reviews()));
        for w in tool_warnings(p) {
            text.push_str(&format!("  warning  {w}\n"));
        }
    }
    out(&text);
    ExitCode::SUCCESS
}

/// A plugin's imports: the live ones on one line, then a line per package
/// of imports its grants leave denied, saying what the plugin gets instead.
fn imports_text(reviews: &[ImportReview]) -> String {
    let live: Vec<&str> = reviews
        .iter()
        .filter(|r| r.status == ImportStatus::Live)
        .map(|r| r.name.as_str())
        .collect();
    let live = grouped(&live);
    let mut text = format!(
        "  imports  live: {}\n",
        if live.is_empty() {
            "none".to_owned()
        } else {
            live.join(", ")
        }
    );
    let mut denied: Vec<(&str, Vec<&str>)> = Vec::new();
    for r in reviews.iter().filter(|r| r.status != ImportStatus::Live) {
        match denied.iter_mut().find(|(note, _)| *note == r.note) {
            Some((_, names)) => names.push(&r.name),
            None => denied.push((&r.note, vec![&r.name])),
        }
    }
    for (note, names) in denied {
        for group in grouped(&names) {
            text.push_str(&format!("  denied   {group}: {note}\n"));
        }
    }
    text
}

/// Interface names with the interfaces of one package and version folded
/// into braces: `wasi:cli/{stderr,stdout}@0.2.6`.
fn grouped(names: &[&str]) -> Vec<String> {
    let mut groups: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for name in names {
        let (path, version) = name.split_once('@').unwrap_or((name, ""));
        let (package, interface) = path.split_once('/').unwrap_or((path, ""));
        match groups
            .iter_mut()
            .find(|(p, v, _)| *p == package && *v == version)
        {
            Some((_, _, interfaces)) => interfaces.push(interface),
            None => groups.push((package, version, vec![interface])),
        }
    }
    groups
        .into_iter()
        .map(|(package, version, interfaces)| {
            let version = if version.is_empty() {
                String::new()
            } else {
                format!("@{version}")
            };
            match interfaces.as_slice() {
                [""] => format!("{package}{version}"),
                [one] => format!("{package}/{one}{version}"),
                many => format!("{package}/{{{}}}{version}", many.join(",")),
            }
        })
        .collect()
}

/// What is suspicious about how a plugin's tools describe themselves.
fn tool_warnings(p: &corral_core::plugins::Plugin) -> Vec<String> {
    p.tools()
        .iter()
        .flat_map(|t| t.warnings.iter().map(move |w| format!("`{}`: {w}", t.name)))
        .collect()
}

/// The first sentence of `text` for a one-line listing: it ends at a full
/// stop followed by a space, unless the word before it is an abbreviation
/// ("e.g.", "i.e.", "etc.") that a description uses mid-sentence.
fn first_sentence(text: &str) -> &str {
    const ABBREVIATIONS: [&str; 5] = ["e.g", "i.e", "etc", "vs", "cf"];
    let line = text.lines().next().unwrap_or("");
    let mut from = 0;
    while let Some(at) = line[from..].find(". ").map(|i| from + i) {
        let word = line[..at].rsplit([' ', '(', '`']).next().unwrap_or("");
        if !ABBREVIATIONS.iter().any(|a| word.eq_ignore_ascii_case(a)) {
            return &line[..at];
        }
        from = at + 2;
    }
    line.trim_end_matches('.')
}

pub(super) fn tools_list(plugins: &Plugins, mcp: &McpTools, json: bool) -> ExitCode {
    let host: Vec<corral_protocol::ToolSpec> = corral_core::agent::HostTool::ALL
        .iter()
        .map(|t| t.spec())
        .collect();
    let mcp_tools = mcp.tools();
    let servers: Vec<String> = mcp_tools
        .iter()
        .map(|t| format!("mcp:{}", t.server()))
        .collect();
    let tools: Vec<(&str, &corral_protocol::ToolSpec)> = plugins
        .tools()
        .into_iter()
        .map(|(p, t)| (p.decl().name.as_str(), t))
        .chain(
            servers
                .iter()
                .zip(&mcp_tools)
                .map(|(s, t)| (s.as_str(), &t.spec)),
        )
        .chain(host.iter().map(|t| (corral_core::agent::HOST_TOOLS, t)))
        .collect();
    for (server, why) in mcp.failed() {
        eprintln!(
            "warning: the tools of [mcp.{server}] are missing: {}",
            inert(why)
        );
    }
    for (server, why) in mcp.unanswered() {
        eprintln!(
            "warning: the tools of [mcp.{server}] are not listed: {}",
            inert(why)
        );
    }
    for (server, why) in mcp.withheld() {
        eprintln!("warning: [mcp.{server}]: {}", inert(&why));
    }
    if json {
        let list: Vec<serde_json::Value> = tools
            .iter()
            .map(|(p, t)| {
                serde_json::json!({
                    "name": t.name,
                    "plugin": p,
                    "description": t.description,
                    "effects": t.effects,
                    "input_schema": t.input_schema,
                    "warnings": t.warnings,
                })
            })
            .collect();
        out_json(&serde_json::to_string_pretty(&list).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let width = tools.iter().map(|(_, t)| t.name.len()).max().unwrap_or(4);
    let pwidth = tools.iter().map(|(p, _)| p.len()).max().unwrap_or(6);
    let mut text = String::new();
    for (p, t) in tools {
        let effects: Vec<&str> = t.effects.iter().map(|e| e.as_str()).collect();
        let summary = first_sentence(&t.description);
        text.push_str(&format!(
            "{:width$}  {:pwidth$}  {:12}  {summary}\n",
            t.name,
            p,
            effects.join(","),
        ));
        for w in &t.warnings {
            text.push_str(&format!("{:width$}  ! warning: {w}\n", ""));
        }
    }
    out(&text);
    ExitCode::SUCCESS
}

pub(super) async fn inspect(file: &std::path::Path, json: bool) -> ExitCode {
    let bytes = match corral_core::native::read_regular(
        file,
        corral_core::manifest::trust::MAX_PLUGIN_FILE,
    ) {
        Ok(b) => b,
        Err(e) => {
            return fail(&format!(
                "cannot read {}: {e}; give the path of a component file (.wasm)",
                file.display()
            ));
        }
    };
    let runtime = match Runtime::new(RuntimeOptions::user()) {
        Ok(r) => r,
        Err(e) => return fail(&format!("{e:#}")),
    };
    let info = match runtime.inspect(&bytes).await {
        Ok(i) => i,
        Err(e) => return fail(&format!("{}: {e}", file.display())),
    };
    let requests = corral_core::install::requests::embedded(&bytes);
    if json {
        let value = serde_json::json!({
            "file": file.display().to_string(),
            "sha256": info.sha256,
            "requests": match &requests {
                Ok(r) => serde_json::to_value(r).unwrap_or_default(),
                Err(e) => serde_json::json!({"error": e.to_string()}),
            },
            "imports": info.imports,
            "exports": info.exports,
            "tools": match &info.tools { Ok(t) => serde_json::to_value(t).unwrap_or_default(), Err(e) => serde_json::json!({"error": e.to_string()}) },
        });
        out_json(&serde_json::to_string_pretty(&value).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let mut text = format!(
        "{}\n  sha256  {}\n\nimports (what it could ask for; live or denied as for a plugin with no grants):\n",
        file.display(),
        info.sha256
    );
    let mut by_cap: std::collections::BTreeMap<Capability, Vec<&ImportReview>> = Default::default();
    for import in &info.imports {
        by_cap.entry(import.capability).or_default().push(import);
    }
    for (cap, imports) in &by_cap {
        text.push_str(&format!("  {}\n", cap.describe()));
        for i in imports {
            // A live import's note would repeat its capability's heading.
            let status = match i.status {
                ImportStatus::Live => "live".to_owned(),
                ImportStatus::Denied => format!("denied: {}", i.note),
                ImportStatus::Refused => format!("refused: {}", i.note),
            };
            text.push_str(&format!("    {}  {status}\n", i.name));
        }
    }
    text.push_str("\nrequests (what it asks to be granted; nothing is until you approve):\n");
    match &requests {
        Ok(Some(r)) => {
            let grants = corral_core::install::review::grants_of(&r.requests);
            if grants.is_empty() {
                text.push_str("  nothing\n");
            }
            for g in grants {
                text.push_str(&format!("  {g}\n"));
            }
        }
        Ok(None) => text.push_str("  none declared\n"),
        Err(e) => text.push_str(&format!("  unreadable: {e}\n")),
    }
    text.push_str("\nexports:\n");
    for e in &info.exports {
        text.push_str(&format!("  {e}\n"));
    }
    match &info.tools {
        Ok(tools) => {
            text.push_str("\ntools:\n");
            for t in tools {
                let effects: Vec<String> = t
                    .effects
                    .iter()
                    .map(|e| format!("{e:?}").to_lowercase())
                    .collect();
                text.push_str(&format!("  {} [{}]\n", t.name, effects.join(",")));
                text.push_str(&super::toolview::whole(&t.description, "      "));
                let schema = serde_json::to_string(&t.input_schema).unwrap_or_default();
                text.push_str(&super::toolview::whole(
                    &format!("parameters: {schema}"),
                    "      ",
                ));
                for w in &t.warnings {
                    text.push_str(&format!("    ! {w}\n"));
                }
            }
        }
        Err(e) => text.push_str(&format!("\ntools: cannot be listed: {e}\n")),
    }
    out(&text);
    ExitCode::SUCCESS
}

/// `corral plugin review [NAME] [--yes]`: each plugin loaded from a file
/// whose tools differ from what was reviewed (or were never reviewed), its
/// tools shown whole, then recorded as reviewed once the user agrees.
pub(super) async fn review(workspace: &std::path::Path, only: Option<&str>, yes: bool) -> ExitCode {
    let manifest = match manifest::load(workspace) {
        Ok(m) => m,
        Err(e) => return fail(&e.to_string()),
    };
    let Some(reviews) = manifest.tool_reviews.clone() else {
        return fail("no data directory to record reviews in (set XDG_DATA_HOME or HOME)");
    };
    if let Some(name) = only
        && !manifest.plugins.iter().any(|p| p.name == name)
    {
        return fail(&format!(
            "no plugin named `{name}` is declared here; `corral plugin list` shows them"
        ));
    }
    // Loaded without the check, to see what each plugin describes now.
    let mut unvetted = manifest.clone();
    unvetted.tool_reviews = None;
    let runtime = match Runtime::new(RuntimeOptions::user()) {
        Ok(r) => r,
        Err(e) => return fail(&format!("{e:#}")),
    };
    let plugins = match runtime.load(&unvetted).await {
        Ok(p) => p,
        Err(e) => return fail(&e.to_string()),
    };
    let mut text = String::new();
    let mut pending = Vec::new();
    for p in plugins.plugins() {
        let decl = p.decl();
        if matches!(decl.source, Source::Builtin(_)) || only.is_some_and(|n| n != decl.name) {
            continue;
        }
        let mut tools: Vec<corral_protocol::ToolSpec> = p.tools().to_vec();
        tools.extend(
            plugins
                .withheld()
                .iter()
                .filter(|w| w.plugin == decl.name)
                .map(|w| w.spec.clone()),
        );
        let heading = match reviews.get(&decl.name, p.sha256()) {
            None => format!("plugin `{}` ({}): not reviewed yet", decl.name, decl.origin),
            Some(_) => match reviews.check(&decl.name, p.sha256(), &tools) {
                Ok(()) => continue,
                Err(changes) => format!(
                    "plugin `{}` ({}) changed since it was reviewed:\n{}",
                    decl.name,
                    decl.origin,
                    corral_core::manifest::reviewed::changes_text(&changes).trim_end()
                ),
            },
        };
        text.push_str(&heading);
        text.push_str("\n  Its tools now, as the model would read them:\n");
        for t in &tools {
            text.push_str(&super::toolview::tool(t));
        }
        text.push('\n');
        pending.push((decl.name.clone(), p.sha256().to_owned(), tools));
    }
    if pending.is_empty() {
        out("Nothing to review: every plugin's tools are as you reviewed them.");
        return ExitCode::SUCCESS;
    }
    out(&text);
    if !yes {
        if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            return fail("not recorded: confirm on a terminal, or pass --yes");
        }
        eprint!("Offer these tools to the model? [y/N] ");
        let mut answer = String::new();
        if std::io::stdin().read_line(&mut answer).is_err()
            || !answer.trim().eq_ignore_ascii_case("y")
        {
            return fail("not recorded");
        }
    }
    for (name, sha256, tools) in &pending {
        if let Err(e) = reviews.record(name, sha256, tools) {
            return fail(&format!("cannot record the review of `{name}`: {e}"));
        }
        out(&format!("reviewed `{name}` ({} tools)", tools.len()));
    }
    ExitCode::SUCCESS
}

/// `corral plugin cache [--prune | --clear] [--json]`.
pub(super) fn cache(prune: bool, clear: bool, json: bool) -> ExitCode {
    let Some(dir) = RuntimeOptions::user().cache_dir else {
        return fail("no cache directory: neither XDG_CACHE_HOME nor HOME is set; set one of them");
    };
    let max_bytes = match runtime::cache_max_bytes() {
        Ok(m) => m,
        Err(e) => return fail(&e.to_string()),
    };
    let removed = if clear {
        runtime::clear_cache(&dir)
    } else if prune {
        runtime::prune_cache(&dir, max_bytes, &Default::default())
    } else {
        Ok(Vec::new())
    };
    let removed = match removed {
        Ok(r) => r,
        Err(e) => {
            return fail(&format!(
                "cannot change the compile cache {}: {e}; check its permissions, or remove it (it is rebuilt as needed)",
                dir.display()
            ));
        }
    };
    let report = match runtime::cache_report(&dir, max_bytes) {
        Ok(r) => r,
        Err(e) => {
            return fail(&format!(
                "cannot read the compile cache {}: {e}; check its permissions",
                dir.display()
            ));
        }
    };
    if json {
        let mut value = serde_json::to_value(&report).unwrap_or_default();
        if prune || clear {
            value["removed"] = serde_json::to_value(&removed).unwrap_or_default();
        }
        out_json(&serde_json::to_string_pretty(&value).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let mut text = String::new();
    if prune || clear {
        text.push_str(&format!(
            "removed {} entries ({})\n",
            removed.len(),
            mib(removed.iter().map(|e| e.bytes).sum())
        ));
    }
    text.push_str(&format!(
        "compile cache  {}\nentries        {}, {} of {} ({})\n",
        report.dir.display(),
        report.entries.len(),
        mib(report.total_bytes),
        mib(report.max_bytes),
        runtime::CACHE_MAX_MB_VAR,
    ));
    let now = std::time::SystemTime::now();
    // Most recently used first: the entries pruning would remove last.
    for e in report.entries.iter().rev() {
        let age = now.duration_since(e.last_used).map_or(0, |d| d.as_secs());
        text.push_str(&format!(
            "  {}  {:>10}  used {} ago  (engine {})\n",
            e.sha256,
            mib(e.bytes),
            ago(age),
            e.engine
        ));
    }
    out(&text);
    ExitCode::SUCCESS
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

fn ago(secs: u64) -> String {
    match secs {
        0..120 => format!("{secs} s"),
        120..7200 => format!("{} min", secs / 60),
        7200..172_800 => format!("{} h", secs / 3600),
        _ => format!("{} days", secs / 86_400),
    }
}
