//! What a plugin can make the host hold, beyond its own linear memory.
//!
//! The memory limiter only sees the guest's memories and tables. Everything
//! else a call creates lives in the host: resources in the store's table
//! (open files, streams, HTTP header maps), log lines, stream events, error
//! text, `describe` and `preview` results. Each has a budget here, so a
//! plugin with no grants cannot grow the host without bound, and each
//! overrun ends the call (or the load) with an error that names the limit.

use super::error::LoadError;
use crate::protocol::ToolSpec;
use std::fmt::Write as _;

/// Live resources (open files and directories, streams, pollables, HTTP
/// header maps and bodies) one call may hold at once; each is host memory
/// and may be a host file descriptor.
pub(crate) const MAX_HOST_OBJECTS: usize = 1024;

/// Bytes one HTTP header map may hold in the host (wasmtime's default is
/// 128 KiB). Real requests carry a few KiB of headers.
pub(crate) const FIELDS_SIZE_LIMIT: usize = 16 * 1024;

/// Bytes of `corral:plugin/host.log` lines kept per call; the rest is
/// counted and dropped.
pub(crate) const LOG_BYTES_PER_CALL: usize = 256 * 1024;

/// Stream events a provider may have in flight to the host; `emit` waits
/// while the channel is full, so a fast plugin cannot queue without bound.
pub const EVENT_CHANNEL_CAPACITY: usize = 16;

/// Bytes of a tool description the model sees; longer ones are cut and
/// flagged.
pub(crate) const MAX_DESCRIPTION: usize = 4096;

/// Longest tool name; model APIs refuse longer ones.
const MAX_TOOL_NAME: usize = 64;

/// The host-side budgets of one call, kept in its store.
pub(crate) struct CallBudget {
    /// Log bytes the plugin may still write through `host.log`.
    pub(crate) log_left: usize,
    /// Log bytes dropped once `log_left` ran out.
    pub(crate) log_dropped: usize,
    /// Largest stream event accepted (the output limit).
    pub(crate) event_bytes: usize,
    /// Set when an event over `event_bytes` ended the call.
    pub(crate) event_hit: Option<usize>,
}

impl CallBudget {
    pub(crate) fn new(output_cap: u64) -> Self {
        Self {
            log_left: LOG_BYTES_PER_CALL,
            log_dropped: 0,
            event_bytes: usize::try_from(output_cap).unwrap_or(usize::MAX),
            event_hit: None,
        }
    }

    /// Takes `len` bytes of log budget; false when the line must be dropped.
    pub(crate) fn take_log(&mut self, len: usize) -> bool {
        if len <= self.log_left {
            self.log_left -= len;
            true
        } else {
            self.log_left = 0;
            self.log_dropped = self.log_dropped.saturating_add(len);
            false
        }
    }
}

/// Why a call that failed with `err` failed, when a budget of this module
/// ended it.
pub(crate) fn explain(
    budget: &CallBudget,
    err: &wasmtime::Error,
    output_kb: u64,
) -> Option<String> {
    if let Some(size) = budget.event_hit {
        return Some(format!(
            "the plugin emitted a stream event of {size} bytes, over the limit of {output_kb} KiB \
             (limits.output_kb); stream smaller deltas or raise limits.output_kb"
        ));
    }
    let full = err.chain().any(|e| {
        e.downcast_ref::<wasmtime::component::ResourceTableError>()
            .is_some_and(|t| matches!(t, wasmtime::component::ResourceTableError::Full))
            || e.to_string().contains("resource table has no free keys")
    });
    full.then(|| {
        format!(
            "the call held more than {MAX_HOST_OBJECTS} host objects at once (open files, \
             streams, HTTP header maps); a plugin must drop what it no longer uses"
        )
    })
}

/// The last lines a crashed plugin wrote, without the hint Rust's panic
/// handler adds for developers (`RUST_BACKTRACE=1` means nothing to a user
/// and cannot be set for a sandboxed plugin anyway).
pub(crate) fn without_backtrace_hint(tail: &str) -> String {
    let kept: Vec<&str> = tail
        .lines()
        .filter(|l| !l.contains("RUST_BACKTRACE"))
        .collect();
    kept[kept.len().saturating_sub(3)..].join("\n")
}

/// Cuts `text` to at most `cap` bytes (on a character boundary), saying so.
pub(crate) fn cap_text(mut text: String, cap: u64, what: &str) -> String {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    if text.len() <= cap {
        return text;
    }
    let total = text.len();
    let mut cut = cap;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    let _ = write!(
        text,
        " […{what} cut at {cap} of {total} bytes (limits.output_kb)]"
    );
    text
}

/// Cuts `text` to at most `max` bytes (on a character boundary) and marks
/// the cut with ` […]`; a shorter text is left as it is.
pub(crate) fn cut_marked(text: &mut String, max: usize) {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(" […]");
    }
}

/// Whether `name` is a tool name every model API accepts:
/// `^[a-zA-Z0-9_-]{1,64}$`.
pub(crate) fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks what `describe` returned: its size against the output limit and
/// every tool name; flags and cuts descriptions a model should not read
/// as they are.
pub(crate) fn vet_tools(
    plugin: &str,
    origin: &str,
    tools: &mut [ToolSpec],
    output_kb: u64,
) -> Result<(), LoadError> {
    let size: usize = tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len())
        .sum();
    if size as u64 > output_kb.saturating_mul(1024) {
        return Err(LoadError(format!(
            "plugin `{plugin}` ({origin}): `describe` returned {size} bytes, over the limit of \
             {output_kb} KiB (limits.output_kb); shorten the tool descriptions and schemas or \
             raise limits.output_kb"
        )));
    }
    for tool in tools.iter_mut() {
        if !valid_tool_name(&tool.name) {
            return Err(LoadError(format!(
                "plugin `{plugin}` ({origin}): tool name {:?} is not allowed: a tool name is 1 to \
                 {MAX_TOOL_NAME} letters, digits, `_` or `-`; rename the tool in the plugin, or \
                 set `enabled = false` on [plugins.{plugin}]",
                tool.name
            )));
        }
        let (description, warnings) = vet_description(&tool.description);
        tool.description = description;
        tool.warnings = warnings;
    }
    Ok(())
}

/// The description the model may see (invisible and control characters
/// written as visible escapes, at most [`MAX_DESCRIPTION`] bytes) and what
/// was wrong with the original.
fn vet_description(original: &str) -> (String, Vec<String>) {
    let mut warnings = Vec::new();
    let invisible: Vec<char> = original
        .chars()
        .filter(|&c| crate::terminal::is_invisible(c))
        .collect();
    if !invisible.is_empty() {
        let mut kinds: Vec<String> = invisible
            .iter()
            .map(|c| format!("U+{:04X}", *c as u32))
            .collect();
        kinds.dedup();
        kinds.truncate(5);
        warnings.push(format!(
            "description holds {} invisible Unicode characters ({}); the model sees them escaped",
            invisible.len(),
            kinds.join(", ")
        ));
    }
    let controls = original
        .chars()
        .filter(|&c| c.is_control() && c != '\n' && c != '\t')
        .count();
    if controls > 0 {
        warnings.push(format!(
            "description holds {controls} control characters (terminal escape sequences); \
             the model sees them escaped"
        ));
    }
    let mut description = crate::terminal::inert(original).into_owned();
    if description.len() > MAX_DESCRIPTION {
        warnings.push(format!(
            "description is {} bytes long; the model sees its first {MAX_DESCRIPTION}",
            original.len()
        ));
    }
    cut_marked(&mut description, MAX_DESCRIPTION);
    (description, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_follow_the_model_apis() {
        assert!(valid_tool_name("read_file"));
        assert!(valid_tool_name("git-log2"));
        assert!(valid_tool_name(&"a".repeat(64)));
        assert!(!valid_tool_name(&"a".repeat(65)));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("bad name"));
        assert!(!valid_tool_name("red\x1b[31m"));
        assert!(!valid_tool_name("ünïcode"));
    }

    #[test]
    fn descriptions_are_flagged_escaped_and_cut() {
        let (d, w) = vet_description("Reads a file.");
        assert_eq!((d.as_str(), w.len()), ("Reads a file.", 0));
        let (d, w) = vet_description("ok\u{200b}\u{e0041}\x1b]52;c;eA==\x07");
        assert_eq!(d, "ok\\u{200b}\\u{e0041}\\x1b]52;c;eA==\\x07");
        assert_eq!(w.len(), 2, "{w:?}");
        let (d, w) = vet_description(&"é".repeat(5000));
        assert!(d.len() <= MAX_DESCRIPTION + 8, "{}", d.len());
        assert!(w[0].contains("10000 bytes long"), "{w:?}");
    }

    #[test]
    fn text_is_capped_on_a_char_boundary() {
        assert_eq!(cap_text("short".into(), 10, "error"), "short");
        let t = cap_text("ééé".into(), 3, "error");
        assert!(t.starts_with("é […error cut at 3 of 6 bytes"), "{t}");
    }

    #[test]
    fn the_backtrace_hint_is_dropped() {
        let tail = "thread 'main' panicked at src/lib.rs:1:1:\nboom\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace";
        assert_eq!(
            without_backtrace_hint(tail),
            "thread 'main' panicked at src/lib.rs:1:1:\nboom"
        );
    }
}
