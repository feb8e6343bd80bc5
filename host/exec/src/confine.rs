//! Confinement as a whole: whether this kernel can confine programs, and
//! the steps prepared in corral and applied to a child between fork and exec
//! (Landlock, no capabilities, the seccomp filter), applied to every program
//! by [`super::Launch`].

use super::landlock::landlock_ruleset;
use super::privileges::{drop_capabilities, hide_from_children};
use super::seccomp::{install_filter, socket_filter};
use super::step::Step;
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
        network: &super::Network,
        readable: Option<&[std::path::PathBuf]>,
    ) -> Result<Self, landlock::RulesetError> {
        hide_from_children();
        let ruleset = match confinement() {
            Confinement::Landlock(_) => Some(landlock_ruleset(writable, network, readable)?),
            Confinement::Unavailable => None,
        };
        Ok(Self {
            landlock: ruleset.is_some(),
            ruleset: Mutex::new(ruleset),
            filter: socket_filter(network),
        })
    }

    /// In the child: Landlock, then no capabilities, then the filter.
    pub(super) fn apply(&self) -> Result<(), Step> {
        let rules = self.ruleset.lock().map_err(|_| Step::Landlock)?.take();
        if let Some(rules) = rules {
            let status = rules.restrict_self().map_err(|_| Step::Landlock)?;
            // Prepared because the kernel has Landlock: not enforcing it is a failure.
            if status.ruleset == landlock::RulesetStatus::NotEnforced {
                return Err(Step::Landlock);
            }
        } else if self.landlock {
            // Taken already: this confinement was applied to another child.
            return Err(Step::Landlock);
        }
        drop_capabilities().map_err(|_| Step::Capabilities)?;
        install_filter(&self.filter).map_err(|_| Step::Seccomp)
    }
}
