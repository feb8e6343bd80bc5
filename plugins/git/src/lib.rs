//! Git tools, run through the host's process interface (`grants.exec` must
//! grant `git`). Each tool builds git's arguments itself from typed fields;
//! values that git would read as options (`-c`, `--upload-pack`, `--exec`,
//! `--config`, anything starting with `-`) are refused, paths come after
//! `--`, and hooks never run (`commit --no-verify`, `core.hooksPath` set to
//! an empty directory by the tool itself). Tools that change the repository
//! declare the `write` effect.

use corral_sdk::process::Command;
use corral_sdk::{Effect, Error, Output, Result, Tool, tools};
use schemars::JsonSchema;
use serde::Deserialize;

/// Options every git invocation starts with: no pager, no hooks, no
/// filesystem monitor (a command named by the configuration), no optional
/// locks nor index refresh, no prompts for credentials, no editor.
const SAFE: &[&str] = &[
    "--no-optional-locks",
    // A path is the file it names, not a pathspec (`prot*`, `:(top)x`,
    // `:!x`) that stages files no rule judged.
    "--literal-pathspecs",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.pager=cat",
    "-c",
    "core.editor=true",
    // `git diff` rewrites the index to refresh its stat information (even
    // with --no-optional-locks); a tool that reads changes nothing.
    "-c",
    "diff.autoRefreshIndex=false",
];

/// Refuses a value that git would parse as an option or a config override.
fn value(name: &str, v: &str) -> Result<String> {
    if v.starts_with('-') {
        return Err(Error::InvalidArguments(format!(
            "`{name}` = `{v}` looks like an option; options such as -c, --upload-pack, --exec and --config are not accepted"
        )));
    }
    if v.contains('\0') || v.contains('\n') {
        return Err(Error::InvalidArguments(format!(
            "`{name}` contains a control character"
        )));
    }
    Ok(v.to_owned())
}

fn paths(list: &[String]) -> Result<Vec<String>> {
    list.iter()
        .map(|p| {
            corral_sdk::workspace_path(p)?;
            Ok(p.clone())
        })
        .collect()
}

fn git(args: Vec<String>) -> Result<Output> {
    let out = Command::new("git")
        .args(SAFE.iter().map(|s| s.to_string()))
        .args(args)
        .run()?;
    let mut text = out.stdout;
    if out.exit_code != Some(0) {
        if !out.stderr.is_empty() {
            text.push_str(&out.stderr);
        }
        return Err(Error::Failed(format!(
            "git failed (exit {}): {}",
            out.exit_code.map_or("none".into(), |c| c.to_string()),
            text.trim()
        )));
    }
    if text.is_empty() {
        text = "(no output)".into();
    }
    Ok(Output::text(text))
}

/// Runs git with `args`, then the revision `rev` if any, then `--` and the
/// workspace paths `list`: each checked first.
fn git_at(mut args: Vec<String>, rev: Option<&str>, list: &[String]) -> Result<Output> {
    if let Some(rev) = rev {
        args.push(value("rev", rev)?);
    }
    args.push("--".into());
    args.extend(paths(list)?);
    git(args)
}

/// Arguments of `git_status`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {}

/// `git_status`
pub struct Status;
impl Tool for Status {
    type Args = StatusArgs;
    const NAME: &'static str = "git_status";
    const DESCRIPTION: &'static str =
        "Show the working tree status (short format, with the branch).";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Execute];
    fn run(_: StatusArgs) -> Result<Output> {
        git(vec!["status".into(), "--short".into(), "--branch".into()])
    }
}

/// Arguments of `git_diff`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    /// Show staged changes instead of unstaged ones.
    #[serde(default)]
    pub staged: bool,
    /// Compare against this revision (e.g. `HEAD~1`, `main`).
    #[serde(default)]
    pub rev: Option<String>,
    /// Limit to these paths.
    #[serde(default)]
    pub paths: Vec<String>,
}

/// `git_diff`
pub struct Diff;
impl Tool for Diff {
    type Args = DiffArgs;
    const NAME: &'static str = "git_diff";
    const DESCRIPTION: &'static str =
        "Show changes as a unified diff: unstaged by default, `staged`, or against `rev`.";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Execute];
    fn run(a: DiffArgs) -> Result<Output> {
        let mut args = vec![
            "diff".to_owned(),
            "--no-ext-diff".into(),
            "--no-color".into(),
        ];
        if a.staged {
            args.push("--cached".into());
        }
        git_at(args, a.rev.as_deref(), &a.paths)
    }
}

/// Arguments of `git_log`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogArgs {
    /// How many commits. Default 20.
    #[serde(default)]
    pub limit: Option<u32>,
    /// Start from this revision instead of HEAD.
    #[serde(default)]
    pub rev: Option<String>,
    /// Only commits touching these paths.
    #[serde(default)]
    pub paths: Vec<String>,
}

/// `git_log`
pub struct Log;
impl Tool for Log {
    type Args = LogArgs;
    const NAME: &'static str = "git_log";
    const DESCRIPTION: &'static str = "List commits (hash, author, date, subject), newest first.";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Execute];
    fn run(a: LogArgs) -> Result<Output> {
        let args = vec![
            "log".to_owned(),
            "--no-color".into(),
            format!("--max-count={}", a.limit.unwrap_or(20).min(500)),
            "--format=%h %an %ad %s".into(),
            "--date=short".into(),
        ];
        git_at(args, a.rev.as_deref(), &a.paths)
    }
}

/// Arguments of `git_show`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowArgs {
    /// The revision to show (e.g. `HEAD`, a hash).
    pub rev: String,
}

/// `git_show`
pub struct Show;
impl Tool for Show {
    type Args = ShowArgs;
    const NAME: &'static str = "git_show";
    const DESCRIPTION: &'static str = "Show one commit: message and diff.";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Execute];
    fn run(a: ShowArgs) -> Result<Output> {
        git(vec![
            "show".into(),
            "--no-color".into(),
            "--no-ext-diff".into(),
            value("rev", &a.rev)?,
            "--".into(),
        ])
    }
}

/// Arguments of `git_add`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddArgs {
    /// Paths to stage.
    pub paths: Vec<String>,
}

/// `git_add`
pub struct Add;
impl Tool for Add {
    type Args = AddArgs;
    const NAME: &'static str = "git_add";
    const DESCRIPTION: &'static str = "Stage paths for the next commit.";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Write, Effect::Execute];
    fn run(a: AddArgs) -> Result<Output> {
        if a.paths.is_empty() {
            return Err(Error::InvalidArguments("`paths` is empty".into()));
        }
        let mut args = vec!["add".to_owned(), "--".into()];
        args.extend(paths(&a.paths)?);
        git(args)
    }
}

/// Arguments of `git_commit`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommitArgs {
    /// The commit message.
    pub message: String,
    /// Stage all tracked changes first (`git commit -a`).
    #[serde(default)]
    pub all: bool,
}

/// `git_commit`
pub struct Commit;
impl Tool for Commit {
    type Args = CommitArgs;
    const NAME: &'static str = "git_commit";
    const DESCRIPTION: &'static str = "Commit the staged changes (hooks do not run).";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Write, Effect::Execute];
    fn run(a: CommitArgs) -> Result<Output> {
        if a.message.trim().is_empty() {
            return Err(Error::InvalidArguments("`message` is empty".into()));
        }
        let mut args = vec![
            "commit".to_owned(),
            "--no-verify".into(),
            "--no-gpg-sign".into(),
        ];
        if a.all {
            args.push("--all".into());
        }
        // `--message=` keeps a message starting with `-` a message.
        args.push(format!("--message={}", a.message));
        git(args)
    }
}

/// Arguments of `git_branch`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchArgs {
    /// Create this branch (from HEAD) instead of listing branches.
    #[serde(default)]
    pub create: Option<String>,
    /// Switch to this existing branch.
    #[serde(default)]
    pub switch: Option<String>,
}

/// `git_branch`
pub struct Branch;
impl Tool for Branch {
    type Args = BranchArgs;
    const NAME: &'static str = "git_branch";
    const DESCRIPTION: &'static str =
        "List branches, create one (`create`), or switch to one (`switch`).";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Write, Effect::Execute];
    fn run(a: BranchArgs) -> Result<Output> {
        match (a.create, a.switch) {
            (None, None) => git(vec!["branch".into(), "--list".into(), "--no-color".into()]),
            (Some(name), None) => git(vec!["branch".into(), value("create", &name)?]),
            (None, Some(name)) => git(vec![
                "switch".into(),
                "--no-guess".into(),
                value("switch", &name)?,
            ]),
            (Some(_), Some(_)) => Err(Error::InvalidArguments(
                "give `create` or `switch`, not both".into(),
            )),
        }
    }
}

tools!(Status, Diff, Log, Show, Add, Commit, Branch);

#[cfg(test)]
mod tests {
    use super::value;

    #[test]
    fn option_like_values_are_refused() {
        for bad in [
            "-c",
            "--upload-pack=touch x",
            "--exec=sh",
            "--config=core.x=y",
            "-oProxy",
        ] {
            assert!(value("rev", bad).is_err(), "{bad}");
        }
        assert_eq!(value("rev", "HEAD~1").unwrap(), "HEAD~1");
    }
}
