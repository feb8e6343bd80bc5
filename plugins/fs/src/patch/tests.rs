use super::*;
use pretty_assertions::assert_eq;
use std::collections::BTreeMap;

type Files = BTreeMap<String, String>;

/// Paths and texts, as [`files`] takes them.
type Entries<'a> = &'a [(&'a str, &'a str)];

fn files(entries: &[(&str, &str)]) -> Files {
    entries
        .iter()
        .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
        .collect()
}

fn plan_on(patch: &str, files: &Files) -> Result<Vec<Change>> {
    let read = |path: &str| Ok(files.get(path).cloned());
    plan(patch, &read)
}

/// The workspace after the patch, as `write` would leave it.
fn apply(patch: &str, before: &Files) -> Files {
    let changes = plan_on(patch, before).unwrap_or_else(|e| panic!("patch failed: {e}"));
    let mut after = before.clone();
    for change in changes {
        if change.new.is_none() || change.move_to.is_some() {
            after.remove(&change.path);
        }
        if let Some(new) = &change.new {
            after.insert(change.dest().to_owned(), new.clone());
        }
    }
    after
}

/// The message of a failed plan; panics if the patch applied.
fn error(patch: &str, before: &Files) -> Error {
    match plan_on(patch, before) {
        Ok(changes) => panic!("patch applied: {changes:?}"),
        Err(e) => e,
    }
}

fn failure(patch: &str, before: &Files) -> String {
    match error(patch, before) {
        Error::Failed(m) => m,
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// The patch fails with a message starting `start`.
fn assert_fails(patch: &str, before: &Files, start: &str) {
    let message = failure(patch, before);
    assert!(message.starts_with(start), "{message}");
}

/// The patch fails with a message that says `part`.
fn assert_fails_with(patch: &str, before: &Files, part: &str) {
    let message = failure(patch, before);
    assert!(message.contains(part), "{message}");
}

/// The patch applies: the files after it, its summary and its preview.
fn assert_applies(patch: &str, before: &Files, after: &Files, summary_: &str, preview: &str) {
    assert_eq!(&apply(patch, before), after);
    let changes = plan_on(patch, before).unwrap();
    assert_eq!(summary(&changes), summary_);
    assert_eq!(preview_of(&changes), preview);
}

fn invalid_patch(patch: &str) -> String {
    match error(patch, &Files::new()) {
        Error::InvalidArguments(m) => m,
        other => panic!("expected invalid arguments, got {other:?}"),
    }
}

const NUMBERS: &str = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n";

#[test]
fn add_file() {
    let patch =
        "*** Begin Patch\n*** Add File: path/new.txt\n+line one\n+\n+line two\n*** End Patch";
    assert_applies(
        patch,
        &Files::new(),
        &files(&[("path/new.txt", "line one\n\nline two\n")]),
        "A path/new.txt",
        "--- /dev/null\n+++ b/path/new.txt\n@@ -0,0 +1,3 @@\n+line one\n+\n+line two\n",
    );
}

#[test]
fn update_with_several_hunks() {
    let before = files(&[("src/lib.rs", NUMBERS)]);
    let patch = "\
*** Begin Patch
*** Update File: src/lib.rs
@@
 one
-two
+TWO
 three
@@ six
 seven
-eight
+EIGHT
+eight and a half
 nine
*** End Patch
";
    let after = apply(patch, &before);
    assert_eq!(
        after["src/lib.rs"],
        "one\nTWO\nthree\nfour\nfive\nsix\nseven\nEIGHT\neight and a half\nnine\nten\n"
    );
    let changes = plan_on(patch, &before).unwrap();
    assert_eq!(summary(&changes), "M src/lib.rs");
    assert_eq!(
        preview_of(&changes),
        "\
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,10 +1,11 @@
 one
-two
+TWO
 three
 four
 five
 six
 seven
-eight
+EIGHT
+eight and a half
 nine
 ten
"
    );
}

/// `f`, holding `before`, after the update hunks `hunks`.
fn update_f(before: &str, hunks: &str) -> String {
    let patch = format!("*** Begin Patch\n*** Update File: f\n{hunks}\n*** End Patch");
    apply(&patch, &files(&[("f", before)])).remove("f").unwrap()
}

const TWO_FNS: &str = "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n";

/// How one file's text reads after an update: `before`, the hunks, `after`.
#[test]
fn updates_of_one_file() {
    let cases = [
        // The first hunk may omit its `@@` line.
        ("a\nb\nc\n", " a\n-b\n+B", "a\nB\nc\n"),
        // The `@@` line picks the occurrence.
        (
            TWO_FNS,
            "@@ fn b() {\n-    x();\n+    y();",
            "fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n",
        ),
        // The `@@` line repeated as the first context line.
        (
            "fn a() {\n    x();\n}\n",
            "@@ fn a() {\n fn a() {\n-    x();\n+    y();",
            "fn a() {\n    y();\n}\n",
        ),
        // A unified range after `@@` is ignored.
        ("a\nb\nc\n", "@@ -1,3 +1,3 @@\n a\n-b\n+B", "a\nB\nc\n"),
        // A pure addition goes after the `@@` line, or at the end.
        ("a\nb\nc\n", "@@ a\n+inserted", "a\ninserted\nb\nc\n"),
        ("a\nb\nc\n", "@@\n+appended", "a\nb\nc\nappended\n"),
        // A missing final newline is kept unless the last line changes.
        ("a\nb\nc", "-a\n+A\n b\n c", "A\nb\nc"),
        ("a\nb\nc", " b\n-c\n+C", "a\nb\nC\n"),
        ("a\nb\nc", " c\n+d\n*** End of File", "a\nb\nc\nd\n"),
        // The end-of-file marker anchors the hunk at the end.
        (
            "x\nend\nx\nend\n",
            " x\n-end\n+END\n*** End of File",
            "x\nend\nx\nEND\n",
        ),
        // CRLF files stay CRLF.
        (
            "one\r\ntwo\r\nthree\r\n",
            " one\n-two\n+2\n+2.5\n three",
            "one\r\n2\r\n2.5\r\nthree\r\n",
        ),
        // Unicode content.
        (
            "héllo wörld\n日本語\n🦀 crab\nend\n",
            " héllo wörld\n-日本語\n+中文 — ok\n 🦀 crab",
            "héllo wörld\n中文 — ok\n🦀 crab\nend\n",
        ),
        // Whitespace differences match (trailing spaces dropped, a tab
        // written as spaces) and the file's own text is kept.
        (
            "def f():\n    x = 1   \n\treturn x\n",
            " def f():\n-    x = 1\n+    x = 2\n    return x",
            "def f():\n    x = 2\n\treturn x\n",
        ),
        // An exact match wins over an earlier loose one.
        ("  a\nb\na\nb\n", " a\n-b\n+B", "  a\nb\na\nB\n"),
        // Typographic punctuation matches ASCII.
        (
            "say “hi” – it’s fine\nnext\n",
            " say \"hi\" - it's fine\n-next\n+then",
            "say “hi” – it’s fine\nthen\n",
        ),
    ];
    for (before, hunks, after) in cases {
        assert_eq!(
            update_f(before, hunks),
            after,
            "before {before:?}, hunks {hunks:?}"
        );
    }
}

#[test]
fn move_with_changes() {
    let before = files(&[("src/lib.rs", "pub fn f() {}\n"), ("other.rs", "x\n")]);
    let patch = "\
*** Begin Patch
*** Update File: src/lib.rs
*** Move to: src/renamed.rs
@@
-pub fn f() {}
+pub fn g() {}
*** End Patch";
    assert_applies(
        patch,
        &before,
        &files(&[("other.rs", "x\n"), ("src/renamed.rs", "pub fn g() {}\n")]),
        "R src/lib.rs -> src/renamed.rs",
        "--- a/src/lib.rs\n+++ b/src/renamed.rs\n@@ -1 +1 @@\n-pub fn f() {}\n+pub fn g() {}\n",
    );
}

/// Codex replaces the destination of a move; the preview shows what goes.
#[test]
fn move_onto_an_existing_file_replaces_it() {
    let before = files(&[("a", "1\n"), ("b", "2\n")]);
    let patch = "*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@\n-1\n+one\n*** End Patch";
    assert_applies(
        patch,
        &before,
        &files(&[("b", "one\n")]),
        "R a -> b",
        "--- a/b\n+++ /dev/null\n@@ -1 +0,0 @@\n-2\n--- a/a\n+++ b/b\n@@ -1 +1 @@\n-1\n+one\n",
    );
    let changes = plan_on(patch, &before).unwrap();
    assert_eq!(changes[0].replaced.as_deref(), Some("2\n"));
}

/// Codex writes an added file whether or not it exists.
#[test]
fn add_over_an_existing_file_replaces_it() {
    let before = files(&[("here.txt", "x\n")]);
    let patch = "*** Begin Patch\n*** Add File: here.txt\n+y\n*** End Patch";
    assert_eq!(apply(patch, &before), files(&[("here.txt", "y\n")]));
    let changes = plan_on(patch, &before).unwrap();
    assert_eq!(summary(&changes), "M here.txt");
    assert_eq!(changes[0].old.as_deref(), Some("x\n"));
}

/// The plan knows which paths become directories: a file and a directory
/// of the same name in one patch cannot both be written.
#[test]
fn files_and_directories_of_one_name_are_refused() {
    assert_fails(
        "*** Begin Patch\n*** Add File: d/f\n+x\n*** Add File: d\n+y\n*** End Patch",
        &Files::new(),
        "cannot write `d`: it is a directory, which this patch needs for `d/f`",
    );
    assert_fails(
        "*** Begin Patch\n*** Add File: d\n+y\n*** Add File: d/e/f\n+x\n*** End Patch",
        &Files::new(),
        "cannot write `d/e/f`: `d` is a file in this patch, not a directory",
    );
}

#[test]
fn delete_file() {
    let before = files(&[("old.txt", "bye\n"), ("keep.txt", "hi\n")]);
    let patch = "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch";
    assert_applies(
        patch,
        &before,
        &files(&[("keep.txt", "hi\n")]),
        "D old.txt",
        "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n",
    );
}

#[test]
fn every_kind_in_one_patch() {
    let before = files(&[("m.txt", "a\nb\n"), ("d.txt", "gone\n"), ("r.txt", "r\n")]);
    let patch = "\
*** Begin Patch
*** Add File: n.txt
+new
*** Update File: m.txt
 a
-b
+c

*** Update File: r.txt
*** Move to: moved/r.txt
*** Delete File: d.txt
*** End Patch";
    assert_eq!(
        apply(patch, &before),
        files(&[
            ("m.txt", "a\nc\n"),
            ("moved/r.txt", "r\n"),
            ("n.txt", "new\n")
        ])
    );
    let changes = plan_on(patch, &before).unwrap();
    assert_eq!(
        summary(&changes),
        "A n.txt\nM m.txt\nR r.txt -> moved/r.txt\nD d.txt"
    );
}

#[test]
fn later_operations_see_earlier_ones() {
    let patch = "\
*** Begin Patch
*** Add File: f
+one
*** Update File: f
-one
+two
*** End Patch";
    assert_eq!(apply(patch, &Files::new()), files(&[("f", "two\n")]));
    let delete_twice = "*** Begin Patch\n*** Delete File: f\n*** Delete File: f\n*** End Patch";
    assert_fails(
        delete_twice,
        &files(&[("f", "x\n")]),
        "cannot delete `f`: it does not exist",
    );
}

#[test]
fn missing_context_names_file_hunk_and_lines_and_applies_nothing() {
    let before = files(&[("a.txt", "x\n"), ("src/lib.rs", NUMBERS)]);
    let patch = "\
*** Begin Patch
*** Add File: new.txt
+hello
*** Update File: src/lib.rs
@@
 one
-two
+2
@@
 four
-FIVE
+5
 six
 seven
 eight
 nine
*** Delete File: a.txt
*** End Patch";
    let message = failure(patch, &before);
    assert_eq!(
        message,
        "`src/lib.rs`, hunk 2 of 2: these context and removed lines were not found after line 2:\n  \
         |four\n  |FIVE\n  |six\n  |seven\n  |eight\n  (1 more lines)\n\
         Read the file again and copy the context and removed lines exactly, with their indentation.\n\
         No file was changed; fix the patch and send all of it again."
    );
}

#[test]
fn missing_at_at_line_is_reported() {
    let before = files(&[("f", "a\nb\n")]);
    let patch = "*** Begin Patch\n*** Update File: f\n@@ fn nowhere()\n-a\n+A\n*** End Patch";
    assert_fails(
        patch,
        &before,
        "`f`, hunk 1 of 1: no line `fn nowhere()` (from `@@ fn nowhere()`) was found; \
             the text after `@@` must equal a whole line of the file",
    );
}

#[test]
fn hunks_out_of_order_are_explained() {
    let before = files(&[("f", NUMBERS)]);
    let patch = "*** Begin Patch\n*** Update File: f\n@@\n-five\n+5\n@@\n-two\n+2\n*** End Patch";
    assert_fails_with(
        patch,
        &before,
        "They occur at line 2, before the previous hunk; hunks must be in file order.",
    );
}

#[test]
fn end_of_file_marker_not_at_the_end_is_not_found() {
    let patch =
        "*** Begin Patch\n*** Update File: f\n x\n-end\n+END\n*** End of File\n*** End Patch";
    assert_fails_with(
        patch,
        &files(&[("f", "x\nend\ny\n")]),
        "were not found at the end of the file:\n  |x\n  |end",
    );
}

#[test]
fn end_of_file_marker_then_another_hunk_is_refused() {
    let patch = "*** Begin Patch\n*** Update File: f\n-a\n*** End of File\n-b\n*** End Patch";
    let message = invalid_patch(patch);
    assert!(
        message.starts_with("line 5: start the hunk after `*** End of File` with `@@`"),
        "{message}"
    );
}

/// A patch sent with CRLF line endings reads the same.
#[test]
fn crlf_patches_read_the_same() {
    let patch = "*** Begin Patch\n*** Update File: f\n one\n-two\n+2\n three\n*** End Patch";
    let before = files(&[("f", "one\r\ntwo\r\nthree\r\n")]);
    assert_eq!(
        apply(&patch.replace('\n', "\r\n"), &before)["f"],
        "one\r\n2\r\nthree\r\n"
    );
}

/// The files before, the patch, the files after.
#[test]
fn patches_leave_these_files() {
    let cases: [(Entries, &str, Entries); 5] = [
        // An empty added file, its path normalised.
        (
            &[],
            "*** Begin Patch\n*** Add File: ./a/../empty.txt\n*** End Patch",
            &[("empty.txt", "")],
        ),
        // A move without hunks.
        (
            &[("a.txt", "same\n")],
            "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b/a.txt\n*** End Patch",
            &[("b/a.txt", "same\n")],
        ),
        // A file deleted first may become a directory.
        (
            &[("d", "old\n")],
            "*** Begin Patch\n*** Delete File: d\n*** Add File: d/f\n+x\n*** End Patch",
            &[("d/f", "x\n")],
        ),
        // Blank lines between sections are not context.
        (
            &[("f", "a\nb\n")],
            "*** Begin Patch\n\n*** Update File: f\n a\n-b\n+c\n\n\n*** End Patch\n\n",
            &[("f", "a\nc\n")],
        ),
        // A heredoc wrapper is accepted.
        (
            &[],
            "<<'EOF'\n*** Begin Patch\n*** Add File: f\n+x\n*** End Patch\nEOF\n",
            &[("f", "x\n")],
        ),
    ];
    for (before, patch, after) in cases {
        assert_eq!(apply(patch, &files(before)), files(after), "{patch:?}");
    }
}

#[test]
fn existence_errors() {
    let before = files(&[("here.txt", "x\n")]);
    assert_fails(
        "*** Begin Patch\n*** Update File: gone.txt\n-x\n+y\n*** End Patch",
        &before,
        "cannot update `gone.txt`: it does not exist; use `*** Add File: gone.txt`",
    );
    assert_fails(
        "*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch",
        &before,
        "cannot delete `gone.txt`: it does not exist",
    );
}

#[test]
fn reader_errors_reach_the_model() {
    let read = |path: &str| Err(Error::Failed(format!("`{path}` is not UTF-8 text")));
    let err = plan(
        "*** Begin Patch\n*** Delete File: bin\n*** End Patch",
        &read,
    );
    assert_eq!(
        err,
        Err(Error::Failed(
            "`bin` is not UTF-8 text\nNo file was changed; fix the patch and send all of it again."
                .into()
        ))
    );
}

#[test]
fn malformed_envelopes() {
    let cases = [
        (
            "",
            "the patch is empty; it must start with `*** Begin Patch`",
        ),
        ("  \n\n", "the patch is empty;"),
        (
            "*** Add File: f\n+x\n*** End Patch",
            "the patch must start with `*** Begin Patch`, but line 1 is `*** Add File: f`",
        ),
        (
            "*** Begin Patch\n*** Add File: f\n+x",
            "the patch must end with `*** End Patch`, but its last line (3) is `+x`",
        ),
        ("*** Begin Patch", "the patch must end with `*** End Patch`"),
        (
            "*** Begin Patch\n*** End Patch",
            "the patch has no file operations;",
        ),
        (
            "*** Begin Patch\n*** Rename File: a\n*** End Patch",
            "line 2: unknown header `*** Rename File: a`;",
        ),
        (
            "*** Begin Patch\nhello\n*** End Patch",
            "line 2: expected a file header",
        ),
        (
            "*** Begin Patch\n*** Add File: f\nno plus\n*** End Patch",
            "line 3: `no plus` in `*** Add File: f`: every line of an added file starts with `+`",
        ),
        (
            "*** Begin Patch\n*** Update File: f\n*** End Patch",
            "line 2: `*** Update File: f` has no hunks;",
        ),
        (
            "*** Begin Patch\n*** Update File: f\n@@\n*** End Patch",
            "hunk 1 of `*** Update File: f` has no lines after its `@@` line",
        ),
        (
            "*** Begin Patch\n*** Update File: f\n a\n*b\n*** End Patch",
            "line 4: `*b` in `*** Update File: f`: every hunk line starts with ` ` (context)",
        ),
        (
            "*** Begin Patch\n*** Update File: f\n a\n*** Move to: g\n*** End Patch",
            "line 4: unknown header `*** Move to: g` in `*** Update File: f`; `*** Move to:` must directly follow",
        ),
        (
            "*** Begin Patch\n*** Delete File: f\n-x\n*** End Patch",
            "line 3: `-x` after `*** Delete File: f`: a deleted file takes no lines",
        ),
        (
            "*** Begin Patch\n*** Add File: ../up.txt\n+x\n*** End Patch",
            "line 2: `../up.txt` leads out of the workspace",
        ),
        (
            "*** Begin Patch\n*** Add File: /etc/passwd\n+x\n*** End Patch",
            "line 2: `/etc/passwd` is an absolute path",
        ),
        (
            "*** Begin Patch\n*** Delete File:\n*** End Patch",
            "line 2: the header names no path",
        ),
    ];
    for (patch, expected) in cases {
        let message = invalid_patch(patch);
        assert!(
            message.starts_with(expected),
            "patch {patch:?}\n  expected a message starting {expected:?}\n  got {message:?}"
        );
        assert!(message.ends_with(NOTHING_CHANGED), "{message}");
    }
}
