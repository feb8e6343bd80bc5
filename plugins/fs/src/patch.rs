//! `apply_patch`: several file changes in one call, in the patch envelope
//! OpenAI models are trained on (OpenAI Codex's `apply_patch`).
//!
//! The work is split so the interesting part needs no WASI: [`plan`] parses
//! the patch and computes every file's new content from a file reader, and
//! only `run` touches the disk, after the whole plan succeeded. A patch
//! therefore changes all its files or none, and the directories it would
//! create are part of the plan: a write that still fails takes them back.
//!
//! Codex's semantics hold where models rely on them: `*** Add File` over an
//! existing file replaces it, and `*** Move to` onto an existing file
//! replaces that file.
//!
//! Hunks are located the way Codex locates them (its `seek_sequence`): the
//! context and removed lines are searched forward from the end of the
//! previous hunk, first exactly, then ignoring trailing whitespace, then
//! ignoring surrounding whitespace, then with typographic punctuation folded
//! to ASCII. Models reproduce indentation and quotes imperfectly; the passes
//! accept that without accepting a different line. Context lines keep the
//! file's own text, so a loose match never rewrites the lines around a change.

use crate::{diff, display_path, file_path};
use corral_sdk::{Effect, Error, Output, Result, Tool, io_error};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt::Write as _;

use corral_syntax::patch::{ADD, Chunk, Line, Op};

/// Lines of a hunk's context quoted in a "not found" error: enough to
/// recognise the hunk, short enough not to drown the message.
const QUOTED_LINES: usize = 5;

/// Appended to every error: the model must know it can resend the whole patch.
const NOTHING_CHANGED: &str = "No file was changed; fix the patch and send all of it again.";

/// Arguments of `apply_patch`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchArgs {
    /// The whole patch, from `*** Begin Patch` to `*** End Patch`.
    pub patch: String,
}

/// `apply_patch`: add, update, move and delete files in one all-or-nothing call.
pub struct ApplyPatch;

impl Tool for ApplyPatch {
    type Args = PatchArgs;
    const NAME: &'static str = "apply_patch";
    const DESCRIPTION: &'static str = "Add, change, rename and delete files in one call. \
        Either every file change applies or none does. The `patch` argument has this form:\n\
        *** Begin Patch\n\
        *** Add File: path/new.txt\n\
        +every line of the new file, prefixed with +\n\
        *** Update File: src/lib.rs\n\
        *** Move to: src/renamed.rs   (optional, right after Update File)\n\
        @@ fn enclosing_function()     (optional: a line above the change, to find the place)\n\
        \x20context line (leading space)\n\
        -removed line\n\
        +added line\n\
        \x20context line\n\
        @@\n\
        ...more hunks for the same file, in file order...\n\
        *** End of File                (optional: this hunk ends at the end of the file)\n\
        *** Delete File: old.txt\n\
        *** End Patch\n\
        Paths are relative to the workspace root. Give about 3 lines of unchanged context \
        above and below each change, copied exactly from the file; use `@@ line` when the \
        context alone is not unique.";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Write];

    fn run(args: PatchArgs) -> Result<Output> {
        let changes = plan(&args.patch, &read_file)?;
        write(&changes)?;
        let data: Vec<serde_json::Value> = changes
            .iter()
            .map(|c| {
                serde_json::json!({
                    "status": c.status(),
                    "path": c.path,
                    "move_to": c.move_to,
                })
            })
            .collect();
        Ok(Output::text(format!(
            "Success. Updated the following files:\n{}",
            summary(&changes)
        ))
        .with_data(serde_json::json!({ "changes": data })))
    }

    fn preview(args: PatchArgs) -> Result<Option<String>> {
        let changes = plan(&args.patch, &read_file)?;
        Ok(Some(preview_of(&changes)))
    }
}

/// Parses a patch envelope with the parser the host's policy reads it
/// with, each header's path checked like every tool path and normalised
/// (`/`-separated, relative to the workspace root).
pub(crate) fn parse(patch: &str) -> Result<Vec<Op>> {
    let check = |raw: &str| {
        file_path(raw)
            .map(|path| display_path(&path))
            .map_err(message)
    };
    corral_syntax::patch::parse(patch, &check).map_err(invalid)
}

fn invalid(message: String) -> Error {
    Error::InvalidArguments(format!("{message}\n{NOTHING_CHANGED}"))
}

fn message(err: Error) -> String {
    match err {
        Error::InvalidArguments(m) | Error::Failed(m) | Error::Fatal(m) => m,
    }
}

/// One file change of a planned patch: the file's content before and after.
#[derive(Debug, PartialEq)]
pub(crate) struct Change {
    /// The file the change starts from (normalised).
    pub path: String,
    /// Where an update moves the file.
    pub move_to: Option<String>,
    /// Content before; `None` for an added file.
    pub old: Option<String>,
    /// Content after; `None` for a deleted file.
    pub new: Option<String>,
    /// What a move replaced at its destination, if a file was there.
    pub replaced: Option<String>,
}

impl Change {
    /// `A`, `M`, `R` or `D`, as `git status --short` says it.
    fn status(&self) -> &'static str {
        match (&self.old, &self.new, &self.move_to) {
            (None, _, _) => "A",
            (_, None, _) => "D",
            (_, _, Some(_)) => "R",
            _ => "M",
        }
    }

    /// Where the content ends up.
    fn dest(&self) -> &str {
        self.move_to.as_deref().unwrap_or(&self.path)
    }
}

/// Reads a workspace file for [`plan`]: its text, `None` if it does not
/// exist, or an error the model should see.
pub(crate) type Reader<'a> = &'a dyn Fn(&str) -> Result<Option<String>>;

/// Parses `patch` and computes every change in memory, reading files through
/// `read`. Operations see the effect of earlier ones in the same patch (add
/// then update, update then delete), as if applied one by one.
pub(crate) fn plan(patch: &str, read: Reader<'_>) -> Result<Vec<Change>> {
    let ops = parse(patch)?;
    // What the patch has done so far to each path; `None` = deleted.
    let mut pending: HashMap<String, Option<String>> = HashMap::new();
    let current = |pending: &HashMap<String, Option<String>>, path: &str| match pending.get(path) {
        Some(content) => Ok(content.clone()),
        None => read(path).map_err(|e| Error::Failed(format!("{}\n{NOTHING_CHANGED}", message(e)))),
    };
    // Directories the patch creates or writes into, each with the file that
    // needs it, so that no later operation treats one as a file.
    let mut dirs: HashMap<String, String> = HashMap::new();
    let mut changes = Vec::with_capacity(ops.len());
    for op in ops {
        let change = match op {
            // Codex replaces an existing file, and models count on it.
            Op::Add { path, contents } => Change {
                old: current(&pending, &path)?,
                path,
                move_to: None,
                new: Some(contents),
                replaced: None,
            },
            Op::Delete { path } => {
                let Some(old) = current(&pending, &path)? else {
                    return Err(failed(format!("cannot delete `{path}`: it does not exist")));
                };
                Change {
                    path,
                    move_to: None,
                    old: Some(old),
                    new: None,
                    replaced: None,
                }
            }
            Op::Update {
                path,
                move_to,
                chunks,
            } => {
                let Some(old) = current(&pending, &path)? else {
                    return Err(failed(format!(
                        "cannot update `{path}`: it does not exist; use `{ADD} {path}` to \
                         create it"
                    )));
                };
                let new = apply_chunks(&path, &old, &chunks)?;
                // Codex replaces the destination of a move, too.
                let replaced = match &move_to {
                    Some(dest) => current(&pending, dest)?,
                    None => None,
                };
                Change {
                    path,
                    move_to,
                    old: Some(old),
                    new: Some(new),
                    replaced,
                }
            }
        };
        if change.new.is_some() {
            claim_parents(change.dest(), &pending, &mut dirs)?;
        }
        if change.move_to.is_some() {
            pending.insert(change.path.clone(), None);
        }
        pending.insert(change.dest().to_owned(), change.new.clone());
        changes.push(change);
    }
    Ok(changes)
}

fn failed(message: String) -> Error {
    Error::Failed(format!("{message}\n{NOTHING_CHANGED}"))
}

/// Records the directories that writing `path` needs, refusing a path that
/// an earlier operation made a directory and a directory that it made a
/// file: on disk either would fail halfway through the patch.
fn claim_parents(
    path: &str,
    pending: &HashMap<String, Option<String>>,
    dirs: &mut HashMap<String, String>,
) -> Result<()> {
    if let Some(needed_by) = dirs.get(path) {
        return Err(failed(format!(
            "cannot write `{path}`: it is a directory, which this patch needs for \
             `{needed_by}`; choose another name"
        )));
    }
    let mut dir = path;
    while let Some((parent, _)) = dir.rsplit_once('/') {
        if matches!(pending.get(parent), Some(Some(_))) {
            return Err(failed(format!(
                "cannot write `{path}`: `{parent}` is a file in this patch, not a directory"
            )));
        }
        dirs.entry(parent.to_owned())
            .or_insert_with(|| path.to_owned());
        dir = parent;
    }
    Ok(())
}

/// A file's lines without their endings, and the endings, so untouched
/// lines are written back byte for byte.
struct Lines<'a> {
    text: Vec<&'a str>,
    endings: Vec<&'a str>,
    /// The ending for added lines: the file's first line ending, so CRLF
    /// files stay CRLF.
    eol: &'a str,
}

impl<'a> Lines<'a> {
    fn split(content: &'a str) -> Self {
        let mut text = Vec::new();
        let mut endings = Vec::new();
        for piece in content.split_inclusive('\n') {
            let (line, ending) = if let Some(line) = piece.strip_suffix("\r\n") {
                (line, "\r\n")
            } else if let Some(line) = piece.strip_suffix('\n') {
                (line, "\n")
            } else {
                (piece, "")
            };
            text.push(line);
            endings.push(ending);
        }
        let eol = endings
            .first()
            .copied()
            .filter(|e| !e.is_empty())
            .unwrap_or("\n");
        Self { text, endings, eol }
    }
}

/// Applies an update's hunks to a file's content.
fn apply_chunks(path: &str, content: &str, chunks: &[Chunk]) -> Result<String> {
    let file = Lines::split(content);
    let lines = &file.text;
    // (first line, lines replaced, the hunk lines that replace them)
    let mut replacements: Vec<(usize, usize, &[Line])> = Vec::new();
    let mut cursor = 0;
    for (index, chunk) in chunks.iter().enumerate() {
        let number = index + 1;
        let mut from = cursor;
        let mut header_at = None;
        if let Some(context) = &chunk.context {
            let Some(at) = seek(lines, &[context.as_str()], cursor, false) else {
                return Err(failed(format!(
                    "`{path}`, hunk {number} of {}: no line `{context}` (from `@@ {context}`) was \
                     found{}; the text after `@@` must equal a whole line of the file",
                    chunks.len(),
                    after_line(cursor)
                )));
            };
            from = at + 1;
            header_at = Some(at);
        }
        let mut ops = chunk.lines.as_slice();
        let old = Chunk::old_side(ops);
        if old.is_empty() {
            // Only added lines: after the `@@` line if there is one, else at
            // the end of the file (Codex appends there too).
            let at = match (&chunk.context, chunk.end_of_file) {
                (Some(_), false) => from,
                _ => lines.len().max(cursor),
            };
            replacements.push((at, 0, ops));
            cursor = at;
            continue;
        }
        let find = |old: &[&str]| {
            seek(lines, old, from, chunk.end_of_file)
                // Models often repeat the `@@` line as the hunk's first context line.
                .or_else(|| header_at.and_then(|h| seek(lines, old, h, chunk.end_of_file)))
        };
        let mut found = find(&old);
        if found.is_none()
            && let Some((Line::Keep(last), rest)) = ops.split_last()
            && last.trim().is_empty()
            && !Chunk::old_side(rest).is_empty()
        {
            // A trailing empty context line is often the blank line a model
            // left before the next header, not a line of the file.
            found = find(&Chunk::old_side(rest));
            if found.is_some() {
                ops = rest;
            }
        }
        let Some(at) = found else {
            return Err(not_found(
                path,
                number,
                chunks.len(),
                &old,
                lines,
                from,
                chunk,
            ));
        };
        let replaced = Chunk::old_side(ops).len();
        replacements.push((at, replaced, ops));
        cursor = at + replaced;
    }

    // Lines are (text, ending in the file); `None` for added lines.
    let mut out: Vec<(&str, Option<&str>)> = Vec::with_capacity(lines.len());
    let mut pos = 0;
    for (at, replaced, ops) in replacements {
        out.extend((pos..at).map(|i| (lines[i], Some(file.endings[i]))));
        let mut i = at;
        for op in ops {
            match op {
                // The file's own text: a loose match must not rewrite it.
                Line::Keep(_) => {
                    out.push((lines[i], Some(file.endings[i])));
                    i += 1;
                }
                Line::Remove(_) => i += 1,
                Line::Add(text) => out.push((text.as_str(), None)),
            }
        }
        pos = at + replaced;
    }
    out.extend((pos..lines.len()).map(|i| (lines[i], Some(file.endings[i]))));

    let mut result = String::with_capacity(content.len());
    let count = out.len();
    for (n, (text, ending)) in out.into_iter().enumerate() {
        result.push_str(text);
        result.push_str(match ending {
            Some(ending) if !ending.is_empty() => ending,
            // The file's unterminated last line stays so while it stays last.
            Some(_) if n + 1 == count => "",
            _ => file.eol,
        });
    }
    Ok(result)
}

fn after_line(cursor: usize) -> String {
    if cursor == 0 {
        String::new()
    } else {
        format!(" after line {cursor}")
    }
}

/// The error for a hunk whose lines are not in the file: the file, the hunk,
/// and the first lines it looked for.
fn not_found(
    path: &str,
    number: usize,
    total: usize,
    old: &[&str],
    lines: &[&str],
    from: usize,
    chunk: &Chunk,
) -> Error {
    let mut message = format!("`{path}`, hunk {number} of {total}");
    if let Some(context) = &chunk.context {
        let _ = write!(message, " (`@@ {context}`)");
    }
    let place = if chunk.end_of_file {
        " at the end of the file".to_owned()
    } else {
        after_line(from)
    };
    let _ = write!(
        message,
        ": these context and removed lines were not found{place}:"
    );
    for line in old.iter().take(QUOTED_LINES) {
        let _ = write!(message, "\n  |{line}");
    }
    if old.len() > QUOTED_LINES {
        let _ = write!(message, "\n  ({} more lines)", old.len() - QUOTED_LINES);
    }
    if from > 0
        && let Some(earlier) = seek(lines, old, 0, false).filter(|at| *at < from)
    {
        let _ = write!(
            message,
            "\nThey occur at line {}, before the previous hunk; hunks must be in file order.",
            earlier + 1
        );
    } else {
        message.push_str(
            "\nRead the file again and copy the context and removed lines exactly, \
             with their indentation.",
        );
    }
    failed(message)
}

/// Where `pattern` occurs in `lines` at or after `start` (only at the very end
/// when `end_of_file`), trying ever looser comparisons, each over the whole
/// range before the next: a loose match never wins over an exact one further on.
fn seek(lines: &[&str], pattern: &[&str], start: usize, end_of_file: bool) -> Option<usize> {
    if pattern.is_empty() {
        return Some(start);
    }
    let last = lines.len().checked_sub(pattern.len())?;
    if start > last {
        return None;
    }
    let first = if end_of_file { last } else { start };
    type Same = fn(&str, &str) -> bool;
    let passes: [Same; 4] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
        |a, b| fold_punctuation(a) == fold_punctuation(b),
    ];
    passes.iter().find_map(|same| {
        (first..=last).find(|&at| {
            pattern
                .iter()
                .zip(&lines[at..])
                .all(|(want, have)| same(have, want))
        })
    })
}

/// A line trimmed and with typographic dashes, quotes and spaces made ASCII,
/// which models and editors swap freely.
fn fold_punctuation(line: &str) -> String {
    line.trim()
        .chars()
        .map(|c| match c {
            '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}'
            | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

/// `A path`, `M path`, `R from -> to`, `D path`, one line per change.
pub(crate) fn summary(changes: &[Change]) -> String {
    changes
        .iter()
        .map(|c| match &c.move_to {
            Some(dest) => format!("{} {} -> {dest}", c.status(), c.path),
            None => format!("{} {}", c.status(), c.path),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The unified diff of every change, in patch order; a move that replaces a
/// file shows that file's removal first.
pub(crate) fn preview_of(changes: &[Change]) -> String {
    changes
        .iter()
        .map(|c| {
            let replaced = c
                .replaced
                .as_deref()
                .map(|text| diff::unified(Some((c.dest(), text)), None))
                .unwrap_or_default();
            replaced
                + &diff::unified(
                    c.old.as_deref().map(|text| (c.path.as_str(), text)),
                    c.new.as_deref().map(|text| (c.dest(), text)),
                )
        })
        .collect()
}

/// Reads a workspace file for [`plan`].
fn read_file(path: &str) -> Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            Error::Failed(format!(
                "`{path}` is not UTF-8 text; apply_patch only changes text files"
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(_) if std::path::Path::new(path).is_dir() => Err(Error::Failed(format!(
            "`{path}` is a directory, not a file"
        ))),
        Err(e) => Err(io_error(path, &e)),
    }
}

/// Writes a planned patch through the host's `write-files`: the final
/// content of every path it touches (or its removal), made all at once and
/// whole across a crash (see [`crate::commit`]).
#[cfg(target_family = "wasm")]
fn write(changes: &[Change]) -> Result<()> {
    // Later operations on a path replace earlier ones: only the end state
    // is written, in the order paths first appear.
    fn put<'a>(
        order: &mut Vec<crate::commit::Change<'a>>,
        at: &mut HashMap<&'a str, usize>,
        path: &'a str,
        content: Option<&'a str>,
    ) {
        match at.get(path) {
            Some(&i) => order[i].1 = content,
            None => {
                at.insert(path, order.len());
                order.push((path, content));
            }
        }
    }
    let mut order: Vec<crate::commit::Change<'_>> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for change in changes {
        if let Some(new) = &change.new {
            put(&mut order, &mut at, change.dest(), Some(new));
        }
        if change.new.is_none() || change.move_to.is_some() {
            put(&mut order, &mut at, &change.path, None);
        }
    }
    crate::commit::commit(&order).map_err(|e| {
        Error::Failed(format!(
            "{}\nFix the problem and send the whole patch again.",
            message(e)
        ))
    })
}

/// A step of a patch being written, as it can be taken back.
#[cfg(not(target_family = "wasm"))]
enum Undo<'a> {
    /// `path` held this content before (`None`: it did not exist).
    File(&'a str, Option<&'a str>),
    /// The patch created this directory.
    Dir(String),
}

#[cfg(not(target_family = "wasm"))]
/// Writes a planned patch. If a write fails midway (a read-only grant, a
/// full disk, a name the filesystem refuses), the files already written are
/// put back as they were and the directories the patch created are removed,
/// so the patch stays all-or-nothing as far as the filesystem allows.
fn write(changes: &[Change]) -> Result<()> {
    let mut undo: Vec<Undo<'_>> = Vec::new();
    for change in changes {
        let step = (|| {
            if let Some(new) = &change.new {
                let before = match change.move_to {
                    Some(_) => change.replaced.as_deref(),
                    None => change.old.as_deref(),
                };
                create_parents(change.dest(), &mut undo)?;
                undo.push(Undo::File(change.dest(), before));
                std::fs::write(change.dest(), new).map_err(|e| io_error(change.dest(), &e))?;
            }
            if change.new.is_none() || change.move_to.is_some() {
                undo.push(Undo::File(&change.path, change.old.as_deref()));
                std::fs::remove_file(&change.path).map_err(|e| io_error(&change.path, &e))?;
            }
            Ok::<(), Error>(())
        })();
        if let Err(e) = step {
            let restored = restore(&undo);
            return Err(Error::Failed(format!(
                "{}\nThe patch stopped there; {restored}.",
                message(e)
            )));
        }
    }
    Ok(())
}

#[cfg(not(target_family = "wasm"))]
/// Creates the missing directories above `path`, outermost first, recording
/// each so a failed patch can remove it again.
fn create_parents(path: &str, undo: &mut Vec<Undo<'_>>) -> Result<()> {
    let mut missing = Vec::new();
    let mut dir = path;
    while let Some((parent, _)) = dir.rsplit_once('/') {
        if std::fs::symlink_metadata(parent).is_ok() {
            break;
        }
        missing.push(parent);
        dir = parent;
    }
    for dir in missing.into_iter().rev() {
        if let Err(e) = std::fs::create_dir(dir) {
            let file = dir
                .match_indices('/')
                .map(|(at, _)| &dir[..at])
                .find(|above| std::path::Path::new(above).is_file());
            return Err(match file {
                Some(file) => Error::Failed(format!(
                    "cannot create `{path}`: `{file}` is a file, not a directory"
                )),
                None => io_error(dir, &e),
            });
        }
        undo.push(Undo::Dir(dir.to_owned()));
    }
    Ok(())
}

#[cfg(not(target_family = "wasm"))]
/// Undoes the steps so far, newest first; says what it could not undo.
fn restore(undo: &[Undo<'_>]) -> String {
    let mut lost = Vec::new();
    for step in undo.iter().rev() {
        let (path, result) = match step {
            Undo::File(path, Some(content)) => (*path, std::fs::write(path, content)),
            // Only what the patch created is removed; a write that failed
            // before creating its file left nothing to undo.
            Undo::File(path, None) if std::fs::symlink_metadata(path).is_err() => (*path, Ok(())),
            Undo::File(path, None) => (*path, std::fs::remove_file(path)),
            Undo::Dir(dir) => (dir.as_str(), std::fs::remove_dir(dir)),
        };
        if let Err(e) = result {
            lost.push(format!("`{path}` ({e})"));
        }
    }
    if lost.is_empty() {
        "the files it had changed were restored and the directories it had created removed"
            .to_owned()
    } else {
        format!(
            "these could not be restored and may be half-changed: {}",
            lost.join(", ")
        )
    }
}

#[cfg(test)]
mod tests;
