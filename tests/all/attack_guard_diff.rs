//! A secret that git returns as a diff is labelled though no argument names
//! it (`git_show HEAD` of the commit that added `.env`, `git_diff` while a
//! tracked `.env` is modified). The result is labelled by the diff headers
//! it carries, so the network call after it is held.

use crate::support::events::{label, labels};
use crate::support::guard::{assert_nothing_sent, git_then_send, refused_reason, shown_secret};
use crate::*;
use serde_json::json;

/// `tool` with `args` in a repository whose first commit added `.env`
/// (after `prepare`), then `http_get` carrying the secret: the result must
/// show the secret, be labelled sensitive by its diff, and the send held.
fn diff_then_send(tool: &str, args: serde_json::Value, prepare: impl FnOnce(&Sandbox)) {
    let (server, events) = git_then_send(tool, args, prepare);
    let shown = shown_secret(&events, "c1");
    assert_eq!(
        labels(shown),
        vec![label(
            "sensitive",
            &format!("`{tool}` output shows a diff of `.env`")
        )]
    );
    let reason = refused_reason(&events, "c2");
    assert!(
        reason.contains("exfiltration guard") && reason.contains(".env"),
        "{reason}"
    );
    assert_nothing_sent(&server);
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
