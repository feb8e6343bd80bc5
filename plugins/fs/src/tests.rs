//! The tools on the real filesystem, natively. Each test works in its own
//! temporary directory under the crate root (the test's current directory),
//! because tool paths must be relative.

use super::*;
use pretty_assertions::assert_eq;

/// A scratch directory and its path relative to the current directory.
fn scratch() -> (tempfile::TempDir, String) {
    let dir = tempfile::Builder::new()
        .prefix(".fs-test-")
        .tempdir_in(".")
        .unwrap();
    let name = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    (dir, name)
}

fn edit(path: &str, old: &str, new: &str) -> EditArgs {
    EditArgs {
        path: path.to_owned(),
        old_string: old.to_owned(),
        new_string: new.to_owned(),
        replace_all: false,
    }
}

#[test]
fn write_preview_of_a_new_file() {
    let (_dir, d) = scratch();
    let args = WriteArgs {
        path: format!("./{d}/sub/new.txt"),
        content: "hello\nworld\n".into(),
    };
    assert_eq!(
        WriteFile::preview(args).unwrap().unwrap(),
        format!("--- /dev/null\n+++ b/{d}/sub/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n")
    );
    assert!(
        !std::path::Path::new(&d).join("sub").exists(),
        "preview wrote"
    );
}

#[test]
fn write_preview_of_an_overwrite_then_run_agrees() {
    let (_dir, d) = scratch();
    let path = format!("{d}/f.txt");
    std::fs::write(&path, "a\nb\nc\n").unwrap();
    let args = || WriteArgs {
        path: path.clone(),
        content: "a\nB\nc\n".into(),
    };
    assert_eq!(
        WriteFile::preview(args()).unwrap().unwrap(),
        format!("--- a/{path}\n+++ b/{path}\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n")
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\nb\nc\n");
    WriteFile::run(args()).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\nB\nc\n");
    // Same content again: nothing would change.
    assert_eq!(WriteFile::preview(args()).unwrap().unwrap(), "");
}

#[test]
fn write_preview_refuses_what_run_refuses() {
    let (_dir, d) = scratch();
    let root = WriteArgs {
        path: ".".into(),
        content: String::new(),
    };
    assert!(matches!(
        WriteFile::preview(root),
        Err(Error::InvalidArguments(_))
    ));
    let dir = WriteArgs {
        path: d.clone(),
        content: String::new(),
    };
    let err = WriteFile::preview(dir).unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
}

#[test]
fn edit_preview_is_the_diff_run_makes() {
    let (_dir, d) = scratch();
    let path = format!("{d}/lib.rs");
    let text = "fn main() {\n    println!(\"hi\");\n}\n\nfn other() {}\n";
    std::fs::write(&path, text).unwrap();
    let preview = EditFile::preview(edit(&path, "\"hi\"", "\"hello\""))
        .unwrap()
        .unwrap();
    assert_eq!(
        preview,
        format!(
            "--- a/{path}\n+++ b/{path}\n@@ -1,5 +1,5 @@\n fn main() {{\n-    println!(\"hi\");\n+    println!(\"hello\");\n }}\n \n fn other() {{}}\n"
        )
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        text,
        "preview wrote"
    );
    EditFile::run(edit(&path, "\"hi\"", "\"hello\"")).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        text.replace("\"hi\"", "\"hello\"")
    );
}

#[test]
fn edit_preview_reports_what_run_would() {
    let (_dir, d) = scratch();
    let path = format!("{d}/f.txt");
    std::fs::write(&path, "x x\n").unwrap();
    let twice = EditFile::preview(edit(&path, "x", "y")).unwrap_err();
    assert!(twice.to_string().contains("occurs 2 times"), "{twice}");
    let missing = EditFile::preview(edit(&path, "z", "y")).unwrap_err();
    assert!(missing.to_string().contains("was not found"), "{missing}");
    let all = EditArgs {
        replace_all: true,
        ..edit(&path, "x", "y")
    };
    assert_eq!(
        EditFile::preview(all).unwrap().unwrap(),
        format!("--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-x x\n+y y\n")
    );
}

#[test]
fn replace_in_counts_and_replaces() {
    let args = EditArgs {
        replace_all: true,
        ..edit("f", "a", "b")
    };
    assert_eq!(replace_in("a-a-a", &args).unwrap(), ("b-b-b".to_owned(), 3));
}

#[test]
fn apply_patch_on_disk() {
    let (_dir, d) = scratch();
    std::fs::write(format!("{d}/m.txt"), "one\ntwo\n").unwrap();
    std::fs::write(format!("{d}/r.txt"), "r\n").unwrap();
    std::fs::write(format!("{d}/d.txt"), "d\n").unwrap();
    let patch = format!(
        "*** Begin Patch\n*** Add File: {d}/new/a.txt\n+added\n*** Update File: {d}/m.txt\n one\n-two\n+2\n\
         *** Update File: {d}/r.txt\n*** Move to: {d}/moved/r.txt\n*** Delete File: {d}/d.txt\n*** End Patch"
    );
    let args = || PatchArgs {
        patch: patch.clone(),
    };
    let preview = ApplyPatch::preview(args()).unwrap().unwrap();
    assert!(
        preview.contains(&format!("--- a/{d}/d.txt\n+++ /dev/null\n")),
        "{preview}"
    );
    assert!(
        std::path::Path::new(&format!("{d}/d.txt")).exists(),
        "preview wrote"
    );

    let out = ApplyPatch::run(args()).unwrap();
    assert_eq!(
        out.content,
        format!(
            "Success. Updated the following files:\nA {d}/new/a.txt\nM {d}/m.txt\n\
             R {d}/r.txt -> {d}/moved/r.txt\nD {d}/d.txt"
        )
    );
    let read = |p: &str| std::fs::read_to_string(format!("{d}/{p}")).ok();
    assert_eq!(read("new/a.txt").as_deref(), Some("added\n"));
    assert_eq!(read("m.txt").as_deref(), Some("one\n2\n"));
    assert_eq!(read("moved/r.txt").as_deref(), Some("r\n"));
    assert_eq!(read("r.txt"), None);
    assert_eq!(read("d.txt"), None);
}

#[test]
fn apply_patch_failing_hunk_changes_nothing_on_disk() {
    let (_dir, d) = scratch();
    std::fs::write(format!("{d}/a.txt"), "a\n").unwrap();
    std::fs::write(format!("{d}/b.txt"), "b\n").unwrap();
    let patch = format!(
        "*** Begin Patch\n*** Update File: {d}/a.txt\n-a\n+A\n*** Delete File: {d}/b.txt\n\
         *** Update File: {d}/b.txt\n-nope\n+x\n*** End Patch"
    );
    let err = ApplyPatch::run(PatchArgs { patch }).unwrap_err();
    assert!(err.to_string().contains("No file was changed"), "{err}");
    assert_eq!(
        std::fs::read_to_string(format!("{d}/a.txt")).unwrap(),
        "a\n"
    );
    assert_eq!(
        std::fs::read_to_string(format!("{d}/b.txt")).unwrap(),
        "b\n"
    );
}

#[test]
fn apply_patch_restores_files_when_a_write_fails() {
    let (_dir, d) = scratch();
    std::fs::write(format!("{d}/keep.txt"), "before\n").unwrap();
    // The plan succeeds (the new directory does not exist, so the long name
    // is never looked up), but the filesystem refuses the name once the
    // directories above it have been made.
    let long = "n".repeat(300);
    let patch = format!(
        "*** Begin Patch\n*** Update File: {d}/keep.txt\n-before\n+after\n\
         *** Add File: {d}/new/deeper/{long}\n+file\n*** End Patch"
    );
    let err = ApplyPatch::run(PatchArgs { patch })
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("`{d}/new/deeper/{long}`: ")),
        "{err}"
    );
    assert!(
        err.ends_with(
            "The patch stopped there; the files it had changed were restored and the \
             directories it had created removed."
        ),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(format!("{d}/keep.txt")).unwrap(),
        "before\n"
    );
    assert!(!std::path::Path::new(&format!("{d}/new")).exists());
}
