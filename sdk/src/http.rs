//! A small blocking HTTP client over the raw `wasi:http` bindings, built for
//! long streaming responses: every wait has a deadline, so a server that goes
//! quiet is a [`Error::Stall`] and a connection that breaks is an
//! [`Error::Dropped`], never a hang.
//!
//! Requests leave through the host, which checks each against the plugin's
//! `grants.net` (and, in a tool, that the tool declares `Effect::Network`)
//! and adds the credentials it holds for that exact scheme, host and port; a
//! plugin never sets (or sees) an API key.
//!
//! ```no_run
//! use corral_sdk::http::Request;
//!
//! let mut response = Request::post_json("https://api.example.com/v1/chat", &serde_json::json!({"stream": true}))
//!     .header("accept", "text/event-stream")
//!     .send()?;
//! while let Some(chunk) = response.chunk()? {
//!     // feed `chunk` to a `corral_sdk::sse::Parser`
//! #   let _ = chunk;
//! }
//! # Ok::<(), corral_sdk::http::Error>(())
//! ```
//!
//! The bindings compile on every target so that code using them can be unit
//! tested natively, but only a `wasm32-wasip2` component can actually send.

use std::time::Duration;
use wasip2::clocks::monotonic_clock;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, FutureIncomingResponse, IncomingBody, IncomingResponse,
    Method as WasiMethod, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasip2::io::poll;
use wasip2::io::streams::{InputStream, StreamError};

/// Most bytes asked of the host per read; the host returns what it has (one
/// network read's worth at most), so this only bounds a read, it reserves
/// nothing. Large enough that a fast stream is not cut into more host calls
/// than the network delivered.
const READ_SIZE: u64 = 1024 * 1024;
/// Most bytes handed to the host per `write` of a request body, whatever
/// larger permit the host gives (wasmtime's HTTP body takes 1 MiB): a
/// multi-megabyte conversation goes out in a few dozen writes instead of
/// thousands of 4 KiB `blocking-write-and-flush` round trips.
const WRITE_SIZE: usize = 1024 * 1024;

/// The HTTP method of a [`Request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`
    Get,
    /// `POST`
    Post,
}

/// How long the client waits before giving up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// From sending the request until the response headers arrive.
    pub response: Duration,
    /// The longest silence allowed while reading the body.
    pub stall: Duration,
}

impl Default for Timeouts {
    /// Two minutes each: long enough for a large model to think before its
    /// first token, short enough that a dead connection does not look like a
    /// slow one for long.
    fn default() -> Self {
        Self {
            response: Duration::from_secs(120),
            stall: Duration::from_secs(120),
        }
    }
}

/// An outgoing request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The absolute `http://` or `https://` URL.
    pub url: String,
    /// Header names and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body (empty for none).
    pub body: Vec<u8>,
    /// Deadlines of this request.
    pub timeouts: Timeouts,
}

impl Request {
    /// A `GET` request.
    pub fn get(url: impl Into<String>) -> Self {
        Self {
            method: Method::Get,
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            timeouts: Timeouts::default(),
        }
    }

    /// A `POST` request with a JSON body and `content-type: application/json`.
    pub fn post_json(url: impl Into<String>, body: &serde_json::Value) -> Self {
        Self::post_json_bytes(url, body.to_string().into_bytes())
    }

    /// A `POST` request with a body that is already JSON text, and
    /// `content-type: application/json`: how a provider sends a body it
    /// serialised straight from the conversation, without a
    /// [`serde_json::Value`] copy of it.
    pub fn post_json_bytes(url: impl Into<String>, body: Vec<u8>) -> Self {
        Self {
            method: Method::Post,
            body,
            ..Self::get(url)
        }
        .header("content-type", "application/json")
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Replaces the deadlines.
    #[must_use]
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Sends the request and waits for the response headers. Any status is a
    /// successful send; the body is read from the returned [`Response`].
    pub fn send(&self) -> Result<Response, Error> {
        let url = Url::parse(&self.url)?;
        let fail = |reason: String| Error::Invalid {
            url: self.url.clone(),
            reason,
        };
        let mut entries: Vec<(String, Vec<u8>)> = self
            .headers
            .iter()
            .map(|(name, value)| (name.to_ascii_lowercase(), value.clone().into_bytes()))
            .collect();
        // Without a length the body goes out chunked, which some local model
        // servers do not accept on requests.
        if self.method == Method::Post && !entries.iter().any(|(n, _)| n == "content-length") {
            entries.push((
                "content-length".to_owned(),
                self.body.len().to_string().into_bytes(),
            ));
        }
        let headers = Fields::from_list(&entries).map_err(|e| {
            fail(format!(
                "a header was refused ({}): header names are tokens and values hold no line breaks",
                header_error_text(&e)
            ))
        })?;
        let request = OutgoingRequest::new(headers);
        let method = match self.method {
            Method::Get => WasiMethod::Get,
            Method::Post => WasiMethod::Post,
        };
        request
            .set_method(&method)
            .map_err(|()| fail("method refused".into()))?;
        request
            .set_scheme(Some(&url.scheme))
            .map_err(|()| fail("scheme refused".into()))?;
        request
            .set_authority(Some(url.authority))
            .map_err(|()| fail("host refused".into()))?;
        request
            .set_path_with_query(Some(url.path_and_query))
            .map_err(|()| fail("path refused".into()))?;
        let body = request
            .body()
            .map_err(|()| fail("request body unavailable".into()))?;

        let options = RequestOptions::new();
        // A host that does not support a timeout says so with an error; the
        // client's own deadlines below still apply, so ignoring it is safe.
        let _ = options.set_connect_timeout(Some(nanos(self.timeouts.response)));
        let _ = options.set_first_byte_timeout(Some(nanos(self.timeouts.response)));
        // Slightly longer than our own stall deadline, so that the clearer
        // error (ours) normally wins.
        let _ = options
            .set_between_bytes_timeout(Some(nanos(self.timeouts.stall + Duration::from_secs(1))));

        // The request is handed over before the body is written: the host
        // streams the body to the server, and a large body written first
        // could fill the host's buffer with nobody reading it.
        let pending = outgoing_handler::handle(request, Some(options))
            .map_err(|code| transport_error(&self.url, &code))?;
        let written = write_body(body, &self.body);

        let response = wait_response(&pending, self.timeouts.response, &self.url);
        // A refused or failed request usually also breaks the body write;
        // the response future has the real reason, so it is reported first.
        let response = response?;
        written.map_err(|message| Error::Transport {
            url: self.url.clone(),
            message: format!("sending the request body failed: {message}"),
        })?;
        Response::new(response, self)
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), String> {
    {
        let stream = body.write().map_err(|()| "body stream unavailable")?;
        let mut rest = bytes;
        while !rest.is_empty() {
            // `check-write` says how much the host takes now; zero means
            // its buffer is full until the connection drains it.
            let permit = stream.check_write().map_err(|e| stream_error_text(&e))?;
            let permit = usize::try_from(permit).unwrap_or(usize::MAX);
            if permit == 0 {
                stream.subscribe().block();
                continue;
            }
            let (now, later) = rest.split_at(rest.len().min(permit).min(WRITE_SIZE));
            stream.write(now).map_err(|e| stream_error_text(&e))?;
            rest = later;
        }
        // Once the host has taken `content-length` bytes it may close the
        // stream: that is the body complete, not a failure.
        match stream.blocking_flush() {
            Ok(()) | Err(StreamError::Closed) => {}
            Err(e) => return Err(stream_error_text(&e)),
        }
        // The stream is a child of the body and must go before `finish`.
    }
    OutgoingBody::finish(body, None).map_err(|code| code_text(&code))
}

fn wait_response(
    pending: &FutureIncomingResponse,
    timeout: Duration,
    url: &str,
) -> Result<IncomingResponse, Error> {
    {
        let ready = pending.subscribe();
        let timer = monotonic_clock::subscribe_duration(nanos(timeout));
        poll::poll(&[&ready, &timer]);
    }
    match pending.get() {
        None => Err(Error::Timeout {
            url: url.to_owned(),
            after: timeout,
        }),
        Some(Err(())) => Err(Error::Transport {
            url: url.to_owned(),
            message: "the response was already taken".into(),
        }),
        Some(Ok(Err(code))) => Err(match code {
            // The host enforces the same deadline through the request
            // options and may notice first.
            ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::HttpResponseTimeout => Error::Timeout {
                url: url.to_owned(),
                after: timeout,
            },
            code => transport_error(url, &code),
        }),
        Some(Ok(Ok(response))) => Ok(response),
    }
}

fn transport_error(url: &str, code: &ErrorCode) -> Error {
    match code {
        ErrorCode::HttpRequestDenied => Error::Denied {
            url: url.to_owned(),
        },
        code => Error::Transport {
            url: url.to_owned(),
            message: code_text(code),
        },
    }
}

/// Why the host refused a header, in words.
fn header_error_text(e: &wasip2::http::types::HeaderError) -> &'static str {
    use wasip2::http::types::HeaderError;
    match e {
        HeaderError::InvalidSyntax => "its name or value is not valid HTTP",
        HeaderError::Forbidden => "the host sets that header itself",
        HeaderError::Immutable => "the headers can no longer be changed",
    }
}

/// What an HTTP error code means, in words a user can act on (the code's
/// `Debug` text names a Rust enum variant).
fn code_text(code: &ErrorCode) -> String {
    let fixed = match code {
        ErrorCode::DnsTimeout => "the DNS lookup of the host timed out",
        ErrorCode::DnsError(p) => {
            return match &p.rcode {
                Some(r) => format!("the host name could not be resolved ({r}); check the URL"),
                None => "the host name could not be resolved; check the URL".to_owned(),
            };
        }
        ErrorCode::DestinationNotFound => "the host was not found; check the URL",
        ErrorCode::DestinationUnavailable => "the host is unavailable",
        ErrorCode::DestinationIpProhibited => "connecting to that IP address is not allowed",
        ErrorCode::DestinationIpUnroutable => "that IP address cannot be reached",
        ErrorCode::ConnectionRefused => {
            "the connection was refused: nothing accepts connections at that address and port; \
             check the URL (and `base_url` in the plugin's config) and that the server is running"
        }
        ErrorCode::ConnectionTerminated => "the server closed the connection",
        ErrorCode::ConnectionTimeout => "connecting timed out",
        ErrorCode::ConnectionReadTimeout => "reading from the connection timed out",
        ErrorCode::ConnectionWriteTimeout => "writing to the connection timed out",
        ErrorCode::ConnectionLimitReached => "too many connections are open",
        ErrorCode::TlsProtocolError => "the TLS handshake failed (is the URL's scheme right?)",
        ErrorCode::TlsCertificateError => "the server's TLS certificate was not accepted",
        ErrorCode::TlsAlertReceived(_) => "the server ended the TLS handshake with an alert",
        ErrorCode::HttpRequestDenied => "the host refused to send the request",
        ErrorCode::HttpRequestUriInvalid => "the URL is not valid",
        ErrorCode::HttpRequestUriTooLong => "the URL is too long",
        ErrorCode::HttpRequestMethodInvalid => "the request method is not valid",
        ErrorCode::HttpResponseIncomplete => "the response ended early",
        ErrorCode::HttpResponseTimeout => "no response arrived in time",
        ErrorCode::HttpProtocolError => "the server did not speak valid HTTP",
        ErrorCode::LoopDetected => "the request loops back on itself",
        ErrorCode::ConfigurationError => "the host's HTTP client is misconfigured",
        ErrorCode::InternalError(Some(m)) => return format!("the host's HTTP client failed: {m}"),
        ErrorCode::InternalError(None) => "the host's HTTP client failed",
        _ => "the request or the response exceeds a size limit, or uses an unsupported coding",
    };
    fixed.to_owned()
}

fn stream_error_text(err: &StreamError) -> String {
    match err {
        StreamError::Closed => "the stream was closed".to_owned(),
        StreamError::LastOperationFailed(io) => match wasip2::http::types::http_error_code(io) {
            Some(code) => code_text(&code),
            None => first_line(&io.to_debug_string()),
        },
    }
}

/// A host's debug text of an I/O error can carry a whole backtrace; the
/// first line is the message.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or(text).trim().to_owned()
}

/// A response whose headers have arrived; read the body with
/// [`chunk`](Response::chunk) or [`read_to_end`](Response::read_to_end).
pub struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

impl Response {
    fn new(response: IncomingResponse, request: &Request) -> Result<Self, Error> {
        let status = response.status();
        let headers: Vec<(String, String)> = response
            .headers()
            .entries()
            .into_iter()
            .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
            .collect();
        let expected = header(&headers, "content-length").and_then(|v| v.trim().parse().ok());
        let transport = |message: &str| Error::Transport {
            url: request.url.clone(),
            message: message.to_owned(),
        };
        let body = response
            .consume()
            .map_err(|()| transport("the response body was already taken"))?;
        let stream = body
            .stream()
            .map_err(|()| transport("the response body stream was already taken"))?;
        Ok(Self {
            status,
            headers,
            body: Body {
                stream: Some(stream),
                body: Some(body),
                _response: response,
                url: request.url.clone(),
                stall: request.timeouts.stall,
                received: 0,
                expected,
            },
        })
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// All headers, names in lower case.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// The next piece of the body as it arrives, or `None` at its end.
    ///
    /// Fails with [`Error::Stall`] when no byte arrives for the stall timeout
    /// and with [`Error::Dropped`] when the connection breaks or closes
    /// before the `content-length` it announced. Whether the body was
    /// complete for the protocol on top (say, an SSE stream's final event) is
    /// for the caller to check.
    pub fn chunk(&mut self) -> Result<Option<Vec<u8>>, Error> {
        self.body.chunk()
    }

    /// Reads the rest of the body, failing with [`Error::TooLarge`] past
    /// `limit` bytes.
    pub fn read_to_end(&mut self, limit: usize) -> Result<Vec<u8>, Error> {
        let mut all = Vec::new();
        while let Some(chunk) = self.chunk()? {
            if all.len() + chunk.len() > limit {
                return Err(Error::TooLarge {
                    url: self.body.url.clone(),
                    limit,
                });
            }
            all.extend_from_slice(&chunk);
        }
        Ok(all)
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The body's resources, declared in the order they must be dropped: a
/// stream before its body, a body before its response.
struct Body {
    stream: Option<InputStream>,
    body: Option<IncomingBody>,
    _response: IncomingResponse,
    url: String,
    stall: Duration,
    received: u64,
    expected: Option<u64>,
}

impl Body {
    fn chunk(&mut self) -> Result<Option<Vec<u8>>, Error> {
        let Some(stream) = &self.stream else {
            return Ok(None);
        };
        let deadline = monotonic_clock::now().saturating_add(nanos(self.stall));
        loop {
            match stream.read(READ_SIZE) {
                Ok(bytes) if !bytes.is_empty() => {
                    self.received += bytes.len() as u64;
                    return Ok(Some(bytes));
                }
                Ok(_) => {}
                Err(StreamError::Closed) => {
                    self.close();
                    return match self.expected {
                        Some(expected) if self.received < expected => Err(Error::Dropped {
                            url: self.url.clone(),
                            message: format!(
                                "the connection closed after {} of {expected} bytes",
                                self.received
                            ),
                        }),
                        _ => Ok(None),
                    };
                }
                Err(StreamError::LastOperationFailed(io)) => {
                    let error = match wasip2::http::types::http_error_code(&io) {
                        Some(ErrorCode::ConnectionReadTimeout) => Error::Stall {
                            url: self.url.clone(),
                            after: self.stall,
                        },
                        Some(code) => Error::Dropped {
                            url: self.url.clone(),
                            message: code_text(&code),
                        },
                        None => Error::Dropped {
                            url: self.url.clone(),
                            message: first_line(&io.to_debug_string()),
                        },
                    };
                    drop(io);
                    self.close();
                    return Err(error);
                }
            }
            // Nothing buffered: sleep until bytes arrive or the deadline
            // passes. Waking on the timer alone means silence: the stream is
            // read once more first, so data that raced the timer still wins.
            let now = monotonic_clock::now();
            if now >= deadline {
                self.close();
                return Err(Error::Stall {
                    url: self.url.clone(),
                    after: self.stall,
                });
            }
            let readable = stream.subscribe();
            let timer = monotonic_clock::subscribe_duration(deadline - now);
            poll::poll(&[&readable, &timer]);
        }
    }

    fn close(&mut self) {
        self.stream = None;
        self.body = None;
    }
}

/// Why a request failed before a complete response was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The request could not be built (bad URL, refused header).
    Invalid {
        /// The URL as given.
        url: String,
        /// What was wrong.
        reason: String,
    },
    /// The host refused the request: the plugin's `grants.net` does not
    /// cover this URL.
    Denied {
        /// The URL.
        url: String,
    },
    /// Connecting or exchanging the request failed (DNS, refused connection,
    /// TLS, protocol error).
    Transport {
        /// The URL.
        url: String,
        /// The host's description of the failure.
        message: String,
    },
    /// No response headers within [`Timeouts::response`].
    Timeout {
        /// The URL.
        url: String,
        /// The deadline that passed.
        after: Duration,
    },
    /// The body went silent for [`Timeouts::stall`].
    Stall {
        /// The URL.
        url: String,
        /// The silence that was too long.
        after: Duration,
    },
    /// The connection broke or closed before the body was complete.
    Dropped {
        /// The URL.
        url: String,
        /// What happened.
        message: String,
    },
    /// The body was longer than the caller's limit.
    TooLarge {
        /// The URL.
        url: String,
        /// The limit in bytes.
        limit: usize,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Invalid { url, reason } => write!(f, "invalid request to {url}: {reason}"),
            Error::Denied { url } => write!(
                f,
                "the host refused the request to {url}: either its origin is not in this plugin's \
                 grants.net in the manifest (add it there), or a secret the request carries, such \
                 as an API key variable, is not set (export it); corral's warning names which"
            ),
            Error::Transport { url, message } => write!(f, "request to {url} failed: {message}"),
            Error::Timeout { url, after } => {
                write!(f, "no response from {url} within {} s", after.as_secs_f64())
            }
            Error::Stall { url, after } => write!(
                f,
                "the response from {url} stalled: no data for {} s",
                after.as_secs_f64()
            ),
            Error::Dropped { url, message } => {
                write!(f, "the response from {url} was cut off: {message}")
            }
            Error::TooLarge { url, limit } => {
                write!(f, "the response from {url} is larger than {limit} bytes")
            }
        }
    }
}

impl std::error::Error for Error {}

/// Sleeps for `duration` on a monotonic-clock pollable.
pub fn sleep(duration: Duration) {
    monotonic_clock::subscribe_duration(nanos(duration)).block();
}

/// The parts of a URL that `wasi:http` takes separately.
#[derive(Debug)]
struct Url<'a> {
    scheme: Scheme,
    authority: &'a str,
    path_and_query: &'a str,
}

impl<'a> Url<'a> {
    fn parse(url: &'a str) -> Result<Self, Error> {
        let invalid = |reason: &str| Error::Invalid {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid("expected an absolute URL such as https://host/path"))?;
        let scheme = if scheme.eq_ignore_ascii_case("https") {
            Scheme::Https
        } else if scheme.eq_ignore_ascii_case("http") {
            Scheme::Http
        } else {
            return Err(invalid("only http:// and https:// URLs are supported"));
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..end];
        if authority.is_empty() || authority.contains('@') {
            return Err(invalid(
                "expected a host (without user info) after the scheme",
            ));
        }
        let path_and_query = match rest[end..].split_once('#') {
            Some((before, _fragment)) => before,
            None => &rest[end..],
        };
        let path_and_query = if path_and_query.is_empty() {
            "/"
        } else {
            path_and_query
        };
        Ok(Self {
            scheme,
            authority,
            path_and_query,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(url: &str) -> (String, &str, &str) {
        let u = Url::parse(url).unwrap();
        (format!("{:?}", u.scheme), u.authority, u.path_and_query)
    }

    #[test]
    fn urls_split_into_wasi_parts() {
        assert_eq!(
            parts("https://api.openai.com/v1/chat/completions"),
            (
                "Scheme::Https".into(),
                "api.openai.com",
                "/v1/chat/completions"
            )
        );
        assert_eq!(
            parts("http://127.0.0.1:11434"),
            ("Scheme::Http".into(), "127.0.0.1:11434", "/")
        );
        assert_eq!(
            parts("HTTP://[::1]:8080?x=1#frag"),
            ("Scheme::Http".into(), "[::1]:8080", "?x=1")
        );
    }

    #[test]
    fn bad_urls_are_rejected_with_a_reason() {
        for url in [
            "api.openai.com/v1",
            "ftp://host/",
            "https:///path",
            "https://user@host/",
        ] {
            assert!(
                matches!(Url::parse(url), Err(Error::Invalid { .. })),
                "{url}"
            );
        }
    }

    #[test]
    fn post_json_sets_body_and_content_type() {
        let r = Request::post_json("http://h/x", &serde_json::json!({"a": 1})).header("x-y", "z");
        assert_eq!(r.method, Method::Post);
        assert_eq!(r.body, br#"{"a":1}"#);
        assert_eq!(
            r.headers,
            vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("x-y".to_owned(), "z".to_owned())
            ]
        );
    }
}
