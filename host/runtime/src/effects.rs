//! What one call may use beyond reading its plugin's directories, decided by
//! what the call is and, for a tool, by the effects the tool declares.
//!
//! Grants say what a plugin may ever reach; a tool's declared effects say
//! what one call of that tool may do, and the permission policy judges the
//! call by those same effects. So the host enforces them instead of trusting
//! them: `process.run` is served only to a tool that declares `execute`,
//! HTTP only to one that declares `network`, and writable directories only
//! to one that declares `write`. Otherwise a tool that declares `read` would
//! be run without asking in `read-only` or `ask` mode and could then run a
//! program or send the workspace anywhere its plugin's grants allow.
//!
//! A preview runs before the user approves anything, and `describe` runs
//! whenever the plugin loads, so both get neither programs nor network, and
//! read-only directories. A provider plugin runs no tools: it keeps its
//! network (that is its job) but runs no programs, which its world does not
//! offer.

use crate::protocol::Effect;

/// The kind of call a store is built for, with what each allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallCaps {
    /// A tool's `invoke`, allowed what the tool declares.
    Invoke {
        /// The tool's name.
        tool: String,
        /// Its declared effects.
        effects: Vec<Effect>,
        /// Origins the user approved for this one call beyond the plugin's
        /// `grants.net` (its `destination_args` URL).
        widened: Vec<crate::manifest::NetGrant>,
    },
    /// A tool's `preview`: reads only.
    Preview {
        /// The tool's name.
        tool: String,
    },
    /// The plugin's `describe` at load time: reads only.
    Describe,
    /// A provider plugin's `complete` or `models`: network, no programs.
    Provider,
    /// A hook plugin's `handle`: what its grants allow, nothing more. A hook
    /// declares no effects; its manifest entry is the whole of what it may
    /// do, and grants nothing unless written.
    Hook,
}

impl CallCaps {
    /// Whether the plugin's read-write directories stay writable.
    pub(crate) fn writes(&self) -> bool {
        match self {
            CallCaps::Invoke { effects, .. } => effects.contains(&Effect::Write),
            CallCaps::Preview { .. } | CallCaps::Describe => false,
            // A provider's directories are its own configuration and
            // cassettes; what it may write there is up to its grants.
            CallCaps::Provider | CallCaps::Hook => true,
        }
    }

    /// Whether the programs this call runs get the workspace read-only: a
    /// tool that declares reading and running programs, and no writing
    /// (`git_status`), reads by running them, which is what lets the
    /// policy run it in a read-only session. One that declares only
    /// `execute` (`run_command`) says nothing of what its programs touch,
    /// and keeps the workspace its grants give.
    pub(crate) fn programs_read_only(&self) -> bool {
        matches!(self, CallCaps::Invoke { effects, .. }
            if effects.contains(&Effect::Read) && !effects.contains(&Effect::Write))
    }

    /// `Err` with the reason when this call may not run programs, whatever
    /// `grants.exec` allows.
    pub(crate) fn process(&self, plugin: &str) -> Result<(), Refused> {
        match self {
            CallCaps::Invoke { effects, .. } if effects.contains(&Effect::Execute) => Ok(()),
            CallCaps::Hook => Ok(()),
            CallCaps::Invoke { tool, effects, .. } => Err(Refused::ToolPrograms {
                tool: tool.clone(),
                plugin: plugin.to_owned(),
                declared: declared(effects),
            }),
            CallCaps::Preview { tool } => Err(Refused::PreviewPrograms {
                tool: tool.clone(),
                plugin: plugin.to_owned(),
            }),
            CallCaps::Describe => Err(Refused::DescribePrograms {
                plugin: plugin.to_owned(),
            }),
            CallCaps::Provider => Err(Refused::ProviderPrograms {
                plugin: plugin.to_owned(),
            }),
        }
    }

    /// `Err` with the reason when this call may not send HTTP requests,
    /// whatever `grants.net` allows.
    pub(crate) fn network(&self, plugin: &str) -> Result<(), Refused> {
        match self {
            CallCaps::Invoke { effects, .. } if effects.contains(&Effect::Network) => Ok(()),
            CallCaps::Provider | CallCaps::Hook => Ok(()),
            CallCaps::Invoke { tool, effects, .. } => Err(Refused::ToolNetwork {
                tool: tool.clone(),
                plugin: plugin.to_owned(),
                declared: declared(effects),
            }),
            CallCaps::Preview { tool } => Err(Refused::PreviewNetwork {
                tool: tool.clone(),
                plugin: plugin.to_owned(),
            }),
            CallCaps::Describe => Err(Refused::DescribeNetwork {
                plugin: plugin.to_owned(),
            }),
        }
    }
}

/// Why a call may not use what its plugin's grants allow: what the call is
/// does not allow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    /// A tool that does not declare `execute` tried to run a program.
    #[error(
        "tool `{tool}` (plugin `{plugin}`) may not run programs: it declares {declared}, and corral \
         runs programs only for tools that declare the `execute` effect; declare `execute` \
         in the tool's effects so that the permission policy judges its calls as running programs"
    )]
    ToolPrograms {
        /// The tool.
        tool: String,
        /// Its plugin.
        plugin: String,
        /// The effects it declares, in words.
        declared: String,
    },
    /// A preview tried to run a program.
    #[error(
        "the preview of `{tool}` (plugin `{plugin}`) may not run programs: previews run \
         before approval with no programs, no network and read-only directories; \
         compute the diff from the files alone"
    )]
    PreviewPrograms {
        /// The tool previewed.
        tool: String,
        /// Its plugin.
        plugin: String,
    },
    /// `describe` tried to run a program.
    #[error(
        "`describe` of plugin `{plugin}` may not run programs: it runs at load time with \
         no programs, no network and read-only directories"
    )]
    DescribePrograms {
        /// The plugin.
        plugin: String,
    },
    /// A provider tried to run a program.
    #[error("provider plugin `{plugin}` may not run programs: providers only talk to their API")]
    ProviderPrograms {
        /// The plugin.
        plugin: String,
    },
    /// A tool that does not declare `network` tried to send a request.
    #[error(
        "tool `{tool}` (plugin `{plugin}`) may not reach the network: it declares {declared}, \
         and corral sends requests only for tools that declare the `network` effect; \
         declare `network` in the tool's effects so that the permission policy judges \
         its calls as reaching the network"
    )]
    ToolNetwork {
        /// The tool.
        tool: String,
        /// Its plugin.
        plugin: String,
        /// The effects it declares, in words.
        declared: String,
    },
    /// A preview tried to send a request.
    #[error(
        "the preview of `{tool}` (plugin `{plugin}`) may not reach the network: previews \
         run before approval with no programs, no network and read-only directories"
    )]
    PreviewNetwork {
        /// The tool previewed.
        tool: String,
        /// Its plugin.
        plugin: String,
    },
    /// `describe` tried to send a request.
    #[error(
        "`describe` of plugin `{plugin}` may not reach the network: it runs at load time \
         with no programs, no network and read-only directories"
    )]
    DescribeNetwork {
        /// The plugin.
        plugin: String,
    },
}

impl CallCaps {
    /// The origins approved for this call beyond `grants.net`.
    pub(crate) fn widened(&self) -> &[crate::manifest::NetGrant] {
        match self {
            CallCaps::Invoke { widened, .. } => widened,
            _ => &[],
        }
    }
}

/// "only read", "read and write", "no effects".
fn declared(effects: &[Effect]) -> String {
    let mut names: Vec<&str> = effects
        .iter()
        .map(|e| match e {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Execute => "execute",
            Effect::Network => "network",
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    match names.as_slice() {
        [] => "no effects".to_owned(),
        [one] => format!("only {one}"),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Decision, Policy};
    use crate::protocol::Mode;
    use Effect::{Execute as X, Network as N, Read as R, Write as W};

    fn invoke(effects: &[Effect]) -> CallCaps {
        CallCaps::Invoke {
            tool: "t".into(),
            effects: effects.to_vec(),
            widened: Vec::new(),
        }
    }

    #[test]
    fn a_call_gets_what_its_tool_declares() {
        let cases: &[(&[Effect], bool, bool, bool)] = &[
            // effects, writes, process, network
            (&[], false, false, false),
            (&[R], false, false, false),
            (&[R, W], true, false, false),
            (&[X], false, true, false),
            (&[R, X], false, true, false),
            (&[N], false, false, true),
            (&[R, W, X, N], true, true, true),
        ];
        for (effects, writes, process, network) in cases {
            let caps = invoke(effects);
            assert_eq!(caps.writes(), *writes, "{effects:?}");
            assert_eq!(caps.process("p").is_ok(), *process, "{effects:?}");
            assert_eq!(caps.network("p").is_ok(), *network, "{effects:?}");
        }
    }

    #[test]
    fn previews_and_describe_get_nothing_providers_keep_the_network() {
        for caps in [CallCaps::Preview { tool: "t".into() }, CallCaps::Describe] {
            assert!(!caps.writes());
            assert!(caps.process("p").is_err());
            assert!(caps.network("p").is_err());
        }
        assert!(CallCaps::Provider.network("p").is_ok());
        assert!(CallCaps::Provider.process("p").is_err());
    }

    /// The policy and the sandbox read the same effects: whatever a
    /// read-only session lets run can do no more than read.
    #[test]
    fn what_read_only_mode_allows_can_only_read() {
        let all = [R, W, X, N];
        for mask in 0u8..16 {
            let effects: Vec<Effect> = (0..4)
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| all[i])
                .collect();
            let policy = Policy {
                mode: Mode::ReadOnly,
                rules: Vec::new(),
            };
            let verdict = policy.decide("t", &effects, &serde_json::json!({}));
            let caps = invoke(&effects);
            // A program run with the workspace read-only reads.
            let runs_writing = caps.process("p").is_ok() && !caps.programs_read_only();
            let more_than_reading = caps.writes() || runs_writing || caps.network("p").is_ok();
            assert_eq!(
                verdict.decision == Decision::Allow,
                !more_than_reading,
                "{effects:?}: {verdict:?}"
            );
        }
    }

    #[test]
    fn refusals_name_the_tool_the_reason_and_the_fix() {
        let why = invoke(&[R]).process("sneaky").unwrap_err().to_string();
        assert!(why.contains("tool `t` (plugin `sneaky`)"), "{why}");
        assert!(why.contains("declares only read"), "{why}");
        assert!(why.contains("declare `execute`"), "{why}");
        let why = invoke(&[R, W]).network("p").unwrap_err().to_string();
        assert!(why.contains("declares read and write"), "{why}");
        assert!(why.contains("declare `network`"), "{why}");
    }
}
