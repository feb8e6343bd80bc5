//! Running `corral` as a child process with a bound on how long it may take,
//! and reading its `--json` events while it runs.

use crate::ModelIds;
use serde_json::Value;
use std::io::BufRead as _;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest a `corral run` with subagents may take before a test calls it a
/// hang (the tests that need less say so).
pub const HANG: Duration = Duration::from_secs(90);

/// Waits for `child` at most `hang`; kills it and fails the test otherwise.
/// Returns its exit code (none if a signal ended it).
pub fn wait_bounded(child: &mut Child, hang: Duration) -> Option<i32> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        if started.elapsed() > hang {
            let _ = child.kill();
            let _ = child.wait();
            panic!("corral still running after {hang:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The child's stdout lines as JSON events, as they come, with corral's call
/// ids put back to the model's ([`ModelIds`]).
pub fn events(child: &mut Child) -> mpsc::Receiver<Value> {
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut ids = ModelIds::default();
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            // A reader thread cannot fail the test: a bad event is sent on
            // as a `schema_violation` the test's wait reports.
            let v = match std::panic::catch_unwind(|| super::schema::check_event(&v)) {
                Ok(()) => ids.apply(v),
                Err(_) => serde_json::json!({"type": "schema_violation", "event": v}),
            };
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits at most `hang` for the first event `pred` accepts; fails the test
/// with the events seen otherwise.
pub fn wait_for(
    rx: &mpsc::Receiver<Value>,
    hang: Duration,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + hang;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(v) if v["type"] == "schema_violation" => {
                panic!("an event does not fit the events schema: {}", v["event"])
            }
            Ok(v) if pred(&v) => return v,
            Ok(v) => seen.push(v),
            Err(e) => panic!("no {what} ({e}) in {seen:#?}"),
        }
    }
}

/// `outer` running `inner` (its program and arguments appended to
/// `outer`'s), in `inner`'s directory and with its environment changes: a
/// wrapper such as `unshare … sh -c '… exec "$@"'` or a probe.
pub fn wrapping(
    mut outer: std::process::Command,
    inner: &std::process::Command,
) -> std::process::Command {
    outer.arg(inner.get_program()).args(inner.get_args());
    if let Some(dir) = inner.get_current_dir() {
        outer.current_dir(dir);
    }
    for (key, value) in inner.get_envs() {
        match value {
            Some(value) => outer.env(key, value),
            None => outer.env_remove(key),
        };
    }
    outer
}

/// Starts `cmd` with its output dropped.
pub fn quiet(cmd: &mut std::process::Command) -> Child {
    use std::process::Stdio;
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn")
}

/// Starts `cmd` with stdout piped and stderr dropped: the child and its
/// `--json` events as they come ([`events`]).
pub fn streaming(cmd: &mut std::process::Command) -> (Child, mpsc::Receiver<Value>) {
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let rx = events(&mut child);
    (child, rx)
}

/// Runs `cmd` to its end, failing the test with its output (and `what` it
/// was) unless it succeeds.
#[track_caller]
pub fn run_ok(cmd: &mut std::process::Command, what: &str) -> std::process::Output {
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        o.status.success(),
        "{what} failed:\n{}",
        super::output::report(&o)
    );
    o
}
