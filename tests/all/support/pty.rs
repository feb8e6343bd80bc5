//! A pseudo-terminal that keeps every byte a program writes to it, and what
//! a terminal shows of those bytes, read back through a terminal emulator
//! (`vt100`): a line the program erased or overwrote is gone from what is
//! shown, as it is for the person at the terminal.

use std::io::Read as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::process::{Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The size of the terminal: tall enough that nothing a test prints
/// scrolls away, wide enough for a JSON line or two.
pub const ROWS: u16 = 200;
pub const COLS: u16 = 160;

/// What a program left on a terminal.
pub struct Shown {
    /// Every byte it wrote, in order.
    pub bytes: Vec<u8>,
    /// The screen those bytes leave, a row a line (wrapped rows joined),
    /// trailing blanks dropped.
    pub screen: String,
    pub status: ExitStatus,
}

/// Runs `cmd` with a new pseudo-terminal as its stdin, stdout and stderr,
/// to its end, and returns what it left on the terminal.
pub fn run(mut cmd: Command) -> Shown {
    let (master, slave) = open();
    cmd.stdin(slave.try_clone().expect("dup"))
        .stdout(slave.try_clone().expect("dup"))
        .stderr(slave);
    let bytes: Arc<Mutex<Vec<u8>>> = Arc::default();
    let reader = {
        let bytes = bytes.clone();
        let mut master = master;
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once every copy of the terminal's other side is
            // closed, i.e. once the program is gone.
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                bytes.lock().expect("lock").extend_from_slice(&buf[..n]);
            }
        })
    };
    let mut child = cmd.spawn().expect("spawn corral");
    // The parent's copies of the terminal go, so the reader sees its end.
    drop(cmd);
    let status = child.wait().expect("wait");
    // A hang guard only: the reader ends as soon as the output is drained.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !reader.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let bytes = bytes.lock().expect("lock").clone();
    let screen = screen(&bytes);
    Shown {
        bytes,
        screen,
        status,
    }
}

/// What a terminal of [`ROWS`] × [`COLS`] shows after `bytes`.
pub fn screen(bytes: &[u8]) -> String {
    let mut term = vt100::Parser::new(ROWS, COLS, 0);
    term.process(bytes);
    term.screen()
        .contents()
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A new pseudo-terminal of [`ROWS`] × [`COLS`]: its master side (the
/// terminal) and its slave side (what the program is given).
pub fn open() -> (std::fs::File, OwnedFd) {
    let (mut m, mut s) = (0, 0);
    let size = libc::winsize {
        ws_row: ROWS,
        ws_col: COLS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two file descriptors into the given integers
    // and only reads the window size.
    let rc = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned here.
    unsafe { (std::fs::File::from_raw_fd(m), OwnedFd::from_raw_fd(s)) }
}
