//! Issue 22's "a 100 MB message is cut off with bounded host memory",
//! measured: the peak resident memory of the `corral` process that took a
//! server's 100 MB answer (and a stdout flood) stays within a fixed margin
//! of the peak of one that took a short answer, read from the kernel's
//! accounting of that one child (`wait4`).

use crate::mcp_client::{PYTHON, runnable, script};
use crate::*;
use serde_json::json;
use std::process::Stdio;

/// The peak resident memory of `corral tool call TOOL` in the workspace,
/// in KiB, and whether it exited successfully.
fn peak_kib(cli: &Cli, sb: &Sandbox, tool: &str) -> (i64, bool) {
    #[allow(
        clippy::zombie_processes,
        reason = "reaped by wait4 below, which also reads its peak memory"
    )]
    let child = cli
        .command(
            &sb.ws(),
            &["tool", "call", tool, "--args", &json!({}).to_string()],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn corral");
    let pid = i32::try_from(child.id()).expect("pid");
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it and `status`
    // for the child just spawned, which nothing else waits for.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; both pointers outlive the call.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (usage.ru_maxrss, ok)
}

#[test]
fn a_100_mb_message_and_a_flood_cost_the_host_a_bounded_amount_of_memory() {
    if !runnable() {
        return;
    }
    let sb = Sandbox::new();
    let script = script(&sb);
    sb.write(
        "corral.toml",
        &format!(
            "[mcp.hostile]\ncommand = {PYTHON:?}\nargs = [{:?}]\ngrants = {{ fs = [\".\"] }}\n\
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
        // Holding the message whole would cost 100 MiB and more; reading
        // it in bounded pieces costs no more than a short answer, give or
        // take buffers and allocator noise.
        assert!(
            peak < small + 48 * 1024,
            "{tool}: corral peaked at {peak} KiB, a short answer at {small} KiB"
        );
    }
}
