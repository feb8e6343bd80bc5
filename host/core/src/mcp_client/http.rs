//! Streamable HTTP servers (`[mcp.NAME] url = "…"`): rmcp's streamable-HTTP
//! client transport over corral's own HTTP client ([`OriginClient`]).
//!
//! corral makes these connections itself, so the server's `url` names the
//! one destination: every request goes to its scheme, host and port, a
//! redirect is refused (never followed, to that origin or any other), a
//! JSON answer or one SSE event longer than the server's cap is cut off
//! before it is held whole, and the call pipeline's per-call timeout
//! applies. The `grants.secrets` headers are added here, on egress, to
//! requests to that origin only; their values are read from corral's
//! environment when the server is reached and go nowhere else (not to the
//! model, the log or a plugin).

mod sse;

use super::{FRAMING_SLACK, Handler};
use crate::manifest::McpServerDecl;
use crate::manifest::mcp_url_origin;
use crate::protocol::terminal::inert;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::{RoleClient, RunningService, ServiceExt as _};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse,
};
use sse::Sse;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const EVENT_STREAM: &str = "text/event-stream";
/// Bytes kept of an error answer's body, for the message.
const ERROR_BODY: usize = 2048;

/// Why a request to the server failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum HttpError {
    /// The connection or the request failed.
    #[error("{0}")]
    Request(#[from] reqwest::Error),
    /// A request the transport wanted to send elsewhere than the url's origin.
    #[error("refused a request to {0}: the server's url names its only destination")]
    OtherOrigin(String),
    /// A redirect, which corral never follows.
    #[error(
        "the server answered {status} with a redirect to {to}; corral follows no redirect of an MCP server: set `url` to where it points"
    )]
    Redirect {
        /// The status code.
        status: u16,
        /// Its `Location`, inert.
        to: String,
    },
    /// An answer or an event over the cap.
    #[error("the server sent a message larger than the {0} KiB cap (`output_kb`)")]
    TooLarge(usize),
}

impl From<HttpError> for StreamableHttpError<HttpError> {
    fn from(e: HttpError) -> Self {
        StreamableHttpError::Client(e)
    }
}

/// An HTTP client bound to one origin, adding its secret headers.
#[derive(Clone)]
pub(super) struct OriginClient {
    client: reqwest::Client,
    /// `scheme://host:port` of the url.
    origin: Arc<str>,
    /// The secret headers, resolved.
    headers: Arc<HeaderMap>,
    /// The largest message read.
    cap: usize,
}

impl OriginClient {
    /// A client for `decl`'s url; fails when a secret's variable is unset.
    fn new(decl: &McpServerDecl, origin: String) -> Result<Self, String> {
        let name = &decl.name;
        let mut headers = HeaderMap::new();
        for secret in &decl.secrets {
            let value = secret.resolve().map_err(|var| {
                format!(
                    "[mcp.{name}]: the secret for {} reads ${{env:{var}}}, which is not set; \
                     export {var} before starting corral",
                    secret.origin()
                )
            })?;
            let header = HeaderName::from_bytes(secret.header.as_bytes())
                .map_err(|_| format!("[mcp.{name}]: `{}` is not a header name", secret.header))?;
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                format!(
                    "[mcp.{name}]: the value of the secret header `{}` holds a character a \
                     header may not (a newline?)",
                    secret.header
                )
            })?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        let client = reqwest::Client::builder()
            .user_agent(concat!("corral/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_millis(decl.timeout_ms))
            .build()
            .map_err(|e| format!("[mcp.{name}]: cannot start an HTTP client: {e}"))?;
        Ok(OriginClient {
            client,
            origin: origin.into(),
            headers: Arc::new(headers),
            cap: decl.output_cap.saturating_add(FRAMING_SLACK),
        })
    }

    /// A request to `uri`, refused unless it is the url's origin, with the
    /// transport's headers and then the secrets (which no server-chosen
    /// header can replace).
    fn request(
        &self,
        method: reqwest::Method,
        uri: &str,
        session: Option<&str>,
        custom: HashMap<HeaderName, HeaderValue>,
    ) -> Result<reqwest::RequestBuilder, HttpError> {
        match mcp_url_origin(uri) {
            Ok((origin, _)) if origin == *self.origin => {}
            _ => return Err(HttpError::OtherOrigin(inert(uri).into_owned())),
        }
        let mut headers = HeaderMap::new();
        for (k, v) in custom {
            headers.insert(k, v);
        }
        if let Some(id) = session
            && let Ok(v) = HeaderValue::from_str(id)
        {
            headers.insert(SESSION_ID, v);
        }
        for (k, v) in self.headers.iter() {
            headers.insert(k, v.clone());
        }
        Ok(self.client.request(method, uri).headers(headers))
    }

    /// Refuses a redirect; `None` when the answer is not one.
    fn redirect(response: &reqwest::Response) -> Option<HttpError> {
        let status = response.status();
        status.is_redirection().then(|| HttpError::Redirect {
            status: status.as_u16(),
            to: response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| "(nowhere)".to_owned(), |v| inert(v).into_owned()),
        })
    }

    /// The body, read up to `cap` bytes: `Err` past it.
    async fn body(mut response: reqwest::Response, cap: usize) -> Result<Vec<u8>, HttpError> {
        let mut out = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            if out.len() + chunk.len() > cap {
                return Err(HttpError::TooLarge(cap / 1024));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    /// An error answer as a transport error, with the start of its body.
    async fn failed(response: reqwest::Response) -> StreamableHttpError<HttpError> {
        let status = response.status();
        let mut text = Vec::new();
        let mut response = response;
        while let Ok(Some(chunk)) = response.chunk().await {
            text.extend_from_slice(&chunk);
            if text.len() >= ERROR_BODY {
                text.truncate(ERROR_BODY);
                break;
            }
        }
        StreamableHttpError::UnexpectedServerResponse(
            format!(
                "HTTP {status}: {}",
                inert(String::from_utf8_lossy(&text).trim())
            )
            .into(),
        )
    }

    /// An SSE body as events, none longer than the cap.
    fn events(&self, response: reqwest::Response) -> BoxStream<'static, Result<Sse, SseError>> {
        let mut reader = sse::Reader::new(self.cap);
        response
            .bytes_stream()
            .flat_map(move |piece| {
                futures::stream::iter(reader.read(piece.map_err(HttpError::from)))
            })
            .boxed()
    }
}

impl StreamableHttpClient for OriginClient {
    type Error = HttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<HttpError>> {
        let body = serde_json::to_vec(&message)?;
        let response = self
            .request(
                reqwest::Method::POST,
                &uri,
                session_id.as_deref(),
                custom_headers,
            )?
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(HttpError::from)?;
        let status = response.status();
        if let Some(e) = Self::redirect(&response) {
            return Err(e.into());
        }
        if status == reqwest::StatusCode::ACCEPTED || status == reqwest::StatusCode::NO_CONTENT {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == reqwest::StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        if !status.is_success() {
            return Err(Self::failed(response).await);
        }
        let session = response
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let kind = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.to_ascii_lowercase());
        match kind.as_deref() {
            Some(k) if k.starts_with(EVENT_STREAM) => Ok(StreamableHttpPostResponse::Sse(
                self.events(response),
                session,
            )),
            Some(k) if k.starts_with("application/json") => {
                let body = Self::body(response, self.cap).await?;
                let message: ServerJsonRpcMessage = serde_json::from_slice(&body)?;
                Ok(StreamableHttpPostResponse::Json(message, session))
            }
            _ if status == reqwest::StatusCode::OK && response.content_length() == Some(0) => {
                Ok(StreamableHttpPostResponse::Accepted)
            }
            _ => Err(StreamableHttpError::UnexpectedContentType(kind)),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<HttpError>> {
        let response = self
            .request(
                reqwest::Method::DELETE,
                &uri,
                Some(&session_id),
                custom_headers,
            )?
            .send()
            .await
            .map_err(HttpError::from)?;
        if response.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportDeleteSession);
        }
        Ok(())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<HttpError>> {
        let mut request = self
            .request(
                reqwest::Method::GET,
                &uri,
                session_id.as_deref(),
                custom_headers,
            )?
            .header(ACCEPT, EVENT_STREAM);
        if let Some(id) = last_event_id {
            request = request.header(LAST_EVENT_ID, id);
        }
        let response = request.send().await.map_err(HttpError::from)?;
        let status = response.status();
        if let Some(e) = Self::redirect(&response) {
            return Err(e.into());
        }
        if status == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            return Err(Self::failed(response).await);
        }
        let kind = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.to_ascii_lowercase());
        if !kind.as_deref().is_some_and(|k| k.starts_with(EVENT_STREAM)) {
            return Err(StreamableHttpError::UnexpectedContentType(kind));
        }
        Ok(self.events(response))
    }
}

/// Connects to `decl`'s url and completes the MCP handshake within its
/// timeout.
pub(super) async fn connect(
    decl: &McpServerDecl,
    url: &str,
    handler: Handler,
) -> Result<RunningService<RoleClient, Handler>, String> {
    let name = &decl.name;
    let (origin, _) =
        mcp_url_origin(url).map_err(|why| format!("[mcp.{name}]: url `{}`: {why}", inert(url)))?;
    let client = OriginClient::new(decl, origin)?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    config.max_sse_event_size = client.cap;
    config.max_json_response_size = client.cap;
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let wait = Duration::from_millis(decl.timeout_ms);
    match tokio::time::timeout(wait, handler.serve(transport)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(format!(
            "the MCP server `{name}` at {} did not complete the MCP handshake: {}",
            inert(url),
            inert(&e.to_string())
        )),
        Err(_) => Err(format!(
            "the MCP server `{name}` at {} did not answer `initialize` within {} ms; is it \
             running? (raise `timeout_ms` of [mcp.{name}] if it is slow)",
            inert(url),
            decl.timeout_ms
        )),
    }
}
