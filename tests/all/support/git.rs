//! Git run the way the tests need it: in a directory of the test's, with an
//! identity, and without the system's or the user's configuration.

use crate::Sandbox;
use std::path::Path;

/// `git ARGS` in `dir`, which must succeed; what it printed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = super::process::run_ok(
        std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir),
        &format!("git {args:?}"),
    );
    super::output::stdout(&o)
}

/// The workspace made a git repository with `notes.txt` committed.
pub fn repo(sb: &Sandbox) {
    sb.write("notes.txt", "- TODO: ship it\n");
    sb.write(".gitignore", "corral.toml\n*.cassette.json\n");
    git(&sb.ws(), &["init", "-q"]);
    git(&sb.ws(), &["add", "notes.txt", ".gitignore"]);
    git(&sb.ws(), &["commit", "-qm", "start"]);
}
