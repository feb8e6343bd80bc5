//! Between steps 4 and 5: a call that names its destination. A plugin's
//! manifest entry may say which argument of a tool holds the URL a call
//! goes to (`destination_args = { web_fetch = "url" }`; `builtin:web-fetch`
//! says so by default). When that URL's origin is not in the plugin's
//! `grants.net`, the call asks, whatever the policy alone said (a denial
//! stays a denial), and the request names the origin. An approval lets
//! this one call reach that one origin: the sandbox's egress check gets it
//! beside the grant ([`super::Checked`] carries it to the run). An approval
//! for the session remembers the origin for that plugin only
//! ([`Scope::Origin`]). Nothing else widens: a redirect to another origin
//! is checked against the grant and the approved origin alone.

use super::judge::Judgement;
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

impl Dispatcher {
    /// The origin `checked` would reach beyond its plugin's grant, and
    /// `judged` made to ask about it; `None` when the call names no
    /// destination or its grant covers it. An origin approved for the
    /// session is widened without asking anything more than the policy did.
    pub(super) fn egress(
        &self,
        checked: &Checked,
        judged: Judgement,
    ) -> (Judgement, Option<Widening>) {
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
                },
                None,
            );
        }
        let plugin = checked
            .plugin
            .as_ref()
            .map_or("", |p| p.decl().name.as_str());
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
        };
        (judged, Some(widening))
    }
}

/// `host:port` of the URL `checked` names in its destination argument,
/// granted or not, for the exfiltration guard.
pub(super) fn destination(checked: &Checked) -> Option<String> {
    let decl = checked.plugin.as_ref()?.decl();
    let arg = decl.destination_args.get(&checked.call.name)?;
    let (_, host, port) = origin_of(checked.args.get(arg)?.as_str()?)?;
    Some(format!("{host}:{port}"))
}

/// The origin of `checked`'s destination argument when its plugin's
/// `grants.net` does not allow it. A URL that does not parse, or is not
/// `http(s)`, widens nothing: the plugin's own request is then refused or
/// fails as it would without this step.
fn ungranted(checked: &Checked) -> Option<Widening> {
    let plugin = checked.plugin.as_ref()?;
    let decl = plugin.decl();
    let arg = decl.destination_args.get(&checked.call.name)?;
    let text = checked.args.get(arg)?.as_str()?;
    let (scheme, host, port) = origin_of(text)?;
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

/// Scheme, host (lowercase, without brackets or a trailing dot) and port of
/// an `http(s)` URL, as the sandbox's egress check normalises a request's.
fn origin_of(text: &str) -> Option<(String, String, u16)> {
    let url = reqwest::Url::parse(text.trim()).ok()?;
    let scheme = url.scheme().to_owned();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let host = url
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    if host.is_empty() {
        return None;
    }
    let port = url.port_or_known_default()?;
    Some((scheme, host, port))
}

#[cfg(test)]
mod tests {
    use super::origin_of;

    #[test]
    fn an_origin_is_read_as_the_egress_check_reads_a_request() {
        let o = |u: &str| origin_of(u);
        assert_eq!(
            o("https://Docs.RS./x?y"),
            Some(("https".into(), "docs.rs".into(), 443))
        );
        assert_eq!(
            o("http://127.0.0.1:8080/"),
            Some(("http".into(), "127.0.0.1".into(), 8080))
        );
        // The plugin's URL parser reads these the same way.
        assert_eq!(
            o("http://0x7f.1/"),
            Some(("http".into(), "127.0.0.1".into(), 80))
        );
        assert_eq!(
            o("http://u:p@[::1]:9/"),
            Some(("http".into(), "::1".into(), 9))
        );
        for bad in ["ftp://x/", "not a url", "file:///etc/passwd", "data:,x"] {
            assert_eq!(o(bad), None, "{bad}");
        }
    }
}
