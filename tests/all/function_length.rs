//! Functions a reader can hold in their head: no function of the host's
//! crates (every `.rs` file under `host/` but its benchmarks) runs over
//! [`MAX_LINES`] lines, from its signature to its closing brace, unless a
//! `// long: <reason>` comment stands in the lines right above it (among its
//! doc comments and attributes). Test code (`#[cfg(test)]` modules and
//! `*tests.rs` files) is left out: a scenario reads top to bottom.
//!
//! The scan reads rustfmt's layout (a body closes with `}` at the
//! signature's indentation), which `cargo fmt --check` in CI keeps true.

use std::path::{Path, PathBuf};

/// The longest a function may be without a reason written beside it.
const MAX_LINES: usize = 120;

/// One function: where it starts, its name and its length in lines.
#[derive(Debug, PartialEq)]
struct Function {
    file: String,
    line: usize,
    name: String,
    lines: usize,
    reason: Option<String>,
}

/// The name of the function whose signature starts on `line`, if one does.
fn signature(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    if let Some(after) = rest.strip_prefix("pub") {
        rest = match after.strip_prefix('(') {
            Some(scoped) => scoped.split_once(')')?.1,
            None => after,
        };
        rest = rest.strip_prefix(' ')?;
    }
    for qualifier in ["const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(qualifier).unwrap_or(rest);
    }
    if rest.starts_with("extern \"") {
        rest = rest.splitn(3, '"').nth(2)?.trim_start();
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    (end > 0).then(|| &name[..end])
}

fn indent(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// The index of the line that closes the item opened on `lines[start]` at
/// its indentation, or `None` for a declaration without a body.
fn closing(lines: &[&str], start: usize) -> Option<usize> {
    let close = format!("{}}}", indent(lines[start]));
    let mut opened = false;
    for (i, line) in lines.iter().enumerate().skip(start) {
        opened |= line.contains('{');
        if i == start && line.trim_end().ends_with('}') {
            return Some(i);
        }
        if !opened && line.trim_end().ends_with(';') {
            return None;
        }
        if *line == close {
            return Some(i);
        }
    }
    None
}

/// The `// long:` reason among the comments and attributes right above
/// `lines[at]`.
fn reason(lines: &[&str], at: usize) -> Option<String> {
    lines[..at]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("//") || l.starts_with("#["))
        .find_map(|l| l.strip_prefix("// long:"))
        .map(|r| r.trim().to_owned())
}

/// Every function of one file, test modules left out.
fn functions(file: &str, text: &str) -> Vec<Function> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let test_module = line.trim() == "#[cfg(test)]"
            && lines.get(i + 1).is_some_and(|next| {
                let t = next.trim_start();
                t.starts_with("mod ")
                    || t.starts_with("pub mod ")
                    || t.starts_with("pub(crate) mod ")
            });
        if test_module {
            i = closing(&lines, i + 1).map_or(i + 1, |end| end + 1);
            continue;
        }
        if let Some(name) = signature(line)
            && let Some(end) = closing(&lines, i)
        {
            out.push(Function {
                file: file.to_owned(),
                line: i + 1,
                name: name.to_owned(),
                lines: end - i + 1,
                reason: reason(&lines, i),
            });
        }
        i += 1;
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if !path.ends_with("benches") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && !path.to_string_lossy().ends_with("tests.rs")
        {
            out.push(path);
        }
    }
}

/// Every function of the host's crates.
fn host_functions() -> Vec<Function> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf();
    let mut files = Vec::new();
    rust_files(&root.join("host"), &mut files);
    assert!(files.len() > 50, "the host's sources are under {root:?}");
    files
        .iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).expect("source");
            let name = path
                .strip_prefix(&root)
                .unwrap_or(path)
                .display()
                .to_string();
            functions(&name, &text)
        })
        .collect()
}

#[test]
fn the_scan_measures_what_rustfmt_lays_out() {
    let text = "\
/// Doc.
// long: a table of cases
#[allow(dead_code)]
pub(crate) async fn first(a: u32) -> u32 {
    let b = a;
    b
}

trait T {
    fn declared(&self);
    fn defaulted(&self) {}
}

fn second<F>(
    f: F,
) -> u32
where
    F: Fn() -> u32,
{
    f()
}

#[cfg(test)]
mod tests {
    fn hidden() {
        let _ = 1;
    }
}
";
    let found: Vec<(String, usize, usize, Option<String>)> = functions("x.rs", text)
        .into_iter()
        .map(|f| (f.name, f.line, f.lines, f.reason))
        .collect();
    assert_eq!(
        found,
        vec![
            ("first".into(), 4, 4, Some("a table of cases".into())),
            ("defaulted".into(), 11, 1, None),
            ("second".into(), 14, 8, None),
        ]
    );
}

#[test]
fn no_host_function_is_long_without_a_reason() {
    let all = host_functions();
    assert!(
        all.iter().any(|f| f.name == "from_layers"),
        "the scan finds the host's functions"
    );
    let long: Vec<String> = all
        .iter()
        .filter(|f| f.lines > MAX_LINES && f.reason.as_deref().is_none_or(str::is_empty))
        .map(|f| format!("{}:{} {} ({} lines)", f.file, f.line, f.name, f.lines))
        .collect();
    assert!(
        long.is_empty(),
        "{} host functions are over {MAX_LINES} lines without a `// long: <reason>` comment \
         above them; split them by the concepts they mix, or write why one must stay whole:\n{}",
        long.len(),
        long.join("\n")
    );
}
