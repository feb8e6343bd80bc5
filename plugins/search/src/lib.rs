//! corral's search tools, compiled to a WASI 0.2 component and embedded in the
//! `corral` binary as `builtin:search`. They use ripgrep's own crates
//! (`ignore`, `grep-regex`, `grep-searcher`), single-threaded because
//! `wasm32-wasip2` has no threads.
//!
//! The same code also compiles natively; the runtime benchmark uses that to
//! compare the sandboxed search with the native one.

use corral_sdk::{Effect, Error, Output, Result, Tool, io_error, tools, workspace_path};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, Sink, SinkContext, SinkMatch};
use schemars::JsonSchema;
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::Path;

mod prefilter;
mod sys;

fn default_dot() -> String {
    ".".to_owned()
}

/// Arguments of `grep`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression (Rust regex syntax, like ripgrep).
    pub pattern: String,
    /// File or directory to search, relative to the workspace root. Default the root.
    #[serde(default = "default_dot")]
    pub path: String,
    /// Only search files whose path matches one of these globs, e.g. `*.rs` or `src/**`.
    #[serde(default)]
    pub include: Vec<String>,
    /// Skip files whose path matches one of these globs.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Match case-insensitively. Default false.
    #[serde(default)]
    pub ignore_case: bool,
    /// Treat `pattern` as a literal string, not a regex. Default false.
    #[serde(default)]
    pub fixed_strings: bool,
    /// Lines of context to show before and after each match. Default 0.
    #[serde(default)]
    pub context: usize,
    /// Stop after this many matching lines. Default 200.
    #[serde(default)]
    pub max_results: Option<usize>,
    /// List only the paths of matching files. Default false.
    #[serde(default)]
    pub files_only: bool,
    /// Also search hidden and .gitignore'd files. Default false.
    #[serde(default)]
    pub all: bool,
}

/// `grep`: regex search over the workspace.
pub struct Grep;

impl Tool for Grep {
    type Args = GrepArgs;
    const NAME: &'static str = "grep";
    const DESCRIPTION: &'static str = "Search file contents with a regular expression \
        (ripgrep's engine), respecting .gitignore. Prints `path:line:text` for each match \
        (`path-line-text` for context lines). Filter files with `include`/`exclude` globs.";
    const EFFECTS: &'static [Effect] = &[Effect::Read];

    fn run(args: GrepArgs) -> Result<Output> {
        grep(&args)
    }
}

struct Line {
    number: u64,
    text: String,
    is_match: bool,
}

/// Collects matching and context lines of one file, up to a budget.
struct Collect<'a> {
    lines: &'a mut Vec<Line>,
    matches: usize,
    budget: usize,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &grep_searcher::Searcher, m: &SinkMatch<'_>) -> std::io::Result<bool> {
        let first = m.line_number().unwrap_or(0);
        for (i, line) in m.lines().enumerate() {
            if self.matches >= self.budget {
                return Ok(false);
            }
            self.matches += 1;
            self.lines.push(Line {
                number: first + i as u64,
                text: trim_line(line),
                is_match: true,
            });
        }
        Ok(self.matches < self.budget)
    }

    fn context(
        &mut self,
        _: &grep_searcher::Searcher,
        c: &SinkContext<'_>,
    ) -> std::io::Result<bool> {
        self.lines.push(Line {
            number: c.line_number().unwrap_or(0),
            text: trim_line(c.bytes()),
            is_match: false,
        });
        Ok(true)
    }
}

fn trim_line(bytes: &[u8]) -> String {
    const MAX: usize = 500;
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    if text.chars().count() > MAX {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut} [...]")
    } else {
        text.to_owned()
    }
}

/// The compiled pattern of `args`, or why it cannot be searched for.
fn matcher(args: &GrepArgs) -> Result<grep_regex::RegexMatcher> {
    // ripgrep's defaults (100 MiB for the compiled program, 1000 MiB for
    // the lazy DFA) exceed the plugin's memory limit: a pattern such as
    // `a{1000}{1000}` would end in an out-of-memory trap instead of an answer.
    RegexMatcherBuilder::new()
        .case_insensitive(args.ignore_case)
        .fixed_strings(args.fixed_strings)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
        .build(&args.pattern)
        .map_err(|e| {
            let e = e.to_string();
            if e.contains("size limit") {
                Error::InvalidArguments(format!(
                    "pattern too large: compiled, `pattern` would exceed {} MiB; \
                     use a smaller repetition count or a simpler pattern",
                    REGEX_SIZE_LIMIT >> 20
                ))
            } else {
                Error::InvalidArguments(format!("`pattern` is not a valid regex: {e}"))
            }
        })
}

/// Bytes a compiled pattern may take.
const REGEX_SIZE_LIMIT: usize = 8 << 20;
/// Bytes the lazy DFA's cache may take while searching.
const REGEX_DFA_SIZE_LIMIT: usize = 16 << 20;

/// The search itself, callable natively as well as from the component.
pub fn grep(args: &GrepArgs) -> Result<Output> {
    let root = workspace_path(&args.path)?;
    let root_is_dir = std::fs::metadata(&root)
        .map_err(|e| io_error(&args.path, &e))?
        .is_dir();
    let matcher = matcher(args)?;
    let fast = prefilter::Prefiltered::new(
        &matcher,
        &args.pattern,
        args.ignore_case,
        args.fixed_strings,
    );
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .before_context(args.context)
        .after_context(args.context)
        .binary_detection(BinaryDetection::quit(0))
        .build();
    let max = args.max_results.unwrap_or(200).max(1);

    let fs = sys::Fs;
    let mut out = String::new();
    let mut files_found: Vec<String> = Vec::new();
    let mut total = 0usize;
    let mut truncated = false;
    let paths = walk(&root, root_is_dir, &args.include, &args.exclude, args.all)?;
    'files: for batch in paths.chunks(fs.batch()) {
        for (entry, content) in batch.iter().zip(fs.read_many(batch)) {
            if total >= max {
                truncated = true;
                break 'files;
            }
            let mut lines = Vec::new();
            let mut sink = Collect {
                lines: &mut lines,
                matches: 0,
                budget: if args.files_only { 1 } else { max - total },
            };
            let searched = match content {
                Some(bytes) => match &fast {
                    Some(fast) => {
                        fast.start();
                        searcher.search_slice(fast, &bytes, &mut sink)
                    }
                    None => searcher.search_slice(&matcher, &bytes, &mut sink),
                },
                None => searcher.search_path(&matcher, entry, &mut sink),
            };
            if searched.is_err() {
                continue;
            }
            let found = sink.matches;
            if found == 0 {
                continue;
            }
            let shown = display_path(entry);
            if args.files_only {
                total += 1;
            } else {
                total += found;
                let mut prev: Option<u64> = None;
                for line in &lines {
                    if args.context > 0 && prev.is_some_and(|p| line.number > p + 1) {
                        out.push_str("--\n");
                    }
                    let sep = if line.is_match { ':' } else { '-' };
                    let _ = writeln!(out, "{shown}{sep}{}{sep}{}", line.number, line.text);
                    prev = Some(line.number);
                }
            }
            files_found.push(shown);
        }
    }
    let files = files_found;
    if args.files_only {
        out = files.join("\n");
        if !out.is_empty() {
            out.push('\n');
        }
    }
    if total == 0 {
        out = format!("no matches for `{}` under `{}`\n", args.pattern, args.path);
    } else if truncated {
        let _ = writeln!(
            out,
            "[stopped after {max} results; narrow the pattern, `path` or `include`, or raise `max_results`]"
        );
    }
    Ok(Output::text(out).with_data(serde_json::json!({
        "matches": total,
        "files": files,
        "truncated": truncated,
    })))
}

/// Files under `root` in path order, honouring ignore files and the globs.
fn walk(
    root: &Path,
    root_is_dir: bool,
    include: &[String],
    exclude: &[String],
    all: bool,
) -> Result<Vec<std::path::PathBuf>> {
    let mut overrides = ignore::overrides::OverrideBuilder::new(root);
    for glob in include {
        overrides
            .add(glob)
            .map_err(|e| Error::InvalidArguments(format!("include glob `{glob}`: {e}")))?;
    }
    for glob in exclude {
        overrides
            .add(&format!("!{glob}"))
            .map_err(|e| Error::InvalidArguments(format!("exclude glob `{glob}`: {e}")))?;
    }
    let overrides = overrides
        .build()
        .map_err(|e| Error::InvalidArguments(format!("globs: {e}")))?;
    Ok(corral_walk::files(root, root_is_dir, overrides, all))
}

/// Arguments of `glob`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// Glob over paths relative to `path`, e.g. `**/*.rs` or `src/*.toml`.
    pub pattern: String,
    /// Directory to search from, relative to the workspace root. Default the root.
    #[serde(default = "default_dot")]
    pub path: String,
    /// Maximum number of paths to return. Default 500.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Also match hidden and .gitignore'd files. Default false.
    #[serde(default)]
    pub all: bool,
}

/// `glob`: find files by name pattern.
pub struct Glob;

impl Tool for Glob {
    type Args = GlobArgs;
    const NAME: &'static str = "glob";
    const DESCRIPTION: &'static str = "Find files whose path matches a glob (`**/*.rs`, \
        `src/**/mod.rs`), respecting .gitignore. Returns workspace-relative paths.";
    const EFFECTS: &'static [Effect] = &[Effect::Read];

    fn run(args: GlobArgs) -> Result<Output> {
        let root = workspace_path(&args.path)?;
        let root_is_dir = std::fs::metadata(&root)
            .map_err(|e| io_error(&args.path, &e))?
            .is_dir();
        let glob = globset::GlobBuilder::new(&args.pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| Error::InvalidArguments(format!("`pattern` is not a valid glob: {e}")))?
            .compile_matcher();
        let limit = args.limit.unwrap_or(500).max(1);
        let mut found = Vec::new();
        let mut truncated = false;
        for path in walk(&root, root_is_dir, &[], &[], args.all)? {
            let rel = corral_walk::below(&path, &root);
            if glob.is_match(rel) {
                if found.len() >= limit {
                    truncated = true;
                    break;
                }
                found.push(display_path(&path));
            }
        }
        let mut content = if found.is_empty() {
            format!("no files match `{}` under `{}`", args.pattern, args.path)
        } else {
            found.join("\n")
        };
        if truncated {
            let _ = write!(
                content,
                "\n[stopped at {limit} paths; narrow the pattern or raise `limit`]"
            );
        }
        Ok(Output::text(content).with_data(serde_json::json!({
            "paths": found,
            "truncated": truncated,
        })))
    }
}

fn display_path(path: &Path) -> String {
    let s = path.to_string_lossy().replace('\\', "/");
    s.strip_prefix("./").unwrap_or(&s).to_owned()
}

tools!(Grep, Glob);

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "a test fails loudly at the first surprise"
)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_too_large_for_the_plugin_memory_is_refused() {
        let args: GrepArgs =
            serde_json::from_value(serde_json::json!({"pattern": "a{1000}{1000}"})).unwrap();
        match matcher(&args) {
            Err(Error::InvalidArguments(m)) => assert!(m.starts_with("pattern too large"), "{m}"),
            Err(e) => panic!("{e:?}"),
            Ok(_) => panic!("compiled"),
        }
        let args: GrepArgs =
            serde_json::from_value(serde_json::json!({"pattern": r"fn \w+\("})).unwrap();
        assert!(matcher(&args).is_ok());
    }
}
