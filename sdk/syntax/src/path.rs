//! Paths resolved by their text alone: `.`, empty segments and `..` go,
//! without looking at the filesystem.
//!
//! That is exact only where no symlink can stand on the path (the kernel
//! proved it, or the path is only matched against a pattern and its
//! resolution is judged separately). Where symlinks count, `..` must be
//! left to the kernel: `link/..` is the parent of the link's target, not
//! the directory holding `link`.

/// A path with `.`, empty segments and `..` resolved by text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lexical<'a> {
    /// The path started with `/`.
    pub absolute: bool,
    /// Its segments. A relative path that climbs above its start begins
    /// with `..` segments; an absolute one drops a `..` at the root.
    pub parts: Vec<&'a str>,
}

impl Lexical<'_> {
    /// Whether the path leads above where it starts (`../x`, `a/../..`).
    pub fn climbs(&self) -> bool {
        self.parts.first() == Some(&"..")
    }
}

/// Resolves `path`'s `.`, empty segments and `..` by text, `/` being the
/// only separator.
pub fn lexical(path: &str) -> Lexical<'_> {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|s| *s != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    Lexical { absolute, parts }
}

/// [`lexical`] as text: a leading `/` kept, `.` for an empty relative path
/// (`./`, `a/..`), e.g. `./src//a/../b.rs` is `src/b.rs`.
pub fn normalize(path: &str) -> String {
    let l = lexical(path);
    let body = l.parts.join("/");
    if l.absolute {
        format!("/{body}")
    } else if body.is_empty() {
        ".".to_owned()
    } else {
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn normalises_by_text() {
        let cases = [
            ("", "."),
            (".", "."),
            ("./", "."),
            ("a/..", "."),
            ("./src//a/../b.rs", "src/b.rs"),
            ("../x", "../x"),
            ("a/../../x", "../x"),
            ("../../a/../b", "../../b"),
            ("/a/../../b", "/b"),
            ("/", "/"),
            ("a/b/", "a/b"),
            ("a\\b", "a\\b"),
        ];
        for (path, expected) in cases {
            assert_eq!(normalize(path), expected, "{path:?}");
        }
        assert!(lexical("a/../..").climbs());
        assert!(!lexical("a/../b").climbs());
        assert!(!lexical("/..").climbs());
    }
}
