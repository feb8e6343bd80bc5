//! stdin and stdout as the server reads and writes them.
//!
//! tokio's `stdin()` and `stdout()` hand every read and every write to its
//! blocking thread pool, so each request and each answer crosses threads
//! twice more than its work needs. When the client connected a pipe or a
//! socket (as every MCP client does), the server reads and writes it
//! without blocking on the runtime's own threads instead; a terminal or a
//! file keeps tokio's blocking reads and writes.
//!
//! Switching a pipe to non-blocking mode switches it for every process that
//! shares it, so it is done only where no one else writes through it: not
//! when stderr is the same pipe (a log line would then fail with "try
//! again"), and stdin and stdout together or not at all when they are one
//! socket. The modes are put back when the server is done.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{FileType, OFlags};
use tokio::io::{AsyncRead, AsyncWrite};

/// What the server reads its requests from.
pub type Input = Box<dyn AsyncRead + Send + Unpin>;
/// What the server writes its answers to.
pub type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// stdin and stdout for the server, and the modes to put back afterwards.
pub struct Stdio {
    /// The requests.
    pub input: Input,
    /// The answers.
    pub output: Output,
    /// Puts the streams' modes back when dropped.
    pub modes: Modes,
}

/// The modes of the streams switched to non-blocking, put back on drop.
pub struct Modes(Vec<(BorrowedFd<'static>, OFlags)>);

impl Drop for Modes {
    fn drop(&mut self) {
        for (fd, flags) in &self.0 {
            let _ = rustix::fs::fcntl_setfl(fd, *flags);
        }
    }
}

/// A standard stream's kind and identity, `None` when it is not open.
fn kind(fd: BorrowedFd<'_>) -> Option<(FileType, (u64, u64))> {
    let st = rustix::fs::fstat(fd).ok()?;
    let file_type = FileType::from_raw_mode(st.st_mode);
    #[allow(
        clippy::useless_conversion,
        reason = "`dev_t` and `ino_t` are not 64 bits on every target"
    )]
    Some((file_type, (u64::from(st.st_dev), u64::from(st.st_ino))))
}

/// Whether a stream of this kind can be read or written without blocking.
fn pollable(kind: Option<(FileType, (u64, u64))>) -> bool {
    matches!(kind, Some((FileType::Fifo | FileType::Socket, _)))
}

/// The server's stdin and stdout; must be called on the runtime.
pub fn open() -> Stdio {
    let (fd0, fd1) = (std::io::stdin(), std::io::stdout());
    let (fd0, fd1) = (fd0.as_fd(), fd1.as_fd());
    let (k0, k1, k2) = (kind(fd0), kind(fd1), kind(std::io::stderr().as_fd()));
    let id = |k: Option<(FileType, (u64, u64))>| k.map(|(_, id)| id);
    let apart_from_stderr = |k| id(k).is_some() && id(k) != id(k2);
    let mut fast_in = pollable(k0) && apart_from_stderr(k0);
    let mut fast_out = pollable(k1) && apart_from_stderr(k1);
    if id(k0) == id(k1) {
        let both = fast_in && fast_out;
        (fast_in, fast_out) = (both, both);
    }
    let mut stdio = Stdio {
        input: Box::new(tokio::io::stdin()),
        output: Box::new(tokio::io::stdout()),
        modes: Modes(Vec::new()),
    };
    // Both modes are read before either is switched: with one socket for
    // both, the second read would see the first switch.
    let (mode0, mode1) = (mode(fd0), mode(fd1));
    if fast_in && let Some(flags) = mode0 {
        match reader(fd0, k0) {
            Some(input) => {
                stdio.input = input;
                stdio.modes.0.push((stdin_fd(), flags));
            }
            None => put_back(fd0, flags),
        }
    }
    if fast_out && let Some(flags) = mode1 {
        match writer(fd1, k1) {
            Some(output) => {
                stdio.output = output;
                stdio.modes.0.push((stdout_fd(), flags));
            }
            None => put_back(fd1, flags),
        }
    }
    stdio
}

fn stdin_fd() -> BorrowedFd<'static> {
    // SAFETY: fd 0 stays open for the life of the process (nothing in
    // corral closes it).
    unsafe { BorrowedFd::borrow_raw(0) }
}

fn stdout_fd() -> BorrowedFd<'static> {
    // SAFETY: fd 1 stays open for the life of the process (nothing in
    // corral closes it; the server's writer holds a duplicate).
    unsafe { BorrowedFd::borrow_raw(1) }
}

fn mode(fd: BorrowedFd<'_>) -> Option<OFlags> {
    rustix::fs::fcntl_getfl(fd).ok()
}

fn put_back(fd: BorrowedFd<'_>, flags: OFlags) {
    let _ = rustix::fs::fcntl_setfl(fd, flags);
}

/// A duplicate of `fd`, for the runtime to own.
fn dup(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    fd.try_clone_to_owned().ok()
}

/// A duplicate of the socket `fd` in non-blocking mode, for the runtime.
fn socket(fd: BorrowedFd<'_>) -> Option<tokio::net::UnixStream> {
    let socket = std::os::unix::net::UnixStream::from(dup(fd)?);
    socket.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(socket).ok()
}

/// The pipe or socket `fd` read without blocking, through a duplicate.
fn reader(fd: BorrowedFd<'_>, kind: Option<(FileType, (u64, u64))>) -> Option<Input> {
    Some(match kind?.0 {
        FileType::Fifo => Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(dup(fd)?).ok()?),
        FileType::Socket => Box::new(socket(fd)?),
        _ => return None,
    })
}

/// The pipe or socket `fd` written without blocking, through a duplicate.
fn writer(fd: BorrowedFd<'_>, kind: Option<(FileType, (u64, u64))>) -> Option<Output> {
    Some(match kind?.0 {
        FileType::Fifo => Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(dup(fd)?).ok()?),
        FileType::Socket => Box::new(socket(fd)?),
        _ => return None,
    })
}
