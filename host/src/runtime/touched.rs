//! What one call actually touched, recorded where each effect happens: the
//! files it opened for reading (through `wasi:filesystem` or corral's
//! `files`), the hosts its HTTP requests went to, and the programs it ran
//! and whether they had the network. Provenance labels are derived from
//! this record, never from what a tool says about itself.

use std::os::fd::AsRawFd;
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

impl Touched {
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

    fn read_path(&mut self, path: PathBuf) {
        if self.reads.contains(&path) {
            return;
        }
        if self.reads.len() >= MAX_ENTRIES {
            self.reads_dropped += 1;
        } else {
            self.reads.push(path);
        }
    }

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
