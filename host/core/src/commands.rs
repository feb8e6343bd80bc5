//! Custom slash commands and `/init`: prompts kept as Markdown files, which
//! `/NAME args` sends to the model (the UI and `corral run "/NAME args"`
//! both expand a line with [`expand_line`], so they cannot differ).
//!
//! A command is a file `NAME.md` in the project's `.corral/commands/` or in
//! the user's `commands/` beside the user manifest
//! (`$XDG_CONFIG_HOME/corral/commands/`). A file in a subdirectory is
//! namespaced by it: `frontend/test.md` is `/frontend:test`. The body is
//! the prompt; `$ARGUMENTS` in it becomes everything after the name, and
//! `$1` … `$9` its words (quoted as a shell would). A body that uses none
//! of them gets the arguments appended. Optional front-matter between
//! `---` lines gives `description:` and `argument-hint:` (other keys are
//! ignored, so files written for other agents load).
//!
//! A project's files come with the code, so they are offered only as
//! `corral trust` reviewed them: trusting records each file's SHA-256
//! ([`record_trust`]), and a file added or changed since is not offered
//! (the reason says to run `corral trust`). A built-in command's name is
//! never taken by a custom one, and the user's command wins over the
//! project's of the same name.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Largest command file read.
pub const MAX_COMMAND_BYTES: u64 = 64 * 1024;
/// Most command files read from one directory tree.
pub const MAX_COMMANDS: usize = 200;
/// How deep subdirectories (namespaces) go.
const MAX_DEPTH: usize = 3;

/// The project's command directory, relative to the workspace.
pub const PROJECT_DIR: &str = ".corral/commands";

/// Where a command comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The project's `.corral/commands/`.
    Project,
    /// The user's `commands/` directory.
    User,
}

impl Scope {
    /// `project` or `user`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::User => "user",
        }
    }
}

/// One custom command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Its name with the slash, `/frontend:test`.
    pub name: String,
    /// `description:` of its front-matter (made inert), else empty.
    pub description: String,
    /// `argument-hint:` of its front-matter (made inert), else empty.
    pub argument_hint: String,
    /// The prompt.
    pub body: String,
    /// Where it comes from.
    pub scope: Scope,
    /// Its file.
    pub path: PathBuf,
}

/// The commands of a workspace, and why some files are not offered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Commands {
    /// The commands offered, by name.
    pub commands: Vec<Command>,
    /// Names of commands not offered, each with the reason and the fix.
    pub refused: Vec<(String, String)>,
    /// Problems with files that give no command name (a bad file name).
    pub problems: Vec<String>,
}

impl Commands {
    /// The command called `name` (with its slash).
    pub fn get(&self, name: &str) -> Option<&Command> {
        self.commands.iter().find(|c| c.name == name)
    }
}

/// The user's command directory, `$XDG_CONFIG_HOME/corral/commands`.
pub fn user_dir() -> Option<PathBuf> {
    crate::manifest::user_file().and_then(|f| f.parent().map(|d| d.join("commands")))
}

/// One command file found under a command directory.
struct Found {
    /// `frontend/test.md`, `/` separated.
    rel: String,
    path: PathBuf,
    /// A symbolic link, not followed.
    link: bool,
}

/// The `.md` files under `dir`, at most [`MAX_COMMANDS`], sorted. For the
/// project (`follow_links` false) a symlink is found but not followed: a
/// link could point at any file of the user's.
fn find(dir: &Path, follow_links: bool, problems: &mut Vec<String>) -> Vec<Found> {
    let mut out = Vec::new();
    let mut dirs = vec![(dir.to_path_buf(), String::new(), 0usize)];
    while let Some((d, prefix, depth)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let link = meta.file_type().is_symlink();
            let meta = if link {
                if !follow_links {
                    if name.ends_with(".md") && out.len() < MAX_COMMANDS {
                        out.push(Found { rel, path, link });
                    }
                    continue;
                }
                match std::fs::metadata(&path) {
                    Ok(m) => m,
                    Err(_) => continue,
                }
            } else {
                meta
            };
            if meta.is_dir() {
                if depth + 1 < MAX_DEPTH && !name.starts_with('.') {
                    dirs.push((path, format!("{rel}/"), depth + 1));
                }
            } else if name.ends_with(".md") {
                if out.len() >= MAX_COMMANDS {
                    problems.push(format!(
                        "{}: more than {MAX_COMMANDS} command files; the rest are not read",
                        dir.display()
                    ));
                    return out;
                }
                out.push(Found {
                    rel,
                    path,
                    link: false,
                });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

/// Why a command file's path makes no command name: one of its parts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{}` is not a command name: use letters, digits, `-` and `_` (at most 64), with \
     subdirectories for namespaces",
    crate::terminal::visible(part)
)]
pub struct BadName {
    /// The part of the path (a directory or the file's stem) that is not a
    /// name, as the path has it.
    pub part: String,
}

impl From<BadName> for String {
    fn from(e: BadName) -> Self {
        e.to_string()
    }
}

/// The command name of the file `rel` (`frontend/test.md` →
/// `/frontend:test`), or why it has none.
pub fn name_of(rel: &str) -> Result<String, BadName> {
    let stem = rel.strip_suffix(".md").unwrap_or(rel);
    let parts: Vec<&str> = stem.split('/').collect();
    for part in &parts {
        let ok = !part.is_empty()
            && part.len() <= 64
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(BadName {
                part: (*part).to_owned(),
            });
        }
    }
    Ok(format!("/{}", parts.join(":")))
}

/// Hex SHA-256 of a command file's bytes.
fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Front-matter and body of a command file's text.
fn parse(text: &str) -> Result<(String, String, String), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok((String::new(), String::new(), text.to_owned()));
    };
    let mut description = String::new();
    let mut hint = String::new();
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim() == "---" {
            let body = rest[offset..].trim_start_matches(['\n', '\r']).to_owned();
            return Ok((description, hint, body));
        }
        if let Some((key, value)) = line.split_once(':') {
            let value = value.trim().trim_matches(['"', '\'']);
            let value = crate::terminal::inert(value).into_owned();
            match key.trim() {
                "description" => description = value,
                "argument-hint" => hint = value,
                _ => {}
            }
        }
    }
    Err(
        "its front-matter has no closing `---` line; end it with `---`, or remove the \
         opening one"
            .into(),
    )
}

/// A command read from `bytes`.
fn command(found: &Found, bytes: &[u8], scope: Scope) -> Result<Command, String> {
    let name = name_of(&found.rel)?;
    let text = std::str::from_utf8(bytes)
        .map_err(|_| "it is not UTF-8 text; save it as UTF-8".to_owned())?;
    let (description, argument_hint, body) = parse(text)?;
    if body.trim().is_empty() {
        return Err("it has no prompt after its front-matter; write the prompt in it".into());
    }
    Ok(Command {
        name,
        description,
        argument_hint,
        body,
        scope,
        path: found.path.clone(),
    })
}

/// Why a command file's bytes cannot be read; its text follows the file's
/// name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// A project command that is a symbolic link.
    #[error(
        "it is a symbolic link; a project command must be a regular file in the \
         repository (a link could read any file of yours); replace it with the \
         file itself"
    )]
    Link,
    /// Larger than a command file may be.
    #[error(
        "it is {0} bytes, over the {limit} KiB limit of a command file; shorten it",
        limit = MAX_COMMAND_BYTES >> 10
    )]
    TooLarge(u64),
    /// It cannot be read.
    #[error("cannot read it: {0}")]
    Unreadable(String),
}

impl From<FileError> for String {
    fn from(e: FileError) -> Self {
        e.to_string()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, FileError> {
    crate::fsread::read_regular(path, MAX_COMMAND_BYTES).map_err(|e| match e {
        crate::fsread::ReadError::TooLarge(n) => FileError::TooLarge(n),
        other => FileError::Unreadable(other.to_string()),
    })
}

/// The commands of `workspace` (the project's as `corral trust` recorded
/// them) and of the user's directory `user`, none named as one of
/// `builtins` (`/help`…).
pub fn discover(workspace: &Path, user: Option<&Path>, builtins: &[&str]) -> Commands {
    let mut all = Commands::default();
    let mut seen: BTreeMap<String, Scope> = BTreeMap::new();
    if let Some(user) = user {
        for found in find(user, true, &mut all.problems) {
            let loaded = read(&found.path)
                .map_err(String::from)
                .and_then(|b| command(&found, &b, Scope::User));
            add(&mut all, &mut seen, &found, loaded, builtins);
        }
    }
    let trusted = trusted_files(workspace);
    for (found, bytes) in project_files(workspace, &mut all.problems) {
        let loaded = bytes.map_err(String::from).and_then(|b| {
            let hash = sha256(&b);
            match trusted.get(&found.rel) {
                Some(h) if *h == hash => command(&found, &b, Scope::Project),
                Some(_) => Err(
                    "it changed since you trusted this project; run `corral trust` \
                     to review it"
                        .to_owned(),
                ),
                None => Err(
                    "it is not trusted yet: a project's commands are offered once you \
                     review them; run `corral trust`"
                        .to_owned(),
                ),
            }
        });
        add(&mut all, &mut seen, &found, loaded, builtins);
    }
    all.commands.sort_by(|a, b| a.name.cmp(&b.name));
    all
}

fn add(
    all: &mut Commands,
    seen: &mut BTreeMap<String, Scope>,
    found: &Found,
    loaded: Result<Command, String>,
    builtins: &[&str],
) {
    let name = match name_of(&found.rel) {
        Ok(n) => n,
        Err(e) => {
            all.problems.push(format!("{}: {e}", found.path.display()));
            return;
        }
    };
    let refused = match loaded {
        Ok(_) if builtins.contains(&name.as_str()) => format!(
            "{}: `{name}` is a built-in command, which a custom one never replaces; rename the file",
            found.path.display()
        ),
        Ok(_) if seen.contains_key(&name) => format!(
            "{}: your user command `{name}` has the same name and is used instead; rename one",
            found.path.display()
        ),
        Ok(c) => {
            seen.insert(name, c.scope);
            all.commands.push(c);
            return;
        }
        Err(e) => format!("{}: {e}", found.path.display()),
    };
    if !seen.contains_key(&name) {
        all.refused.push((name, refused));
    } else {
        all.problems.push(refused);
    }
}

/// The project's command files with their bytes (or why they cannot be
/// read). The directory itself must not be a symlink.
fn project_files(
    workspace: &Path,
    problems: &mut Vec<String>,
) -> Vec<(Found, Result<Vec<u8>, FileError>)> {
    let dir = workspace.join(PROJECT_DIR);
    for d in [workspace.join(".corral"), dir.clone()] {
        if std::fs::symlink_metadata(&d).is_ok_and(|m| m.file_type().is_symlink()) {
            problems.push(format!(
                "{}: is a symbolic link; project commands are read only from a real \
                 directory in the repository",
                d.display()
            ));
            return Vec::new();
        }
    }
    find(&dir, false, problems)
        .into_iter()
        .map(|f| {
            let bytes = if f.link {
                Err(FileError::Link)
            } else {
                read(&f.path)
            };
            (f, bytes)
        })
        .collect()
}

/// One project command file as `corral trust` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviewed {
    /// `frontend/test.md` under [`PROJECT_DIR`].
    pub rel: String,
    /// Its command name, or why it has none.
    pub name: Result<String, BadName>,
    /// Its SHA-256, or why it cannot be read.
    pub sha256: Result<String, FileError>,
    /// Its description (inert), when it parses.
    pub description: String,
    /// Whether trusting it now changes what is recorded (new or changed).
    pub changed: bool,
}

/// The project's command files, hashed now, for `corral trust`.
pub fn review(workspace: &Path) -> (Vec<Reviewed>, Vec<String>) {
    let mut problems = Vec::new();
    let trusted = trusted_files(workspace);
    let files = project_files(workspace, &mut problems);
    let mut out = Vec::new();
    for (found, bytes) in files {
        let sha = bytes.as_ref().map(|b| sha256(b)).map_err(Clone::clone);
        let description = bytes
            .as_ref()
            .ok()
            .and_then(|b| command(&found, b, Scope::Project).ok())
            .map(|c| c.description)
            .unwrap_or_default();
        let changed = match &sha {
            Ok(h) => trusted.get(&found.rel) != Some(h),
            Err(_) => false,
        };
        out.push(Reviewed {
            name: name_of(&found.rel),
            rel: found.rel,
            sha256: sha,
            description,
            changed,
        });
    }
    let removed = trusted.keys().any(|rel| !out.iter().any(|r| &r.rel == rel));
    if removed {
        problems.push("some command files trusted before are gone".into());
    }
    (out, problems)
}

/// Whether trusting `reviewed` would change the record (a file new,
/// changed or removed since).
pub fn review_changes(workspace: &Path, reviewed: &[Reviewed]) -> bool {
    let trusted = trusted_files(workspace);
    reviewed.iter().any(|r| r.changed)
        || trusted
            .keys()
            .any(|rel| !reviewed.iter().any(|r| &r.rel == rel))
}

/// What `corral trust` recorded for one workspace: its command files and
/// its skills' files, each by its SHA-256 when trusted.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Record {
    workspace: String,
    /// `frontend/test.md` → its SHA-256 when trusted.
    files: BTreeMap<String, String>,
    /// Every file of the project's skills, by its path in the workspace
    /// (`.corral/skills/pdf/SKILL.md`) → its SHA-256 when trusted
    /// (the Agent Skills).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    skills: BTreeMap<String, String>,
}

fn record_path(workspace: &Path) -> Option<PathBuf> {
    let canonical = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let key = sha256(canonical.as_os_str().as_encoded_bytes());
    crate::trust::store_dir().map(|d| d.join("commands").join(format!("{key}.json")))
}

/// What `corral trust` recorded for `workspace`; empty when nothing was.
fn read_record(workspace: &Path) -> Record {
    let Some(path) = record_path(workspace) else {
        return Record::default();
    };
    crate::fsread::read_state(&path, 16 << 20)
        .ok()
        .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
        .unwrap_or_default()
}

/// The project command files `corral trust` recorded for `workspace`.
fn trusted_files(workspace: &Path) -> BTreeMap<String, String> {
    read_record(workspace).files
}

/// The project skill files `corral trust` recorded for `workspace`, by
/// their paths in it.
pub(crate) fn trusted_skill_files(workspace: &Path) -> BTreeMap<String, String> {
    read_record(workspace).skills
}

/// Writes what the user trusted of `workspace`, changed by `change`.
fn update_record(workspace: &Path, change: impl FnOnce(&mut Record)) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let Some(path) = record_path(workspace) else {
        return Err(std::io::Error::other(
            "no data directory to record trust in (set XDG_DATA_HOME)",
        ));
    };
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let mut record = read_record(workspace);
    record.workspace = workspace.display().to_string();
    change(&mut record);
    let tmp = path.with_extension("tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(tmp, path)
}

/// Records the readable files of `reviewed` as what the user trusted.
pub fn record_trust(workspace: &Path, reviewed: &[Reviewed]) -> std::io::Result<()> {
    update_record(workspace, |record| {
        record.files = reviewed
            .iter()
            .filter_map(|r| Some((r.rel.clone(), r.sha256.clone().ok()?)))
            .collect();
    })
}

/// Records `files` (path in the workspace → SHA-256) as the project skill
/// files the user trusted, in the same record as the commands.
pub(crate) fn record_skill_trust(
    workspace: &Path,
    files: BTreeMap<String, String>,
) -> std::io::Result<()> {
    update_record(workspace, |record| record.skills = files)
}

/// `body` with `$ARGUMENTS` replaced by `args` and `$1` … `$9` by its
/// words, in one pass (text of the arguments is never expanded again).
/// A body with none of them gets the arguments appended.
pub fn expand(body: &str, args: &str) -> String {
    let args = args.trim();
    let words = corral_syntax::shell::words(args)
        .unwrap_or_else(|_| args.split_whitespace().map(str::to_owned).collect());
    let mut out = String::with_capacity(body.len() + args.len());
    let mut used = false;
    let mut rest = body;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args);
            used = true;
            rest = tail;
        } else if let Some(d) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
            let n = d as usize - '1' as usize;
            out.push_str(words.get(n).map(String::as_str).unwrap_or(""));
            used = true;
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if !used && !args.is_empty() {
        out.push_str(&format!("\n\nARGUMENTS: {args}"));
    }
    out
}

/// The prompt of `/init`: the model looks at the repository with its read
/// tools and writes `AGENTS.md` with its write tool (so the usual approval
/// applies), or improves the one there.
pub fn init_prompt(workspace: &Path) -> String {
    let task = if workspace.join("AGENTS.md").exists() {
        "There is already an AGENTS.md at the root of this repository: read it, then improve \
         it where it is wrong, stale or missing something below (keep what is right, and edit \
         it rather than rewrite it)."
    } else {
        "Write an AGENTS.md file at the root of this repository."
    };
    format!(
        "{task} AGENTS.md is read by coding agents (like you) at the start of every session \
         in this repository, so it should say what they need to work here and cannot guess \
         quickly:\n\
         - the commands to build, lint and test (and how to run a single test);\n\
         - the layout: the main parts, where things live, what depends on what;\n\
         - conventions of this codebase (style, error handling, naming, tests) that differ \
         from the defaults of its language;\n\
         - anything surprising or easy to get wrong.\n\
         First look at the repository with your read tools (the README, build files, CI \
         configuration, the source layout, existing agent rules such as CLAUDE.md, \
         .cursorrules or .github/copilot-instructions.md). Be concise and specific; do not \
         list every file or invent what you did not find. Then write the file with your \
         file-writing tool."
    )
}

/// A command the user typed that is not offered; its text says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{name}` is not offered: {why}")]
pub struct NotOffered {
    /// The command, with its `/`.
    pub name: String,
    /// Why it is not offered.
    pub why: String,
}

impl From<NotOffered> for String {
    fn from(e: NotOffered) -> Self {
        e.to_string()
    }
}

/// What a line typed as a prompt becomes: `/init` and custom commands
/// expanded to their prompt (`Ok(Some)`), a refused command's reason
/// (`Err`), or `Ok(None)` for a line that names no such command.
pub fn expand_line(
    commands: &Commands,
    workspace: &Path,
    line: &str,
) -> Result<Option<String>, NotOffered> {
    let line = line.trim_start();
    if !line.starts_with('/') {
        return Ok(None);
    }
    let (name, args) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    if name == "/init" {
        return Ok(Some(init_prompt(workspace)));
    }
    if let Some(c) = commands.get(name) {
        return Ok(Some(expand(&c.body, args)));
    }
    if let Some((_, why)) = commands.refused.iter().find(|(n, _)| n == name) {
        return Err(NotOffered {
            name: name.to_owned(),
            why: why.clone(),
        });
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_substituted_once() {
        assert_eq!(expand("fix $ARGUMENTS now", "issue 12"), "fix issue 12 now");
        assert_eq!(expand("$2 then $1, $3.", "a 'b c'"), "b c then a, .");
        // Text of the arguments is not expanded again.
        assert_eq!(
            expand("say $ARGUMENTS", "$1 $ARGUMENTS"),
            "say $1 $ARGUMENTS"
        );
        assert_eq!(expand("costs $5 or $x", ""), "costs  or $x");
        assert_eq!(
            expand("review", "src/a.rs"),
            "review\n\nARGUMENTS: src/a.rs"
        );
        assert_eq!(expand("review", ""), "review");
    }

    #[test]
    fn names_and_front_matter() {
        assert_eq!(name_of("frontend/test.md").unwrap(), "/frontend:test");
        assert_eq!(name_of("fix-issue.md").unwrap(), "/fix-issue");
        assert!(name_of("bad name.md").is_err());
        assert!(name_of("a:b.md").is_err());
        let (d, h, b) =
            parse("---\ndescription: Fix \u{1b}[2Jit\nargument-hint: [n]\nmodel: x\n---\nDo $1\n")
                .unwrap();
        assert!(!d.contains('\u{1b}'), "{d:?}");
        assert!(d.starts_with("Fix "), "{d:?}");
        assert_eq!(h, "[n]");
        assert_eq!(b, "Do $1\n");
        assert!(parse("---\ndescription: x\nno end\n").is_err());
        assert_eq!(parse("plain\n").unwrap().2, "plain\n");
    }
}
