//! Outgoing HTTP for plugins (`wasi:http`), checked against `grants.net` on
//! every request. The default client does not follow redirects, so a redirect
//! comes back to the plugin and its next request is checked like any other.
//! A denied request is `HttpRequestDenied` to the guest, never a trap, and a
//! log line naming the grant that would allow it.
//!
//! Credentials (`grants.secrets`) are added here, on egress, to requests for
//! their host only: the plugin never holds them, in its environment or
//! anywhere else.

use crate::manifest::{NetGrant, Secret};
use std::sync::Arc;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// The egress policy of one plugin.
pub(crate) struct Egress {
    pub(crate) plugin: Arc<str>,
    pub(crate) allow: Arc<[NetGrant]>,
    pub(crate) secrets: Arc<[Secret]>,
}

impl Egress {
    /// Whether `uri` may be requested.
    fn allowed(&self, uri: &http::Uri) -> Result<(), String> {
        let scheme = uri.scheme_str().unwrap_or("https");
        let host = uri.host().unwrap_or("");
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "http" { 80 } else { 443 });
        if self.allow.iter().any(|g| g.allows(scheme, host, port)) {
            Ok(())
        } else {
            Err(format!(
                "plugin `{}`: request to {scheme}://{host}:{port} denied; add \"{scheme}://{host}:{port}\" to grants.net of [plugins.{}] to allow it",
                self.plugin, self.plugin
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
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        if let Err(why) = self.allowed(request.uri()) {
            tracing::warn!(target: "corral::egress", "{why}");
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        tracing::debug!(target: "corral::egress", plugin = &*self.plugin, uri = %request.uri(), "request allowed");
        let host = request.uri().host().unwrap_or("").to_ascii_lowercase();
        for secret in self.secrets.iter().filter(|s| s.host == host) {
            let value = match secret.resolve() {
                Ok(v) => v,
                Err(var) => {
                    tracing::warn!(
                        target: "corral::egress",
                        "plugin `{}`: request to {host} needs the environment variable {var}, which is not set",
                        self.plugin
                    );
                    return Box::new(async { Err(HttpError::HttpRequestDenied) });
                }
            };
            let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(secret.header.as_bytes()),
                http::HeaderValue::from_str(&value),
            ) else {
                tracing::warn!(target: "corral::egress", "plugin `{}`: secret for {host} is not a valid header", self.plugin);
                return Box::new(async { Err(HttpError::HttpRequestDenied) });
            };
            request.headers_mut().insert(name, value);
        }
        let _ = fut;
        Box::new(async move {
            use http_body_util::BodyExt;
            let (res, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                res.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}
