//! Where a call names its destination: a plugin's manifest entry may say
//! which argument of a tool holds the URL a call goes to
//! (`destination_args = { web_fetch = "url" }`); its origin is read as the
//! sandbox's egress check reads a request's. The guard (step 4) and the
//! egress step (5) both read it here.

/// `host:port` of the URL a call of `tool` of the plugin `decl` names in
/// its destination argument, granted or not, for the exfiltration guard.
pub(super) fn destination(
    decl: &crate::manifest::PluginDecl,
    tool: &str,
    args: &serde_json::Value,
) -> Option<String> {
    let (_, host, port) = named(decl, tool, args)?;
    Some(format!("{host}:{port}"))
}

/// Scheme, host and port of the URL a call of `tool` of the plugin `decl`
/// names in its destination argument.
pub(super) fn named(
    decl: &crate::manifest::PluginDecl,
    tool: &str,
    args: &serde_json::Value,
) -> Option<(String, String, u16)> {
    let arg = decl.destination_args.get(tool)?;
    origin_of(args.get(arg)?.as_str()?)
}

/// Scheme, host (lowercase, without brackets or a trailing dot) and port of
/// an `http(s)` URL, as the sandbox's egress check normalises a request's.
pub(super) fn origin_of(text: &str) -> Option<(String, String, u16)> {
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
        for (url, scheme, host, port) in [
            ("https://Docs.RS./x?y", "https", "docs.rs", 443),
            ("http://127.0.0.1:8080/", "http", "127.0.0.1", 8080),
            // The plugin's URL parser reads these the same way.
            ("http://0x7f.1/", "http", "127.0.0.1", 80),
            ("http://u:p@[::1]:9/", "http", "::1", 9),
        ] {
            assert_eq!(o(url), Some((scheme.into(), host.into(), port)), "{url}");
        }
        for bad in ["ftp://x/", "not a url", "file:///etc/passwd", "data:,x"] {
            assert_eq!(o(bad), None, "{bad}");
        }
    }
}
