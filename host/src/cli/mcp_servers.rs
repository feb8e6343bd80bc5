//! `corral mcp add | list | remove | import`: the `[mcp.NAME]` entries of a
//! manifest file, edited in place (comments and layout kept).

use corral_core::manifest::{self, McpPackage, McpServerDecl};
use corral_core::mcp_client::install;
use corral_protocol::terminal::inert;
use std::path::Path;
use std::process::ExitCode;
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, value};

/// What an entry is granted, as `--grant` says it.
#[derive(Default)]
struct Grants {
    fs: Vec<String>,
    env: Vec<String>,
    /// `net`: any destination (`Some(empty)`), or only those listed.
    net: Option<Vec<String>>,
}

impl Grants {
    fn parse(given: &[String]) -> Result<Self, String> {
        let mut out = Grants::default();
        for g in given {
            if let Some(dir) = g.strip_prefix("fs:") {
                out.fs.push(dir.to_owned());
            } else if let Some(var) = g.strip_prefix("env:") {
                out.env.push(var.to_owned());
            } else if g == "net" {
                out.net = Some(Vec::new());
            } else if let Some(dest) = g.strip_prefix("net:") {
                match &mut out.net {
                    Some(list) if list.is_empty() => {}
                    Some(list) => list.push(dest.to_owned()),
                    None => out.net = Some(vec![dest.to_owned()]),
                }
            } else {
                return Err(format!(
                    "--grant {}: not a grant; use fs:DIR (read and write beneath DIR), env:NAME \
                     (pass that variable through), net (any destination) or net:https://HOST:PORT \
                     (only that destination, through corral's proxy)",
                    inert(g)
                ));
            }
        }
        Ok(out)
    }

    fn describe(&self) -> String {
        let fs = if self.fs.is_empty() {
            "no files (only the system's directories, read-only)".to_owned()
        } else {
            format!("read and write beneath {}", self.fs.join(", "))
        };
        let env = if self.env.is_empty() {
            "no variables of yours".to_owned()
        } else {
            format!("the variables {}", self.env.join(", "))
        };
        let net = match &self.net {
            None => "no network".to_owned(),
            Some(list) if list.is_empty() => "the network (any destination)".to_owned(),
            Some(list) => format!("the network only to {}", list.join(", ")),
        };
        format!("{fs}; {env}; {net}")
    }
}

/// One server to write.
struct Entry {
    name: String,
    command: Vec<String>,
    env: Vec<(String, String)>,
    grants: Grants,
    /// A streamable HTTP server: its url, and the headers corral adds.
    url: Option<(String, Vec<(String, String)>)>,
    /// The package of corral's store it runs, checked before each start.
    package: Option<McpPackage>,
}

impl Entry {
    fn table(&self) -> Table {
        let mut t = Table::new();
        if let Some((url, secrets)) = &self.url {
            t["url"] = value(url.as_str());
            if !secrets.is_empty() {
                let mut list = Array::new();
                for (header, v) in secrets {
                    let mut s = InlineTable::new();
                    s.insert("header", header.as_str().into());
                    s.insert("value", v.as_str().into());
                    list.push(s);
                }
                let mut grants = InlineTable::new();
                grants.insert("secrets", list.into());
                t["grants"] = value(grants);
            }
            return t;
        }
        t["command"] = value(self.command[0].as_str());
        let mut args = Array::new();
        for a in &self.command[1..] {
            args.push(a.as_str());
        }
        t["args"] = value(args);
        if !self.env.is_empty() {
            let mut env = InlineTable::new();
            for (k, v) in &self.env {
                env.insert(k, v.as_str().into());
            }
            t["env"] = value(env);
        }
        let mut grants = InlineTable::new();
        if !self.grants.fs.is_empty() {
            grants.insert(
                "fs",
                Array::from_iter(self.grants.fs.iter().map(String::as_str)).into(),
            );
        }
        if !self.grants.env.is_empty() {
            grants.insert(
                "env",
                Array::from_iter(self.grants.env.iter().map(String::as_str)).into(),
            );
        }
        match &self.grants.net {
            None => {}
            Some(list) if list.is_empty() => {
                grants.insert("net", true.into());
            }
            Some(list) => {
                grants.insert(
                    "net",
                    Array::from_iter(list.iter().map(String::as_str)).into(),
                );
            }
        }
        if !grants.is_empty() {
            t["grants"] = value(grants);
        }
        if let Some(p) = &self.package {
            let mut package = InlineTable::new();
            package.insert("store", p.store.as_str().into());
            package.insert("name", p.name.as_str().into());
            package.insert("version", p.version.as_str().into());
            package.insert("sha256", p.sha256.as_str().into());
            t["package"] = value(package);
        }
        t
    }

    fn shown(&self) -> String {
        if let Some((url, secrets)) = &self.url {
            let headers = if secrets.is_empty() {
                String::new()
            } else {
                format!(
                    ", adding the header(s) {} to those requests only",
                    secrets
                        .iter()
                        .map(|(h, _)| h.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return format!(
                "[mcp.{}] connects to {} (corral makes the requests, to that origin only{})",
                self.name,
                inert(url),
                inert(&headers)
            );
        }
        format!(
            "[mcp.{}] runs `{}`{}; it gets {}",
            self.name,
            inert(&self.command.join(" ")),
            if self.env.is_empty() {
                String::new()
            } else {
                format!(
                    " with {} set",
                    self.env
                        .iter()
                        .map(|(k, _)| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            self.grants.describe()
        )
    }
}

fn read(file: &Path) -> Result<DocumentMut, String> {
    let text = match manifest::read_manifest(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
    };
    text.parse::<DocumentMut>()
        .map_err(|e| format!("{} is not valid TOML: {}", file.display(), e.message()))
}

fn write(file: &Path, doc: &DocumentMut) -> Result<(), String> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(file, doc.to_string())
        .map_err(|e| format!("cannot write {}: {e}", file.display()))
}

fn insert(doc: &mut DocumentMut, entry: &Entry) {
    let mcp = doc.entry("mcp").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    if let Some(t) = mcp.as_table_mut() {
        t.insert(&entry.name, Item::Table(entry.table()));
    }
}

/// Writes `entry` into `doc`, the manifest `file`; says so, with `said`
/// and what trusting the file takes.
fn add_entry(
    workspace: &Path,
    file: &Path,
    mut doc: DocumentMut,
    entry: &Entry,
    said: &str,
) -> Result<String, String> {
    insert(&mut doc, entry);
    write(file, &doc)?;
    Ok(format!(
        "Added to {}: {}.{said}{}",
        file.display(),
        entry.shown(),
        trust_note(workspace, file)
    ))
}

fn trust_note(workspace: &Path, file: &Path) -> &'static str {
    if file == workspace.join("corral.toml") {
        " The project's corral.toml changed: run `corral trust` to use it."
    } else {
        ""
    }
}

/// What `corral mcp add` was given besides the name and the command.
pub(super) struct Given<'a> {
    /// `--grant`s.
    pub(super) grants: &'a [String],
    /// `--env KEY=VALUE`s.
    pub(super) env: &'a [String],
    /// `--project`.
    pub(super) project: bool,
    /// `--yes`: install a fetched package without asking.
    pub(super) yes: bool,
}

/// `corral mcp add`.
pub(super) fn add(
    workspace: &Path,
    name: &str,
    given: &Given<'_>,
    command: &[String],
) -> Result<String, String> {
    let (grants, env, project) = (given.grants, given.env, given.project);
    if !manifest::valid_plugin_name(name) {
        return Err(format!(
            "`{}` is not a valid server name; use lowercase letters, digits, `-` and `_`, starting with a letter",
            inert(name)
        ));
    }
    if command.is_empty() {
        return Err(
            "no command: give it after `--`, e.g. `corral mcp add fs -- npx server`".into(),
        );
    }
    let env = env
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| format!("--env {}: write KEY=VALUE", inert(kv)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut entry = Entry {
        name: name.to_owned(),
        command: command.to_vec(),
        env,
        grants: Grants::parse(grants)?,
        url: None,
        package: None,
    };
    let file = crate::cli::install::target_file(workspace, project)?;
    let doc = read(&file)?;
    let mut said = String::new();
    let fetched = install::fetched(command).filter(|f| !own_module(workspace, f));
    if let Some(fetched) = fetched {
        let (plan, _) = installed(&fetched, false)?;
        if approved(&plan, given.yes) {
            let (done_said, done) = installed(&fetched, true)?;
            said = done_said
                .lines()
                .map(|l| format!("\n{}", l.trim()))
                .collect();
            if let Some(done) = done {
                run_installed(&mut entry, &fetched, done);
            }
        } else {
            said = format!(
                "\nnote: added as written, not installed: {}. To install it, run this again \
                 with -y (or answer y on a terminal)",
                plan.trim()
            );
        }
    }
    let added = add_entry(workspace, &file, doc, &entry, &said)?;
    Ok(format!("{added}{}", state_note(workspace, name)))
}

/// What the server `name`'s grants leave out of its reach of corral's own
/// state, when they cover it (a grant of `~`), as a line to show.
fn state_note(workspace: &Path, name: &str) -> String {
    let Ok(now) = manifest::load(workspace) else {
        return String::new();
    };
    let ours = format!("MCP server `{name}`: ");
    now.state_notes()
        .iter()
        .filter(|n| n.starts_with(&ours))
        .map(|n| format!("\nnote: {n}"))
        .collect()
}

/// `corral mcp add NAME --url URL [--secret HEADER=VALUE]`.
pub(super) fn add_url(
    workspace: &Path,
    name: &str,
    url: &str,
    secrets: &[String],
    project: bool,
) -> Result<String, String> {
    if !manifest::valid_plugin_name(name) {
        return Err(format!(
            "`{}` is not a valid server name; use lowercase letters, digits, `-` and `_`, starting with a letter",
            inert(name)
        ));
    }
    manifest::mcp_url_origin(url).map_err(|why| {
        format!(
            "--url {}: {why}; write http://HOST:PORT/PATH or https://HOST/PATH",
            inert(url)
        )
    })?;
    let secrets = secrets
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
                .ok_or_else(|| {
                    format!(
                        "--secret {}: write HEADER=VALUE, e.g. 'authorization=Bearer ${{env:TOKEN}}'",
                        inert(kv)
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let entry = Entry {
        name: name.to_owned(),
        command: Vec::new(),
        env: Vec::new(),
        grants: Grants::default(),
        url: Some((url.to_owned(), secrets)),
        package: None,
    };
    let file = crate::cli::install::target_file(workspace, project)?;
    let doc = read(&file)?;
    add_entry(workspace, &file, doc, &entry, "")
}

/// `corral mcp remove`.
pub(super) fn remove(workspace: &Path, name: &str, project: bool) -> Result<String, String> {
    let file = crate::cli::install::target_file(workspace, project)?;
    let mut doc = read(&file)?;
    let removed = doc
        .get_mut("mcp")
        .and_then(Item::as_table_mut)
        .and_then(|t| t.remove(name));
    if removed.is_none() {
        return Err(format!(
            "{} has no [mcp.{}]; `corral mcp list` shows the servers",
            file.display(),
            inert(name)
        ));
    }
    write(&file, &doc)?;
    Ok(format!(
        "Removed [mcp.{}] from {}.{}",
        inert(name),
        file.display(),
        trust_note(workspace, &file)
    ))
}

/// `corral mcp list`.
pub(super) fn list(workspace: &Path, json: bool) -> ExitCode {
    let m = match manifest::load(workspace) {
        Ok(m) => m,
        Err(e) => return super::fail(&e.to_string()),
    };
    let status = |d: &McpServerDecl| {
        if d.url.is_some() {
            return "remote (connected with a session)";
        }
        let found = if d.command.contains('/') {
            d.cwd.join(&d.command).exists()
        } else {
            corral_core::native::resolve(&d.command).is_some()
        };
        if found {
            "ready (starts with a session)"
        } else {
            "not installed"
        }
    };
    if json {
        let list: Vec<serde_json::Value> = m
            .mcp
            .iter()
            .map(|d| {
                serde_json::json!({
                    "name": d.name,
                    "url": d.url,
                    "secret_headers": d.secrets.iter().map(|s| s.header.as_str()).collect::<Vec<_>>(),
                    "command": d.command,
                    "args": d.args,
                    "env": d.env.keys().collect::<Vec<_>>(),
                    "grants": {"fs": d.fs, "env": d.env_grants, "net": match d.net.listed() {
                        Some(list) => serde_json::json!(list),
                        None => serde_json::json!(d.net.reaches()),
                    }},
                    "tool_prefix": d.tool_prefix,
                    "file": d.file,
                    "status": status(d),
                })
            })
            .collect();
        crate::cli::out_json(&serde_json::to_string_pretty(&list).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    if m.mcp.is_empty() {
        crate::cli::out("No MCP servers. Add one with `corral mcp add NAME -- CMD ARGS…`.");
        return ExitCode::SUCCESS;
    }
    let mut text = String::new();
    for d in &m.mcp {
        if let Some(url) = &d.url {
            let headers: Vec<&str> = d.secrets.iter().map(|s| s.header.as_str()).collect();
            text.push_str(&format!(
                "{}  {}  {}\n    {}\n    corral connects to that origin only{}\n",
                d.name,
                status(d),
                d.file,
                inert(url),
                if headers.is_empty() {
                    String::new()
                } else {
                    format!(", adding {}", headers.join(", "))
                }
            ));
            continue;
        }
        let grants = Grants {
            fs: d.fs.iter().map(|p| p.display().to_string()).collect(),
            env: d.env_grants.clone(),
            net: match d.net.listed() {
                Some(list) => Some(list),
                None => d.net.reaches().then(Vec::new),
            },
        };
        text.push_str(&format!(
            "{}  {}  {}\n    {} {}\n    gets {}\n",
            d.name,
            status(d),
            d.file,
            d.command,
            d.args.join(" "),
            grants.describe()
        ));
    }
    crate::cli::out(&text);
    ExitCode::SUCCESS
}

/// The servers of a Claude Code `.mcp.json` (`mcpServers`) or a Codex
/// `config.toml` (`[mcp_servers]`), each as `(name, command+args, env)`,
/// or why one cannot be imported.
fn servers_of(file: &Path) -> Result<Vec<Result<Entry, String>>, String> {
    let text = manifest::read_manifest(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let table: serde_json::Value = if file.extension().is_some_and(|e| e == "json") {
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", file.display()))?;
        v.get("mcpServers")
            .cloned()
            .unwrap_or(serde_json::Value::Null)
    } else {
        let v: toml::Value = toml::from_str(&text)
            .map_err(|e| format!("{} is not TOML: {}", file.display(), e.message()))?;
        serde_json::to_value(
            v.get("mcp_servers")
                .cloned()
                .unwrap_or(toml::Value::Table(Default::default())),
        )
        .unwrap_or_default()
    };
    let Some(servers) = table.as_object().filter(|t| !t.is_empty()) else {
        return Err(format!(
            "{} has no MCP servers (a Claude Code `.mcp.json` has `mcpServers`, a Codex config.toml `[mcp_servers]`)",
            file.display()
        ));
    };
    Ok(servers
        .iter()
        .map(|(name, s)| {
            let safe: String = name
                .to_lowercase()
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            if let Some(url) = s.get("url").and_then(|c| c.as_str()) {
                return url_entry(name, safe, url, s);
            }
            let Some(command) = s.get("command").and_then(|c| c.as_str()) else {
                return Err(format!(
                    "`{}`: neither `command` nor `url`; skipped",
                    inert(name)
                ));
            };
            let mut all = vec![command.to_owned()];
            all.extend(
                s.get("args")
                    .and_then(|a| a.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(str::to_owned)),
            );
            let env = s
                .get("env")
                .and_then(|e| e.as_object())
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect();
            Ok(Entry {
                name: safe,
                command: all,
                env,
                grants: Grants::default(),
                url: None,
                package: None,
            })
        })
        .collect())
}

/// An imported `url` entry: Claude Code's `"type": "http"` with `headers`
/// (`${VAR}` read from the environment), or Codex's `url` with
/// `bearer_token_env_var`, `http_headers` and `env_http_headers`. Their
/// headers become secrets bound to the url's origin.
fn url_entry(name: &str, safe: String, url: &str, s: &serde_json::Value) -> Result<Entry, String> {
    if s.get("type").and_then(|t| t.as_str()) == Some("sse") {
        return Err(format!(
            "`{}`: an SSE server (the older HTTP transport) is not supported, only streamable HTTP; skipped",
            inert(name)
        ));
    }
    manifest::mcp_url_origin(url)
        .map_err(|why| format!("`{}`: url {}: {why}; skipped", inert(name), inert(url)))?;
    let mut secrets = Vec::new();
    let strings = |key: &str| -> Vec<(String, String)> {
        s.get(key)
            .and_then(|h| h.as_object())
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.to_ascii_lowercase(), v.to_owned())))
            .collect()
    };
    for (header, v) in strings("headers")
        .into_iter()
        .chain(strings("http_headers"))
    {
        secrets.push((header, claude_placeholders(&v)));
    }
    for (header, var) in strings("env_http_headers") {
        secrets.push((header, format!("${{env:{var}}}")));
    }
    if let Some(var) = s.get("bearer_token_env_var").and_then(|v| v.as_str()) {
        secrets.push(("authorization".into(), format!("Bearer ${{env:{var}}}")));
    }
    Ok(Entry {
        name: safe,
        command: Vec::new(),
        env: Vec::new(),
        grants: Grants::default(),
        url: Some((url.to_owned(), secrets)),
        package: None,
    })
}

/// Claude Code's `${VAR}` (and `${VAR:-default}`, whose default is dropped)
/// as corral's `${env:VAR}`.
fn claude_placeholders(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[at..]);
            return out;
        };
        let inner = &after[..end];
        let var = inner.split(":-").next().unwrap_or(inner);
        let var = var.strip_prefix("env:").unwrap_or(var);
        out.push_str(&format!("${{env:{var}}}"));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// For an entry that fetches its package at each start (`npx -y PKG`,
/// `uvx PKG`, …), what corral does instead, in words: it installs the
/// package once into its store (when `yes`), and the entry then runs the
/// installed program. The words, and the install once done.
fn installed(
    fetched: &install::Fetched,
    yes: bool,
) -> Result<(String, Option<install::Installed>), String> {
    let store = install::store()?;
    let registry = fetched.registry().join(" and ");
    let plan = format!(
        "    `{}` fetches `{}` from the registry at each start, and a server runs without \
         network: corral installs it once from {registry} into {} (network only to the \
         registry, {}) and runs the installed program\n",
        fetched.launcher,
        inert(&fetched.spec),
        store.display(),
        fetched.unrun()
    );
    if !yes {
        return Ok((plan, None));
    }
    let done = install::install(fetched)?;
    let mut command = done.command.clone();
    command.extend(fetched.args.iter().cloned());
    let env: String = done
        .env
        .iter()
        .map(|(k, v)| format!("{k}={} ", inert(v)))
        .collect();
    Ok((
        format!(
            "{plan}    installed {} (sha256 {}): runs `{env}{}`, checked against that sha256 \
             before each start\n",
            inert(&done.package.shown()),
            done.package.sha256,
            inert(&command.join(" "))
        ),
        Some(done),
    ))
}

/// Whether to install what `plan` says: `--yes`, or the answer on the
/// terminal; without a terminal, no.
fn approved(plan: &str, yes: bool) -> bool {
    if yes {
        return true;
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return false;
    }
    eprint!("{}. Install it? [y/N] ", plan.trim());
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).is_ok() && answer.trim().eq_ignore_ascii_case("y")
}

/// Rewrites `entry` to run what `done` installed for `fetched`.
fn run_installed(entry: &mut Entry, fetched: &install::Fetched, done: install::Installed) {
    let mut command = done.command;
    command.extend(fetched.args.iter().cloned());
    entry.command = command;
    entry.env.extend(done.env);
    entry.package = Some(done.package);
}

/// Whether `python -m MODULE` runs the project's own module (a `MODULE`
/// package or `MODULE.py` in the workspace), which is not PyPI's.
fn own_module(workspace: &Path, fetched: &install::Fetched) -> bool {
    fetched.launcher == "python -m"
        && fetched.program.as_ref().is_some_and(|m| {
            workspace.join(m).exists() || workspace.join(format!("{m}.py")).exists()
        })
}

/// `corral mcp import`.
pub(super) fn import(
    workspace: &Path,
    file: &Path,
    project: bool,
    yes: bool,
) -> Result<String, String> {
    let found = servers_of(file)?;
    let target = crate::cli::install::target_file(workspace, project)?;
    let mut text = String::new();
    let mut doc = read(&target)?;
    let mut n = 0;
    for entry in found {
        match entry {
            Ok(mut e) => {
                text.push_str(&format!("  {}\n", e.shown()));
                let fetched = install::fetched(&e.command).filter(|f| !own_module(workspace, f));
                if let Some(fetched) = fetched {
                    match installed(&fetched, yes) {
                        Ok((said, done)) => {
                            text.push_str(&said);
                            if let Some(done) = done {
                                run_installed(&mut e, &fetched, done);
                            }
                        }
                        Err(why) => {
                            text.push_str(&format!("    not added: {why}\n"));
                            continue;
                        }
                    }
                }
                insert(&mut doc, &e);
                n += 1;
            }
            Err(why) => text.push_str(&format!("  {why}\n")),
        }
    }
    if !yes {
        return Ok(format!(
            "Would add to {}:\n{text}Nothing was written. Grant each server what it needs \
             with `corral mcp add NAME --grant fs:DIR -- CMD…`, or run again with --yes.",
            target.display()
        ));
    }
    write(&target, &doc)?;
    Ok(format!(
        "Added {n} server(s) to {}:\n{text}{}",
        target.display(),
        trust_note(workspace, &target)
    ))
}
