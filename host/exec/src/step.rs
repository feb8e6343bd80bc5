//! The confinement steps applied in a child between fork and exec, each
//! named by one byte that the child sends to the parent when it fails, so
//! that the error says which step stopped the program.

/// A confinement step that failed in the child, sent to the parent as one
/// byte so that the error can name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    Rlimit,
    Cgroup,
    Namespace,
    UserMap,
    Private,
    /// Making the n-th read-only path read-only.
    Mount(u8),
    Cwd,
    Landlock,
    Capabilities,
    Seccomp,
    /// Bringing up `lo` in the program's network namespace.
    Loopback,
    /// Making or handing over the proxy's listener.
    Listener,
}

impl Step {
    /// The byte sent for this step.
    pub(super) fn code(self) -> u8 {
        match self {
            Self::Rlimit => 1,
            Self::Cgroup => 2,
            Self::Namespace => 3,
            Self::UserMap => 4,
            Self::Private => 5,
            Self::Cwd => 6,
            Self::Landlock => 7,
            Self::Capabilities => 8,
            Self::Seccomp => 9,
            Self::Loopback => 10,
            Self::Listener => 11,
            Self::Mount(i) => 50 + i.min(200),
        }
    }

    /// What failed, in words, for the step sent as `code`.
    pub(super) fn describe(code: u8, read_only: &[std::path::PathBuf]) -> String {
        match code {
            1 => "the process limit (RLIMIT_NPROC) could not be set".into(),
            2 => "it could not join its pids cgroup".into(),
            3 => "a private mount (and, for a grant naming destinations, network) namespace could not be made (unshare failed; user namespaces may be disabled on this system, and corral does not give such a program the host's network instead)".into(),
            4 => "the user namespace's uid and gid maps could not be written".into(),
            5 => "the mounts of its namespace could not be made private".into(),
            6 => "its working directory could not be entered again".into(),
            7 => "Landlock could not be enforced".into(),
            8 => "its capabilities could not be dropped".into(),
            9 => "the seccomp filter could not be installed".into(),
            10 => "the loopback interface of its private network namespace could not be brought up".into(),
            11 => "the listener of its network proxy could not be made or handed to corral".into(),
            n if n >= 50 => match read_only.get(usize::from(n - 50)) {
                Some(p) => format!("{} could not be made read-only", p.display()),
                None => "a protected path could not be made read-only".into(),
            },
            _ => "a confinement step failed".into(),
        }
    }
}
