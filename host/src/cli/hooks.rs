//! `corral hooks import`: the `hooks` block of a Claude Code
//! `settings.json` as corral's `[hooks]` command hooks, with what each
//! would be granted; and the command hooks' part of `corral trust`'s
//! review.

use super::{fail, out};
use corral_core::manifest::{self, HookTarget, trust};
use corral_protocol::HookEvent;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table};

/// `corral hooks …`.
#[derive(clap::Subcommand)]
pub enum HooksCmd {
    /// Read the hooks of a Claude Code settings.json (default
    /// `.claude/settings.json` of the workspace) and print the `[hooks]`
    /// entries corral would run, with what each is granted. Nothing is
    /// written without `--write`, which appends them to the project's
    /// corral.toml for a file inside the workspace (then review them with
    /// `corral trust`), or to your own corral.toml for one outside it
    /// (`~/.claude/settings.json`).
    Import {
        /// The settings file (default `.claude/settings.json`).
        file: Option<PathBuf>,
        /// Append the entries to the manifest.
        #[arg(long)]
        write: bool,
    },
}

/// Runs `corral hooks …`.
pub(super) fn hooks(workspace: &Path, cmd: HooksCmd) -> ExitCode {
    match cmd {
        HooksCmd::Import { file, write } => import(workspace, file, write),
    }
}

/// Claude Code's tool names and corral's.
const TOOLS: &[(&str, &str)] = &[
    ("Bash", "run_command"),
    ("Read", "read_file"),
    ("Write", "write_file"),
    ("Edit", "edit_file"),
    ("MultiEdit", "edit_file"),
    ("Grep", "grep"),
    ("Glob", "glob"),
    ("LS", "list_files"),
    ("WebFetch", "web_fetch"),
    ("WebSearch", "web_search"),
    ("Task", "task"),
];

/// corral's event for a Claude Code hook event, or why there is none.
fn event_of(name: &str) -> Result<HookEvent, &'static str> {
    Ok(match name {
        "PreToolUse" => HookEvent::BeforeTool,
        "PostToolUse" => HookEvent::AfterTool,
        "PostToolUseFailure" => HookEvent::AfterToolFailure,
        "UserPromptSubmit" => HookEvent::UserPrompt,
        "Stop" => HookEvent::Stop,
        "SubagentStop" => HookEvent::SubagentStop,
        "SessionStart" => HookEvent::SessionStart,
        "SessionEnd" => HookEvent::SessionEnd,
        "PreCompact" => HookEvent::BeforeCompact,
        "Notification" => {
            return Err("corral has no notification event (it asks in its own prompt)");
        }
        "PermissionRequest" => {
            return Err("corral's approvals are its policy's; a hook cannot answer them");
        }
        _ => return Err("corral has no such event"),
    })
}

/// One alternative of a Claude Code matcher as corral tool patterns, or
/// why it cannot be.
fn tool_pattern(alt: &str) -> Result<String, String> {
    if let Some((_, ours)) = TOOLS.iter().find(|(claude, _)| *claude == alt) {
        return Ok((*ours).to_owned());
    }
    if let Some(rest) = alt.strip_prefix("mcp__") {
        // corral offers MCP server S's tool T as `S__T`.
        let rest = rest
            .strip_suffix(".*")
            .map_or_else(|| rest.to_owned(), |server| format!("{server}*"));
        if rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*'))
        {
            return Ok(rest);
        }
    }
    if alt.chars().any(|c| {
        matches!(
            c,
            '.' | '*' | '+' | '?' | '[' | ']' | '(' | ')' | '^' | '$' | '\\'
        )
    }) {
        return Err(format!(
            "`{alt}` is a regular expression corral's matcher cannot translate (it matches tool \
             names with `*` only); write `tools` by hand"
        ));
    }
    Err(format!("corral has no tool like Claude Code's `{alt}`"))
}

/// A matcher as corral's `tools`: empty for every tool, and each
/// alternative left out with why.
fn tools_of(matcher: &str) -> (Vec<String>, Vec<String>) {
    let matcher = matcher.trim();
    if matches!(matcher, "" | "*" | ".*") {
        return (Vec::new(), Vec::new());
    }
    let mut tools = Vec::new();
    let mut left = Vec::new();
    for alt in matcher.split('|').map(str::trim).filter(|a| !a.is_empty()) {
        match tool_pattern(alt) {
            Ok(t) if !tools.contains(&t) => tools.push(t),
            Ok(_) => {}
            Err(why) => left.push(why),
        }
    }
    (tools, left)
}

/// One hook as corral would run it.
struct Imported {
    event: HookEvent,
    tools: Vec<String>,
    command: String,
    timeout: Option<u64>,
    /// What of the entry was left out, and why.
    notes: Vec<String>,
}

/// What importing a `hooks` block does: the entries, and what was skipped.
#[derive(Default)]
struct Plan {
    entries: Vec<Imported>,
    skipped: Vec<String>,
}

/// Reads the `hooks` block of a Claude Code settings file.
fn plan(settings: &Value) -> Plan {
    let mut plan = Plan::default();
    let Some(events) = settings.get("hooks").and_then(Value::as_object) else {
        return plan;
    };
    for (name, groups) in events {
        let event = match event_of(name) {
            Ok(e) => e,
            Err(why) => {
                plan.skipped.push(format!("{name}: {why}"));
                continue;
            }
        };
        for group in groups.as_array().into_iter().flatten() {
            let matcher = group.get("matcher").and_then(Value::as_str).unwrap_or("");
            let (tools, mut notes) = if event.is_tool_event() {
                tools_of(matcher)
            } else if matches!(matcher, "" | "*") {
                (Vec::new(), Vec::new())
            } else {
                let why = format!(
                    "the matcher `{matcher}` is dropped: corral runs {} hooks every time",
                    event.as_str()
                );
                (Vec::new(), vec![why])
            };
            if event.is_tool_event() && tools.is_empty() && !notes.is_empty() {
                plan.skipped.push(format!(
                    "{name} matcher `{matcher}`: {} (run on every tool instead, it would judge \
                     calls it was not written for)",
                    notes.join("; ")
                ));
                continue;
            }
            for hook in group
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let kind = hook
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("command");
                let command = hook.get("command").and_then(Value::as_str);
                let (Some(command), "command") = (command, kind) else {
                    plan.skipped.push(format!(
                        "{name} hook of type `{kind}`: corral runs command hooks only"
                    ));
                    continue;
                };
                plan.entries.push(Imported {
                    event,
                    tools: tools.clone(),
                    command: command.to_owned(),
                    timeout: hook.get("timeout").and_then(Value::as_u64),
                    notes: std::mem::take(&mut notes),
                });
            }
        }
    }
    plan
}

impl Imported {
    /// The entry as an inline table of `[hooks]`.
    fn table(&self) -> InlineTable {
        let mut t = InlineTable::new();
        t.insert("command", self.command.as_str().into());
        if !self.tools.is_empty() {
            let tools: Array = self.tools.iter().map(String::as_str).collect();
            t.insert("tools", tools.into());
        }
        if let Some(s) = self.timeout.filter(|s| (1..=3600).contains(s)) {
            t.insert("timeout", (s as i64).into());
        }
        t
    }

    /// What it would be granted, in words.
    fn grants(&self) -> String {
        let mut text = format!(
            "runs `/bin/sh -c` on it confined, for at most {} s: reads the system's directories \
             and the workspace only, writes nothing but a private temporary directory, no \
             network, environment PATH, HOME, LANG and CLAUDE_PROJECT_DIR",
            self.timeout
                .unwrap_or(manifest::DEFAULT_COMMAND_TIMEOUT_SECS)
        );
        if self.command.contains("~/") || self.command.contains("$HOME") {
            text.push_str(
                "; it names a file in your home directory, which it cannot read unless you add \
                 its directory to grants.read",
            );
        }
        text
    }
}

/// The `[hooks]` TOML of `entries`.
fn toml_of(entries: &[Imported]) -> DocumentMut {
    let mut doc = DocumentMut::new();
    append(&mut doc, entries);
    doc
}

/// Appends `entries` to the `[hooks]` table of `doc`.
fn append(doc: &mut DocumentMut, entries: &[Imported]) {
    let hooks = doc
        .entry("hooks")
        .or_insert_with(|| Item::Table(Table::new()));
    let Some(table) = hooks.as_table_like_mut() else {
        return;
    };
    for e in entries {
        let list = table
            .entry(e.event.as_str())
            .or_insert(Item::Value(Array::new().into()));
        if let Some(array) = list.as_array_mut() {
            array.push(e.table());
            array.fmt();
        }
    }
}

/// `corral hooks import [FILE] [--write]`.
fn import(workspace: &Path, file: Option<PathBuf>, write: bool) -> ExitCode {
    let file = file.unwrap_or_else(|| workspace.join(".claude/settings.json"));
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) => {
            return fail(&format!(
                "cannot read {}: {e}; name a Claude Code settings.json (`corral hooks import \
                 ~/.claude/settings.json`)",
                file.display()
            ));
        }
    };
    let settings: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return fail(&format!("{} is not JSON: {e}", file.display())),
    };
    let plan = plan(&settings);
    let mut report = format!("From {}:\n\n", file.display());
    if plan.entries.is_empty() {
        report.push_str("No command hooks to import.\n");
    } else {
        report.push_str(&toml_of(&plan.entries).to_string());
        report.push_str("\nWhat each would be granted:\n");
        for e in &plan.entries {
            report.push_str(&format!(
                "  {} `{}`: {}\n",
                e.event.as_str(),
                e.command,
                e.grants()
            ));
            for note in &e.notes {
                report.push_str(&format!("    note: {note}\n"));
            }
        }
    }
    if !plan.skipped.is_empty() {
        report.push_str("\nSkipped:\n");
        for s in &plan.skipped {
            report.push_str(&format!("  {s}\n"));
        }
    }
    report.push_str(
        "\ncorral's tool names are not Claude Code's: run_command is Bash, read_file Read, \
         write_file Write, edit_file Edit, grep Grep, glob Glob, list_files LS, web_fetch \
         WebFetch, web_search WebSearch; an MCP tool mcp__S__T is S__T.\n",
    );
    if !write || plan.entries.is_empty() {
        if !plan.entries.is_empty() {
            report.push_str("Nothing was written; --write appends these entries.\n");
        }
        out(&report);
        return ExitCode::SUCCESS;
    }
    match write_entries(workspace, &file, &plan.entries) {
        Ok(note) => {
            report.push_str(&note);
            out(&report);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// Appends `entries` to the project's corral.toml when `from` is inside
/// the workspace, else to the user's; says where.
fn write_entries(workspace: &Path, from: &Path, entries: &[Imported]) -> Result<String, String> {
    let inside = from
        .canonicalize()
        .ok()
        .zip(workspace.canonicalize().ok())
        .is_some_and(|(f, w)| f.starts_with(w));
    let target = if inside {
        workspace.join("corral.toml")
    } else {
        manifest::user_file().ok_or("no configuration directory for your corral.toml")?
    };
    let text = match manifest::read_manifest(&target) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", target.display())),
    };
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        format!("{} is not valid TOML: {}", target.display(), e.message())
    })?;
    append(&mut doc, entries);
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(&target, doc.to_string())
        .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
    let trust = if inside {
        " The project's corral.toml changed: review it and run `corral trust` to use it."
    } else {
        ""
    };
    Ok(format!(
        "Appended {} hook(s) to {}.{trust}\n",
        entries.len(),
        target.display()
    ))
}

/// The command hooks a project file declares, with their grants and the
/// files of their code that trusting it approves, for `corral trust`.
pub(super) fn review_text(
    checked: &manifest::Manifest,
    name: &str,
    code: &[(String, Vec<trust::CodeFile>)],
) -> String {
    let mut text = String::new();
    for b in checked.hooks.iter().filter(|b| b.origin.file == name) {
        let HookTarget::Command(c) = &b.target else {
            continue;
        };
        let mut grants = vec!["reads the system and the workspace".to_owned()];
        let dirs = |d: &[PathBuf]| {
            d.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !c.read.is_empty() {
            grants.push(format!("reads {}", dirs(&c.read)));
        }
        if !c.write.is_empty() {
            grants.push(format!("WRITES {}", dirs(&c.write)));
        }
        if c.net.reaches() {
            grants.push("HAS THE NETWORK".to_owned());
        }
        if !c.env.is_empty() {
            grants.push(format!("gets {}", c.env.join(", ")));
        }
        text.push_str(&format!(
            "  {} (line {}): {}\n    {}; at most {} s\n",
            b.event.as_str(),
            b.origin.line,
            c.command,
            grants.join("; "),
            c.timeout_secs
        ));
        if let Some((_, files)) = code.iter().find(|(k, _)| *k == trust::hook_key(b)) {
            for f in files {
                let state = match f.sha256() {
                    Some(h) => format!("sha256 {h}"),
                    None => "cannot be read; the hook will not run until you trust again".into(),
                };
                text.push_str(&format!("    runs {}  {state}\n", f.path.display()));
            }
        }
    }
    if text.is_empty() {
        return text;
    }
    format!(
        "\nCommand hooks it runs (through /bin/sh -c, confined); trusting approves the files \
         their command lines name and the files beside those, as they are now, and a hook whose \
         files change does not run until you trust again (a file a script reads from elsewhere \
         is not covered):\n{text}"
    )
}

/// Each file of the command hooks' code whose content differs from what was
/// approved.
pub(super) fn code_changed(
    code: &[(String, Vec<trust::CodeFile>)],
    approved: &std::collections::BTreeMap<String, trust::ServerCode>,
) -> String {
    let mut text = String::new();
    for (key, files) in code {
        let was = approved.get(key).cloned().unwrap_or_default();
        for change in trust::code_changes(files, &was) {
            text.push_str(&format!("  hook `{key}`: {change}\n"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_become_tool_patterns_or_say_why_not() {
        assert_eq!(tools_of("Bash"), (vec!["run_command".into()], vec![]));
        assert_eq!(
            tools_of("Edit|MultiEdit|Write").0,
            ["edit_file", "write_file"]
        );
        assert_eq!(tools_of("mcp__github__.*").0, ["github__*"]);
        assert_eq!(tools_of("mcp__memory__create").0, ["memory__create"]);
        assert!(tools_of("").0.is_empty() && tools_of("*").1.is_empty());
        let (tools, left) = tools_of("Bash|Notebook.*");
        assert_eq!(tools, ["run_command"]);
        assert_eq!(left.len(), 1);
        assert!(tools_of("TodoWrite").1[0].contains("no tool like"));
    }
}
