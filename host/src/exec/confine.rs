//! Confinement as a whole: whether this kernel can confine programs, and
//! the steps prepared in corral and applied to a child between fork and exec
//! (Landlock, no capabilities, the socket filter), for granted programs and
//! for corral's own helpers.

use super::landlock::landlock_ruleset;
use super::privileges::{drop_capabilities, hide_from_children};
use super::seccomp::{install_filter, socket_filter};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// Whether the kernel confines programs here, probed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confinement {
    /// Landlock with this ABI version.
    Landlock(i32),
    /// No Landlock on this kernel.
    Unavailable,
}

/// Probes Landlock once and warns once when it is missing.
pub fn confinement() -> Confinement {
    static PROBE: OnceLock<Confinement> = OnceLock::new();
    *PROBE.get_or_init(|| {
        // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
        // only returns the ABI version; it takes no pointers.
        let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
        if abi >= 1 {
            Confinement::Landlock(abi as i32)
        } else {
            tracing::warn!(
                "this kernel has no Landlock: programs run by plugins cannot be confined to the workspace \
                 (set [sandbox] require_os_sandbox = false to run them anyway)"
            );
            Confinement::Unavailable
        }
    })
}

/// What confines a child, prepared in the parent and applied in the child
/// between fork and exec, where only system calls may be made.
pub(super) struct ChildConfinement {
    /// Taken by the child; the mutex cannot be held by any other thread there.
    ruleset: Mutex<Option<landlock::RulesetCreated>>,
    /// Whether a ruleset was prepared, so that its absence is a failure.
    landlock: bool,
    filter: Vec<libc::sock_filter>,
}

impl ChildConfinement {
    /// Landlock rules where the kernel has Landlock (reads as in
    /// [`landlock_ruleset`], writes beneath `writable`, TCP with `network`)
    /// and the socket filter; makes corral non-dumpable first.
    pub(super) fn prepare(
        writable: &[&Path],
        network: bool,
    ) -> Result<Self, landlock::RulesetError> {
        hide_from_children();
        let ruleset = match confinement() {
            Confinement::Landlock(_) => Some(landlock_ruleset(writable, network)?),
            Confinement::Unavailable => None,
        };
        Ok(Self {
            landlock: ruleset.is_some(),
            ruleset: Mutex::new(ruleset),
            filter: socket_filter(network),
        })
    }

    /// In the child: Landlock, then no capabilities, then the filter.
    pub(super) fn apply(&self) -> std::io::Result<()> {
        let denied = || std::io::Error::from_raw_os_error(libc::EPERM);
        let rules = self.ruleset.lock().map_err(|_| denied())?.take();
        if let Some(rules) = rules {
            let status = rules.restrict_self().map_err(|_| denied())?;
            // Prepared because the kernel has Landlock: not enforcing it is a failure.
            if status.ruleset == landlock::RulesetStatus::NotEnforced {
                return Err(denied());
            }
        } else if self.landlock {
            // Taken already: this confinement was applied to another child.
            return Err(denied());
        }
        drop_capabilities()?;
        install_filter(&self.filter)
    }
}

/// Confines a helper program corral runs for itself (`git status` for the
/// model's context): an environment of only `PATH`, `HOME`, `LANG` and
/// `LC_ALL`, no capabilities, the socket filter, and where the kernel has
/// Landlock, reads as for granted programs, writes nowhere (but
/// `/dev/null`) and no TCP. A repository's configuration is the
/// workspace's to set, and a tool may have written it: whatever command it
/// names runs confined. Fails, so that the caller runs nothing, when the
/// confinement cannot be prepared.
pub fn confine_helper(cmd: &mut std::process::Command) -> Result<(), String> {
    confine_helper_writing(cmd, &[])
}

/// [`confine_helper`], with writes allowed beneath `writable` too (git
/// making a worktree writes the repository's `.git` and the new tree).
pub fn confine_helper_writing(
    cmd: &mut std::process::Command,
    writable: &[&Path],
) -> Result<(), String> {
    use std::os::unix::process::CommandExt as _;
    cmd.env_clear();
    for var in ["PATH", "HOME", "LANG", "LC_ALL"] {
        if let Some(value) = std::env::var_os(var) {
            cmd.env(var, value);
        }
    }
    let confine = ChildConfinement::prepare(writable, false).map_err(|e| e.to_string())?;
    // SAFETY: `apply` only makes system calls.
    unsafe {
        cmd.pre_exec(move || confine.apply());
    }
    Ok(())
}
