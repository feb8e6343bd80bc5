//! Files the host reads for itself: plugin components, manifests and
//! `AGENTS.md`. Each is opened non-blocking and read only when it is a
//! regular file, up to a size cap, so a FIFO cannot hang a command and a
//! device such as `/dev/zero` cannot make it allocate without bound.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Opening or reading failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It is not a regular file.
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    /// It is larger than the cap.
    #[error("it is larger than the limit of {} MiB", .0 >> 20)]
    TooLarge(u64),
}

impl ReadError {
    /// Whether the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Flags for every file the host opens to read: a FIFO opens at once
/// instead of waiting for a writer, and a terminal never becomes ours.
pub const OPEN_FLAGS: i32 = libc::O_NONBLOCK | libc::O_NOCTTY;

/// Reads `path` if it is a regular file of at most `max` bytes.
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OPEN_FLAGS)
        .open(path)?;
    read_open(file, max)
}

/// Opens one of corral's own state files (a cache entry, a journal, a
/// checkpoint): never through a symlink, without blocking, and only when it
/// is a regular file. What a confined program could have swapped in (a
/// FIFO, a link to `/dev/zero`) is refused, never waited on.
pub fn open_state(path: &Path) -> Result<std::fs::File, ReadError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OPEN_FLAGS | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                ReadError::NotRegular("a symlink")
            } else {
                ReadError::Io(e)
            }
        })?;
    if let Some(kind) = kind(&file.metadata()?.file_type()) {
        return Err(ReadError::NotRegular(kind));
    }
    Ok(file)
}

/// Reads one of corral's own state files ([`open_state`]) of at most `max`
/// bytes.
pub fn read_state(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    read_open(open_state(path)?, max)
}

/// Reads an already opened file if it is a regular file of at most `max`
/// bytes.
pub fn read_open(file: std::fs::File, max: u64) -> Result<Vec<u8>, ReadError> {
    let meta = file.metadata()?;
    let kind = kind(&meta.file_type());
    if let Some(kind) = kind {
        return Err(ReadError::NotRegular(kind));
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge(max));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // It may have grown since: one byte past the cap tells.
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge(max));
    }
    Ok(bytes)
}

/// What a file that is not regular is, for messages; `None` for a regular
/// file.
pub fn kind(ft: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt as _;
    Some(if ft.is_file() {
        return None;
    } else if ft.is_dir() {
        "a directory"
    } else {
        special_kind(
            ft.is_fifo(),
            ft.is_socket(),
            ft.is_char_device(),
            ft.is_block_device(),
        )
    })
}

/// What a file that is neither regular nor a directory is, for messages,
/// from what its type answers: a FIFO, a socket, a character device, a
/// block device. Any file type can say it this way (cap-std's has no
/// conversion to std's).
pub fn special_kind(
    fifo: bool,
    socket: bool,
    char_device: bool,
    block_device: bool,
) -> &'static str {
    if fifo {
        "a FIFO (named pipe)"
    } else if socket {
        "a socket"
    } else if char_device {
        "a character device"
    } else if block_device {
        "a block device"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_cap_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "12345").unwrap();
        assert_eq!(read_regular(&file, 5).unwrap(), b"12345");
        assert!(matches!(
            read_regular(&file, 4),
            Err(ReadError::TooLarge(4))
        ));
        assert!(matches!(
            read_regular(dir.path(), 4),
            Err(ReadError::NotRegular("a directory"))
        ));
        assert!(matches!(
            read_regular(Path::new("/dev/zero"), 4),
            Err(ReadError::NotRegular("a character device"))
        ));
        assert!(
            read_regular(&dir.path().join("missing"), 4)
                .unwrap_err()
                .is_not_found()
        );
    }
}
