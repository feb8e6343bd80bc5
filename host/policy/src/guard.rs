//! The exfiltration guard: once a session holds sensitive data in its
//! context, a call that could carry data out of the machine needs the
//! user's approval, whatever the rules or the mode say. Such a call is one
//! that declares `network` and whose plugin may reach a destination not in
//! `[guard] allow_hosts`, one that runs programs under a grant with
//! `network = true`, or one that writes and whose plugin may write outside
//! the workspace.
//!
//! Untrusted content is not required: an instruction can hide in any file
//! the model reads, the workspace's own README included, so a secret in the
//! context is reason enough. Untrusted sources are still named in the
//! reason, since they tell the user where an instruction may have come from.
//!
//! Pure functions over what the session holds ([`Held`]) and what the call
//! could reach ([`Reach`]); the dispatcher supplies both. Where the content
//! came from is decided by the provenance tracker of the core.

use crate::protocol::{Effect, Label, LabelKind};

/// `[guard]`: the exfiltration guard's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardSettings {
    /// `enabled = false` turns the guard off (on by default, in every mode).
    pub enabled: bool,
    /// `allow_hosts = ["api.example.com", "127.0.0.1:8080"]`: destinations
    /// a held session may still send to unasked (a host, or host and port).
    pub allow_hosts: Vec<String>,
    /// `untrusted = ["generated/**"]`: workspace paths (globs) whose content
    /// counts as untrusted, besides the defaults ([`DEFAULT_UNTRUSTED`]).
    pub untrusted: Vec<String>,
    /// `trusted = ["vendor/ours/**"]`: workspace paths that are trusted even
    /// where a default or `untrusted` glob says otherwise.
    pub trusted: Vec<String>,
    /// `secrets = ["config/prod.yaml"]`: workspace paths (globs) that hold
    /// secrets, besides the defaults ([`DEFAULT_SECRETS`]).
    pub secrets: Vec<String>,
    /// `injection = false` turns the injection guard off ([`crate::taint`]:
    /// on by default, in every mode, while the guard is enabled).
    pub injection: bool,
    /// `injection_exempt = ["web_fetch"]`: tools whose arguments may carry
    /// values from untrusted content unasked.
    pub injection_exempt: Vec<String>,
}

impl GuardSettings {
    /// Whether the injection guard judges calls of `tool`.
    pub fn judges_injection(&self, tool: &str) -> bool {
        self.enabled && self.injection && !self.injection_exempt.iter().any(|t| t == tool)
    }
}

impl Default for GuardSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            allow_hosts: Vec::new(),
            untrusted: Vec::new(),
            trusted: Vec::new(),
            secrets: Vec::new(),
            injection: true,
            injection_exempt: Vec::new(),
        }
    }
}

/// Workspace trees whose content the user did not write: dependencies,
/// vendored code, virtual environments and build output.
pub const DEFAULT_UNTRUSTED: &[&str] = &[
    "**/node_modules/**",
    "**/vendor/**",
    "**/third_party/**",
    "**/third-party/**",
    ".venv/**",
    "venv/**",
    "**/site-packages/**",
    "target/**",
];

/// Files that hold secrets, wherever they are.
pub const DEFAULT_SECRETS: &[&str] = &[
    "**/.env",
    "**/.env.*",
    "**/*.pem",
    "**/*.key",
    "**/*.p12",
    "**/*.pfx",
    "**/id_rsa*",
    "**/id_dsa*",
    "**/id_ecdsa*",
    "**/id_ed25519*",
    "**/.netrc",
    "**/.npmrc",
    "**/.pypirc",
    "**/.git-credentials",
    "**/credentials.json",
];

/// Names kept of each kind of source, for the reason text.
const SHOWN: usize = 3;

/// What a session holds in its context: the sources of its sensitive and of
/// its untrusted content, from the labels of every tool result it read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// Sources of sensitive content, first seen first.
    pub sensitive: Vec<String>,
    /// Sources of untrusted content, first seen first.
    pub untrusted: Vec<String>,
    /// The significant values seen in untrusted content and in trusted
    /// text, for the injection guard ([`crate::taint`]).
    pub values: crate::taint::Values,
}

impl Held {
    /// Adds the labels of one tool result.
    pub fn add(&mut self, labels: &[Label]) {
        for label in labels {
            let list = match label.kind {
                LabelKind::Sensitive => &mut self.sensitive,
                LabelKind::Untrusted => &mut self.untrusted,
                LabelKind::Workspace => continue,
            };
            if !list.contains(&label.source) {
                list.push(label.source.clone());
            }
        }
    }

    /// Whether the session holds sensitive content: the state the guard
    /// acts on (whatever else it read; see the module documentation).
    pub fn is_risky(&self) -> bool {
        !self.sensitive.is_empty()
    }
}

/// Where a call could send data, from its declared effects and its plugin's
/// grants (what the sandbox would let it reach).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// The call declares `network`: its plugin's `grants.net` destinations,
    /// as `host:port`.
    pub hosts: Vec<String>,
    /// The call declares `execute` and its plugin may run these programs
    /// with the network.
    pub networked_programs: Vec<String>,
    /// The call declares `write` and its plugin may write in these
    /// directories outside the workspace.
    pub outside_writes: Vec<String>,
    /// The tool itself sends what it is given out, whatever its grants: a
    /// manifest names it a sink, or an MCP tool declares `network`; each
    /// said as the way it is.
    pub sinks: Vec<String>,
}

impl Reach {
    /// Whether the call could send nothing anywhere.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
            && self.networked_programs.is_empty()
            && self.outside_writes.is_empty()
            && self.sinks.is_empty()
    }

    /// What the call could reach for a plugin whose grants are `net`
    /// (`host:port`), `programs` (name, network) and `writable_outside`.
    pub fn of(
        effects: &[Effect],
        net: Vec<String>,
        programs: Vec<(String, bool)>,
        writable_outside: Vec<String>,
    ) -> Self {
        let mut reach = Reach::default();
        if effects.contains(&Effect::Network) {
            reach.hosts = net;
        }
        if effects.contains(&Effect::Execute) {
            reach.networked_programs = programs
                .into_iter()
                .filter(|(_, network)| *network)
                .map(|(p, _)| p)
                .collect();
        }
        if effects.contains(&Effect::Write) {
            reach.outside_writes = writable_outside;
        }
        reach
    }
}

/// Whether `allow` (a host, or `host:port`) covers the destination `dest`
/// (`host:port`).
fn allowed(allow: &[String], dest: &str) -> bool {
    let host = dest.rsplit_once(':').map_or(dest, |(h, _)| h);
    allow
        .iter()
        .any(|a| a.eq_ignore_ascii_case(dest) || a.eq_ignore_ascii_case(host))
}

/// Why the guard holds a call of `tool` that could reach `reach`, in a
/// session that holds `held`; `None` lets the policy decide alone.
pub fn hold(settings: &GuardSettings, held: &Held, tool: &str, reach: &Reach) -> Option<String> {
    if !settings.enabled || !held.is_risky() {
        return None;
    }
    let ways = ways(settings, reach);
    if ways.is_empty() {
        return None;
    }
    let sensitive: Vec<&String> = held.sensitive.iter().collect();
    let untrusted: Vec<&String> = held.untrusted.iter().collect();
    let read = if untrusted.is_empty() {
        format!("sensitive data ({})", names(&sensitive))
    } else {
        format!(
            "sensitive data ({}) and untrusted content ({})",
            names(&sensitive),
            names(&untrusted)
        )
    };
    Some(format!(
        "exfiltration guard: this session read {read}; `{tool}` could {}",
        ways.join(" and ")
    ))
}

/// Why the guard holds one call of `tool` whose arguments name the secret
/// files `named` and which could carry data out (`reach`): it could read
/// and send them in one go (`upload {path: ".env", url}`), or copy them
/// outside the workspace (`copy {from: ".env", to: "/elsewhere/x"}`),
/// before any label of its result exists.
pub fn hold_named(
    settings: &GuardSettings,
    named: &[String],
    tool: &str,
    reach: &Reach,
) -> Option<String> {
    if !settings.enabled || named.is_empty() {
        return None;
    }
    let ways = ways(settings, reach);
    if ways.is_empty() {
        return None;
    }
    let named: Vec<&String> = named.iter().collect();
    Some(format!(
        "exfiltration guard: this call names sensitive data ({}); `{tool}` could {}",
        names(&named),
        ways.join(" and ")
    ))
}

/// How a call that could reach `reach` could carry data out, in words.
fn ways(settings: &GuardSettings, reach: &Reach) -> Vec<String> {
    let mut ways = Vec::new();
    let hosts: Vec<&String> = reach
        .hosts
        .iter()
        .filter(|h| !allowed(&settings.allow_hosts, h))
        .collect();
    if !hosts.is_empty() {
        ways.push(format!("send data to {}", names(&hosts)));
    }
    if !reach.networked_programs.is_empty() {
        let programs: Vec<&String> = reach.networked_programs.iter().collect();
        ways.push(format!(
            "run {} with the network",
            if programs.iter().any(|p| *p == crate::protocol::ANY_PROGRAM) {
                "any program".to_owned()
            } else {
                names(&programs)
            }
        ));
    }
    for sink in &reach.sinks {
        ways.push(format!("send data out through {sink}"));
    }
    if !reach.outside_writes.is_empty() {
        let dirs: Vec<&String> = reach.outside_writes.iter().collect();
        ways.push(format!("write outside the workspace ({})", names(&dirs)));
    }
    ways
}

/// `a`, `b`, `c` and N more.
fn names(items: &[&String]) -> String {
    let shown: Vec<String> = items.iter().take(SHOWN).map(|s| format!("`{s}`")).collect();
    let mut text = shown.join(", ");
    if items.len() > SHOWN {
        text.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// [`Reach::of`] from borrowed names.
    fn reach(
        effects: &[Effect],
        net: &[&str],
        programs: &[(&str, bool)],
        outside: &[&str],
    ) -> Reach {
        let owned = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect();
        let programs = programs
            .iter()
            .map(|(p, n)| ((*p).to_owned(), *n))
            .collect();
        Reach::of(effects, owned(net), programs, owned(outside))
    }

    fn risky() -> Held {
        let mut held = Held::default();
        held.add(&[
            Label::new(LabelKind::Workspace, "src/main.rs"),
            Label::new(LabelKind::Untrusted, "vendor/lib/README.md"),
        ]);
        held.add(&[Label::new(LabelKind::Sensitive, ".env")]);
        held
    }

    #[test]
    fn a_sensitive_read_arms_the_guard() {
        let net = reach(&[Effect::Network], &["api.example.com:443"], &[], &[]);
        let settings = GuardSettings::default();
        let mut held = Held::default();
        assert_eq!(hold(&settings, &held, "fetch", &net), None);
        held.add(&[Label::new(LabelKind::Untrusted, "https://web:443")]);
        assert_eq!(hold(&settings, &held, "fetch", &net), None);
        // A secret alone is enough: the instruction may hide in any file.
        let mut secret_only = Held::default();
        secret_only.add(&[Label::new(LabelKind::Sensitive, ".env")]);
        assert_eq!(
            hold(&settings, &secret_only, "fetch", &net).as_deref(),
            Some(
                "exfiltration guard: this session read sensitive data (`.env`); \
                 `fetch` could send data to `api.example.com:443`"
            )
        );
        held.add(&[Label::new(LabelKind::Sensitive, ".env")]);
        assert_eq!(
            hold(&settings, &held, "fetch", &net).as_deref(),
            Some(
                "exfiltration guard: this session read sensitive data (`.env`) and untrusted content \
                 (`https://web:443`); `fetch` could send data to `api.example.com:443`"
            )
        );
    }

    #[test]
    fn what_a_held_session_may_still_do() {
        let held = risky();
        let settings = GuardSettings::default();
        // Reads, and writes inside the workspace, are not held.
        let read = reach(&[Effect::Read], &["a:443"], &[], &["/tmp"]);
        assert_eq!(hold(&settings, &held, "read_file", &read), None);
        let write = reach(&[Effect::Write], &[], &[], &[]);
        assert_eq!(hold(&settings, &held, "write_file", &write), None);
        // A plugin without grants.net cannot send anything.
        let nowhere = reach(&[Effect::Network], &[], &[], &[]);
        assert_eq!(hold(&settings, &held, "fetch", &nowhere), None);
        // Programs without the network are not held.
        let offline = reach(&[Effect::Execute], &[], &[("cargo", false)], &[]);
        assert_eq!(hold(&settings, &held, "shell", &offline), None);
        let online = reach(&[Effect::Execute], &[], &[("curl", true)], &[]);
        assert!(
            hold(&settings, &held, "shell", &online)
                .unwrap()
                .ends_with("`shell` could run `curl` with the network")
        );
        let outside = reach(&[Effect::Write], &[], &[], &["/tmp/out"]);
        assert!(
            hold(&settings, &held, "write_file", &outside)
                .unwrap()
                .ends_with("could write outside the workspace (`/tmp/out`)")
        );
    }

    #[test]
    fn one_call_that_names_a_secret_and_can_send_it_is_held() {
        let settings = GuardSettings::default();
        let named = vec![".env".to_owned()];
        let net = reach(
            &[Effect::Read, Effect::Network],
            &["127.0.0.1:9"],
            &[],
            &["/tmp/out"],
        );
        assert_eq!(
            hold_named(&settings, &named, "upload", &net).as_deref(),
            Some(
                "exfiltration guard: this call names sensitive data (`.env`); \
                 `upload` could send data to `127.0.0.1:9`"
            )
        );
        assert_eq!(hold_named(&settings, &[], "upload", &net), None);
        // A copy out of the workspace carries the secret as surely as a send.
        let write = reach(&[Effect::Read, Effect::Write], &[], &[], &["/elsewhere"]);
        assert_eq!(
            hold_named(&settings, &named, "copy", &write).as_deref(),
            Some(
                "exfiltration guard: this call names sensitive data (`.env`); \
                 `copy` could write outside the workspace (`/elsewhere`)"
            )
        );
        let inside = reach(&[Effect::Read, Effect::Write], &[], &[], &[]);
        assert_eq!(hold_named(&settings, &named, "copy", &inside), None);
        let allowed = GuardSettings {
            allow_hosts: vec!["127.0.0.1".into()],
            ..GuardSettings::default()
        };
        assert_eq!(hold_named(&allowed, &named, "upload", &net), None);
    }

    #[test]
    fn allowed_hosts_and_the_switch() {
        let held = risky();
        let net = reach(
            &[Effect::Network],
            &["api.example.com:443", "127.0.0.1:8080"],
            &[],
            &[],
        );
        let mut settings = GuardSettings {
            allow_hosts: vec!["API.example.com".into()],
            ..GuardSettings::default()
        };
        assert!(
            hold(&settings, &held, "fetch", &net)
                .unwrap()
                .ends_with("could send data to `127.0.0.1:8080`")
        );
        settings.allow_hosts.push("127.0.0.1:8080".into());
        assert_eq!(hold(&settings, &held, "fetch", &net), None);
        // Another port of an allowed host:port is not allowed.
        let other = reach(&[Effect::Network], &["127.0.0.1:9090"], &[], &[]);
        assert!(hold(&settings, &held, "fetch", &other).is_some());
        let off = GuardSettings {
            enabled: false,
            ..GuardSettings::default()
        };
        assert_eq!(hold(&off, &held, "fetch", &net), None);
    }
}
