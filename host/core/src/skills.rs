//! Agent Skills: folders holding a `SKILL.md` (YAML front matter with
//! `name` and `description`, then Markdown instructions) and any files the
//! instructions use, in the open format other agents read too.
//!
//! Skills are found in the user's `skills/` beside the user manifest
//! (`$XDG_CONFIG_HOME/corral/skills/NAME/SKILL.md`), the project's
//! `.corral/skills/NAME/`, and, for projects set up for other agents, its
//! `.claude/skills/` and `.agents/skills/` (read only). Only each skill's
//! name, description and folder go into the system prompt
//! ([`prompt_section`]); the model reads the instructions and the files
//! when it uses the skill, with the host's `skill` tool ([`read`]). corral
//! never runs a skill's scripts itself: the model runs them with
//! `run_command`, under the permission policy and the sandbox.
//!
//! Reading is bounded: at most [`MAX_SKILLS`] skills per directory and
//! [`MAX_FILES`] files per skill, a `SKILL.md` of at most
//! [`MAX_SKILL_BYTES`] and other files of at most [`MAX_FILE_BYTES`], each
//! opened without blocking and read only when it is a regular file inside
//! its folder (a symbolic link is never followed, save a user's skill
//! folder itself, which the user placed). Names follow the format (lowercase
//! letters, digits and `-`, at most 64), descriptions are at most 1024
//! characters and made inert.
//!
//! A project's skills come with the code, so each is offered only as
//! `corral trust` reviewed it: trusting records the SHA-256 of every file
//! of every skill in the record that holds the project's commands
//! ([`crate::commands`]), and a skill with a file added or changed since is
//! not offered until the user trusts the project again. The user's skills
//! are the user's own. When two skills share a name, the user's wins, then
//! `.corral/skills/`, `.claude/skills/`, `.agents/skills/`.

mod tool;

pub use tool::{ReadError, Used, read};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Largest `SKILL.md` read.
pub const MAX_SKILL_BYTES: u64 = 64 * 1024;
/// Largest other file of a skill read (and, for a project's skill, hashed).
pub const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Most skills read from one directory.
pub const MAX_SKILLS: usize = 100;
/// Most files a skill's folder may hold (its subfolders included).
pub const MAX_FILES: usize = 100;
/// How deep a skill's subfolders are listed.
const MAX_DEPTH: usize = 4;
/// Longest skill name.
pub const MAX_NAME: usize = 64;
/// Longest description, in characters.
pub const MAX_DESCRIPTION: usize = 1024;

/// The project's directories of skills, relative to the workspace, in the
/// order a name is taken.
pub const PROJECT_DIRS: [(&str, Scope); 3] = [
    (".corral/skills", Scope::Project),
    (".claude/skills", Scope::Claude),
    (".agents/skills", Scope::Agents),
];

/// Where a skill comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's `skills/` directory.
    User,
    /// The project's `.corral/skills/`.
    Project,
    /// The project's `.claude/skills/`, read for compatibility.
    Claude,
    /// The project's `.agents/skills/`, read for compatibility.
    Agents,
}

impl Scope {
    /// `user`, `project`, `.claude/skills` or `.agents/skills`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
            Scope::Claude => ".claude/skills",
            Scope::Agents => ".agents/skills",
        }
    }

    /// Whether it comes with the project (and needs its trust).
    pub fn is_project(self) -> bool {
        self != Scope::User
    }
}

/// Whether a skill is offered to the model, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// In the system prompt, and readable with the `skill` tool.
    Offered,
    /// A project's skill not (or no longer) as `corral trust` recorded it.
    NeedsTrust(String),
    /// Another skill of the same name is offered instead.
    Shadowed(String),
    /// It cannot be a skill: why, and the fix.
    Invalid(String),
}

impl Status {
    /// `offered`, `needs trust`, `shadowed` or `invalid`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Offered => "offered",
            Status::NeedsTrust(_) => "needs trust",
            Status::Shadowed(_) => "shadowed",
            Status::Invalid(_) => "invalid",
        }
    }

    /// Why it is not offered; `None` when it is.
    pub fn why(&self) -> Option<&str> {
        match self {
            Status::Offered => None,
            Status::NeedsTrust(w) | Status::Shadowed(w) | Status::Invalid(w) => Some(w),
        }
    }
}

/// One skill found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name; for a folder that is no skill, the folder's name made
    /// visible.
    pub name: String,
    /// Its description (inert, on one line), else empty.
    pub description: String,
    /// Where it comes from.
    pub scope: Scope,
    /// Its folder as found.
    pub dir: PathBuf,
    /// Its folder as the model and the user are told: relative to the
    /// workspace for a project's skill, absolute for the user's.
    pub shown: String,
    /// Whether it is offered.
    pub status: Status,
    /// A project skill's files (by path in the workspace) and their
    /// SHA-256, as read when it was found.
    pub files: BTreeMap<String, String>,
}

/// The skills of a session, and problems with the directories that hold
/// them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skills {
    /// Every skill folder found, offered or not, in the order names are
    /// taken.
    pub all: Vec<Skill>,
    /// Problems with a directory of skills as a whole.
    pub problems: Vec<String>,
}

impl Skills {
    /// The skills offered to the model.
    pub fn offered(&self) -> impl Iterator<Item = &Skill> {
        self.all.iter().filter(|s| s.status == Status::Offered)
    }

    /// Whether any skill is offered (and so the `skill` tool).
    pub fn any_offered(&self) -> bool {
        self.offered().next().is_some()
    }
}

/// The user's directory of skills, `$XDG_CONFIG_HOME/corral/skills`.
pub fn user_dir() -> Option<PathBuf> {
    crate::manifest::user_file().and_then(|f| f.parent().map(|d| d.join("skills")))
}

/// Hex SHA-256 of a file's bytes.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Why `name` is not a skill name, or `None` when it is one.
pub fn bad_name(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    (!ok).then(|| {
        format!(
            "`{}` is not a skill name: use lowercase letters, digits and single `-` between \
             them (at most {MAX_NAME})",
            crate::terminal::visible(&name.chars().take(80).collect::<String>())
        )
    })
}

/// The front matter a skill's `SKILL.md` opens with; other keys
/// (`license`, `allowed-tools`, `metadata`…) are ignored.
#[derive(serde::Deserialize)]
struct Front {
    name: Option<String>,
    description: Option<String>,
}

/// A `SKILL.md`'s name, description (inert, one line) and body.
pub(crate) fn parse(text: &str) -> Result<(String, String, String), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Err(
            "SKILL.md does not open with front matter; start it with `---`, a `name:` and a \
             `description:` line, and `---`"
                .into(),
        );
    };
    let mut offset = 0;
    let mut end = None;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']).trim() == "---" {
            end = Some((offset, offset + line.len()));
            break;
        }
        offset += line.len();
    }
    let Some((yaml_end, body_start)) = end else {
        return Err(
            "the front matter of SKILL.md has no closing `---` line; end it with `---`".into(),
        );
    };
    let front: Front = serde_yaml_ng::from_str(&rest[..yaml_end]).map_err(|e| {
        format!(
            "the front matter of SKILL.md is not valid YAML ({}); write `name: NAME` and \
             `description: TEXT` lines",
            crate::terminal::inert_line(&e.to_string())
        )
    })?;
    let name = front.name.unwrap_or_default();
    if name.is_empty() {
        return Err("the front matter of SKILL.md has no `name:`; add the skill's name".into());
    }
    if let Some(why) = bad_name(&name) {
        return Err(why);
    }
    let description = front.description.unwrap_or_default();
    let description = description.trim();
    if description.is_empty() {
        return Err(
            "the front matter of SKILL.md has no `description:`; say what the skill does and \
             when to use it"
                .into(),
        );
    }
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(format!(
            "its description has {} characters, over the {MAX_DESCRIPTION} the format allows; \
             shorten it",
            description.chars().count()
        ));
    }
    let description = crate::terminal::inert_line(description).into_owned();
    let body = rest[body_start..]
        .trim_start_matches(['\n', '\r'])
        .to_owned();
    Ok((name, description, body))
}

/// How a file of a skill could not be read.
pub(crate) fn open_error(e: &std::io::Error, what: &str) -> String {
    if e.raw_os_error() == Some(libc::ELOOP) {
        format!(
            "{what} is a symbolic link; a skill's files are read only as regular files inside \
             its folder (a link could read any file of yours); replace it with the file itself"
        )
    } else if e.kind() == std::io::ErrorKind::NotFound {
        format!("{what} does not exist")
    } else if e.kind() == std::io::ErrorKind::PermissionDenied {
        format!("{what} leads out of the skill's folder; a skill's files are read only inside it")
    } else {
        format!("cannot open {what}: {e}")
    }
}

/// Reads `rel` beneath `dir`: never through a symbolic link, without
/// blocking, only a regular file of at most `max` bytes.
pub(crate) fn read_beneath(dir: &Dir, rel: &str, max: u64, what: &str) -> Result<Vec<u8>, String> {
    // Every folder on the way must be a real one: a link inside the folder
    // could lead anywhere.
    let mut prefix = PathBuf::new();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        prefix.push(part);
        match dir.symlink_metadata(&prefix) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!(
                    "{what} is reached through the symbolic link `{}`; a skill's files are \
                     read only inside its folder",
                    crate::terminal::visible(&prefix.display().to_string())
                ));
            }
            Ok(_) => {}
            Err(e) => return Err(open_error(&e, what)),
        }
    }
    let file = dir
        .open_with(
            rel,
            OpenOptions::new()
                .read(true)
                .custom_flags(crate::fsread::OPEN_FLAGS | libc::O_NOFOLLOW),
        )
        .map_err(|e| open_error(&e, what))?;
    crate::fsread::read_open(file.into_std(), max).map_err(|e| match e {
        crate::fsread::ReadError::NotRegular(kind) => {
            format!("{what} is {kind}, not a regular file; a skill's files must be regular files")
        }
        crate::fsread::ReadError::TooLarge(_) => format!(
            "{what} is larger than the {} KiB a skill's file may be; shorten it",
            max >> 10
        ),
        crate::fsread::ReadError::Io(e) => format!("cannot read {what}: {e}"),
    })
}

/// The regular files of a skill's folder, `/`-separated and sorted,
/// without hidden ones and without following links; more than
/// [`MAX_FILES`] is an error.
pub(crate) fn list_files(dir: &Dir) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut dirs = vec![(PathBuf::new(), 0usize)];
    while let Some((sub, depth)) = dirs.pop() {
        let entries = if sub.as_os_str().is_empty() {
            dir.entries()
        } else {
            dir.read_dir(&sub)
        };
        let Ok(entries) = entries else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|n| !n.starts_with('.')) else {
                continue;
            };
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let rel = sub.join(name);
            if kind.is_dir() && depth + 1 < MAX_DEPTH {
                dirs.push((rel, depth + 1));
            } else if kind.is_file() {
                if out.len() >= MAX_FILES {
                    return Err(format!(
                        "its folder holds more than {MAX_FILES} files; a skill keeps only what \
                         its instructions use"
                    ));
                }
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Finds the skills of `workspace` (the project's as `corral trust`
/// recorded them) and of the user's directory `user`.
pub fn discover(workspace: &Path, user: Option<&Path>) -> Skills {
    let mut all = Skills::default();
    if let Some(user) = user {
        for (dir, name) in folders(user, true, &mut all.problems) {
            let shown = dir.display().to_string();
            all.all.push(load(Scope::User, &dir, &name, shown, None));
        }
    }
    let trusted = crate::commands::trusted_skill_files(workspace);
    for (rel, scope) in PROJECT_DIRS {
        let Some(root) = project_root(workspace, rel, &mut all.problems) else {
            continue;
        };
        for (dir, name) in folders(&root, false, &mut all.problems) {
            let shown = format!("{rel}/{name}");
            all.all
                .push(load(scope, &dir, &name, shown, Some(&trusted)));
        }
    }
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    for skill in &mut all.all {
        if skill.status != Status::Offered {
            continue;
        }
        if let Some(first) = taken.get(&skill.name) {
            skill.status = Status::Shadowed(format!(
                "the skill of the same name in {first} is offered instead; rename one"
            ));
        } else {
            taken.insert(skill.name.clone(), skill.shown.clone());
        }
    }
    all
}

/// The project's directory of skills `rel`, when it exists and no part of
/// it is a symbolic link.
fn project_root(workspace: &Path, rel: &str, problems: &mut Vec<String>) -> Option<PathBuf> {
    let mut path = workspace.to_path_buf();
    for part in rel.split('/') {
        path.push(part);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if meta.file_type().is_symlink() {
            problems.push(format!(
                "{}: is a symbolic link; a project's skills are read only from a real \
                 directory in the repository",
                path.display()
            ));
            return None;
        }
        if !meta.is_dir() {
            return None;
        }
    }
    Some(path)
}

/// The folders of a directory of skills, sorted, at most [`MAX_SKILLS`]:
/// (path, name). A link to a folder counts only where `follow_links` (the
/// user's own directory).
fn folders(root: &Path, follow_links: bool, problems: &mut Vec<String>) -> Vec<(PathBuf, String)> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    let mut out = Vec::new();
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let is_dir = if meta.file_type().is_symlink() {
            // A project's link is kept to be refused with its reason.
            !follow_links || std::fs::metadata(&path).is_ok_and(|m| m.is_dir())
        } else {
            meta.is_dir()
        };
        if !is_dir {
            continue;
        }
        if out.len() >= MAX_SKILLS {
            problems.push(format!(
                "{}: more than {MAX_SKILLS} skills; the rest are not read",
                root.display()
            ));
            break;
        }
        out.push((path, name));
    }
    out
}

/// The skill in the folder `dir` named `folder`; a project's checked
/// against `trusted`.
fn load(
    scope: Scope,
    dir: &Path,
    folder: &str,
    shown: String,
    trusted: Option<&BTreeMap<String, String>>,
) -> Skill {
    let mut skill = Skill {
        name: crate::terminal::visible(folder),
        description: String::new(),
        scope,
        dir: dir.to_path_buf(),
        shown,
        status: Status::Offered,
        files: BTreeMap::new(),
    };
    if let Err(why) = check(&mut skill, folder, trusted) {
        skill.status = why;
    }
    skill
}

/// Reads and checks `skill`, filling its name, description and files.
fn check(
    skill: &mut Skill,
    folder: &str,
    trusted: Option<&BTreeMap<String, String>>,
) -> Result<(), Status> {
    if let Some(why) = bad_name(folder) {
        return Err(Status::Invalid(format!("its folder's name: {why}")));
    }
    if skill.scope.is_project()
        && std::fs::symlink_metadata(&skill.dir).is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(Status::Invalid(
            "its folder is a symbolic link; a project's skill must be a real folder in the \
             repository (a link could read any file of yours)"
                .into(),
        ));
    }
    let dir = Dir::open_ambient_dir(&skill.dir, cap_std::ambient_authority())
        .map_err(|e| Status::Invalid(format!("cannot open its folder: {e}")))?;
    let bytes =
        read_beneath(&dir, SKILL_FILE, MAX_SKILL_BYTES, "its SKILL.md").map_err(Status::Invalid)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| Status::Invalid("its SKILL.md is not UTF-8 text; save it as UTF-8".into()))?;
    let (name, description, _) = parse(text).map_err(Status::Invalid)?;
    if name != folder {
        return Err(Status::Invalid(format!(
            "its name `{name}` differs from its folder's; rename one so that they match"
        )));
    }
    skill.name = name;
    skill.description = description;
    let Some(trusted) = trusted else {
        return Ok(());
    };
    skill.files = hash_files(&dir, &skill.shown, &bytes).map_err(Status::Invalid)?;
    match trust_of(&skill.files, trusted) {
        Some(why) => Err(Status::NeedsTrust(why)),
        None => Ok(()),
    }
}

/// Every file of a project's skill by its path in the workspace (`shown`
/// is the folder's), with its SHA-256; `SKILL.md` from the `skill_md`
/// already read.
pub(crate) fn hash_files(
    dir: &Dir,
    shown: &str,
    skill_md: &[u8],
) -> Result<BTreeMap<String, String>, String> {
    let mut files = BTreeMap::new();
    for rel in list_files(dir)? {
        let hash = if rel == SKILL_FILE {
            sha256(skill_md)
        } else {
            let what = format!("its file `{}`", crate::terminal::visible(&rel));
            sha256(&read_beneath(dir, &rel, MAX_FILE_BYTES, &what)?)
        };
        files.insert(format!("{shown}/{rel}"), hash);
    }
    files.insert(format!("{shown}/{SKILL_FILE}"), sha256(skill_md));
    Ok(files)
}

/// Why a project skill with `files` is not as `trusted` recorded it;
/// `None` when every file is.
fn trust_of(
    files: &BTreeMap<String, String>,
    trusted: &BTreeMap<String, String>,
) -> Option<String> {
    if files.keys().all(|f| !trusted.contains_key(f)) {
        return Some(
            "it is not trusted yet: a project's skills are offered once you review them; run \
             `corral trust`"
                .into(),
        );
    }
    let changed: Vec<String> = files
        .iter()
        .filter(|(f, h)| trusted.get(*f) != Some(*h))
        .map(|(f, _)| crate::terminal::visible(f))
        .collect();
    if changed.is_empty() {
        return None;
    }
    Some(format!(
        "{} changed or was added since you trusted this project; run `corral trust` to review \
         it",
        changed.join(", ")
    ))
}

/// The system prompt's section on the offered skills: each one's name,
/// description and folder, and how to use them. Empty when none is.
pub fn prompt_section(skills: &Skills) -> String {
    if !skills.any_offered() {
        return String::new();
    }
    let mut out = String::from(
        "\n# Skills\nSkills are instructions (and files) for particular tasks. When a task fits \
         a skill's description, first call the `skill` tool with its name to read its \
         instructions, then follow them; read a file of the skill with the same tool and \
         `file`. Never guess what a skill says. corral never runs a skill's scripts: run one \
         with run_command, as the instructions say.\n",
    );
    for skill in skills.offered() {
        let _ = writeln!(
            out,
            "- {}: {} ({} skill, in {})",
            skill.name,
            skill.description,
            skill.scope.as_str(),
            crate::terminal::inert_line(&skill.shown)
        );
    }
    out
}

/// One project skill as `corral trust` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviewed {
    /// The skill as found (its status as things stand before trusting).
    pub skill: Skill,
    /// Whether trusting now changes what is recorded for it.
    pub changed: bool,
}

/// The project's skills, hashed now, for `corral trust`; problems with
/// their directories beside.
pub fn review(workspace: &Path) -> (Vec<Reviewed>, Vec<String>) {
    let found = discover(workspace, None);
    let reviewed = found
        .all
        .into_iter()
        .map(|skill| Reviewed {
            changed: matches!(skill.status, Status::NeedsTrust(_)),
            skill,
        })
        .collect();
    (reviewed, found.problems)
}

/// Whether trusting `reviewed` would change the record (a skill new or
/// changed, or a file trusted before gone).
pub fn review_changes(workspace: &Path, reviewed: &[Reviewed]) -> bool {
    let trusted = crate::commands::trusted_skill_files(workspace);
    reviewed.iter().any(|r| r.changed)
        || trusted
            .keys()
            .any(|f| !reviewed.iter().any(|r| r.skill.files.contains_key(f)))
}

/// Records the files of the readable skills of `reviewed` as what the
/// user trusted.
pub fn record_trust(workspace: &Path, reviewed: &[Reviewed]) -> std::io::Result<()> {
    let files = reviewed
        .iter()
        .flat_map(|r| r.skill.files.iter())
        .map(|(f, h)| (f.clone(), h.clone()))
        .collect();
    crate::commands::record_skill_trust(workspace, files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_format() {
        assert!(bad_name("pdf-tools").is_none());
        assert!(bad_name("a1").is_none());
        for bad in ["", "PDF", "a_b", "-a", "a-", "a--b", "a b", "a\nb", "../x"] {
            assert!(bad_name(bad).is_some(), "{bad:?}");
        }
        assert!(bad_name(&"a".repeat(65)).is_some());
        let why = bad_name("x\u{1b}[2J").unwrap();
        assert!(!why.contains('\u{1b}'), "{why:?}");
    }

    #[test]
    fn front_matter_is_yaml_and_the_body_follows() {
        let (n, d, b) = parse(
            "---\nname: pdf\ndescription: >\n  Extract text\n  from PDFs.\nlicense: MIT\n---\n\n# PDF\nRun it.\n",
        )
        .unwrap();
        assert_eq!((n.as_str(), d.as_str()), ("pdf", "Extract text from PDFs."));
        assert_eq!(b, "# PDF\nRun it.\n");
        let (_, d, _) = parse("---\nname: x\ndescription: |\n  a\n  b\n---\nbody\n").unwrap();
        assert_eq!(d, "a\\nb");
        assert!(parse("no front matter\n").is_err());
        assert!(parse("---\nname: x\n").is_err());
        assert!(parse("---\nname: x\n---\nbody\n").is_err());
        assert!(parse("---\nname: Bad Name\ndescription: d\n---\n").is_err());
        let long = format!("---\nname: x\ndescription: {}\n---\n", "a".repeat(1025));
        assert!(parse(&long).is_err());
    }
}
