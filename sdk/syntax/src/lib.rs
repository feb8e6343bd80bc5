//! The one parser of each little language that corral both judges on the
//! host and carries out in a plugin.
//!
//! When the permission policy judges a command line or a patch, it must
//! judge the same parse that runs, or a line can mean one thing to the
//! policy and another to the tool. So the host (policy, protected paths,
//! session log) and the wasm32 plugins (`shell`, `fs`) share this crate,
//! which has no dependencies and does no I/O:
//!
//! - [`shell`]: command lines split into words as a POSIX shell would,
//!   without expansion, and where a shell would be needed;
//! - [`wildcard`]: `*` patterns over plain text (tool names, words, JSON);
//! - [`path`]: lexical path normalisation;
//! - [`patch`]: the `apply_patch` envelope;
//! - [`file_name`]: text made safe as a file name.

pub mod patch;
pub mod path;
pub mod shell;

/// `*` matches any run of characters (including none); everything else is
/// literal. Used for tool names in rules and hook bindings, for the words
/// of a command pattern and for a rule's pattern over a call's JSON.
pub fn wildcard(pattern: &str, text: &str) -> bool {
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

/// `name` with every character other than an ASCII letter, digit, `-` or
/// `_` replaced by `_`: safe as one component of a file name on any
/// filesystem, never a path (`/`, `..`) and never hidden (`.`).
pub fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn wildcards() {
        let cases = [
            ("*", "", true),
            ("*", "anything", true),
            ("a*", "abc", true),
            ("*c", "abc", true),
            ("a*c*e", "abcde", true),
            ("a*c", "ab", false),
            ("abc", "abc", true),
            ("abc", "abcd", false),
            ("--package=corral*", "--package=corral-sdk", true),
            ("run_command", "run_command", true),
            ("run_command", "run_commands", false),
            ("git_*", "git_commit", true),
            ("git_*", "git_", true),
            ("git_*", "xgit_commit", false),
            ("*_file", "write_file", true),
            ("*_file", "write_files", false),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXcYb", false),
            ("ab*ba", "aba", false),
            ("é*", "éa", true),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(wildcard(pattern, text), expected, "{pattern} ~ {text}");
        }
    }

    #[test]
    fn file_names() {
        assert_eq!(file_name("call_1"), "call_1");
        assert_eq!(file_name("toolu.01:x"), "toolu_01_x");
        assert_eq!(file_name("../a/b c"), "___a_b_c");
        assert_eq!(file_name("é"), "_");
        assert_eq!(file_name(""), "");
    }
}
