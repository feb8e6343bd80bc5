//! Command lines as a POSIX shell reads them, without any expansion.
//!
//! One lexer serves three readers, so they can never disagree on quoting:
//! [`argv`] (what the `shell` plugin runs without a shell), [`words`] (the
//! permission policy's word list, operators kept as text) and [`segments`]
//! (the policy's cut of a compound line at its control operators).
//!
//! Quoting follows POSIX sh: single quotes are literal; inside double quotes
//! a backslash escapes only `$`, `` ` ``, `"`, `\` and a newline, and stays
//! before any other character; outside quotes a backslash makes the next
//! character literal. A backslash-newline is a line continuation wherever it
//! is not single-quoted: both characters vanish. Two lines have no meaning
//! a shell agrees on, and every reader refuses them alike
//! ([`Incomplete`]): a quote left open, and a line that ends in a lone
//! backslash (`sh -c` keeps it, a script file drops it).

use std::fmt;

/// Why a command line is not complete. No reader guesses what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incomplete {
    /// A `'` is never closed.
    SingleQuote,
    /// A `"` is never closed.
    DoubleQuote,
    /// The line ends in a backslash that escapes nothing.
    TrailingBackslash,
}

impl Incomplete {
    /// What to do about it, for an error message.
    pub fn fix(self) -> &'static str {
        match self {
            Incomplete::SingleQuote | Incomplete::DoubleQuote => {
                "close the quote, or give the program and its arguments as `argv`"
            }
            Incomplete::TrailingBackslash => {
                "remove it, or write a literal backslash as `\\\\` or `'\\'`"
            }
        }
    }
}

impl fmt::Display for Incomplete {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Incomplete::SingleQuote => "a single quote (`'`) is never closed",
            Incomplete::DoubleQuote => "a double quote (`\"`) is never closed",
            Incomplete::TrailingBackslash => "the line ends in a backslash that escapes nothing",
        })
    }
}

/// Why a command line has no argv of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The line is not complete.
    Incomplete(Incomplete),
    /// The line uses shell syntax that only a shell carries out (operators,
    /// redirection, substitution, globbing, a comment); the text names it,
    /// e.g. `` `|` ``.
    NeedsShell(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Incomplete(why) => why.fmt(f),
            Refusal::NeedsShell(what) => f.write_str(what),
        }
    }
}

/// One character of a command line, as the lexer classifies it.
#[derive(Clone, Copy)]
enum Lex {
    /// A character of a word made literal by quotes or a backslash.
    /// `expands` marks a `$` or `` ` `` inside double quotes: literal to
    /// these readers, a substitution to a shell.
    Literal { c: char, expands: bool },
    /// An unquoted, unescaped character other than whitespace: a word's
    /// character here, possibly an operator or a glob to a shell.
    Plain(char),
    /// Unquoted whitespace (a newline among it ends a command in a shell).
    Blank(char),
    /// A quote opened: a word starts even if it stays empty (`''`).
    Open,
}

/// A character made literal by quotes or a backslash.
fn literal(c: char) -> Lex {
    Lex::Literal { c, expands: false }
}

/// Runs `each` over every character of `line` with its byte offset, quotes
/// and escapes removed; stops at the first error `each` returns. At the end,
/// an unclosed quote or a lone trailing backslash is an error.
fn lex(line: &str, mut each: impl FnMut(usize, Lex) -> Result<(), Refusal>) -> Result<(), Refusal> {
    let incomplete = |why| Err(Refusal::Incomplete(why));
    let mut chars = line.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' => {
                each(i, Lex::Open)?;
                loop {
                    match chars.next() {
                        Some((_, '\'')) => break,
                        Some((j, x)) => each(j, literal(x))?,
                        None => return incomplete(Incomplete::SingleQuote),
                    }
                }
            }
            '"' => {
                each(i, Lex::Open)?;
                loop {
                    match chars.next() {
                        Some((_, '"')) => break,
                        Some((j, '\\')) => match chars.next() {
                            Some((_, '\n')) => {}
                            Some((k, x @ ('"' | '\\' | '$' | '`'))) => each(k, literal(x))?,
                            Some((k, x)) => {
                                each(j, literal('\\'))?;
                                each(k, literal(x))?;
                            }
                            None => return incomplete(Incomplete::DoubleQuote),
                        },
                        Some((j, x)) => each(
                            j,
                            Lex::Literal {
                                c: x,
                                expands: matches!(x, '$' | '`'),
                            },
                        )?,
                        None => return incomplete(Incomplete::DoubleQuote),
                    }
                }
            }
            '\\' => match chars.next() {
                Some((_, '\n')) => {}
                Some((j, x)) => each(j, literal(x))?,
                None => return incomplete(Incomplete::TrailingBackslash),
            },
            c if c.is_whitespace() => each(i, Lex::Blank(c))?,
            c => each(i, Lex::Plain(c))?,
        }
    }
    Ok(())
}

/// Splits `line` into words with `shell_syntax` refused or kept as text.
fn split(line: &str, shell_syntax: bool) -> Result<Vec<String>, Refusal> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let needs = |what: String| Err(Refusal::NeedsShell(what));
    lex(line, |i, lex| {
        match lex {
            Lex::Literal { c, expands } => {
                if shell_syntax && expands {
                    return needs(format!("`{c}` (substitution)"));
                }
                word.push(c);
                in_word = true;
            }
            Lex::Open => in_word = true,
            Lex::Blank(c) => {
                // A newline between two commands is a separator, as `;` is;
                // blank lines around a single command change nothing.
                if shell_syntax
                    && c == '\n'
                    && (in_word || !words.is_empty())
                    && !line[i..].trim().is_empty()
                {
                    return needs("a newline (a second command)".to_owned());
                }
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            Lex::Plain(c) => {
                if shell_syntax {
                    match c {
                        '|' | '&' | ';' | '<' | '>' | '(' | ')' | '$' | '`' => {
                            return needs(format!("`{c}`"));
                        }
                        '*' | '?' | '[' | '{' if !in_word => {
                            return needs(format!("`{c}` (globbing or expansion)"));
                        }
                        '~' => return needs("`~` (globbing or expansion)".to_owned()),
                        '#' if !in_word => return needs("`#` (a comment)".to_owned()),
                        _ => {}
                    }
                }
                word.push(c);
                in_word = true;
            }
        }
        Ok(())
    })?;
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// The argv a command line runs as without a shell, or why it cannot:
/// [`Refusal::NeedsShell`] for shell syntax (`|`, `&`, `;`, `<`, `>`, `(`,
/// `)`, `$` and `` ` `` anywhere a shell would see them, a newline between
/// commands, `~`, and `*`, `?`, `[`, `{` or `#` starting a word), which
/// only `sh -c` carries out; [`Refusal::Incomplete`] for a line no shell
/// would run as written. A glob character inside a word (`src/*.rs`) stays
/// literal, as it does for the policy.
pub fn argv(line: &str) -> Result<Vec<String>, Refusal> {
    split(line, true)
}

/// The words of a command line with quotes removed and nothing expanded,
/// as [`argv`] reads them, but with shell syntax kept as text: `a;b` is
/// one word here. The permission policy matches its patterns against these
/// (after cutting the line into [`segments`]).
pub fn words(line: &str) -> Result<Vec<String>, Incomplete> {
    split(line, false).map_err(|refusal| match refusal {
        Refusal::Incomplete(why) => why,
        // `split` without shell syntax refuses nothing else.
        Refusal::NeedsShell(_) => Incomplete::TrailingBackslash,
    })
}

/// The commands of a compound line: `line` cut at its unquoted control
/// operators (`;`, `&`, `|`, newline) with the quoting of [`argv`], blank
/// ones left out. An incomplete line is cut as far as it goes. (Whether a
/// line needs a shell at all, redirection and substitution included, is
/// [`argv`]'s answer.)
pub fn segments(line: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let _ = lex(line, |i, lex| {
        if let Lex::Plain(c @ (';' | '&' | '|')) | Lex::Blank(c @ '\n') = lex {
            parts.push(&line[start..i]);
            start = i + c.len_utf8();
        }
        Ok(())
    });
    parts.push(&line[start..]);
    parts.retain(|s| !s.trim().is_empty());
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn owned(ws: &[&str]) -> Vec<String> {
        ws.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn words_unquote_without_expanding() {
        use Incomplete::*;
        let cases: &[(&str, Result<&[&str], Incomplete>)] = &[
            ("", Ok(&[])),
            ("   ", Ok(&[])),
            ("rm -rf /", Ok(&["rm", "-rf", "/"])),
            (" rm\t -rf \n / ", Ok(&["rm", "-rf", "/"])),
            ("'a b' c", Ok(&["a b", "c"])),
            (r#"'a\"b'"#, Ok(&[r#"a\"b"#])),
            (r#""a \"b\" \\ \$HOME \x""#, Ok(&[r#"a "b" \ $HOME \x"#])),
            (r"a\ b \'c\' \\", Ok(&["a b", "'c'", "\\"])),
            ("r''m \"\" ''", Ok(&["rm", "", ""])),
            ("a\"b c\"'d e'f", Ok(&["ab cd ef"])),
            ("$HOME *.rs ~ a;b", Ok(&["$HOME", "*.rs", "~", "a;b"])),
            ("a\\\nb", Ok(&["ab"])),
            ("a \\\n b", Ok(&["a", "b"])),
            ("\"a\\\nb\"", Ok(&["ab"])),
            ("'a\\\nb'", Ok(&["a\\\nb"])),
            ("'open", Err(SingleQuote)),
            ("\"open", Err(DoubleQuote)),
            ("\"a\\\"", Err(DoubleQuote)),
            ("trailing\\", Err(TrailingBackslash)),
            ("\\", Err(TrailingBackslash)),
        ];
        for (line, expected) in cases {
            assert_eq!(words(line), expected.map(owned), "{line:?}");
        }
    }

    #[test]
    fn argv_refuses_what_needs_a_shell() {
        assert_eq!(
            argv("cargo  test   -p x").unwrap(),
            ["cargo", "test", "-p", "x"]
        );
        assert_eq!(
            argv(r#"echo 'a b' "c \"d\"" e\ f"#).unwrap(),
            ["echo", "a b", r#"c "d""#, "e f"]
        );
        assert_eq!(
            argv("git log --format=%H").unwrap(),
            ["git", "log", "--format=%H"]
        );
        assert_eq!(argv("ls src/*.rs").unwrap(), ["ls", "src/*.rs"]);
        assert_eq!(argv("ls '*.rs' \\*").unwrap(), ["ls", "*.rs", "*"]);
        assert_eq!(argv("a\\;b a#b").unwrap(), ["a;b", "a#b"]);
        assert_eq!(argv("\n ls -l \n\n").unwrap(), ["ls", "-l"]);
        assert_eq!(
            argv("cargo test \\\n  -p x").unwrap(),
            ["cargo", "test", "-p", "x"]
        );
        for line in [
            "ls | wc",
            "a > b",
            "a && b",
            "echo $(id)",
            "echo \"$HOME\"",
            "echo ~/x",
            "ls *.rs",
            "echo a # note",
            "echo a\nrm b",
        ] {
            assert!(
                matches!(argv(line), Err(Refusal::NeedsShell(_))),
                "{line:?}: {:?}",
                argv(line)
            );
        }
        assert_eq!(
            argv("echo 'unclosed"),
            Err(Refusal::Incomplete(Incomplete::SingleQuote))
        );
        assert_eq!(
            argv("echo a\\"),
            Err(Refusal::Incomplete(Incomplete::TrailingBackslash))
        );
        // Shell syntax decides before the end of the line is reached: a
        // shell reads quotes inside `$( )` afresh, which this lexer cannot.
        assert!(matches!(
            argv("echo \"$(printf \"it's\")\""),
            Err(Refusal::NeedsShell(_))
        ));
    }

    #[test]
    fn argv_and_words_agree_where_argv_answers() {
        for line in [
            "a\\\nb",
            "\"a\\\nb\"",
            "'a\\\nb'",
            "printf '%s\\n' \"x y\" z\\ w",
            "a -- -b",
            "",
        ] {
            assert_eq!(argv(line).ok(), words(line).ok(), "{line:?}");
        }
    }

    #[test]
    fn segments_cut_at_unquoted_operators() {
        assert_eq!(segments("a; b && c | d"), ["a", " b ", " c ", " d"]);
        assert_eq!(segments("a ';' \"|\" \\&"), ["a ';' \"|\" \\&"]);
        assert_eq!(segments("a\nb"), ["a", "b"]);
        assert_eq!(segments("a\\\nb"), ["a\\\nb"]);
        assert_eq!(segments("a 'open; b"), ["a 'open; b"]);
        assert!(segments(" ;\n ").is_empty());
    }
}
