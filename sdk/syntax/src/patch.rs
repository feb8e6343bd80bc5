//! The `apply_patch` envelope (OpenAI Codex's patch format), parsed once
//! for the tool that applies it (`fs`) and for the host that judges which
//! paths it touches (the permission policy, protected paths): both read the
//! same headers, so no path the tool writes escapes the policy.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path/new.txt
//! +a line
//! *** Update File: src/lib.rs
//! *** Move to: src/renamed.rs
//! @@ fn enclosing_function()
//!  context
//! -removed
//! +added
//! *** End of File
//! *** Delete File: old.txt
//! *** End Patch
//! ```

/// `*** Begin Patch`
pub const BEGIN: &str = "*** Begin Patch";
/// `*** End Patch`
pub const END: &str = "*** End Patch";
/// `*** Add File:`
pub const ADD: &str = "*** Add File:";
/// `*** Update File:`
pub const UPDATE: &str = "*** Update File:";
/// `*** Delete File:`
pub const DELETE: &str = "*** Delete File:";
/// `*** Move to:`
pub const MOVE: &str = "*** Move to:";
/// `*** End of File`
pub const END_OF_FILE: &str = "*** End of File";

/// Checks a header's path (trimmed, not empty) and returns it as the
/// caller wants it kept, or says what is wrong with it.
pub type PathCheck<'a> = &'a dyn Fn(&str) -> Result<String, String>;

/// One file operation of a parsed patch, with its path as the caller's
/// [`PathCheck`] returned it.
#[derive(Debug, PartialEq)]
pub enum Op {
    /// `*** Add File:` with the file's content.
    Add {
        /// The file added.
        path: String,
        /// Its content, every line ending in `\n`.
        contents: String,
    },
    /// `*** Delete File:`.
    Delete {
        /// The file deleted.
        path: String,
    },
    /// `*** Update File:`, maybe moved, with its hunks in file order.
    Update {
        /// The file changed.
        path: String,
        /// `*** Move to:`, unless it names the file itself.
        move_to: Option<String>,
        /// The hunks; empty only for a pure move.
        chunks: Vec<Chunk>,
    },
}

impl Op {
    /// The paths the operation touches: its file, and where it moves to.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        let (path, move_to) = match self {
            Op::Add { path, .. } | Op::Delete { path } => (path, None),
            Op::Update { path, move_to, .. } => (path, move_to.as_ref()),
        };
        std::iter::once(path.as_str()).chain(move_to.map(String::as_str))
    }
}

/// One `@@` hunk of an update.
#[derive(Debug, PartialEq)]
pub struct Chunk {
    /// The text after `@@`: the hunk starts after a line equal to it.
    pub context: Option<String>,
    /// The hunk's lines in order.
    pub lines: Vec<Line>,
    /// Marked `*** End of File`: the hunk must end at the end of the file.
    pub end_of_file: bool,
}

/// One line of a hunk, without its prefix character.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// ` `: a context line, kept.
    Keep(String),
    /// `-`: a line removed.
    Remove(String),
    /// `+`: a line added.
    Add(String),
}

impl Chunk {
    /// The lines the hunk expects in the file: its context and removed lines.
    pub fn old_side(lines: &[Line]) -> Vec<&str> {
        lines
            .iter()
            .filter_map(|l| match l {
                Line::Keep(t) | Line::Remove(t) => Some(t.as_str()),
                Line::Add(_) => None,
            })
            .collect()
    }
}

/// Parses a patch envelope, each header's path passed through `check`.
/// Errors say what is wrong and name the patch line (counting from 1).
pub fn parse(patch: &str, check: PathCheck<'_>) -> Result<Vec<Op>, String> {
    let lines: Vec<&str> = patch.lines().collect();
    let mut start = 0;
    let mut end = lines.len();
    while start < end && lines[start].trim().is_empty() {
        start += 1;
    }
    while end > start && lines[end - 1].trim().is_empty() {
        end -= 1;
    }
    if start == end {
        return Err(format!(
            "the patch is empty; it must start with `{BEGIN}` and end with `{END}`"
        ));
    }
    // Models trained on Codex's shell form sometimes keep its heredoc
    // (`<<'EOF'` ... `EOF`) around the patch; it carries nothing.
    if end - start >= 2
        && let Some(marker) = heredoc_marker(lines[start])
        && lines[end - 1].trim() == marker
    {
        start += 1;
        end -= 1;
    }
    let first = lines[start].trim();
    if first != BEGIN {
        return Err(format!(
            "the patch must start with `{BEGIN}`, but line {} is `{first}`",
            start + 1
        ));
    }
    let last = lines[end - 1].trim();
    if end - start < 2 || last != END {
        return Err(format!(
            "the patch must end with `{END}`, but its last line ({}) is `{last}`",
            end
        ));
    }
    let mut parser = Parser {
        lines: &lines,
        check,
        at: start + 1,
        end: end - 1,
    };
    let mut ops = Vec::new();
    while let Some(op) = parser.op()? {
        ops.push(op);
    }
    if ops.is_empty() {
        return Err(format!(
            "the patch has no file operations; between `{BEGIN}` and `{END}` put \
             `{ADD} PATH`, `{UPDATE} PATH` or `{DELETE} PATH` sections"
        ));
    }
    Ok(ops)
}

/// `EOF` for `<<'EOF'`, `<<"EOF"`, `<<EOF` or `<<-EOF`.
fn heredoc_marker(line: &str) -> Option<&str> {
    let marker = line
        .trim()
        .strip_prefix("<<")?
        .trim_start_matches('-')
        .trim();
    let marker = marker.trim_matches(|c| c == '\'' || c == '"');
    (!marker.is_empty()).then_some(marker)
}

/// A cursor over the lines between `*** Begin Patch` and `*** End Patch`.
struct Parser<'a> {
    lines: &'a [&'a str],
    check: PathCheck<'a>,
    at: usize,
    end: usize,
}

impl Parser<'_> {
    /// The next file operation, or `None` at the end of the patch.
    fn op(&mut self) -> Result<Option<Op>, String> {
        self.skip_blank();
        if self.at >= self.end {
            return Ok(None);
        }
        let number = self.at + 1;
        let header = self.lines[self.at].trim();
        self.at += 1;
        if let Some(path) = header.strip_prefix(ADD) {
            let path = self.path(path, number)?;
            let mut contents = String::new();
            while self.at < self.end && !self.section_ends() {
                let line = self.lines[self.at];
                let Some(text) = line.strip_prefix('+') else {
                    return Err(format!(
                        "line {}: `{line}` in `{ADD} {path}`: every line of an added file \
                         starts with `+` (a lone `+` for an empty line)",
                        self.at + 1
                    ));
                };
                contents.push_str(text);
                contents.push('\n');
                self.at += 1;
            }
            Ok(Some(Op::Add { path, contents }))
        } else if let Some(path) = header.strip_prefix(DELETE) {
            let path = self.path(path, number)?;
            if self.at < self.end && !self.section_ends() {
                return Err(format!(
                    "line {}: `{}` after `{DELETE} {path}`: a deleted file takes no lines",
                    self.at + 1,
                    self.lines[self.at]
                ));
            }
            Ok(Some(Op::Delete { path }))
        } else if let Some(path) = header.strip_prefix(UPDATE) {
            let path = self.path(path, number)?;
            let mut move_to = None;
            if self.at < self.end
                && let Some(dest) = self.lines[self.at].trim().strip_prefix(MOVE)
            {
                move_to = Some(self.path(dest, self.at + 1)?).filter(|dest| *dest != path);
                self.at += 1;
            }
            let chunks = self.chunks(&path)?;
            if chunks.is_empty() && move_to.is_none() {
                return Err(format!(
                    "line {number}: `{UPDATE} {path}` has no hunks; add `@@` hunks with \
                     ` `, `-` and `+` lines, or leave the file out of the patch"
                ));
            }
            Ok(Some(Op::Update {
                path,
                move_to,
                chunks,
            }))
        } else if header.starts_with("***") {
            Err(format!(
                "line {number}: unknown header `{header}`; a file section starts with \
                 `{ADD} PATH`, `{UPDATE} PATH` or `{DELETE} PATH`"
            ))
        } else {
            Err(format!(
                "line {number}: expected a file header (`{ADD} PATH`, `{UPDATE} PATH` or \
                 `{DELETE} PATH`), found `{header}`"
            ))
        }
    }

    /// The hunks of an `*** Update File:` section.
    fn chunks(&mut self, path: &str) -> Result<Vec<Chunk>, String> {
        let mut chunks: Vec<Chunk> = Vec::new();
        let mut current: Option<Chunk> = None;
        while self.at < self.end && !self.section_ends() {
            let number = self.at + 1;
            let line = self.lines[self.at];
            self.at += 1;
            if line.trim() == END_OF_FILE {
                match current.take() {
                    Some(mut chunk) if !chunk.lines.is_empty() => {
                        chunk.end_of_file = true;
                        chunks.push(chunk);
                    }
                    _ => {
                        return Err(format!(
                            "line {number}: `{END_OF_FILE}` must follow the lines of a hunk"
                        ));
                    }
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix("@@") {
                if let Some(chunk) = current.take() {
                    chunks.push(finished(chunk, chunks.len() + 1, path)?);
                }
                current = Some(Chunk {
                    context: hunk_context(rest),
                    lines: Vec::new(),
                    end_of_file: false,
                });
                continue;
            }
            let parsed = match line.chars().next() {
                // An empty line is an empty context line whose space was lost.
                None => Line::Keep(String::new()),
                Some(' ') => Line::Keep(line[1..].to_owned()),
                Some('-') => Line::Remove(line[1..].to_owned()),
                Some('+') => Line::Add(line[1..].to_owned()),
                Some(_) if line.trim_start().starts_with("***") => {
                    return Err(format!(
                        "line {number}: unknown header `{}` in `{UPDATE} {path}`; \
                         `{MOVE}` must directly follow `{UPDATE}`, and a new file section \
                         starts with `{ADD}`, `{UPDATE}` or `{DELETE}`",
                        line.trim()
                    ));
                }
                Some(_) => {
                    return Err(format!(
                        "line {number}: `{line}` in `{UPDATE} {path}`: every hunk line starts \
                         with ` ` (context), `-` (removed) or `+` (added); start a hunk with `@@`"
                    ));
                }
            };
            match &mut current {
                Some(chunk) => chunk.lines.push(parsed),
                // The first hunk may leave out its `@@` line, as Codex allows.
                None if chunks.is_empty() => {
                    current = Some(Chunk {
                        context: None,
                        lines: vec![parsed],
                        end_of_file: false,
                    });
                }
                None => {
                    return Err(format!(
                        "line {number}: start the hunk after `{END_OF_FILE}` with `@@`"
                    ));
                }
            }
        }
        if let Some(chunk) = current {
            chunks.push(finished(chunk, chunks.len() + 1, path)?);
        }
        Ok(chunks)
    }

    /// Whether the current line (and any blank lines) lead to the next file
    /// header or the end of the patch. Blank lines there separate sections;
    /// anywhere else in a hunk they are empty context lines.
    fn section_ends(&self) -> bool {
        let mut at = self.at;
        while at < self.end && self.lines[at].trim().is_empty() {
            at += 1;
        }
        at >= self.end || is_file_header(self.lines[at])
    }

    fn skip_blank(&mut self) {
        while self.at < self.end && self.lines[self.at].trim().is_empty() {
            self.at += 1;
        }
    }

    /// A header's path, trimmed and passed through the caller's check.
    fn path(&self, raw: &str, number: usize) -> Result<String, String> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(format!("line {number}: the header names no path"));
        }
        match (self.check)(raw) {
            Ok(path) => Ok(path),
            Err(e) => Err(format!("line {number}: {e}")),
        }
    }
}

fn is_file_header(line: &str) -> bool {
    let line = line.trim();
    [ADD, UPDATE, DELETE].iter().any(|h| line.starts_with(h))
}

fn finished(chunk: Chunk, number: usize, path: &str) -> Result<Chunk, String> {
    if chunk.lines.is_empty() {
        return Err(format!(
            "hunk {number} of `{UPDATE} {path}` has no lines after its `@@` line"
        ));
    }
    Ok(chunk)
}

/// The text after `@@`. A unified-diff range (`-12,5 +12,6 @@`) is dropped:
/// models write one from habit, and its numbers are not checked.
fn hunk_context(rest: &str) -> Option<String> {
    let mut text = rest.trim();
    if let Some(after) = strip_unified_range(text) {
        text = after.trim();
    }
    (!text.is_empty()).then(|| text.to_owned())
}

fn strip_unified_range(text: &str) -> Option<&str> {
    let is_range = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == ',');
    let (old, rest) = text.strip_prefix('-')?.split_once(' ')?;
    let (new, rest) = rest.trim_start().strip_prefix('+')?.split_once(' ')?;
    let rest = rest.trim_start().strip_prefix("@@")?;
    (is_range(old) && is_range(new)).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn as_written(raw: &str) -> Result<String, String> {
        Ok(raw.to_owned())
    }

    #[test]
    fn headers_and_hunks() {
        let patch = "*** Begin Patch\n*** Add File: a/x.txt\n+x\n*** Update File: b.txt\n\
                     *** Move to: c/y.txt\n@@\n-a\n+b\n  *** Delete File: d.txt \n*** End Patch";
        let ops = parse(patch, &as_written).unwrap();
        let paths: Vec<&str> = ops.iter().flat_map(Op::paths).collect();
        assert_eq!(paths, ["a/x.txt", "b.txt", "c/y.txt", "d.txt"]);
        assert_eq!(
            ops[1],
            Op::Update {
                path: "b.txt".into(),
                move_to: Some("c/y.txt".into()),
                chunks: vec![Chunk {
                    context: None,
                    lines: vec![Line::Remove("a".into()), Line::Add("b".into())],
                    end_of_file: false,
                }],
            }
        );
    }

    #[test]
    fn the_check_decides_about_paths() {
        let refuse = |raw: &str| Err(format!("`{raw}` is refused"));
        assert_eq!(
            parse(
                "*** Begin Patch\n*** Delete File: /etc/x\n*** End Patch",
                &refuse
            ),
            Err("line 2: `/etc/x` is refused".to_owned())
        );
        assert!(parse("*** Add File: x\n+x", &as_written).is_err());
        assert!(parse("", &as_written).is_err());
    }
}
