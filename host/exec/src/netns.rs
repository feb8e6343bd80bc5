//! The child's side of [`super::Network::Only`]: in a network namespace of
//! its own (made with its mount namespace, see `launch.rs`), where only
//! `lo` exists, the child brings `lo` up, listens on
//! `127.0.0.1:`[`PROXY_PORT`] and hands the listening socket to corral over
//! a socket pair made before the fork. A socket keeps the namespace it was
//! made in, so corral accepts the program's connections from its own
//! namespace and serves them as the proxy ([`super::proxy`]); the program
//! has no other route out.

use super::ExecError;
use super::step::Step;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

/// The proxy's port inside the program's namespace, which holds nothing
/// else, so any port is free; Landlock lets the program connect to this
/// one only.
pub const PROXY_PORT: u16 = 3128;

/// The proxy's address as the program's `HTTP_PROXY` and the like name it.
pub(super) const PROXY_URL: &str = "http://127.0.0.1:3128";

/// The socket pair the listener crosses, child end to parent end.
pub(super) struct Handoff {
    parent: OwnedFd,
    child: OwnedFd,
}

impl Handoff {
    /// Made in the parent before the fork; both ends close on exec.
    pub(super) fn new() -> Result<Self, ExecError> {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two descriptors into `fds`.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if made != 0 {
            return Err(ExecError::SpawnFailed(format!(
                "cannot make the socket pair of the network proxy: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: both descriptors were just made and are owned by nothing else.
        Ok(unsafe {
            Self {
                parent: OwnedFd::from_raw_fd(fds[0]),
                child: OwnedFd::from_raw_fd(fds[1]),
            }
        })
    }

    /// The end the child sends on.
    pub(super) fn child_end(&self) -> i32 {
        self.child.as_raw_fd()
    }

    /// In the child, in its new network namespace, before Landlock and the
    /// seccomp filter: `lo` up, the listener made and sent, its descriptor
    /// closed, so that the program cannot accept its own connections. Only
    /// system calls.
    pub(super) fn send_listener(fd: i32) -> Result<(), Step> {
        // SAFETY: socket, ioctl, bind, listen, sendmsg and close on
        // descriptors made here and structures on the stack, which outlive
        // each call.
        unsafe {
            let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            if s < 0 {
                return Err(Step::Loopback);
            }
            let mut req: libc::ifreq = std::mem::zeroed();
            req.ifr_name[0] = b'l' as libc::c_char;
            req.ifr_name[1] = b'o' as libc::c_char;
            let up = libc::ioctl(s, libc::SIOCGIFFLAGS as _, &mut req) == 0 && {
                req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
                libc::ioctl(s, libc::SIOCSIFFLAGS as _, &req) == 0
            };
            libc::close(s);
            if !up {
                return Err(Step::Loopback);
            }
            let l = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if l < 0 {
                return Err(Step::Listener);
            }
            let addr = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: PROXY_PORT.to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
                },
                sin_zero: [0; 8],
            };
            let sent = libc::bind(
                l,
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ) == 0
                && libc::listen(l, 128) == 0
                && send_fd(fd, l);
            libc::close(l);
            if !sent {
                return Err(Step::Listener);
            }
        }
        Ok(())
    }

    /// In the parent, once the spawn returned (the child sent the listener
    /// before its exec, or the spawn failed): the listener.
    pub(super) fn receive(self) -> Result<std::net::TcpListener, ExecError> {
        drop(self.child);
        let fail = || {
            ExecError::SpawnFailed(format!(
                "the program's network proxy did not start: the listener did not arrive ({}); corral runs no program it cannot confine",
                std::io::Error::last_os_error()
            ))
        };
        let mut byte = 0u8;
        let mut iov = libc::iovec {
            iov_base: (&mut byte as *mut u8).cast(),
            iov_len: 1,
        };
        let mut space = [0u64; 8];
        // SAFETY: msghdr zeroed, then pointed at `iov` and `space`, which
        // outlive recvmsg; the control message is read only within the
        // length the kernel reports.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = space.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&space) as _;
            let n = libc::recvmsg(
                self.parent.as_raw_fd(),
                &mut msg,
                libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
            );
            if n != 1 {
                return Err(fail());
            }
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            if cmsg.is_null()
                || (*cmsg).cmsg_level != libc::SOL_SOCKET
                || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            {
                return Err(fail());
            }
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>());
            let listener = std::net::TcpListener::from(OwnedFd::from_raw_fd(fd));
            listener.set_nonblocking(true).map_err(|_| fail())?;
            Ok(listener)
        }
    }
}

/// Sends `fd` over the socket `over` with one byte of data. Only system calls.
///
/// # Safety
/// Both must be open descriptors.
unsafe fn send_fd(over: i32, fd: i32) -> bool {
    let mut byte = 0u8;
    let mut iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    let mut space = [0u64; 8];
    // SAFETY: as for recvmsg in `receive`: the header points at buffers on
    // the stack, and the one control message fits in `space`.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return false;
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), fd);
        libc::sendmsg(over, &msg, 0) == 1
    }
}
