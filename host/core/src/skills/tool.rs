//! What the `skill` tool reads when the model uses a skill: its
//! instructions (the body of `SKILL.md`) with the list of its files, or one
//! of those files. Only an offered skill is read, only inside its folder,
//! never through a symbolic link, and a project's skill only as
//! `corral trust` recorded it.

use super::{
    MAX_FILE_BYTES, MAX_SKILL_BYTES, SKILL_FILE, Scope, Skill, Skills, bad_name, list_files, parse,
    read_beneath, sha256,
};
use cap_std::fs::Dir;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

/// Why the `skill` tool read nothing; the text says why and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The arguments name no skill or no file of it (the model's mistake).
    #[error("{0}")]
    Invalid(String),
    /// The skill or its file cannot be read as it is now.
    #[error("{0}")]
    Refused(String),
}

/// What a use of a skill read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Used {
    /// The text for the model.
    pub content: String,
    /// The file read, by its real path.
    pub path: PathBuf,
    /// Where the skill comes from.
    pub scope: Scope,
    /// The skill's name.
    pub name: String,
}

/// The skill `name` of `skills`: its instructions and files, or with
/// `file` that file's text.
pub fn read(skills: &Skills, name: &str, file: Option<&str>) -> Result<Used, ReadError> {
    let skill = find(skills, name)?;
    let dir = Dir::open_ambient_dir(&skill.dir, cap_std::ambient_authority()).map_err(|e| {
        ReadError::Refused(format!("cannot open the folder of skill `{name}`: {e}"))
    })?;
    let real = skill
        .dir
        .canonicalize()
        .unwrap_or_else(|_| skill.dir.clone());
    let (rel, content) = match file {
        None => (SKILL_FILE.to_owned(), instructions(skill, &dir, &real)?),
        Some(file) => {
            let rel = relative(file)?;
            let what = format!("`{}`", crate::terminal::visible(&rel));
            let bytes =
                read_beneath(&dir, &rel, MAX_FILE_BYTES, &what).map_err(ReadError::Refused)?;
            as_trusted(skill, &rel, &bytes)?;
            let text = String::from_utf8(bytes).map_err(|e| {
                ReadError::Refused(format!(
                    "{what} is not UTF-8 text ({} bytes); if it is a program, run it with \
                     run_command",
                    e.as_bytes().len()
                ))
            })?;
            (rel, text)
        }
    };
    Ok(Used {
        content,
        path: real.join(&rel),
        scope: skill.scope,
        name: skill.name.clone(),
    })
}

/// The offered skill called `name`.
fn find<'a>(skills: &'a Skills, name: &str) -> Result<&'a Skill, ReadError> {
    let offered: Vec<&str> = skills.offered().map(|s| s.name.as_str()).collect();
    let list = if offered.is_empty() {
        "no skill is offered".to_owned()
    } else {
        format!("the skills offered are: {}", offered.join(", "))
    };
    if let Some(why) = bad_name(name) {
        return Err(ReadError::Invalid(format!("{why}; {list}")));
    }
    if let Some(s) = skills.offered().find(|s| s.name == name) {
        return Ok(s);
    }
    match skills.all.iter().find(|s| s.name == name) {
        Some(s) => Err(ReadError::Refused(format!(
            "skill `{name}` is not offered: {}",
            s.status.why().unwrap_or("")
        ))),
        None => Err(ReadError::Invalid(format!(
            "there is no skill `{name}`; {list}"
        ))),
    }
}

/// `file` as a path relative to a skill's folder, `/`-separated, or why it
/// is not one.
fn relative(file: &str) -> Result<String, ReadError> {
    let shown = crate::terminal::visible(&file.chars().take(200).collect::<String>());
    let refuse = |why: &str| {
        Err(ReadError::Invalid(format!(
            "`{shown}` {why}; name a file inside the skill's folder by its relative path, as \
             the skill's list of files shows it"
        )))
    };
    if file.is_empty() || file.contains('\0') {
        return refuse("is not a file name");
    }
    let path = Path::new(file);
    if path.is_absolute() {
        return refuse("is an absolute path");
    }
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => return refuse("goes up with `..` out of the skill's folder"),
            Component::RootDir | Component::Prefix(_) => return refuse("is an absolute path"),
        }
    }
    if parts.is_empty() {
        return refuse("is not a file name");
    }
    Ok(parts.join("/"))
}

/// Checks that `bytes` read from `rel` of a project's skill are what
/// `corral trust` recorded.
fn as_trusted(skill: &Skill, rel: &str, bytes: &[u8]) -> Result<(), ReadError> {
    if !skill.scope.is_project() {
        return Ok(());
    }
    let key = format!("{}/{rel}", skill.shown);
    match skill.files.get(&key) {
        Some(h) if *h == sha256(bytes) => Ok(()),
        Some(_) => Err(ReadError::Refused(format!(
            "`{}` changed since the project was trusted; it is not read until the user runs \
             `corral trust` to review it",
            crate::terminal::visible(&key)
        ))),
        None => Err(ReadError::Refused(format!(
            "`{}` is not one of the files of skill `{}` that the user trusted (new, hidden, or \
             not a regular file); it is not read",
            crate::terminal::visible(&key),
            skill.name
        ))),
    }
}

/// The body of the skill's `SKILL.md`, its files, and how its scripts run.
fn instructions(skill: &Skill, dir: &Dir, real: &Path) -> Result<String, ReadError> {
    let bytes = read_beneath(dir, SKILL_FILE, MAX_SKILL_BYTES, "its SKILL.md")
        .map_err(ReadError::Refused)?;
    as_trusted(skill, SKILL_FILE, &bytes)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| ReadError::Refused("its SKILL.md is not UTF-8 text".into()))?;
    let (_, _, body) = parse(text).map_err(ReadError::Refused)?;
    let files = list_files(dir).map_err(ReadError::Refused)?;
    let folder = if skill.scope.is_project() {
        skill.shown.clone()
    } else {
        real.display().to_string()
    };
    let folder = crate::terminal::inert_line(&folder).into_owned();
    let mut out = format!(
        "Skill `{}` ({} skill, in {folder}):\n\n{}",
        skill.name,
        skill.scope.as_str(),
        body.trim_end()
    );
    let others: Vec<&String> = files.iter().filter(|f| *f != SKILL_FILE).collect();
    if !others.is_empty() {
        let _ = write!(
            out,
            "\n\nFiles of this skill, relative to {folder} (read one with the skill tool: \
             {{\"name\": \"{}\", \"file\": \"PATH\"}}):\n",
            skill.name
        );
        for f in others {
            let _ = writeln!(out, "- {}", crate::terminal::inert_line(f));
        }
        let _ = write!(
            out,
            "\ncorral never runs a skill's scripts itself: run one with run_command (the \
             permission policy and the sandbox apply), by its path {folder}/PATH."
        );
        if !skill.scope.is_project() && in_config_dir(real) {
            out.push_str(
                " This skill's folder is in corral's configuration directory, which programs \
                 run by run_command cannot read: its scripts cannot run from there. If the \
                 instructions need one, tell the user (a skill folder linked from elsewhere \
                 can run its scripts).",
            );
        }
    }
    Ok(out)
}

/// Whether `path` lies in corral's configuration directory, which confined
/// programs cannot read.
fn in_config_dir(path: &Path) -> bool {
    crate::manifest::user_file()
        .and_then(|f| f.parent()?.canonicalize().ok())
        .is_some_and(|config| path.starts_with(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_relative_to_the_folder() {
        assert_eq!(relative("a/./b.md").unwrap(), "a/b.md");
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a\0b", "."] {
            assert!(relative(bad).is_err(), "{bad:?}");
        }
    }
}
