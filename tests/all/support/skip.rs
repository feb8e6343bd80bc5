//! A test that cannot run says so, and the run counts it: each skip is kept
//! in one list for the whole test binary, and when the binary exits it
//! prints how many tests were skipped, what each lacked, and the command
//! that installs it. Under `CORRAL_CI` a missing toolchain or server is a
//! failure instead, since CI installs everything the tests use.
//!
//! libtest has no hook at the end of a run, so the summary is printed by a
//! handler registered with `atexit` at the first skip: the binary is one
//! process, and libtest leaves it through `exit` whether the tests passed or
//! failed.

use std::fmt::Display;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Mutex, Once};

/// The command that installs every toolchain and server the tests use
/// (into `~/.cache/corral-ci`) and runs the tests with them.
pub const CI_RUN: &str = "bash .ci/run";

/// What would let a skipped test run.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Remedy {
    /// A command that installs what was missing.
    Install(String),
    /// A network that reaches what was out of reach.
    Network,
    /// Nothing a command can give (the kernel, the user the tests run as).
    None,
}

struct Skip {
    test: String,
    why: String,
    remedy: Remedy,
}

static SKIPS: Mutex<Vec<Skip>> = Mutex::new(Vec::new());

/// The test lacks `what` (a toolchain, a server, a program), which
/// `install` puts in place. Under `CORRAL_CI` this fails the test.
pub fn missing(what: impl Display, install: &str) {
    let what = what.to_string();
    assert!(
        !under_ci(),
        "CORRAL_CI is set but {what}; install with: {install}"
    );
    record(what, Remedy::Install(install.to_owned()));
}

/// The test needs to reach `what` over the network, and cannot from here.
/// Under `CORRAL_CI` this fails the test.
pub fn offline(what: impl Display) {
    let what = what.to_string();
    assert!(!under_ci(), "CORRAL_CI is set but {what}");
    record(what, Remedy::Network);
}

/// This machine cannot run the test (its kernel, or the user the tests run
/// as); no install changes that, so the test is skipped under CI too.
pub fn cannot_run_here(why: impl Display) {
    record(why.to_string(), Remedy::None);
}

/// The interpreter `var` names, else `bin/python` of the virtualenv `venv`
/// that `.ci/run` keeps in its cache (`CORRAL_CI_CACHE`, else
/// `~/.cache/corral-ci`); or why there is none, naming `what` it would have
/// given ("no uvicorn").
pub fn ci_python(var: &str, venv: &str, what: &str) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(var) {
        return Ok(PathBuf::from(p));
    }
    let cache = std::env::var_os("CORRAL_CI_CACHE")
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".cache/corral-ci")));
    match cache.map(|c| c.join(venv).join("bin/python")) {
        Some(p) if p.exists() => Ok(p),
        Some(p) => Err(format!(
            "{what}: {var} is unset and {} does not exist",
            p.display()
        )),
        None => Err(format!(
            "{what}: {var} is unset and there is no home directory"
        )),
    }
}

/// The directory `var` names if its `node_modules` holds `package`, or
/// `None`, the test counted as skipped (a failure under CI, which installs
/// it); `what` names the client the package gives ("no ACP client").
pub fn node_package(var: &str, package: &str, what: &str) -> Option<PathBuf> {
    let why = match std::env::var_os(var).map(PathBuf::from) {
        Some(dir) if dir.join("node_modules").join(package).is_dir() => {
            return Some(dir);
        }
        Some(dir) => format!(
            "{var} is {} but it holds no node_modules/{package}",
            dir.display()
        ),
        None => format!("{var} is unset"),
    };
    missing(format!("{what}: {why}"), CI_RUN);
    None
}

fn under_ci() -> bool {
    std::env::var_os("CORRAL_CI").is_some()
}

fn record(why: String, remedy: Remedy) {
    // libtest runs each test on a thread named after it.
    let test = std::thread::current()
        .name()
        .unwrap_or("a test on an unnamed thread")
        .to_owned();
    eprintln!("skipped: {}", line(&why, &remedy));
    lock().push(Skip { test, why, remedy });
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: `summary` is an `extern "C" fn()` that never unwinds (it
        // neither panics nor lets a panic out), as atexit requires.
        let registered = unsafe { libc::atexit(summary) };
        if registered != 0 {
            eprintln!("cannot register the skip summary with atexit; it will not be printed");
        }
    });
}

fn lock() -> std::sync::MutexGuard<'static, Vec<Skip>> {
    // A test that panicked holding the lock left whole entries behind.
    SKIPS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn line(why: &str, remedy: &Remedy) -> String {
    match remedy {
        Remedy::Install(command) => format!("{why} — install with: {command}"),
        Remedy::Network => format!("{why} — needs a network that reaches it"),
        Remedy::None => format!("{why} — this machine cannot run it"),
    }
}

/// Runs at exit: the skips, grouped by what was lacking.
extern "C" fn summary() {
    let text = std::panic::catch_unwind(render).unwrap_or_default();
    let _ = std::io::stderr().write_all(text.as_bytes());
}

fn render() -> String {
    let mut skips = std::mem::take(&mut *lock());
    if skips.is_empty() {
        return String::new();
    }
    skips.sort_by(|a, b| (&a.remedy, &a.why, &a.test).cmp(&(&b.remedy, &b.why, &b.test)));
    let mut out = format!("\n{} in tests/all:\n", tests(skips.len()));
    for group in skips.chunk_by(|a, b| (&a.remedy, &a.why) == (&b.remedy, &b.why)) {
        let first = &group[0];
        out += &format!(
            "  {}: {}\n",
            tests(group.len()),
            line(&first.why, &first.remedy)
        );
        for skip in group {
            out += &format!("      {}\n", skip.test);
        }
    }
    let installs = skips
        .iter()
        .any(|s| matches!(&s.remedy, Remedy::Install(c) if c == CI_RUN));
    if installs {
        out += &format!(
            "`{CI_RUN}` installs every toolchain and server into ~/.cache/corral-ci \
             and runs the tests with them (CORRAL_CI=1: a skip is a failure).\n"
        );
    }
    out
}

fn tests(n: usize) -> String {
    match n {
        1 => "1 test skipped".to_owned(),
        n => format!("{n} tests skipped"),
    }
}
