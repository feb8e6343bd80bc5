//! What one call actually touched, recorded where each effect happens: the
//! files it opened for reading (through `wasi:filesystem` or corral's
//! `files`), the hosts its HTTP requests went to, and the programs it ran
//! and whether they had the network. Provenance labels are derived from
//! this record, never from what a tool says about itself.

use foldhash::fast::RandomState;
use std::collections::HashSet;
use std::hash::BuildHasher;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Entries of each kind kept per call; a call that reads more files than
/// this (a grep over a tree) keeps the first ones and a count.
const MAX_ENTRIES: usize = 4096;

/// What one call touched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touched {
    /// Files opened for reading, by the path the kernel resolved them to.
    pub reads: Vec<PathBuf>,
    /// Files opened for reading beyond [`MAX_ENTRIES`], not listed.
    pub reads_dropped: usize,
    /// Destinations of requests that went out, as `scheme://host:port`.
    pub hosts: Vec<String>,
    /// Programs run through `corral:plugin/process`.
    pub programs: Vec<ProgramRun>,
}

/// One program run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramRun {
    /// The program as the plugin named it.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Whether its grant let it open TCP connections.
    pub network: bool,
}

/// [`Touched`] while the call runs, with what makes recording O(1) per
/// effect: a grep opens tens of thousands of files, and comparing each with
/// every path recorded so far made the bookkeeping cost more than the grep.
#[derive(Debug, Default)]
pub(crate) struct Recording {
    touched: Touched,
    /// The listed reads, to know a file already recorded without a scan
    /// (foldhash under a random per-process seed: a grep records tens of
    /// thousands of paths, and SipHash over each was a visible share of
    /// the host's time).
    listed: HashSet<PathBuf, RandomState>,
    /// Keyed hashes of the paths counted in `reads_dropped`: only a count
    /// depends on them, so a tree of a million files does not keep a
    /// million paths (a collision under a random key only undercounts).
    dropped: HashSet<u64, RandomState>,
    hasher: RandomState,
}

impl Recording {
    /// Records a file opened for reading through `fd`, by the path the
    /// kernel knows it by (so a symlink counts as what it points to).
    pub(crate) fn read_fd(&mut self, fd: &impl AsRawFd) {
        let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
        match std::fs::read_link(link) {
            Ok(path) => self.read_path(path),
            Err(e) => {
                // Unknown origin counts as outside the workspace.
                tracing::debug!("cannot tell which file a call opened: {e}");
                self.read_path(PathBuf::from("(unknown file)"));
            }
        }
    }

    /// Records a file opened for reading by the host path it was opened
    /// by, when that path is exact (no symlink on the way).
    pub(crate) fn read_path(&mut self, path: PathBuf) {
        if self.listed.contains(&path) {
            return;
        }
        if self.touched.reads.len() < MAX_ENTRIES {
            self.listed.insert(path.clone());
            self.touched.reads.push(path);
        } else if self
            .dropped
            .insert(self.hasher.hash_one(path.as_os_str().as_bytes()))
        {
            self.touched.reads_dropped += 1;
        }
    }

    /// Records a program run.
    pub(crate) fn program(&mut self, run: ProgramRun) {
        self.touched.program(run);
    }

    /// What the call touched.
    pub(crate) fn finish(self) -> Touched {
        self.touched
    }
}

impl Touched {
    /// Records a request that went out to `scheme://host:port`.
    pub(crate) fn host(&mut self, scheme: &str, host: &str, port: u16) {
        let dest = format!("{scheme}://{host}:{port}");
        if !self.hosts.contains(&dest) && self.hosts.len() < MAX_ENTRIES {
            self.hosts.push(dest);
        }
    }

    /// Records a program run.
    pub(crate) fn program(&mut self, run: ProgramRun) {
        if !self.programs.contains(&run) && self.programs.len() < MAX_ENTRIES {
            self.programs.push(run);
        }
    }

    /// Whether the call touched nothing this records.
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.hosts.is_empty() && self.programs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_listed_once_up_to_the_cap_and_counted_once_beyond() {
        let mut rec = Recording::default();
        for _ in 0..2 {
            for i in 0..MAX_ENTRIES + 10 {
                rec.read_path(PathBuf::from(format!("/ws/f{i}")));
            }
        }
        let touched = rec.finish();
        assert_eq!(touched.reads.len(), MAX_ENTRIES);
        assert_eq!(touched.reads[0], PathBuf::from("/ws/f0"));
        assert_eq!(touched.reads_dropped, 10);
    }
}
