//! What network a launched program gets: none, any, or only some
//! destinations, reached through corral's proxy (see [`super::proxy`]).

use std::net::IpAddr;

/// The network of one launch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Network {
    /// No TCP and no IP sockets at all (`network = false`).
    #[default]
    Off,
    /// Any destination (`network = true`).
    Any,
    /// Only these destinations: the program runs in a network namespace of
    /// its own whose one way out is corral's HTTP proxy, which checks
    /// scheme, host and port of every connection against this list.
    Only(Vec<Destination>),
}

impl From<bool> for Network {
    fn from(any: bool) -> Self {
        if any { Self::Any } else { Self::Off }
    }
}

impl Network {
    /// Whether the program reaches any network at all.
    pub fn reaches(&self) -> bool {
        !matches!(self, Self::Off)
    }

    /// The destinations as written in a manifest, for a grant that names some.
    pub fn listed(&self) -> Option<Vec<String>> {
        match self {
            Self::Only(d) => Some(d.iter().map(Destination::to_string).collect()),
            _ => None,
        }
    }

    /// Whether this grant allows everything `other` allows.
    pub fn covers(&self, other: &Network) -> bool {
        match (self, other) {
            (Self::Any, _) | (_, Self::Off) => true,
            (Self::Only(mine), Self::Only(theirs)) => theirs.iter().all(|d| mine.contains(d)),
            _ => false,
        }
    }

    /// The grant in words, after "with": `network access`, `network access
    /// to https://crates.io:443`; empty when off.
    pub fn describe(&self) -> String {
        match self {
            Self::Off => String::new(),
            Self::Any => "network access".into(),
            Self::Only(d) => format!(
                "network access to {}",
                d.iter()
                    .map(Destination::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The scheme of a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP, forwarded by the proxy request by request.
    Http,
    /// HTTPS, tunnelled by the proxy with `CONNECT`.
    Https,
}

/// One destination a program may reach: `scheme://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// `http` or `https`.
    pub scheme: Scheme,
    /// A host name (lower case), an address, or `*.example.com` for any
    /// subdomain of `example.com`.
    pub host: String,
    /// The port (the scheme's default when omitted).
    pub port: u16,
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

impl Destination {
    /// Parses `https://crates.io:443`, `https://crates.io` (the scheme's
    /// port), `http://127.0.0.1:8080`, `http://[::1]:80` or
    /// `https://*.example.com`. On failure, why, in words.
    pub fn parse(text: &str) -> Result<Self, DestinationError> {
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(DestinationError::NoScheme);
        };
        let (scheme, default_port) = match scheme.to_ascii_lowercase().as_str() {
            "http" => (Scheme::Http, 80),
            "https" => (Scheme::Https, 443),
            other => return Err(DestinationError::Scheme(other.to_owned())),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '@', '?', '#']) {
            return Err(DestinationError::NotOnlyOrigin);
        }
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or(DestinationError::UnclosedBracket)?;
            let port = match after.strip_prefix(':') {
                Some(p) => parse_port(p)?,
                None if after.is_empty() => default_port,
                None => return Err(DestinationError::AfterBracket),
            };
            if host.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(DestinationError::NotIpv6(host.to_owned()));
            }
            (host.to_owned(), port)
        } else {
            match rest.split_once(':') {
                Some((h, p)) => (h.to_owned(), parse_port(p)?),
                None => (rest.to_owned(), default_port),
            }
        };
        let bare = host.strip_prefix("*.").unwrap_or(&host);
        if bare.is_empty()
            || bare.contains('*')
            || !bare
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
        {
            return Err(DestinationError::Host);
        }
        Ok(Self {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether a request for `scheme://host:port` goes to this destination.
    pub(crate) fn matches(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        if self.scheme != scheme || self.port != port {
            return false;
        }
        let host = host.to_ascii_lowercase();
        let host = host.strip_suffix('.').unwrap_or(&host);
        match self.host.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => self.host == host,
        }
    }

    /// Whether the grant names loopback or private addresses itself (an
    /// address, or `localhost`), so that the proxy may connect to them.
    pub(crate) fn names_local(&self) -> bool {
        self.host == "localhost" || self.host.parse::<IpAddr>().is_ok()
    }

    /// Whether a connection for this destination may go to `ip`, an
    /// address its host resolved to: any address on the public internet;
    /// loopback, private, link-local (the cloud metadata address among them)
    /// and the like only when the destination names such an address itself,
    /// or `localhost`. The one rule of corral's proxy and of the plugins'
    /// own HTTP: a name that resolves to loopback is not a way to reach it.
    pub fn may_connect_to(&self, ip: IpAddr) -> bool {
        self.names_local() || is_public(ip)
    }
}

/// Whether `ip` is on the public internet: not loopback, private,
/// link-local, shared (CGNAT), unspecified, broadcast or multicast.
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b)))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

/// Why a text is not a [`Destination`], in words a manifest's error shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// No `scheme://`.
    #[error("it has no scheme: write `https://HOST:PORT` or `http://HOST:PORT`")]
    NoScheme,
    /// A scheme other than http and https.
    #[error(
        "the scheme `{}` is not one corral's proxy carries: only http and https are",
        .0.escape_debug()
    )]
    Scheme(String),
    /// A path, query or user after the host.
    #[error("only a scheme, a host and a port are allowed: no path, query or user")]
    NotOnlyOrigin,
    /// `[` without `]`.
    #[error("an IPv6 address in `[` has no closing `]`")]
    UnclosedBracket,
    /// Something other than `:PORT` after `]`.
    #[error("text follows the `]` of the address")]
    AfterBracket,
    /// Text in `[` `]` that is not an IPv6 address.
    #[error("`{}` is not an IPv6 address", .0.escape_debug())]
    NotIpv6(String),
    /// A port that is not 1 to 65535.
    #[error("the port `{}` is not a number from 1 to 65535", .0.escape_debug())]
    Port(String),
    /// A host that is neither a name nor an address, or a `*` not in front.
    #[error("the host must be a name or an address; a `*` may only lead it, as in `*.example.com`")]
    Host,
}

/// For callers whose errors are still text.
impl From<DestinationError> for String {
    fn from(e: DestinationError) -> Self {
        e.to_string()
    }
}

fn parse_port(p: &str) -> Result<u16, DestinationError> {
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(DestinationError::Port(p.to_owned())),
        Ok(n) => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::{Destination, Network, Scheme, is_public};

    #[test]
    fn destinations_parse_and_match() {
        let d = Destination::parse("https://crates.io").expect("parses");
        assert_eq!(d.to_string(), "https://crates.io:443");
        assert!(d.matches(Scheme::Https, "Crates.IO", 443));
        assert!(!d.matches(Scheme::Http, "crates.io", 443));
        assert!(!d.matches(Scheme::Https, "crates.io", 80));
        assert!(!d.matches(Scheme::Https, "evilcrates.io", 443));
        let w = Destination::parse("https://*.example.com:8443").expect("parses");
        assert!(w.matches(Scheme::Https, "a.example.com", 8443));
        assert!(!w.matches(Scheme::Https, "example.com", 8443));
        assert!(!w.matches(Scheme::Https, "aexample.com", 8443));
        let v6 = Destination::parse("http://[::1]:8080").expect("parses");
        assert_eq!(v6.to_string(), "http://[::1]:8080");
        assert!(v6.names_local());
        for bad in [
            "crates.io",
            "ftp://x",
            "https://x/path",
            "https://u@x",
            "https://x:0",
            "https://x:99999",
            "https://",
            "https://a*b",
            "https://[::1",
            "http://a b",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_wider_grant_covers_a_narrower_one() {
        let a = Destination::parse("https://a:443").expect("parses");
        let b = Destination::parse("https://b:443").expect("parses");
        let only_a = Network::Only(vec![a.clone()]);
        let both = Network::Only(vec![a, b]);
        assert!(Network::Any.covers(&both));
        assert!(both.covers(&only_a));
        assert!(!only_a.covers(&both));
        assert!(!both.covers(&Network::Any));
        assert!(Network::Off.covers(&Network::Off));
        assert!(!Network::Off.covers(&only_a));
    }

    #[test]
    fn only_public_addresses_are_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(ip.parse().expect("ip")), "{ip}");
        }
        for ip in ["1.1.1.1", "2606:4700::1111"] {
            assert!(is_public(ip.parse().expect("ip")), "{ip}");
        }
    }
}
