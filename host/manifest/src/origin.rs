//! Origins as grants and secrets write them, `scheme://host:port`: the one
//! reading of that text shared by `grants.net`, `grants.secrets`, MCP
//! servers' URLs and the SDKs' base-URL variables.

/// `scheme://host[:port]` split into its lowercase scheme, its host (lowercase,
/// without brackets; `*.` allowed in front) and its port (the scheme's
/// default when omitted).
pub(super) fn split_origin(text: &str) -> Result<(String, String, u16), &'static str> {
    let (scheme, rest) = text.split_once("://").ok_or("no scheme")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err("the scheme must be http or https"),
    };
    let rest = rest.trim_end_matches('/');
    if rest.contains('/') || rest.contains('@') || rest.contains('?') {
        return Err("only scheme, host and port are allowed, no path or user");
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') && !p.contains(']') => {
            (h, p.parse::<u16>().map_err(|_| "the port is not a number")?)
        }
        _ => (rest, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let bare = host.strip_prefix("*.").unwrap_or(host);
    if bare.is_empty() || bare.contains('*') || bare.contains(char::is_whitespace) {
        return Err("the host is empty or has a `*` other than a leading `*.`");
    }
    Ok((scheme, host.to_ascii_lowercase(), port))
}
