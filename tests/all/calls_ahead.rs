//! A session or `corral mcp serve` makes each tool's next instance as soon
//! as a call ends, off the next call's path. Each instance still serves
//! exactly one call: nothing an earlier call left in memory is there, and
//! the deadline starts with the call that takes it, however long the
//! instance waited.

use crate::support::served::Served;
use crate::*;
use corral_test_programs::ADVERSARY;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The text of a `tools/call` result.
fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn an_instance_made_ahead_serves_one_call_with_its_own_deadline() {
    let sb = Sandbox::with_manifest(&format!(
        "[plugins.adversary]\nsource = {ADVERSARY:?}\nlimits = {{ timeout_ms = 1500 }}\n"
    ));
    let cli = Cli::new();
    let mut served = Served::start_env(
        &cli,
        &sb,
        &[],
        &[("CORRAL_LOG", "warn,corral_runtime::sandbox=debug")],
    );
    let mut id = 10;
    let mut call = |served: &mut Served, name: &str, arguments: Value| {
        id += 1;
        served.request(
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
    };
    // Longer than the deadline: an instance made when the last call ended
    // waits past it before its call comes.
    let idle = Duration::from_millis(1700);
    for _ in 0..3 {
        // One call fills 8 MiB with a marker; the next, in the instance
        // made while it ended, grows its memory past that and finds none.
        let wrote = call(
            &mut served,
            "mark_memory",
            json!({"key": 9, "mib": 8, "plant": false}),
        );
        assert!(text(&wrote).starts_with("wrote"), "{wrote}");
        std::thread::sleep(idle);
        let scan = call(
            &mut served,
            "scan_memory",
            json!({"key": 9, "mib": 16, "plant": false}),
        );
        assert!(text(&scan).starts_with("found 0 in"), "{scan}");
        assert_ne!(scan["isError"], true, "{scan}");
    }
    // A call that never ends runs until its own deadline, counted from its
    // start, not from when its instance was made.
    std::thread::sleep(idle);
    let started = Instant::now();
    let spin = call(&mut served, "spin", json!({}));
    let took = started.elapsed();
    assert!(text(&spin).contains("timed out after 1500 ms"), "{spin}");
    assert!(
        took >= Duration::from_millis(1400),
        "ended after {took:?}: {spin}"
    );
    // The server goes on, on the instance made after the timed-out call.
    let control = call(
        &mut served,
        "scan_memory",
        json!({"key": 9, "mib": 1, "plant": true}),
    );
    assert!(text(&control).starts_with("found 1 in"), "{control}");
    let log = served.close();
    // At least the calls that came after a pause (the three scans and the
    // spin) took an instance made ahead; the others did when it was made
    // before they came.
    let taken = log.matches("the call takes an instance made ahead").count();
    assert!(
        taken >= 4,
        "{taken} calls took an instance made ahead:\n{log}"
    );
}
