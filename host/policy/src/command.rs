//! Command lines: word splitting as a shell does it, compound lines cut at
//! their control operators, wrappers looked through, and matching a rule's
//! command pattern word by word.

use super::patterns::wildcard;
use corral_syntax::shell;

/// Splits a command line into words the way a POSIX shell would, without
/// any expansion: [`corral_syntax::shell::words`], the lexer the `shell`
/// plugin splits with, so the policy judges the words that run. Operators
/// such as `;` or `|` are not special here: they stay in words.
///
/// Returns `None` when a quote is left open or the line ends in a lone
/// backslash (which the plugin refuses to run).
pub fn shell_split(line: &str) -> Option<Vec<String>> {
    shell::words(line).ok()
}

pub(super) fn split_or_whitespace(line: &str) -> Vec<String> {
    shell_split(line).unwrap_or_else(|| line.split_whitespace().map(str::to_owned).collect())
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
pub(super) fn loose_forms(words: &[String], depth: usize, out: &mut Vec<Vec<String>>) {
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

pub(super) fn line_forms(line: &str, depth: usize, out: &mut Vec<Vec<String>>) {
    for segment in shell::segments(line) {
        loose_forms(&split_or_whitespace(segment), depth, out);
    }
}

/// Matches a command pattern against a word list. `*` as a word is one word
/// (one or more when it is the last word, so `rm *` covers `rm -rf /`), `**`
/// as a word is any number of words, and `*` inside a word is a wildcard.
/// Loosely, the programs are compared by basename, so `/bin/rm` is `rm`;
/// strictly they are not, so an allow rule for `cargo` never runs `./cargo`.
pub(super) fn command_match(pattern: &[String], words: &[String], loose: bool) -> bool {
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
