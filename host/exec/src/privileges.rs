//! What a program must not inherit from corral: capabilities, access to
//! corral's memory and environment, and room for more processes than the
//! run's budget.

use super::MAX_PROCESSES;

/// Makes corral non-dumpable, so that its `/proc/PID/environ` and `mem`
/// (provider keys among them) open only with `CAP_SYS_PTRACE`, which the
/// programs it runs do not have (see [`drop_capabilities`]). Landlock alone
/// does not stop a program from reading its parent's environment.
pub(super) fn hide_from_children() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: prctl(PR_SET_DUMPABLE, 0) takes plain integers.
        let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        if rc != 0 {
            tracing::warn!(
                "cannot make corral non-dumpable: programs it runs may read its environment: {}",
                std::io::Error::last_os_error()
            );
        }
    });
}

/// In the child, before exec: drops every capability (effective, permitted,
/// inheritable, ambient and the bounding set), so that a program run as
/// root cannot use root's privileges either, e.g. `CAP_SYS_PTRACE` to read
/// corral's memory. Only syscalls, as a `pre_exec` closure requires; any
/// failure fails the spawn.
pub(super) fn drop_capabilities() -> std::io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    /// `_LINUX_CAPABILITY_VERSION_3`.
    const VERSION_3: u32 = 0x2008_0522;
    let last_error = std::io::Error::last_os_error;
    // SAFETY: prctl, capset and capget take plain integers and pointers to
    // the structs above, which live for the duration of the calls.
    unsafe {
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return Err(last_error());
        }
        // Dropping from the bounding set needs CAP_SETPCAP, which a user
        // who is not root lacks; it matters only when a uid is 0, whose
        // exec would otherwise regain the set.
        let root = libc::getuid() == 0 || libc::geteuid() == 0;
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                let err = last_error();
                match err.raw_os_error() {
                    // Past the last capability this kernel knows.
                    Some(libc::EINVAL) => break,
                    Some(libc::EPERM) if !root => break,
                    _ => return Err(err),
                }
            }
        }
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let mut data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(last_error());
        }
        // Read back: what counts is what the kernel holds.
        if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
            return Err(last_error());
        }
        if data
            .iter()
            .any(|d| d.effective != 0 || d.permitted != 0 || d.inheritable != 0)
        {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
    }
    Ok(())
}

/// `RLIMIT_NPROC` for a run: [`MAX_PROCESSES`] more than the user runs
/// already, since the kernel counts every process and thread of the real
/// user (a desktop session has hundreds), within the current hard limit.
pub(super) fn nproc_limit() -> libc::rlim_t {
    // SAFETY: getuid takes nothing; getrlimit writes into a valid struct.
    let (uid, hard) = unsafe {
        let mut current = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let hard = if libc::getrlimit(libc::RLIMIT_NPROC, &mut current) == 0 {
            current.rlim_max
        } else {
            libc::RLIM_INFINITY
        };
        (libc::getuid(), hard)
    };
    let uid = uid.to_string();
    let threads: u64 = std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
                .filter_map(|status| {
                    let mut real_uid = None;
                    let mut threads = None;
                    for line in status.lines() {
                        if let Some(v) = line.strip_prefix("Uid:") {
                            real_uid = v.split_whitespace().next().map(str::to_owned);
                        } else if let Some(v) = line.strip_prefix("Threads:") {
                            threads = v.trim().parse::<u64>().ok();
                        }
                    }
                    (real_uid.as_deref() == Some(uid.as_str())).then_some(threads?)
                })
                .sum()
        })
        .unwrap_or(0);
    (threads + MAX_PROCESSES).min(hard)
}
