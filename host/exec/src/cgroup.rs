//! A `pids` cgroup per run, where the host may create one, so that a fork
//! bomb meets the process budget and every process of the run can be found
//! and killed.

use super::MAX_PROCESSES;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static RUNS: AtomicU64 = AtomicU64::new(0);

/// A `pids` cgroup (v1 or v2) for one run, when the host may create one.
pub(super) struct PidsCgroup {
    dir: PathBuf,
    pub(super) tasks: Arc<CString>,
}

impl PidsCgroup {
    pub(super) fn create() -> Option<Self> {
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let name = format!("corral-{}-{n}", std::process::id());
        for (root, tasks) in [
            ("/sys/fs/cgroup/pids", "tasks"),
            ("/sys/fs/cgroup", "cgroup.procs"),
        ] {
            let base = Path::new(root);
            if !base.join("pids.max").exists() && root == "/sys/fs/cgroup" {
                continue;
            }
            let dir = base.join(&name);
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            if std::fs::write(dir.join("pids.max"), MAX_PROCESSES.to_string()).is_err() {
                let _ = std::fs::remove_dir(&dir);
                continue;
            }
            let tasks = CString::new(dir.join(tasks).into_os_string().into_encoded_bytes()).ok()?;
            return Some(Self {
                dir,
                tasks: Arc::new(tasks),
            });
        }
        None
    }

    /// Kills every process still in the group.
    pub(super) fn kill_all(&self) {
        for file in ["cgroup.procs", "tasks"] {
            if let Ok(text) = std::fs::read_to_string(self.dir.join(file)) {
                for pid in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    // SAFETY: kill takes plain integers.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
        }
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // The directory can be removed once its processes are gone.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            self.kill_all();
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Moves the calling process into the cgroup whose task file is `tasks`.
/// Runs between fork and exec: no allocation.
pub(super) fn join_cgroup(tasks: &CString) -> std::io::Result<()> {
    let mut buf = [0u8; 16];
    // SAFETY: getpid takes nothing.
    let mut pid = unsafe { libc::getpid() } as u32;
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (pid % 10) as u8;
        pid /= 10;
        if pid == 0 {
            break;
        }
    }
    // SAFETY: open/write/close with a valid NUL-terminated path and a stack buffer.
    unsafe {
        let fd = libc::open(tasks.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, buf[i..].as_ptr().cast(), buf.len() - i);
        let failed = written != (buf.len() - i) as isize;
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if failed {
            return Err(err);
        }
    }
    Ok(())
}
