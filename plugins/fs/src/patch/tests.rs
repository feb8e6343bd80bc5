use super::*;
use pretty_assertions::assert_eq;
use std::collections::BTreeMap;

type Files = BTreeMap<String, String>;

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
    let after = apply(patch, &Files::new());
    assert_eq!(after, files(&[("path/new.txt", "line one\n\nline two\n")]));
    let changes = plan_on(patch, &Files::new()).unwrap();
    assert_eq!(summary(&changes), "A path/new.txt");
    assert_eq!(
        preview_of(&changes),
        "--- /dev/null\n+++ b/path/new.txt\n@@ -0,0 +1,3 @@\n+line one\n+\n+line two\n"
    );
}

#[test]
fn add_empty_file_and_normalised_path() {
    let patch = "*** Begin Patch\n*** Add File: ./a/../empty.txt\n*** End Patch";
    assert_eq!(apply(patch, &Files::new()), files(&[("empty.txt", "")]));
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

#[test]
fn first_hunk_may_omit_its_at_at_line() {
    let before = files(&[("f", "a\nb\nc\n")]);
    let patch = "*** Begin Patch\n*** Update File: f\n a\n-b\n+B\n*** End Patch";
    assert_eq!(apply(patch, &before)["f"], "a\nB\nc\n");
}

#[test]
fn at_at_line_picks_the_occurrence() {
    let before = files(&[("f.rs", "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n")]);
    let patch =
        "*** Begin Patch\n*** Update File: f.rs\n@@ fn b() {\n-    x();\n+    y();\n*** End Patch";
    assert_eq!(
        apply(patch, &before)["f.rs"],
        "fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n"
    );
}

#[test]
fn at_at_line_repeated_as_first_context_line() {
    let before = files(&[("f.rs", "fn a() {\n    x();\n}\n")]);
    let patch = "*** Begin Patch\n*** Update File: f.rs\n@@ fn a() {\n fn a() {\n-    x();\n+    y();\n*** End Patch";
    assert_eq!(apply(patch, &before)["f.rs"], "fn a() {\n    y();\n}\n");
}

#[test]
fn unified_range_after_at_at_is_ignored() {
    let before = files(&[("f", "a\nb\nc\n")]);
    let patch = "*** Begin Patch\n*** Update File: f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n*** End Patch";
    assert_eq!(apply(patch, &before)["f"], "a\nB\nc\n");
}

#[test]
fn pure_addition_goes_after_the_at_at_line_or_at_the_end() {
    let before = files(&[("f", "a\nb\nc\n")]);
    let after_header = "*** Begin Patch\n*** Update File: f\n@@ a\n+inserted\n*** End Patch";
    assert_eq!(apply(after_header, &before)["f"], "a\ninserted\nb\nc\n");
    let appended = "*** Begin Patch\n*** Update File: f\n@@\n+appended\n*** End Patch";
    assert_eq!(apply(appended, &before)["f"], "a\nb\nc\nappended\n");
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
    assert_eq!(
        apply(patch, &before),
        files(&[("other.rs", "x\n"), ("src/renamed.rs", "pub fn g() {}\n")])
    );
    let changes = plan_on(patch, &before).unwrap();
    assert_eq!(summary(&changes), "R src/lib.rs -> src/renamed.rs");
    assert_eq!(
        preview_of(&changes),
        "--- a/src/lib.rs\n+++ b/src/renamed.rs\n@@ -1 +1 @@\n-pub fn f() {}\n+pub fn g() {}\n"
    );
}

#[test]
fn move_without_hunks() {
    let before = files(&[("a.txt", "same\n")]);
    let patch = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b/a.txt\n*** End Patch";
    assert_eq!(apply(patch, &before), files(&[("b/a.txt", "same\n")]));
}

/// Codex replaces the destination of a move; the preview shows what goes.
#[test]
fn move_onto_an_existing_file_replaces_it() {
    let before = files(&[("a", "1\n"), ("b", "2\n")]);
    let patch = "*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@\n-1\n+one\n*** End Patch";
    assert_eq!(apply(patch, &before), files(&[("b", "one\n")]));
    let changes = plan_on(patch, &before).unwrap();
    assert_eq!(changes[0].replaced.as_deref(), Some("2\n"));
    assert_eq!(summary(&changes), "R a -> b");
    assert_eq!(
        preview_of(&changes),
        "--- a/b\n+++ /dev/null\n@@ -1 +0,0 @@\n-2\n--- a/a\n+++ b/b\n@@ -1 +1 @@\n-1\n+one\n"
    );
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
    let message = failure(
        "*** Begin Patch\n*** Add File: d/f\n+x\n*** Add File: d\n+y\n*** End Patch",
        &Files::new(),
    );
    assert!(
        message
            .starts_with("cannot write `d`: it is a directory, which this patch needs for `d/f`"),
        "{message}"
    );
    let message = failure(
        "*** Begin Patch\n*** Add File: d\n+y\n*** Add File: d/e/f\n+x\n*** End Patch",
        &Files::new(),
    );
    assert!(
        message.starts_with("cannot write `d/e/f`: `d` is a file in this patch, not a directory"),
        "{message}"
    );
    // A file deleted first may become a directory.
    let before = files(&[("d", "old\n")]);
    let patch = "*** Begin Patch\n*** Delete File: d\n*** Add File: d/f\n+x\n*** End Patch";
    assert_eq!(apply(patch, &before), files(&[("d/f", "x\n")]));
}

#[test]
fn delete_file() {
    let before = files(&[("old.txt", "bye\n"), ("keep.txt", "hi\n")]);
    let patch = "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch";
    assert_eq!(apply(patch, &before), files(&[("keep.txt", "hi\n")]));
    let changes = plan_on(patch, &before).unwrap();
    assert_eq!(summary(&changes), "D old.txt");
    assert_eq!(
        preview_of(&changes),
        "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
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
    let message = failure(delete_twice, &files(&[("f", "x\n")]));
    assert!(
        message.starts_with("cannot delete `f`: it does not exist"),
        "{message}"
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
    let message = failure(patch, &before);
    assert!(
        message.starts_with(
            "`f`, hunk 1 of 1: no line `fn nowhere()` (from `@@ fn nowhere()`) was found; \
             the text after `@@` must equal a whole line of the file"
        ),
        "{message}"
    );
}

#[test]
fn hunks_out_of_order_are_explained() {
    let before = files(&[("f", NUMBERS)]);
    let patch = "*** Begin Patch\n*** Update File: f\n@@\n-five\n+5\n@@\n-two\n+2\n*** End Patch";
    let message = failure(patch, &before);
    assert!(
        message.contains(
            "They occur at line 2, before the previous hunk; hunks must be in file order."
        ),
        "{message}"
    );
}

#[test]
fn unicode_content() {
    let before = files(&[("i18n.txt", "héllo wörld\n日本語\n🦀 crab\nend\n")]);
    let patch = "\
*** Begin Patch
*** Update File: i18n.txt
 héllo wörld
-日本語
+中文 — ok
 🦀 crab
*** End Patch";
    assert_eq!(
        apply(patch, &before)["i18n.txt"],
        "héllo wörld\n中文 — ok\n🦀 crab\nend\n"
    );
}

#[test]
fn missing_final_newline_is_kept_unless_the_last_line_changes() {
    let before = files(&[("f", "a\nb\nc")]);
    let elsewhere = "*** Begin Patch\n*** Update File: f\n-a\n+A\n b\n c\n*** End Patch";
    assert_eq!(apply(elsewhere, &before)["f"], "A\nb\nc");
    let last = "*** Begin Patch\n*** Update File: f\n b\n-c\n+C\n*** End Patch";
    assert_eq!(apply(last, &before)["f"], "a\nb\nC\n");
    let appended = "*** Begin Patch\n*** Update File: f\n c\n+d\n*** End of File\n*** End Patch";
    assert_eq!(apply(appended, &before)["f"], "a\nb\nc\nd\n");
}

#[test]
fn end_of_file_marker_anchors_the_hunk_at_the_end() {
    let before = files(&[("f", "x\nend\nx\nend\n")]);
    let patch =
        "*** Begin Patch\n*** Update File: f\n x\n-end\n+END\n*** End of File\n*** End Patch";
    assert_eq!(apply(patch, &before)["f"], "x\nend\nx\nEND\n");
    let not_at_end = files(&[("f", "x\nend\ny\n")]);
    let message = failure(patch, &not_at_end);
    assert!(
        message.contains("were not found at the end of the file:\n  |x\n  |end"),
        "{message}"
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

#[test]
fn crlf_files_stay_crlf() {
    let before = files(&[("win.txt", "one\r\ntwo\r\nthree\r\n")]);
    let patch =
        "*** Begin Patch\n*** Update File: win.txt\n one\n-two\n+2\n+2.5\n three\n*** End Patch";
    assert_eq!(
        apply(patch, &before)["win.txt"],
        "one\r\n2\r\n2.5\r\nthree\r\n"
    );
    // A patch sent with CRLF line endings reads the same.
    let crlf_patch = patch.replace('\n', "\r\n");
    assert_eq!(
        apply(&crlf_patch, &before)["win.txt"],
        "one\r\n2\r\n2.5\r\nthree\r\n"
    );
}

#[test]
fn whitespace_differences_match_and_keep_the_files_text() {
    let before = files(&[("f.py", "def f():\n    x = 1   \n\treturn x\n")]);
    // Trailing spaces dropped, tab written as spaces.
    let patch = "\
*** Begin Patch
*** Update File: f.py
 def f():
-    x = 1
+    x = 2
    return x
*** End Patch";
    assert_eq!(
        apply(patch, &before)["f.py"],
        "def f():\n    x = 2\n\treturn x\n"
    );
}

#[test]
fn exact_match_wins_over_an_earlier_loose_one() {
    let before = files(&[("f", "  a\nb\na\nb\n")]);
    let patch = "*** Begin Patch\n*** Update File: f\n a\n-b\n+B\n*** End Patch";
    assert_eq!(apply(patch, &before)["f"], "  a\nb\na\nB\n");
}

#[test]
fn typographic_punctuation_matches_ascii() {
    let before = files(&[("f", "say “hi” – it’s fine\nnext\n")]);
    let patch =
        "*** Begin Patch\n*** Update File: f\n say \"hi\" - it's fine\n-next\n+then\n*** End Patch";
    assert_eq!(apply(patch, &before)["f"], "say “hi” – it’s fine\nthen\n");
}

#[test]
fn blank_lines_between_sections_are_not_context() {
    let before = files(&[("f", "a\nb\n")]);
    let patch = "*** Begin Patch\n\n*** Update File: f\n a\n-b\n+c\n\n\n*** End Patch\n\n";
    assert_eq!(apply(patch, &before)["f"], "a\nc\n");
}

#[test]
fn heredoc_wrapper_is_accepted() {
    let patch = "<<'EOF'\n*** Begin Patch\n*** Add File: f\n+x\n*** End Patch\nEOF\n";
    assert_eq!(apply(patch, &Files::new()), files(&[("f", "x\n")]));
}

#[test]
fn existence_errors() {
    let before = files(&[("here.txt", "x\n")]);
    let update = failure(
        "*** Begin Patch\n*** Update File: gone.txt\n-x\n+y\n*** End Patch",
        &before,
    );
    assert!(
        update.starts_with(
            "cannot update `gone.txt`: it does not exist; use `*** Add File: gone.txt`"
        ),
        "{update}"
    );
    let delete = failure(
        "*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch",
        &before,
    );
    assert!(
        delete.starts_with("cannot delete `gone.txt`: it does not exist"),
        "{delete}"
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
