//! A flood of streamed text cannot grow the host's memory, through `corral
//! run`: a provider plugin capped at 64 MiB that streams far more text than
//! the terminal takes cannot grow it, because deltas wait for the front-end
//! instead of queueing without limit.

use crate::*;
use corral_test_programs::ENV_PROVIDER;
use std::io::Read as _;
use std::time::{Duration, Instant};

/// A `/proc/PID/status` field in KiB (`VmRSS`, `VmHWM`), 0 once it is gone.
fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_flooding_provider_waits_for_the_terminal_instead_of_filling_memory() {
    const MIB: u64 = 256;
    let sb = Sandbox::with_manifest(&format!(
        "[plugins.flood]\nsource = {ENV_PROVIDER:?}\n\
             limits = {{ memory_mb = 64, output_kb = 2048, timeout_ms = 600000 }}\n\
             config = {{ flood_mib = \"{MIB}\" }}\n"
    ));
    let cli = Cli::new();
    let mut child = cli
        .command(&sb.ws(), &["run", "--provider", "flood", "go"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start corral");
    let pid = child.id();
    // A terminal slower than the provider: nobody reads for a while.
    let paused = Instant::now();
    let mut peak = 0;
    while paused.elapsed() < Duration::from_secs(4) {
        peak = peak.max(status_kb(pid, "VmHWM"));
        if peak > 1 << 20 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0u64;
        let mut tail = Vec::new();
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n as u64;
            tail = buf[..n].to_vec();
        }
        (total, tail)
    });
    let started = Instant::now();
    let status = loop {
        peak = peak.max(status_kb(pid, "VmHWM"));
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("corral did not finish streaming {MIB} MiB in 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (total, _) = reader.join().expect("reader");
    let mut err = String::new();
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err);
    assert!(status.success(), "{err}");
    eprintln!(
        "{MIB} MiB streamed in {:?}; corral's peak RSS {} MiB",
        paused.elapsed(),
        peak >> 10
    );
    // Nothing was dropped: every byte streamed reached the terminal.
    assert!(total >= MIB << 20, "only {total} bytes arrived: {err}");
    assert!(
        peak < 200 << 10,
        "corral's peak RSS was {} MiB while the provider streamed {MIB} MiB",
        peak >> 10
    );
}
