//! What a project manifest may change about the user's security settings.
//!
//! A project's `corral.toml` comes with the code, so even once trusted it
//! may only **tighten** what the built-in defaults and the user's own file
//! set up: a stricter mode, more `ask`/`deny`/`stop` rules, more guard
//! sources, plugins disabled. A line that would loosen them (the guard off,
//! `trusted` globs, hosts that skip the guard, a more permissive mode,
//! `allow` rules, `require_os_sandbox = false`, a plugin the user disabled
//! brought back, a plugin replaced by one with wider grants or fewer
//! `reads_secrets`) is ignored with a warning naming the line and the key
//! that would let it through — unless the user's own file says
//! `[trust] project_may_loosen = true`. `corral trust` lists every such line
//! in plain words before asking, applied or not.

use super::{FsGrant, PluginDecl};
use crate::protocol::Mode;

/// The user-layer key that lets a trusted project loosen security settings.
pub const MAY_LOOSEN_KEY: &str = "[trust] project_may_loosen = true";

/// One line of a project manifest that loosens the user's security
/// settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loosening {
    /// The project file.
    pub file: String,
    /// 1-based line, 0 when unknown.
    pub line: usize,
    /// The setting as written, e.g. `guard.enabled = false`.
    pub setting: String,
    /// What it switches off, in plain words.
    pub what: String,
    /// Whether it took effect (the user's file allows loosening).
    pub applied: bool,
}

impl Loosening {
    /// The warning printed when the line is ignored: the line, the file, what
    /// it would do and the key that would allow it.
    pub fn warning(&self) -> String {
        format!(
            "{}:{}: `{}` ignored: a project's corral.toml may only tighten your security \
             settings, and this {}. If you want the project to do that, add `{MAY_LOOSEN_KEY}` \
             to your own corral.toml ({})",
            self.file,
            self.line,
            self.setting,
            self.what,
            super::user_file().map_or_else(
                || "$XDG_CONFIG_HOME/corral/corral.toml".to_owned(),
                |f| f.display().to_string()
            ),
        )
    }
}

/// How much `mode` lets run unasked; higher is looser.
pub(super) fn permissiveness(mode: Mode) -> u8 {
    match mode {
        Mode::ReadOnly => 0,
        Mode::Ask => 1,
        Mode::AutoEdit => 2,
        Mode::FullAuto => 3,
    }
}

/// What `new` can do that `old`, the entry it replaces, could not, in
/// plain words; empty when it widens nothing.
pub(super) fn widened(old: &PluginDecl, new: &PluginDecl) -> Vec<String> {
    let mut out = Vec::new();
    let covered = |g: &FsGrant| {
        old.fs.iter().any(|o| {
            g.host_path.starts_with(&o.host_path)
                && (g.access == super::Access::Ro || o.access == super::Access::Rw)
        })
    };
    for g in new.fs.iter().filter(|g| !covered(g)) {
        out.push(format!("{} access to {}", access(g), g.host_path.display()));
    }
    for n in &new.net {
        if !old.net.iter().any(|o| o.pattern == n.pattern) {
            out.push(format!("network access to {}", n.pattern));
        }
    }
    for e in &new.env {
        if !old.env.contains(e) {
            out.push(format!("the environment variable {e}"));
        }
    }
    for x in &new.exec {
        let same = old.exec.iter().any(|o| {
            (o.program == "*" || o.program == x.program)
                && (o.args == ["**"] || o.args == x.args)
                && o.network.covers(&x.network)
        });
        if !same {
            let mut line = format!("running `{} {}`", x.program, x.args.join(" "));
            if x.network.reaches() {
                line.push_str(&format!(" with {}", x.network.describe()));
            }
            out.push(line);
        }
    }
    for s in &new.secrets {
        if !old.secrets.contains(s) {
            out.push(format!(
                "the secret header `{}` for {}",
                s.header,
                s.origin()
            ));
        }
    }
    for (tool, arg) in &new.destination_args {
        if old.destination_args.get(tool) != Some(arg) {
            out.push(format!(
                "asking to let a `{tool}` call reach the origin of its `{arg}` argument"
            ));
        }
    }
    for t in &old.reads_secrets {
        if !new.reads_secrets.contains(t) {
            out.push(format!(
                "the output of `{t}` no longer counted as sensitive by the guard"
            ));
        }
    }
    out
}

fn access(g: &FsGrant) -> &'static str {
    match g.access {
        super::Access::Ro => "read",
        super::Access::Rw => "read-write",
    }
}

/// What a plugin a project brings in may do beyond reading the workspace,
/// in plain words, for `corral trust`; empty for one that only reads it.
pub fn wide_grants(decl: &PluginDecl, workspace: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for g in &decl.fs {
        if !g.host_path.starts_with(workspace) {
            out.push(format!(
                "{} access to {}, outside the workspace",
                access(g),
                g.host_path.display()
            ));
        } else if g.access == super::Access::Rw {
            out.push(format!("write access to {}", g.host_path.display()));
        }
    }
    for n in &decl.net {
        out.push(format!("network access to {}", n.pattern));
    }
    for e in &decl.env {
        out.push(format!("reads the environment variable {e}"));
    }
    for x in &decl.exec {
        let mut line = format!("runs native programs: `{} {}`", x.program, x.args.join(" "));
        if x.network.reaches() {
            line.push_str(&format!(" with {}", x.network.describe()));
        }
        out.push(line);
    }
    for s in &decl.secrets {
        out.push(format!(
            "gets the secret header `{}` on requests to {}",
            s.header,
            s.origin()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_ordered_from_strict_to_loose() {
        let ranks: Vec<u8> = Mode::ALL.iter().map(|m| permissiveness(*m)).collect();
        let mut sorted = ranks.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), Mode::ALL.len());
        assert!(permissiveness(Mode::FullAuto) > permissiveness(Mode::Ask));
        assert!(permissiveness(Mode::ReadOnly) < permissiveness(Mode::Ask));
    }
}
