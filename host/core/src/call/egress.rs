//! Step 5, `egress`: a call that names its destination. A plugin's
//! manifest entry may say which argument of a tool holds the URL a call
//! goes to (`destination_args = { web_fetch = "url" }`; `builtin:web-fetch`
//! says so by default). When that URL's origin is not in the plugin's
//! `grants.net`, the call asks, whatever the policy alone said (a denial
//! stays a denial), and the request names the origin. An approval lets
//! this one call reach that one origin: the sandbox's egress check gets it
//! beside the grant ([`super::Checked`] carries it to the run). An approval
//! for the session remembers the origin for that plugin only
//! ([`Scope::Origin`]). Nothing else widens: a redirect to another origin
//! is checked against the grant and the approved origin alone. A front-end
//! whose approver widens nothing (`corral tool call`) runs the call within
//! its grant, where the sandbox refuses the origin.

use super::judge::{Judged, Judgement};
use super::{Checked, Dispatcher, Scope};
use crate::manifest::NetGrant;
use crate::policy::{Decision, Verdict};

/// An origin a call would reach that its plugin's grant does not name.
pub(super) struct Widening {
    /// The origin as the sandbox's egress check reads it.
    pub grant: NetGrant,
    /// What remembers it for the session: this plugin, this origin.
    pub scope: Scope,
    /// How to allow it without asking, for a refusal.
    pub hint: String,
}

/// A judged call, with the origin it would reach beyond its grant.
pub(super) struct Routed {
    /// The call as it will run.
    pub checked: Checked,
    /// What the judges said, made to ask about the origin.
    pub judgement: Judgement,
    /// The origin beyond the grant, granted to this call if it is admitted.
    pub widening: Option<Widening>,
}

impl Dispatcher {
    /// `judged` with the origin its call would reach beyond its plugin's
    /// grant, its judgement made to ask about it; no widening when the call
    /// names no destination or its grant covers it. An origin approved for
    /// the session is widened without asking anything more than the policy
    /// did.
    pub(super) fn egress(&self, judged: Judged) -> Routed {
        let Judged { checked, judgement } = judged;
        let (judgement, widening) = self.widen(&checked, judgement);
        Routed {
            checked,
            judgement,
            widening,
        }
    }

    fn widen(&self, checked: &Checked, judged: Judgement) -> (Judgement, Option<Widening>) {
        if !self.approver.widens_grants() {
            return (judged, None);
        }
        let Some(widening) = ungranted(checked) else {
            return (judged, None);
        };
        if self.approved_for_session(&widening.scope) {
            return (judged, Some(widening));
        }
        let Judgement {
            verdict,
            scope,
            guard,
            tainted,
            ..
        } = judged;
        if let Decision::Deny { .. } = verdict.decision {
            let verdict = Verdict {
                reason: format!("{}; {}", verdict.reason, widening.hint),
                ..verdict
            };
            return (
                Judgement {
                    verdict,
                    scope,
                    guard,
                    also: None,
                    hint: None,
                    tainted,
                },
                None,
            );
        }
        let plugin = checked.plugin().map_or("", |p| p.decl().name.as_str());
        let reason = format!(
            "`{}` would reach {}, which grants.net of [plugins.{plugin}] does not name; an approval lets this call reach it (the policy alone: {})",
            checked.call.name, widening.grant.pattern, verdict.reason
        );
        let judged = Judgement {
            verdict: Verdict {
                decision: Decision::Ask,
                reason,
            },
            scope,
            guard,
            also: Some(widening.scope.clone()),
            hint: Some(widening.hint.clone()),
            tainted,
        };
        (judged, Some(widening))
    }
}

/// The origin of `checked`'s destination argument when its plugin's
/// `grants.net` does not allow it. A URL that does not parse, or is not
/// `http(s)`, widens nothing: the plugin's own request is then refused or
/// fails as it would without this step.
fn ungranted(checked: &Checked) -> Option<Widening> {
    let decl = checked.plugin()?.decl();
    let (scheme, host, port) = super::origin::named(decl, &checked.call.name, &checked.args)?;
    if decl.net.iter().any(|g| g.allows(&scheme, &host, port)) {
        return None;
    }
    let shown = if host.contains(':') {
        format!("{scheme}://[{host}]:{port}")
    } else {
        format!("{scheme}://{host}:{port}")
    };
    let name = &decl.name;
    Some(Widening {
        hint: format!(
            "{shown} is not granted to {name}: to allow it without asking, add \"{shown}\" to grants.net in [plugins.{name}] of corral.toml"
        ),
        scope: Scope::Origin {
            plugin: name.clone(),
            origin: shown.clone(),
        },
        grant: NetGrant {
            scheme,
            host,
            port,
            pattern: shown,
            origin: crate::manifest::Origin {
                file: "an approval of this call".into(),
                line: 0,
            },
        },
    })
}
