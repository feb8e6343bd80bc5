//! Rules judge the resolved path of every path a call names: the paths of a
//! `git_add`, the file headers of an `apply_patch` envelope, and the early
//! protected-path check, each judged as written and as it resolves through
//! a workspace symlink, through `corral run` against the mock model.

use crate::support::events::{events, find};
use crate::support::files::assert_absent;
use crate::support::manifest::openai_project;
use crate::support::mock::*;
use crate::support::model::calls_then_done;
use crate::support::output::assert_exit;
use crate::support::run::argv;
use crate::*;
use serde_json::{Value, json};

const KEY: (&str, &str) = ("TEST_OPENAI_KEY", "sk-paths-test");

/// A git repository with `protected/` under a deny rule for every tool,
/// `alias -> protected`, `g -> .git`, the git plugin and the mock model.
fn project(port: u16) -> Sandbox {
    let sb = Sandbox::new();
    sb.write("protected/README", "keep out\n");
    sb.write("protected/z", "staged through the alias?\n");
    sb.write("a.txt", "a\n");
    sb.write("ok2.txt", "fine\n");
    let o = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(sb.ws())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", sb.ws())
        .output()
        .expect("git init");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::os::unix::fs::symlink("protected", sb.ws().join("alias")).expect("symlink");
    std::os::unix::fs::symlink(".git", sb.ws().join("g")).expect("symlink");
    sb.write(
        "corral.toml",
        &openai_project(
            port,
            "[policy]\ndeny = [\"*(protected/**)\"]\n\n\
             [plugins.git]\nsource = \"builtin:git\"\n\
             grants.exec = [{ program = \"git\", args = [\"**\"] }]\n",
        ),
    );
    sb
}

fn read(sb: &Sandbox, rel: &str) -> String {
    std::fs::read_to_string(sb.ws().join(rel)).unwrap_or_default()
}

/// The events of `corral run --json` in full-auto mode.
fn run(sb: &Sandbox) -> Vec<Value> {
    let o = Cli::new().run_env(
        &sb.ws(),
        &argv("run --provider openai --mode full-auto --json go"),
        &[KEY],
    );
    assert_exit(&o, 0);
    events(&o)
}

fn patch(id: &'static str, body: &str) -> Call {
    (
        id,
        "apply_patch",
        json!({ "patch": format!("*** Begin Patch\n{body}\n*** End Patch\n") }),
    )
}

/// The permission decision for `id`, and its reason.
fn decision(events: &[Value], id: &str) -> (String, String) {
    let p = find(events, "permission", id);
    (
        p["decision"].as_str().unwrap_or_default().to_owned(),
        p["reason"].as_str().unwrap_or_default().to_owned(),
    )
}

/// A deny rule on `protected/**` holds for every path a call names through
/// `alias -> protected`: a file an `apply_patch` adds, a file it moves, a
/// path of `git_add`; the same tools elsewhere run.
#[test]
fn a_deny_rule_holds_for_every_path_through_a_symlink() {
    let mock = calls_then_done(vec![
        patch(
            "p1",
            "*** Add File: ok.txt\n+ok\n*** Add File: alias/x.txt\n+pwned",
        ),
        patch(
            "p2",
            "*** Update File: a.txt\n*** Move to: alias/y.txt\n@@\n-a\n+pwned",
        ),
        ("g1", "git_add", json!({ "paths": ["ok2.txt", "alias/z"] })),
        patch("p3", "*** Add File: fine.txt\n+fine"),
        ("g2", "git_add", json!({ "paths": ["ok2.txt"] })),
        // A pathspec glob or magic names no protected path as written, so
        // git must not expand it into one.
        ("g3", "git_add", json!({ "paths": ["prot*"] })),
        ("g4", "git_add", json!({ "paths": [":(top)protected/z"] })),
    ]);
    let sb = project(mock.port);
    let events = run(&sb);
    // Every case is checked before failing, so a failure names them all.
    let through: Vec<String> = ["p1", "p2", "g1"]
        .into_iter()
        .map(|id| (id, decision(&events, id)))
        .filter(|(_, (decision, reason))| decision != "deny" || !reason.contains("*(protected/**)"))
        .map(|(id, (decision, reason))| format!("{id}: {decision}: {reason}"))
        .collect();
    assert_eq!(through, Vec::<String>::new());
    assert_absent(&sb, "protected/x.txt", "added through the alias");
    assert_absent(&sb, "ok.txt", "half of a denied patch applied");
    assert_absent(&sb, "protected/y.txt", "moved through the alias");
    assert_eq!(read(&sb, "a.txt"), "a\n");
    // The rule, not a broken tool, refused: the same tools elsewhere run.
    assert_eq!(decision(&events, "p3").0, "allow");
    assert_eq!(read(&sb, "fine.txt"), "fine\n");
    assert_eq!(decision(&events, "g2").0, "allow");
    let o = std::process::Command::new("git")
        .args(["diff", "--cached", "--name-only"])
        .current_dir(sb.ws())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", sb.ws())
        .output()
        .expect("git diff");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok2.txt\n", "staged");
}

/// `g -> .git`: a write to `g/config` is refused by the early protected-path
/// check, naming where it leads (the filesystem layer would refuse it too,
/// but only after the tool ran); `.git/config` keeps
/// its content.
#[test]
fn a_write_through_a_symlink_to_git_is_refused_before_it_runs() {
    let mock = calls_then_done(vec![
        write_call("w1", "g/config", "[core]\n\tfsmonitor = touch PWNED\n"),
        patch("p1", "*** Add File: g/hooks/pre-commit\n+touch PWNED"),
        write_call("w2", "fine.txt", "fine\n"),
    ]);
    let sb = project(mock.port);
    let before = read(&sb, ".git/config");
    let events = run(&sb);
    let through: Vec<String> = [("w1", ".git/config"), ("p1", ".git/hooks/pre-commit")]
        .into_iter()
        .map(|(id, leads)| (id, leads, decision(&events, id)))
        .filter(|(_, leads, (decision, reason))| {
            decision != "deny"
                || !reason.contains(&format!("(which leads to `{leads}`) is protected"))
        })
        .map(|(id, _, (decision, reason))| format!("{id}: {decision}: {reason}"))
        .collect();
    assert_eq!(through, Vec::<String>::new());
    assert_eq!(read(&sb, ".git/config"), before);
    assert!(!sb.ws().join(".git/hooks/pre-commit").exists());
    assert_eq!(decision(&events, "w2").0, "allow");
    assert_eq!(read(&sb, "fine.txt"), "fine\n");
}
