//! Outgoing HTTP for plugins (`wasi:http`), checked against `grants.net` on
//! every request, and refused outright in calls that may not reach the
//! network (a tool that does not declare `network`, a preview, `describe`).
//! The default client does not follow redirects, so a redirect comes back to
//! the plugin and its next request is checked like any other. A denied
//! request is `HttpRequestDenied` to the guest, never a trap, and a log line
//! naming the grant or the effect that would allow it. A plugin without
//! `grants.net` may still import `wasi:http`: every request it makes is
//! denied that way.
//!
//! Credentials (`grants.secrets`) are added here, on egress, to requests for
//! their exact scheme, host and port only: the plugin never holds them, in
//! its environment or anywhere else, and a cleartext or other-port request
//! to the same host does not carry them.

use crate::manifest::{NetGrant, Secret};
use std::sync::Arc;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode as HttpErrorCode;
use wasmtime_wasi_http::{
    Error as HttpError, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks,
    WasiHttpView,
};

/// Adds `wasi:http`'s own interfaces (WASI's, which it builds on, are added
/// with the rest of WASI); requests go out through each call's [`Egress`].
/// wasmtime-wasi-http reaches a store's [`Http`] through
/// [`WasiHttpView`], which the store implements with [`Http::view`].
pub(super) fn add_to_linker<T: WasiHttpView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
}

/// The `wasi:http` state of one call: wasmtime-wasi-http's context and the
/// call's egress policy.
pub(crate) struct Http {
    ctx: WasiHttpCtx,
    /// Where requests may go, and where they went.
    pub(crate) egress: Egress,
}

impl Http {
    /// The state of a call that sends its requests through `egress`, with
    /// header maps held to [`super::budget::FIELDS_SIZE_LIMIT`].
    pub(crate) fn new(egress: Egress) -> Self {
        let mut ctx = WasiHttpCtx::new();
        ctx.set_field_size_limit(super::budget::FIELDS_SIZE_LIMIT);
        Self { ctx, egress }
    }

    /// What wasmtime-wasi-http works on: this state and the call's
    /// resource table.
    pub(crate) fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiHttpCtxView<'a> {
        WasiHttpCtxView {
            ctx: &mut self.ctx,
            table,
            hooks: &mut self.egress,
        }
    }
}

/// The egress policy of one call.
pub(crate) struct Egress {
    pub(crate) plugin: Arc<str>,
    /// Where the plugin's manifest entry is, for the denial of a plugin
    /// without `grants.net`.
    pub(crate) origin: Arc<str>,
    pub(crate) allow: Arc<[NetGrant]>,
    pub(crate) secrets: Arc<[Secret]>,
    /// Why this call may send nothing at all, whatever `allow` says (left
    /// unworded when `allow` is empty: the missing grant is the reason then).
    pub(crate) refused: Option<String>,
    /// Destinations requests went out to in this call (`scheme`, `host`,
    /// `port`), for its provenance labels.
    pub(crate) contacted: Vec<(String, String, u16)>,
    /// The plugin's connections, kept between its requests.
    pub(crate) connections: Arc<super::connections::Pool>,
}

/// The scheme, host (lowercase, without brackets or a trailing dot) and port
/// a request goes to.
fn destination(uri: &http::Uri) -> (String, String, u16) {
    let scheme = uri.scheme_str().unwrap_or("https").to_ascii_lowercase();
    let host = uri
        .host()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "http" { 80 } else { 443 });
    (scheme, host, port)
}

impl Egress {
    /// Whether a request to `scheme://host:port` may be sent.
    fn allowed(&self, scheme: &str, host: &str, port: u16) -> Result<(), String> {
        let plugin = &self.plugin;
        // Without grants.net, `wasi:http` is a stub: declaring `network`
        // would not help, so the missing grant is what the log says.
        if self.allow.is_empty() {
            return Err(format!(
                "plugin `{plugin}` has no grants.net entry in [plugins.{plugin}] ({}): request to \
                 {scheme}://{host}:{port} denied; add grants.net = [\"{scheme}://{host}:{port}\"] \
                 to [plugins.{plugin}] to let it reach that destination",
                self.origin
            ));
        }
        if let Some(why) = &self.refused {
            return Err(format!("request to {scheme}://{host}:{port} denied: {why}"));
        }
        if self.allow.iter().any(|g| g.allows(scheme, host, port)) {
            Ok(())
        } else {
            Err(format!(
                "plugin `{plugin}`: request to {scheme}://{host}:{port} denied; add \"{scheme}://{host}:{port}\" to grants.net of [plugins.{plugin}] to allow it"
            ))
        }
    }
}

type SendResult = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    HttpError,
>;

impl WasiHttpHooks for Egress {
    // wasmtime's own hooks log these errors with `Debug` (`Os { code: 111,
    // kind: ConnectionRefused, .. }`); the guest gets the error code and
    // says what failed, so the log line only adds where, in words.
    fn p2_error_from_connect(&mut self, err: &std::io::Error) -> HttpErrorCode {
        tracing::debug!(target: "corral::egress", plugin = &*self.plugin, "cannot connect: {err}");
        HttpErrorCode::ConnectionRefused
    }

    fn p2_error_from_tls(&mut self, err: &std::io::Error) -> HttpErrorCode {
        tracing::debug!(target: "corral::egress", plugin = &*self.plugin, "TLS failed: {err}");
        HttpErrorCode::TlsProtocolError
    }

    fn p2_error_from_hyper(&mut self, err: &hyper::Error) -> HttpErrorCode {
        tracing::debug!(target: "corral::egress", plugin = &*self.plugin, "HTTP failed: {err}");
        HttpErrorCode::HttpProtocolError
    }

    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        let (scheme, host, port) = destination(request.uri());
        if let Err(why) = self.allowed(&scheme, &host, port) {
            tracing::warn!(target: "corral::egress", "{why}");
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        tracing::debug!(target: "corral::egress", plugin = &*self.plugin, uri = %request.uri(), "request allowed");
        let dest = (scheme.clone(), host.clone(), port);
        if !self.contacted.contains(&dest) {
            self.contacted.push(dest);
        }
        for secret in self
            .secrets
            .iter()
            .filter(|s| s.applies_to(&scheme, &host, port))
        {
            let origin = secret.origin();
            let value = match secret.resolve() {
                Ok(v) => v,
                Err(var) => {
                    tracing::warn!(
                        target: "corral::egress",
                        "plugin `{}`: request to {origin} needs the environment variable {var}, which is not set",
                        self.plugin
                    );
                    return Box::new(async { Err(HttpError::HttpRequestDenied) });
                }
            };
            let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(secret.header.as_bytes()),
                http::HeaderValue::from_str(&value),
            ) else {
                tracing::warn!(target: "corral::egress", "plugin `{}`: secret for {origin} is not a valid header", self.plugin);
                return Box::new(async { Err(HttpError::HttpRequestDenied) });
            };
            request.headers_mut().insert(name, value);
        }
        let _ = fut;
        let pool = self.connections.clone();
        let plugin = self.plugin.clone();
        Box::new(async move {
            let response = super::connections::send(&pool, request, options, &plugin).await?;
            // The connection's I/O runs on a task of its own, which
            // outlives the call when the connection is kept.
            let io = async { Ok(()) };
            Ok((response, Box::new(io) as Box<dyn Future<Output = _> + Send>))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::destination;

    #[test]
    fn destinations_are_normalised_like_grants() {
        let d = |u: &str| destination(&u.parse().unwrap());
        for (url, scheme, host, port) in [
            (
                "https://API.Example.com./v1",
                "https",
                "api.example.com",
                443,
            ),
            ("http://127.0.0.1/x", "http", "127.0.0.1", 80),
            ("http://127.0.0.1:8443/", "http", "127.0.0.1", 8443),
            ("https://[::1]:9000/", "https", "::1", 9000),
        ] {
            assert_eq!(d(url), (scheme.into(), host.into(), port), "{url}");
        }
    }
}
