//! Where a secret goes: `grants.secrets` entries bound to one scheme, host
//! and port, checked against `grants.net` when the manifest loads.

use super::check::Checker;
use super::origin::split_origin;
use super::raw::RawSecret;
use super::{ManifestError, NetGrant, Secret};
use toml::Spanned;

impl Checker<'_> {
    /// The one destination a secret is sent to. `origin` names it; the older
    /// `host` means that host over https on port 443, so a manifest written
    /// before secrets were bound to a scheme and port keeps sending its key
    /// where it did over TLS and nowhere else. Either way grants.net must
    /// allow it.
    pub(super) fn secret_destination(
        &self,
        name: &str,
        secret: &Spanned<RawSecret>,
        net: &[NetGrant],
    ) -> Result<(String, String, u16), ManifestError> {
        let raw = secret.get_ref();
        let err = |message: String, help: String| self.err(secret.span(), message, Some(help));
        let (scheme, host, port) = match (&raw.origin, &raw.host) {
            (Some(_), Some(_)) => {
                return Err(err(
                    format!("plugin `{name}`: a secret has both `origin` and `host`"),
                    "keep only `origin = \"scheme://host:port\"`".into(),
                ));
            }
            (None, None) => {
                return Err(err(
                    format!("plugin `{name}`: a secret names no destination"),
                    "add `origin = \"https://HOST:443\"`, the one scheme, host and port whose requests get the header".into(),
                ));
            }
            (Some(origin), None) => {
                let (scheme, host, port) = split_origin(origin).map_err(|why| {
                    err(
                        format!("plugin `{name}`: secret origin `{origin}`: {why}"),
                        "write `scheme://host:port`, e.g. \"https://api.openai.com:443\"".into(),
                    )
                })?;
                if host.contains('*') {
                    return Err(err(
                        format!("plugin `{name}`: secret origin `{origin}` names every subdomain"),
                        "a secret goes to one host; name it exactly".into(),
                    ));
                }
                (scheme, host, port)
            }
            (None, Some(host)) => {
                let bare = host.trim_start_matches('[').trim_end_matches(']');
                let is_ipv6 = bare.parse::<std::net::Ipv6Addr>().is_ok();
                if bare.is_empty()
                    || bare.contains(['/', '*', '@', '?'])
                    || bare.contains(char::is_whitespace)
                    || (bare.contains(':') && !is_ipv6)
                {
                    return Err(err(
                        format!("plugin `{name}`: secret host `{host}` is not a bare host name"),
                        "`host` means https on port 443 only; to bind the secret to another scheme or port write `origin = \"scheme://host:port\"` instead".into(),
                    ));
                }
                (
                    "https".to_owned(),
                    bare.trim_end_matches('.').to_ascii_lowercase(),
                    443,
                )
            }
        };
        if net.iter().any(|g| g.allows(&scheme, &host, port)) {
            return Ok((scheme, host, port));
        }
        let shown = Secret {
            scheme: scheme.clone(),
            host: host.clone(),
            port,
            header: String::new(),
            value: String::new(),
        }
        .origin();
        let same_host: Vec<&str> = net
            .iter()
            .filter(|g| g.host == host)
            .map(|g| g.pattern.as_str())
            .collect();
        let help = match (raw.host.is_some(), same_host.as_slice()) {
            (true, [first, ..]) => format!(
                "`host = \"{host}\"` sends the secret only to {shown}; to send it to a granted destination write `origin = \"{first}\"` instead of `host`, or add \"{shown}\" to grants.net"
            ),
            _ => format!("add \"{shown}\" to grants.net, or fix the destination"),
        };
        Err(err(
            format!("plugin `{name}`: secret for {shown}, which grants.net does not allow"),
            help,
        ))
    }
}
