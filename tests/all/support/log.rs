//! Finding and reading the session logs a `corral` command wrote under its
//! data directory.

use crate::{Cli, with_model_ids};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The workspace's session logs, oldest first; none (not a panic) while no
/// log has been written yet, for tests that poll a running command.
pub fn try_session_logs(cli: &Cli) -> Vec<PathBuf> {
    let root = cli.home.path().join("data/corral/sessions");
    let Some(Ok(ws_dir)) = std::fs::read_dir(root).into_iter().flatten().next() else {
        return Vec::new();
    };
    let mut logs: Vec<_> = std::fs::read_dir(ws_dir.path())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    logs.sort();
    logs
}

/// The workspace's session logs, oldest first; fails the test if there is
/// no session directory.
pub fn session_logs(cli: &Cli) -> Vec<PathBuf> {
    let root = cli.home.path().join("data/corral/sessions");
    let ws_dir = std::fs::read_dir(&root)
        .expect("sessions")
        .next()
        .expect("one workspace")
        .expect("entry")
        .path();
    let mut logs: Vec<_> = std::fs::read_dir(&ws_dir)
        .expect("logs")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    logs.sort();
    logs
}

/// The newest session log of `cli`'s data directory.
pub fn session_log(cli: &Cli) -> PathBuf {
    session_logs(cli).pop().expect("a log")
}

/// The events of the log at `path`, as corral reads them back.
pub fn read_events(path: &Path) -> Vec<Value> {
    corral_core::session::read(path)
        .expect("log")
        .iter()
        .map(|r| serde_json::to_value(&r.event).expect("event"))
        .collect()
}

/// Every session log of the workspace, oldest first, read line by line as
/// events, with corral's call ids put back to the model's across all of
/// them (a child's log names its parent's call by the parent's id for it).
pub fn all_events(cli: &Cli) -> Vec<Vec<Value>> {
    let logs: Vec<Vec<Value>> = session_logs(cli)
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .expect("log")
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).expect("record")["event"].clone())
                .collect()
        })
        .collect();
    let lens: Vec<usize> = logs.iter().map(Vec::len).collect();
    let mut all = with_model_ids(logs.into_iter().flatten().collect()).into_iter();
    lens.iter()
        .map(|&n| all.by_ref().take(n).collect())
        .collect()
}

/// The events of type `ty`, in order.
pub fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// An event's type, or "" for a value that has none.
pub fn kind(e: &Value) -> &str {
    e["type"].as_str().unwrap_or_default()
}

/// Fails the test, showing the log, unless the newest session log of `cli`
/// ([`session_log`]) holds every one of `needles`.
#[track_caller]
pub fn assert_logged(cli: &Cli, needles: &[&str]) {
    let log = std::fs::read_to_string(session_log(cli)).expect("log");
    crate::support::text::has_all(&log, needles);
}
