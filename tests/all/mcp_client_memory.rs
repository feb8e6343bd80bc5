//! A 100 MB message from an MCP server is cut off with bounded host memory,
//! measured: the peak resident memory of the `corral` process that took a
//! server's 100 MB answer (and a stdout flood) stays within a fixed margin
//! of the peak of one that took a short answer, read from the kernel's
//! accounting of that one child (`wait4`).

use crate::support::servers::{SYSTEM_PYTHON, hostile_runnable, hostile_script};
use crate::*;
use serde_json::json;
use std::process::Stdio;

/// Starts a program, waits for it and prints its peak resident memory in
/// KiB and its exit code, as `time -f %M` does. The test process does not
/// start `corral` itself: a child's `ru_maxrss` also counts the memory of
/// the process it was started from (the kernel records the old image's
/// peak at `exec`), and the test binary's peak grows with whatever the
/// tests beside it hold; this small interpreter's is the same every time.
const PEAK: &str = "import os, sys\n\
pid = os.fork()\n\
if pid == 0:\n    os.execv(sys.argv[1], sys.argv[1:])\n\
_, status, usage = os.wait4(pid, 0)\n\
print(\"\\n%d %d\" % (usage.ru_maxrss, os.waitstatus_to_exitcode(status)))\n";

/// The peak resident memory of `corral tool call TOOL` in the workspace,
/// in KiB, and whether it exited successfully.
fn peak_kib(cli: &Cli, sb: &Sandbox, tool: &str) -> (i64, bool) {
    let corral = cli.command(
        &sb.ws(),
        &["tool", "call", tool, "--args", &json!({}).to_string()],
    );
    let mut probe = std::process::Command::new(SYSTEM_PYTHON);
    probe.args(["-c", PEAK]);
    let mut cmd = crate::support::process::wrapping(probe, &corral);
    cmd.stdin(Stdio::null()).stderr(Stdio::null());
    let out = cmd.output().expect("run corral under the peak probe");
    let text = String::from_utf8_lossy(&out.stdout);
    // corral's own stdout comes first; the probe's line, on a line of its
    // own, is the last.
    let last = text.lines().last().unwrap_or_default();
    let mut fields = last.split(' ').map(|f| f.parse::<i64>());
    match (fields.next(), fields.next()) {
        (Some(Ok(peak)), Some(Ok(code))) => (peak, code == 0),
        _ => panic!("the peak probe printed {text:?}"),
    }
}

#[test]
fn a_100_mb_message_and_a_flood_cost_the_host_a_bounded_amount_of_memory() {
    if !hostile_runnable() {
        return;
    }
    let sb = Sandbox::new();
    let script = hostile_script(&sb);
    sb.write(
        "corral.toml",
        &format!(
            "[mcp.hostile]\ncommand = {SYSTEM_PYTHON:?}\nargs = [{:?}]\ngrants = {{ fs = [\".\"] }}\n\
             timeout_ms = 20000\noutput_kb = 256\n",
            script.display().to_string()
        ),
    );
    let cli = Cli::new();
    let (small, ok) = peak_kib(&cli, &sb, "hostile__pid");
    assert!(ok, "a short answer failed");
    for tool in ["hostile__big", "hostile__flood"] {
        let (peak, ok) = peak_kib(&cli, &sb, tool);
        assert!(!ok, "{tool} was not cut off");
        eprintln!("{tool}: corral peaked at {peak} KiB, a short answer at {small} KiB");
        // Holding the message whole would cost 100 MiB and more; reading
        // it in bounded pieces costs no more than a short answer, give or
        // take buffers and allocator noise.
        assert!(
            peak < small + 48 * 1024,
            "{tool}: corral peaked at {peak} KiB, a short answer at {small} KiB"
        );
    }
}
