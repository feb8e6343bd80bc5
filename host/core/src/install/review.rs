//! What a user approves: each requested capability as one [`Grant`], the
//! `--grant`/`--deny` filters that narrow them, and the difference between
//! what an installed plugin has and what its new version asks for.

use super::requests::{ExecRequest, FsRequest, Requested, SecretRequest};
use crate::manifest::{Access, PluginDecl};
use crate::protocol::ToolSpec;
use std::fmt;

/// One capability, as requested or as granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// A directory, workspace-relative.
    Fs(FsRequest),
    /// A network destination.
    Net(String),
    /// An environment variable.
    Env(String),
    /// A program with argument patterns.
    Exec(ExecRequest),
    /// A header added on egress.
    Secret(SecretRequest),
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::Fs(r) => {
                let access = match r.access {
                    Access::Ro => "read-only",
                    Access::Rw => "read-write",
                };
                write!(f, "fs   {} ({access})", r.path)
            }
            Grant::Net(n) => write!(f, "net  {n}"),
            Grant::Env(e) => write!(f, "env  {e}"),
            Grant::Exec(e) => {
                write!(f, "exec {}", e.program)?;
                if !e.args.is_empty() {
                    write!(f, " {}", e.args.join(" "))?;
                }
                if e.network {
                    write!(f, " (with network)")?;
                }
                Ok(())
            }
            Grant::Secret(s) => {
                write!(f, "secret {} header `{}` = {}", s.origin, s.header, s.value)
            }
        }
    }
}

impl Grant {
    /// The kind, as `--grant`/`--deny` name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Grant::Fs(_) => "fs",
            Grant::Net(_) => "net",
            Grant::Env(_) => "env",
            Grant::Exec(_) => "exec",
            Grant::Secret(_) => "secret",
        }
    }

    /// The `KIND:VALUE` spec that names exactly this grant's value, as
    /// `--deny` takes it and `denied = [...]` records it.
    pub fn spec(&self) -> String {
        format!("{}:{}", self.kind(), self.value())
    }

    /// What `KIND:VALUE` compares against.
    fn value(&self) -> &str {
        match self {
            Grant::Fs(r) => &r.path,
            Grant::Net(n) => n,
            Grant::Env(e) => e,
            Grant::Exec(e) => &e.program,
            Grant::Secret(s) => &s.origin,
        }
    }

    /// Whether a `--grant`/`--deny` spec (`net`, `net:https://x:443`,
    /// `fs:docs`, `exec:git`, `env:HOME`, `secret:https://x:443`) names it.
    pub fn matches(&self, spec: &str) -> bool {
        match spec.split_once(':') {
            Some((kind, value)) => kind == self.kind() && value == self.value(),
            None => spec == self.kind(),
        }
    }

    /// Whether this grant gives something `held` does not: a new
    /// capability, or a wider one (read-write where it was read-only,
    /// network for a program, other arguments).
    pub fn widens(&self, held: &[Grant]) -> bool {
        !held.iter().any(|h| match (self, h) {
            (Grant::Fs(a), Grant::Fs(b)) => {
                a.path == b.path && (a.access == Access::Ro || b.access == Access::Rw)
            }
            (Grant::Exec(a), Grant::Exec(b)) => {
                a.program == b.program && a.args == b.args && (!a.network || b.network)
            }
            (a, b) => a == b,
        })
    }
}

/// Why a `--grant`/`--deny` filter was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// The spec's kind is not a capability kind.
    #[error(
        "`{0}` is not a capability kind; use fs, net, env, exec or secret, optionally with \
         `:VALUE` (e.g. `net:https://api.example.com:443`, `fs:docs`)"
    )]
    Kind(String),
    /// The spec names nothing the plugin requests (a typo, most likely).
    #[error("`{spec}` names nothing the plugin requests; requested: {requested}")]
    NamesNothing {
        /// The spec.
        spec: String,
        /// What the plugin requests, `KIND:VALUE`, comma-separated, or
        /// `nothing`.
        requested: String,
    },
}

impl From<FilterError> for String {
    fn from(e: FilterError) -> Self {
        e.to_string()
    }
}

/// Checks a `--grant`/`--deny` spec names a kind that exists.
pub fn check_spec(spec: &str) -> Result<(), FilterError> {
    let kind = spec.split_once(':').map_or(spec, |(k, _)| k);
    match kind {
        "fs" | "net" | "env" | "exec" | "secret" => Ok(()),
        other => Err(FilterError::Kind(other.to_owned())),
    }
}

/// Every capability `requested` asks for.
pub fn grants_of(requested: &Requested) -> Vec<Grant> {
    let mut out: Vec<Grant> = requested.fs.iter().cloned().map(Grant::Fs).collect();
    out.extend(requested.net.iter().cloned().map(Grant::Net));
    out.extend(requested.env.iter().cloned().map(Grant::Env));
    out.extend(requested.exec.iter().cloned().map(Grant::Exec));
    out.extend(requested.secrets.iter().cloned().map(Grant::Secret));
    out
}

/// The grants back in manifest form.
pub fn requested_of(grants: &[Grant]) -> Requested {
    let mut out = Requested::default();
    for g in grants {
        match g.clone() {
            Grant::Fs(r) => out.fs.push(r),
            Grant::Net(n) => out.net.push(n),
            Grant::Env(e) => out.env.push(e),
            Grant::Exec(e) => out.exec.push(e),
            Grant::Secret(s) => out.secrets.push(s),
        }
    }
    out
}

/// What an installed plugin holds now, from its manifest entry.
pub fn grants_held(decl: &PluginDecl) -> Vec<Grant> {
    let mut out: Vec<Grant> = decl
        .fs
        .iter()
        .map(|g| {
            Grant::Fs(FsRequest {
                path: g.path.clone(),
                access: g.access,
            })
        })
        .collect();
    out.extend(decl.net.iter().map(|n| Grant::Net(n.pattern.clone())));
    out.extend(decl.env.iter().cloned().map(Grant::Env));
    out.extend(decl.exec.iter().map(|e| {
        Grant::Exec(ExecRequest {
            program: e.program.clone(),
            args: e.args.clone(),
            network: e.network.reaches(),
        })
    }));
    out.extend(decl.secrets.iter().map(|s| {
        Grant::Secret(SecretRequest {
            origin: s.origin(),
            header: s.header.clone(),
            value: s.value.clone(),
        })
    }));
    out
}

/// Narrows `requested` by the user's filters: with any `--grant`, only
/// what one of them names; then minus what a `--deny` names. A filter that
/// names nothing requested is an error, so a typo cannot pass silently.
pub fn narrow(
    requested: &[Grant],
    grant: &[String],
    deny: &[String],
) -> Result<Vec<Grant>, FilterError> {
    for spec in grant.iter().chain(deny) {
        check_spec(spec)?;
        if !requested.iter().any(|g| g.matches(spec)) {
            return Err(FilterError::NamesNothing {
                spec: spec.clone(),
                requested: if requested.is_empty() {
                    "nothing".to_owned()
                } else {
                    requested
                        .iter()
                        .map(|g| format!("{}:{}", g.kind(), g.value()))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            });
        }
    }
    Ok(requested
        .iter()
        .filter(|g| grant.is_empty() || grant.iter().any(|s| g.matches(s)))
        .filter(|g| !deny.iter().any(|s| g.matches(s)))
        .cloned()
        .collect())
}

/// How a plugin's tools changed between two versions.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ToolDiff {
    /// Tools only the new version has.
    pub added: Vec<String>,
    /// Tools only the old version had.
    pub removed: Vec<String>,
    /// `tool: what changed` for tools in both.
    pub changed: Vec<String>,
}

impl ToolDiff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Compares the tools of two versions.
pub fn tool_diff(old: &[ToolSpec], new: &[ToolSpec]) -> ToolDiff {
    let mut diff = ToolDiff::default();
    for n in new {
        match old.iter().find(|o| o.name == n.name) {
            None => diff.added.push(n.name.clone()),
            Some(o) => {
                if o.effects != n.effects {
                    diff.changed.push(format!(
                        "{}: effects {} -> {}",
                        n.name,
                        effects_text(o),
                        effects_text(n)
                    ));
                }
                if o.description != n.description {
                    diff.changed
                        .push(format!("{}: description changed", n.name));
                }
                if o.input_schema != n.input_schema {
                    diff.changed.push(format!("{}: parameters changed", n.name));
                }
            }
        }
    }
    for o in old {
        if !new.iter().any(|n| n.name == o.name) {
            diff.removed.push(o.name.clone());
        }
    }
    diff
}

/// A tool's effects as `plugin list` shows them.
pub fn effects_text(t: &ToolSpec) -> String {
    let names: Vec<&str> = t.effects.iter().map(|e| e.as_str()).collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs(path: &str, access: Access) -> Grant {
        Grant::Fs(FsRequest {
            path: path.into(),
            access,
        })
    }

    #[test]
    fn read_write_widens_read_only_but_not_the_reverse() {
        assert!(fs(".", Access::Rw).widens(&[fs(".", Access::Ro)]));
        assert!(!fs(".", Access::Ro).widens(&[fs(".", Access::Rw)]));
        assert!(fs("docs", Access::Ro).widens(&[fs(".", Access::Ro)]));
        assert!(Grant::Net("https://a:443".into()).widens(&[]));
    }

    #[test]
    fn filters_narrow_and_typos_are_errors() {
        let req = vec![
            fs(".", Access::Ro),
            Grant::Net("https://a:443".into()),
            Grant::Env("HOME".into()),
        ];
        let kept = narrow(&req, &[], &["net".into()]).unwrap();
        assert_eq!(kept, vec![fs(".", Access::Ro), Grant::Env("HOME".into())]);
        let only = narrow(&req, &["fs:.".into()], &[]).unwrap();
        assert_eq!(only, vec![fs(".", Access::Ro)]);
        assert!(narrow(&req, &[], &["net:https://b:443".into()]).is_err());
        assert!(narrow(&req, &[], &["files".into()]).is_err());
    }
}
