//! Unified diffs for previews, in the form `git apply` and `patch -p1` accept.

use similar::TextDiff;
use std::fmt::Write as _;

/// Lines of unchanged context around each change, as `diff -u` and git use.
const CONTEXT_LINES: usize = 3;

/// One side of a change: the file's path and its content, or `None` when the
/// file does not exist on that side (created or deleted).
pub(crate) type Side<'a> = Option<(&'a str, &'a str)>;

/// The unified diff from `old` to `new`: `--- a/PATH` / `+++ b/PATH` headers
/// (`/dev/null` for a missing side) and `@@ -l,n +l,n @@` hunks.
///
/// Returns an empty string when nothing changes. A creation, deletion or
/// rename always gets its headers, even without hunks (an empty file, a pure
/// rename), so the reader still sees that a file appears, goes or moves.
pub(crate) fn unified(old: Side<'_>, new: Side<'_>) -> String {
    let old_text = old.map_or("", |(_, text)| text);
    let new_text = new.map_or("", |(_, text)| text);
    let old_name = old.map_or_else(|| "/dev/null".to_owned(), |(path, _)| format!("a/{path}"));
    let new_name = new.map_or_else(|| "/dev/null".to_owned(), |(path, _)| format!("b/{path}"));
    let same_file = matches!((old, new), (Some((a, _)), Some((b, _))) if a == b);

    let diff = TextDiff::from_lines(old_text, new_text);
    let mut udiff = diff.unified_diff();
    let mut hunks = String::new();
    for hunk in udiff.context_radius(CONTEXT_LINES).iter_hunks() {
        let _ = write!(hunks, "{hunk}");
    }
    if hunks.is_empty() && same_file {
        return String::new();
    }
    format!("--- {old_name}\n+++ {new_name}\n{hunks}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn change_in_the_middle_has_three_lines_of_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            unified(Some(("f.txt", old)), Some(("f.txt", new))),
            "--- a/f.txt\n+++ b/f.txt\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn new_file_comes_from_dev_null() {
        assert_eq!(
            unified(None, Some(("dir/new.txt", "a\nb\n"))),
            "--- /dev/null\n+++ b/dir/new.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        );
    }

    #[test]
    fn deleted_file_goes_to_dev_null() {
        assert_eq!(
            unified(Some(("old.txt", "a\n")), None),
            "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"
        );
    }

    #[test]
    fn missing_final_newline_is_marked() {
        assert_eq!(
            unified(Some(("f", "a\nb")), Some(("f", "a\nc"))),
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
        );
    }

    #[test]
    fn no_change_is_empty_but_empty_files_and_renames_are_not() {
        assert_eq!(unified(Some(("f", "a\n")), Some(("f", "a\n"))), "");
        assert_eq!(unified(None, Some(("e", ""))), "--- /dev/null\n+++ b/e\n");
        assert_eq!(
            unified(Some(("a.rs", "x\n")), Some(("b.rs", "x\n"))),
            "--- a/a.rs\n+++ b/b.rs\n"
        );
    }
}
