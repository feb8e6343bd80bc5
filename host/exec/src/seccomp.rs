//! The seccomp filter of a run: no UNIX sockets, no IP sockets without
//! `network`, no `io_uring`, no mounts or namespaces, nothing for another
//! architecture.

/// A seccomp filter for programs: `socket()` for UNIX sockets is refused
/// (a session bus, an ssh or gpg agent, a container daemon could each run
/// commands outside the sandbox for it), and without `network` so is
/// `socket()` for IPv4 and IPv6 (Landlock stops TCP, not UDP), and with
/// only some destinations, reached through the proxy on `127.0.0.1`, IPv6; `io_uring`,
/// which could open sockets past the filter, is refused too, and so are
/// `mount`, `umount2`, `pivot_root`, `unshare`, `setns` and the new mount
/// API, which could undo the run's read-only mounts. Anything for
/// another architecture (32-bit or x32 system calls) is refused.
pub(super) fn socket_filter(network: &super::Network) -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ: u16 = 0x15;
    const JGE: u16 = 0x35;
    const RET: u16 = 0x06;
    const ALLOW: u32 = 0x7fff_0000;
    const DENY: u32 = libc::SECCOMP_RET_ERRNO | libc::EACCES as u32;
    const NOT_PERMITTED: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xc000_003e;
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xc000_00b7;
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let mut prog = vec![
        // arch must be this one
        op(LD_W_ABS, 0, 0, 4),
        op(JEQ, 1, 0, ARCH),
        op(RET, 0, 0, DENY),
        op(LD_W_ABS, 0, 0, 0),
        // x32 system calls carry bit 30
        op(JGE, 0, 1, 0x4000_0000),
        op(RET, 0, 0, DENY),
        op(JEQ, 0, 1, libc::SYS_io_uring_setup as u32),
        op(RET, 0, 0, DENY),
    ];
    // What could undo the read-only mounts of a run, or make a namespace
    // in which its capabilities come back.
    for call in [
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fsconfig,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
    ] {
        prog.push(op(JEQ, 0, 1, call as u32));
        prog.push(op(RET, 0, 0, NOT_PERMITTED));
    }
    prog.extend([
        op(JEQ, 1, 0, libc::SYS_socket as u32),
        op(RET, 0, 0, ALLOW),
        // socket(domain, ...): the low word of the first argument
        op(LD_W_ABS, 0, 0, 16),
    ]);
    let mut denied = vec![libc::AF_UNIX as u32];
    match network {
        super::Network::Off => denied.extend([libc::AF_INET as u32, libc::AF_INET6 as u32]),
        // IPv4 reaches the proxy on 127.0.0.1; nothing needs IPv6.
        super::Network::Only(_) => denied.push(libc::AF_INET6 as u32),
        super::Network::Any => {}
    }
    for domain in denied {
        prog.push(op(JEQ, 0, 1, domain));
        prog.push(op(RET, 0, 0, DENY));
    }
    prog.push(op(RET, 0, 0, ALLOW));
    prog
}

/// In the child, before exec: installs `filter` (after no-new-privs, which
/// it needs). Only syscalls.
pub(super) fn install_filter(filter: &[libc::sock_filter]) -> std::io::Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl reads `prog`, which points at `filter`; both outlive the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
