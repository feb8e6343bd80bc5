//! corral's file tools, compiled to a WASI 0.2 component and embedded in the
//! `corral` binary as `builtin:fs`.
//!
//! Every path is relative to the workspace root (the plugin's preopened
//! directory). The sandbox is what keeps the tools inside their grant; the
//! checks here only make the messages clearer.
//!
//! The tools that write (`write_file`, `edit_file`, `apply_patch`) also
//! implement `preview`: each computes the new content with the same function
//! in `run` and `preview`, so the diff the user approves is the change made.

mod commit;
mod diff;
mod patch;

pub use patch::{ApplyPatch, PatchArgs};

use corral_sdk::{Effect, Error, Output, Result, Tool, io_error, tools, workspace_path};
use schemars::JsonSchema;
use serde::Deserialize;
use std::fmt::Write as _;
use std::io::Read as _;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// Files larger than this are read only up to this many bytes.
const MAX_READ_BYTES: u64 = 256 * 1024;
/// Lines longer than this are cut in `read_file` output.
const MAX_LINE_CHARS: usize = 2000;
/// Bytes inspected to decide whether a file is binary.
const SNIFF_BYTES: usize = 8192;

fn default_dot() -> String {
    ".".to_owned()
}

/// Arguments of `list_files`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Directory to list, relative to the workspace root. Defaults to the root.
    #[serde(default = "default_dot")]
    pub path: String,
    /// How many directory levels to descend (1 = only direct children). Default 3.
    #[serde(default)]
    pub depth: Option<usize>,
    /// Maximum number of entries to return. Default 500.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Include hidden files and files ignored by .gitignore. Default false.
    #[serde(default)]
    pub all: bool,
}

/// `list_files`: a gitignore-aware directory listing.
pub struct ListFiles;

impl Tool for ListFiles {
    type Args = ListArgs;
    const NAME: &'static str = "list_files";
    const DESCRIPTION: &'static str = "List files and directories under a path in the workspace, \
        respecting .gitignore. Directories end with `/`. Use `depth` and `limit` to bound the output.";
    const EFFECTS: &'static [Effect] = &[Effect::Read];

    fn run(args: ListArgs) -> Result<Output> {
        let root = workspace_path(&args.path)?;
        let meta = std::fs::metadata(&root).map_err(|e| io_error(&args.path, &e))?;
        if !meta.is_dir() {
            return Err(Error::Failed(format!("`{}` is not a directory", args.path)));
        }
        let depth = args.depth.unwrap_or(3).max(1);
        let limit = args.limit.unwrap_or(500).max(1);
        // The walk of the search tools: one host call per directory, where
        // `ignore::Walk` through `std::fs` cost two host calls and two
        // `stat`s per entry. Same rules, same order (tested against it).
        let options = corral_walk::Options {
            overrides: ignore::overrides::Override::empty(),
            all: args.all,
            max_depth: Some(depth),
            dirs: true,
            others: true,
        };
        let mut entries = Vec::new();
        let mut truncated = false;
        corral_walk::walk(&root, true, &options, &mut |path, kind| {
            if entries.len() >= limit {
                truncated = true;
                return ControlFlow::Break(());
            }
            let mut rel = display_path(path);
            if kind == corral_walk::Kind::Dir {
                rel.push('/');
            }
            entries.push(rel);
            ControlFlow::Continue(())
        });
        let mut content = entries.join("\n");
        if entries.is_empty() {
            content = format!("`{}` is empty", args.path);
        }
        if truncated {
            let _ = write!(
                content,
                "\n[listing stopped at {limit} entries; narrow `path` or raise `limit`]"
            );
        }
        // The entries move into the data; `json!` would copy each one.
        let mut data = serde_json::Map::new();
        let entries = entries.into_iter().map(serde_json::Value::String).collect();
        data.insert("entries".into(), serde_json::Value::Array(entries));
        data.insert("truncated".into(), truncated.into());
        Ok(Output::text(content).with_data(data.into()))
    }
}

/// Arguments of `read_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// File to read, relative to the workspace root.
    pub path: String,
    /// First line to return, counting from 1. Default 1.
    #[serde(default)]
    pub offset: Option<usize>,
    /// Maximum number of lines to return. Default 2000.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `read_file`: text with line numbers.
pub struct ReadFile;

impl Tool for ReadFile {
    type Args = ReadArgs;
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Read a text file from the workspace. Lines are numbered \
        from 1 (`   12\\tline`). Use `offset` and `limit` to page through large files. \
        Binary files are refused.";
    const EFFECTS: &'static [Effect] = &[Effect::Read];

    fn run(args: ReadArgs) -> Result<Output> {
        let path = workspace_path(&args.path)?;
        let file = std::fs::File::open(&path).map_err(|e| io_error(&args.path, &e))?;
        // One `stat` for both: in the sandbox each is a host call.
        let meta = file.metadata().map_err(|e| io_error(&args.path, &e))?;
        let size = meta.len();
        if meta.is_dir() {
            return Err(Error::Failed(format!(
                "`{}` is a directory; use list_files",
                args.path
            )));
        }
        // Room for the whole file up front: `take` hides the size from
        // `read_to_end`, which would otherwise start at 32 bytes and double,
        // each read a host call.
        let room = usize::try_from(size.min(MAX_READ_BYTES)).unwrap_or(0);
        let mut bytes = Vec::with_capacity(room.saturating_add(1));
        file.take(MAX_READ_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| io_error(&args.path, &e))?;
        let capped = size > MAX_READ_BYTES;
        if bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0) {
            return Err(Error::Failed(format!(
                "`{}` looks like a binary file ({size} bytes); read_file only shows text",
                args.path
            )));
        }
        let text = String::from_utf8_lossy(&bytes);
        let offset = args.offset.unwrap_or(1).max(1);
        let limit = args.limit.unwrap_or(2000).max(1);
        let mut out = String::new();
        let mut shown = 0usize;
        let mut total = 0usize;
        let mut last = 0usize;
        for (i, line) in text.lines().enumerate() {
            total = i + 1;
            if total < offset || shown >= limit {
                continue;
            }
            shown += 1;
            last = total;
            if line.chars().count() > MAX_LINE_CHARS {
                let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
                let _ = writeln!(
                    out,
                    "{total:>6}\t{cut} [line cut at {MAX_LINE_CHARS} chars]"
                );
            } else {
                let _ = writeln!(out, "{total:>6}\t{line}");
            }
        }
        if total == 0 {
            out.push_str("[empty file]\n");
        } else if shown == 0 {
            let _ = writeln!(
                out,
                "[offset {offset} is past the end: the file has {total} lines]"
            );
        } else if last < total {
            let _ = writeln!(
                out,
                "[showing lines {offset}-{last} of {total}; continue with offset {}]",
                last + 1
            );
        }
        if capped {
            let _ = writeln!(
                out,
                "[file is {size} bytes; only the first {MAX_READ_BYTES} bytes were read]"
            );
        }
        Ok(Output::text(out).with_data(serde_json::json!({
            "path": args.path,
            "bytes": size,
            "lines_shown": shown,
            "truncated": capped || last < total,
        })))
    }
}

/// Arguments of `write_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// File to write, relative to the workspace root. Parent directories are created.
    pub path: String,
    /// The complete new content of the file.
    pub content: String,
}

/// `write_file`: create or overwrite a file.
pub struct WriteFile;

impl Tool for WriteFile {
    type Args = WriteArgs;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Create a file or replace its whole content. Parent \
        directories are created. Prefer edit_file for changes to an existing file.";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Write];

    fn run(args: WriteArgs) -> Result<Output> {
        let path = file_path(&args.path)?;
        let existed = std::fs::symlink_metadata(&path).is_ok();
        commit::commit(&[(&display_path(&path), Some(&args.content))])?;
        let verb = if existed { "overwrote" } else { "created" };
        Ok(Output::text(format!(
            "{verb} `{}` ({} bytes, {} lines)",
            args.path,
            args.content.len(),
            args.content.lines().count()
        )))
    }

    fn preview(args: WriteArgs) -> Result<Option<String>> {
        let path = file_path(&args.path)?;
        let old = read_if_exists(&path, &args.path)?;
        let shown = display_path(&path);
        Ok(Some(diff::unified(
            old.as_deref().map(|text| (shown.as_str(), text)),
            Some((&shown, &args.content)),
        )))
    }
}

/// Arguments of `edit_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// File to edit, relative to the workspace root.
    pub path: String,
    /// The exact text to replace, including whitespace and indentation. It must
    /// occur exactly once unless `replace_all` is true.
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence instead of requiring a unique one. Default false.
    #[serde(default)]
    pub replace_all: bool,
}

/// `edit_file`: exact string replacement.
pub struct EditFile;

impl Tool for EditFile {
    type Args = EditArgs;
    const NAME: &'static str = "edit_file";
    const DESCRIPTION: &'static str = "Replace an exact string in a file. `old_string` must \
        match exactly once (include surrounding lines to make it unique) unless `replace_all` \
        is true.";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Write];

    fn run(args: EditArgs) -> Result<Output> {
        let edit = plan_edit(&args)?;
        commit::commit(&[(&display_path(&edit.path), Some(&edit.updated))])?;
        let count = edit.count;
        let plural = if count == 1 { "" } else { "s" };
        Ok(Output::text(format!(
            "replaced {count} occurrence{plural} in `{}`",
            args.path
        )))
    }

    fn preview(args: EditArgs) -> Result<Option<String>> {
        let edit = plan_edit(&args)?;
        let shown = display_path(&edit.path);
        Ok(Some(diff::unified(
            Some((&shown, &edit.original)),
            Some((&shown, &edit.updated)),
        )))
    }
}

/// What an `edit_file` call does, computed without writing.
struct Edit {
    path: PathBuf,
    original: String,
    updated: String,
    count: usize,
}

/// Checks an `edit_file` call and computes the file's new content; `run`
/// writes it and `preview` diffs it.
fn plan_edit(args: &EditArgs) -> Result<Edit> {
    let path = workspace_path(&args.path)?;
    if args.old_string.is_empty() {
        return Err(Error::InvalidArguments(
            "`old_string` is empty; to create a file use write_file".into(),
        ));
    }
    if args.old_string == args.new_string {
        return Err(Error::InvalidArguments(
            "`old_string` and `new_string` are the same; nothing would change".into(),
        ));
    }
    let original = std::fs::read_to_string(&path).map_err(|e| io_error(&args.path, &e))?;
    let (updated, count) = replace_in(&original, args)?;
    Ok(Edit {
        path,
        original,
        updated,
        count,
    })
}

/// `edit_file`'s replacement on a file's text: the new text and how many
/// occurrences were replaced.
fn replace_in(text: &str, args: &EditArgs) -> Result<(String, usize)> {
    let count = text.matches(&args.old_string).count();
    match (count, args.replace_all) {
        (0, _) => Err(Error::Failed(format!(
            "`old_string` was not found in `{}`; read the file and copy the text exactly, \
             including whitespace",
            args.path
        ))),
        (1, _) | (_, true) => Ok((text.replace(&args.old_string, &args.new_string), count)),
        (n, false) => {
            let lines: Vec<String> = text
                .match_indices(&args.old_string)
                .take(5)
                .map(|(at, _)| (text[..at].matches('\n').count() + 1).to_string())
                .collect();
            Err(Error::Failed(format!(
                "`old_string` occurs {n} times in `{}` (at lines {}); add surrounding context \
                 to make it unique, or set `replace_all`",
                args.path,
                lines.join(", ")
            )))
        }
    }
}

/// A path argument that must name a file: checked like every workspace path,
/// and not the workspace root itself.
fn file_path(path: &str) -> Result<PathBuf> {
    let checked = workspace_path(path)?;
    if checked.as_os_str() == "." {
        return Err(Error::InvalidArguments(format!(
            "`{path}` names the workspace root, not a file"
        )));
    }
    Ok(checked)
}

/// A file's text, or `None` if it does not exist. Bytes that are not UTF-8
/// are replaced rather than refused, since a preview only shows them.
fn read_if_exists(path: &Path, shown: &str) -> Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if path.is_dir() => Err(Error::Failed(format!(
            "`{shown}` is a directory, not a file: {e}"
        ))),
        Err(e) => Err(io_error(shown, &e)),
    }
}

/// A path as the model should see it: relative, `/`-separated, without `./`.
fn display_path(path: &Path) -> String {
    let s = path.to_string_lossy();
    if s.contains('\\') {
        let s = s.replace('\\', "/");
        return s.strip_prefix("./").unwrap_or(&s).to_owned();
    }
    // One allocation per path: `list_files` shows thousands of them.
    s.strip_prefix("./").unwrap_or(&s).to_owned()
}

tools!(ListFiles, ReadFile, WriteFile, EditFile, ApplyPatch);

#[cfg(test)]
mod tests;
