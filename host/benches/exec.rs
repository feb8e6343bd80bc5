//! The cost of the one confined path per program run, printed as figures
//! from one run.
//!
//! `cargo bench -p corral --bench exec`
//!
//! One run of `true` three ways, in interleaved rounds (A B C A B C …) so
//! that the machine's drift hits all three alike, medians reported:
//! - plain: `std::process::Command` spawn and wait, what a tool without a
//!   sandbox costs;
//! - confined: [`corral_exec::Launch`] without read-only paths, the
//!   confinement programs had before (Landlock, seccomp, no capabilities,
//!   process budget, process-tree kill);
//! - confined + read-only: the same with the workspace's `.git` and
//!   `corral.toml` bind-mounted read-only in a private mount namespace,
//!   what every program corral starts now gets.
//!
//! Beside them, the part of every confined run that finds what it may not
//! reach: corral's own state (the user's corral directories, made when
//! missing) and the credential stores, found again for each run.
//!
//! Target: the mount namespace adds under 2 ms per run, small beside the
//! programs an agent runs (a `cargo check` is seconds).

use corral_exec::Launch;
use std::time::{Duration, Instant};

/// Prints one line of the report.
#[expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
fn report(line: &str) {
    println!("{line}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ws = ws.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(ws.join(".git")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.join("corral.toml"), "").unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let program = corral_exec::resolve("true").unwrap_or_else(|| panic!("no `true` in PATH"));

    let plain = || {
        let started = Instant::now();
        let status = std::process::Command::new(&program)
            .current_dir(&ws)
            .status()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(status.success());
        started.elapsed()
    };
    let confined = |read_only: bool| {
        let mut launch = Launch::new(&program, &ws).pass_env(["PATH"]).writable(&ws);
        if read_only {
            launch = launch.protect(&ws);
        }
        let started = Instant::now();
        let out = rt.block_on(launch.run()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.exit_code, Some(0), "{}", out.stderr);
        started.elapsed()
    };

    let (rounds, per_round) = (15, 20);
    let (mut a, mut b, mut c, mut d) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let kept = || {
        let started = Instant::now();
        let found = corral_exec::credential_stores();
        assert!(!found.is_empty(), "corral's own state is always kept out");
        started.elapsed()
    };
    for _ in 0..3 {
        plain();
        confined(false);
        confined(true);
    }
    for _ in 0..rounds {
        let round =
            |f: &dyn Fn() -> Duration| (0..per_round).map(|_| f()).sum::<Duration>() / per_round;
        a.push(round(&plain));
        b.push(round(&|| confined(false)));
        c.push(round(&|| confined(true)));
        d.push(round(&kept));
    }
    let (a, b, c, d) = (median(a), median(b), median(c), median(d));
    report(&format!(
        "one run of `true`, median of {rounds} interleaved rounds of {per_round}:"
    ));
    report(&format!("  plain spawn                    {a:>10.2?}"));
    report(&format!("  confined (before)              {b:>10.2?}"));
    report(&format!("  confined + read-only mounts    {c:>10.2?}"));
    report(&format!(
        "  of which: finding corral's state and the credentials {d:>10.2?}"
    ));
    report(&format!(
        "  the mount namespace adds {:.2?} per run (target: under 2 ms); the whole confinement {:.2?}",
        c.saturating_sub(b),
        c.saturating_sub(a)
    ));
}
