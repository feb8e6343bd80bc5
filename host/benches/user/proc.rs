//! Whole-process measurement: start a command, watch its stdout for a
//! marker, reap it with `wait4` for the kernel's own CPU accounting.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes of stdout and stderr kept for checks; the rest is counted only.
const KEEP: usize = 4 << 20;

/// A command that did not finish within this is killed (a hung row must not
/// hang the whole bench).
const DEADLINE: Duration = Duration::from_secs(180);

/// What one finished run gave.
pub struct Finished {
    /// When the process was started.
    pub started: Instant,
    /// When `wait4` returned.
    pub exited: Instant,
    /// User + system CPU of the process and of its reaped descendants.
    pub cpu: Duration,
    /// The largest resident set of the process or of one of its reaped
    /// descendants, in KiB (the kernel's `ru_maxrss`).
    pub peak_kib: u64,
    /// Exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The first [`KEEP`] bytes of stdout.
    pub stdout: Vec<u8>,
    /// Every byte written to stdout.
    pub stdout_len: usize,
    /// The first [`KEEP`] bytes of stderr.
    pub stderr: Vec<u8>,
    /// When the marker first appeared on stdout.
    pub marker_at: Option<Instant>,
    /// When the first byte appeared on stdout or stderr (the end of a
    /// blank screen).
    pub first_output: Option<Instant>,
}

impl Finished {
    /// Start to exit.
    pub fn wall(&self) -> Duration {
        self.exited - self.started
    }

    /// Stdout as text (what was kept of it).
    pub fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Panics with the output unless the run exited 0.
    pub fn ok(self, what: &str) -> Self {
        if self.code != Some(0) {
            panic!(
                "{what} failed (exit {:?}):\nstdout: {}\nstderr: {}",
                self.code,
                String::from_utf8_lossy(&self.stdout[..self.stdout.len().min(4000)]),
                String::from_utf8_lossy(&self.stderr[..self.stderr.len().min(4000)])
            );
        }
        self
    }
}

#[derive(Default)]
struct Seen {
    at: Option<Instant>,
    first_output: Option<Instant>,
}

fn first_byte(seen: &(Mutex<Seen>, Condvar)) {
    let mut s = seen.0.lock().unwrap_or_else(|e| e.into_inner());
    s.first_output.get_or_insert_with(Instant::now);
}

/// A running command.
pub struct Running {
    child: Child,
    started: Instant,
    /// Its stdin, when [`start`] was asked for one.
    pub stdin: Option<ChildStdin>,
    seen: Arc<(Mutex<Seen>, Condvar)>,
    out: JoinHandle<(Vec<u8>, usize)>,
    err: JoinHandle<Vec<u8>>,
}

/// Starts `cmd`; its stdout is searched for `marker` as it arrives.
pub fn start(cmd: &mut Command, marker: Option<&[u8]>, with_stdin: bool) -> Running {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if with_stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.get_program()));
    let stdin = child.stdin.take();
    let mut stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let seen: Arc<(Mutex<Seen>, Condvar)> = Arc::default();
    let marker = marker.map(<[u8]>::to_vec);
    let out = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut total = 0usize;
            // The marker may straddle two reads: search the tail of the
            // previous read with the new one.
            let mut window: Vec<u8> = Vec::new();
            let mut buf = vec![0u8; 256 * 1024];
            loop {
                let n = match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if total == 0 {
                    first_byte(&seen);
                }
                total += n;
                if kept.len() < KEEP {
                    let room = KEEP - kept.len();
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
                if let Some(m) = &marker {
                    let (lock, cv) = &*seen;
                    let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
                    if s.at.is_none() {
                        window.extend_from_slice(&buf[..n]);
                        if window.windows(m.len()).any(|w| w == m.as_slice()) {
                            s.at = Some(Instant::now());
                            cv.notify_all();
                        }
                        let keep_from = window.len().saturating_sub(m.len());
                        window.drain(..keep_from);
                    }
                }
            }
            (kept, total)
        })
    };
    let seen_err = seen.clone();
    let err = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stderr.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if kept.is_empty() {
                        first_byte(&seen_err);
                    }
                    if kept.len() < KEEP {
                        kept.extend_from_slice(&buf[..n.min(KEEP - kept.len())]);
                    }
                }
            }
        }
        kept
    });
    Running {
        child,
        started,
        stdin,
        seen,
        out,
        err,
    }
}

impl Running {
    /// When it started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Writes `bytes` to its stdin.
    pub fn send(&mut self, bytes: &[u8]) {
        if let Some(stdin) = &mut self.stdin {
            let _ = stdin.write_all(bytes);
            let _ = stdin.flush();
        }
    }

    /// Waits (up to `timeout`) for the marker on stdout.
    pub fn wait_marker(&self, timeout: Duration) -> Option<Instant> {
        let (lock, cv) = &*self.seen;
        let s = lock.lock().unwrap_or_else(|e| e.into_inner());
        let (s, _) = cv
            .wait_timeout_while(s, timeout, |s| s.at.is_none())
            .unwrap_or_else(|e| e.into_inner());
        s.at
    }

    /// Closes stdin, waits for the exit and reaps it.
    pub fn finish(mut self) -> Finished {
        drop(self.stdin.take());
        let pid = self.child.id() as libc::pid_t;
        let reaped = Arc::new((Mutex::new(false), Condvar::new()));
        let watchdog = {
            let reaped = reaped.clone();
            std::thread::spawn(move || {
                let (lock, cv) = &*reaped;
                let done = lock.lock().unwrap_or_else(|e| e.into_inner());
                let (done, _) = cv
                    .wait_timeout_while(done, DEADLINE, |d| !*d)
                    .unwrap_or_else(|e| e.into_inner());
                if !*done {
                    // Still our unreaped child (the flag is set under this
                    // lock right after wait4), so the pid is still its own.
                    // SAFETY: kill has no memory effects.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            })
        };
        let mut status: libc::c_int = 0;
        // SAFETY: rusage is plain old data; all-zero is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: both pointers are to live locals of the right types.
            let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            if r == pid {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                panic!("wait4: {e}");
            }
        }
        let exited = Instant::now();
        {
            let (lock, cv) = &*reaped;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
        }
        let _ = watchdog.join();
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        let cpu = tv(usage.ru_utime) + tv(usage.ru_stime);
        let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        let (stdout, stdout_len) = self.out.join().unwrap_or_default();
        let stderr = self.err.join().unwrap_or_default();
        let (marker_at, first_output) = {
            let s = self.seen.0.lock().unwrap_or_else(|e| e.into_inner());
            (s.at, s.first_output)
        };
        Finished {
            started: self.started,
            exited,
            cpu,
            peak_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
            code,
            stdout,
            stdout_len,
            stderr,
            marker_at,
            first_output,
        }
    }
}

/// Runs `cmd` to the end.
pub fn run(cmd: &mut Command) -> Finished {
    start(cmd, None, false).finish()
}

/// Runs `cmd` to the end, watching for `marker` on stdout.
pub fn run_marked(cmd: &mut Command, marker: &[u8]) -> Finished {
    start(cmd, Some(marker), false).finish()
}
