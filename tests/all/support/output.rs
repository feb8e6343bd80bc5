//! Reading what a finished `corral` command printed.

use std::process::Output;

/// The command's stdout as text (invalid UTF-8 replaced, never a panic).
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The command's stderr as text (invalid UTF-8 replaced, never a panic).
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON events a `corral run --json` printed: each stdout line that
/// parses, as it came (corral's call ids kept; see [`crate::with_model_ids`]),
/// each checked against the events schema ([`super::schema`]).
pub fn json_events(o: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .inspect(super::schema::check_event)
        .collect()
}

/// All the command printed: stdout, then stderr.
pub fn printed(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Fails the test, showing stderr, unless the command exited with `code`.
#[track_caller]
pub fn assert_exit(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The command's exit code, stdout and stderr, each under a heading: a
/// report for a failure message, or to search both streams at once.
pub fn report(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The command's stdout, once it exited 0; fails the test otherwise, saying
/// `what` ran and showing both streams.
#[track_caller]
pub fn ok_stdout(o: &Output, what: &str) -> String {
    let out = stdout(o);
    assert_eq!(o.status.code(), Some(0), "{what}:\n{out}\n{}", stderr(o));
    out
}

/// Fails the test, showing stdout then stderr, unless stdout holds every
/// one of `needles`.
#[track_caller]
pub fn stdout_has(o: &Output, needles: &[&str]) {
    let out = stdout(o);
    for needle in needles {
        assert!(out.contains(needle), "{out}{}", stderr(o));
    }
}
