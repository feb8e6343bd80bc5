//! A plugin's HTTP/1.1 connections, kept open between its requests to the
//! same origin.
//!
//! A provider asks the same server for every turn of a session. A new
//! connection for each request costs a TCP handshake and, to an API over
//! TLS, a TLS handshake (a round trip or two to a remote server, and the key
//! exchange) before the request's first byte. Here a connection whose
//! response was read to its end goes back to its plugin's [`Pool`], under
//! the origin (scheme, host and port), and the plugin's next request there
//! takes it.
//!
//! What keeps that safe:
//! - A pool belongs to one plugin: a plugin never sends on a connection
//!   another plugin opened.
//! - The egress check and the credentials stay per request
//!   ([`super::http`]); they run before a connection is chosen.
//! - A connection goes back only once its response ended whole and it can
//!   take a request. A body the plugin stopped reading is read on to its
//!   end in the background, for at most [`DRAIN_BYTES`] and [`DRAIN_FOR`],
//!   and thrown away; a longer one, one that failed or timed out is closed
//!   with its connection, so a request never follows part of an answer.
//! - A request is sent again only where the server cannot have answered
//!   it: when a kept connection turns out to be closed before the request
//!   went out, and, once, on a new connection, when the request failed on a
//!   kept connection before any byte of its answer arrived. That is a
//!   server closing an idle connection as the request reached it, the race
//!   every keep-alive client meets (a browser sends such a request again
//!   too); its body is kept for that while it is sent (up to
//!   [`REPLAY_BYTES`]). Any other error is the request's error.
//! - A connection is not kept after an answer that says `Connection: close`,
//!   nor past the `Keep-Alive: timeout=N` the server announced, less a
//!   margin ([`keep_for`]).
//! - A connection goes only to an address its grant may reach: the host's
//!   name is resolved here, each address judged by the rule of corral's
//!   egress proxy ([`corral_exec::Destination::may_connect_to`]: loopback,
//!   private and link-local addresses only for a grant that names such an
//!   address or `localhost`), and the connection made to exactly an address
//!   that passed, so no later lookup (DNS rebinding) can move it.
//! - A pool keeps at most [`IDLE_PER_ORIGIN`] connections per origin and
//!   [`IDLE_PER_PLUGIN`] in all, each for at most [`IDLE_FOR`].

use corral_exec::{Destination, Scheme};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody};

/// Idle connections a plugin keeps to one origin.
pub(crate) const IDLE_PER_ORIGIN: usize = 4;
/// Idle connections a plugin keeps in all (a plugin that fetches from many
/// hosts keeps the most recent).
pub(crate) const IDLE_PER_PLUGIN: usize = 16;
/// How long an idle connection is kept when its server announces no
/// keep-alive time: under that of the usual servers, so a kept connection
/// is rarely one the server is closing.
pub(crate) const IDLE_FOR: Duration = Duration::from_secs(50);
/// The most a server's announced keep-alive time is cut short by, so that
/// a request does not reach the server as it closes the connection: a
/// quarter of that time, at most this.
const KEEP_ALIVE_MARGIN: Duration = Duration::from_secs(1);
/// What of a request's body is kept to send it again on a new connection
/// (see [`send`]); a longer body is sent once. The bytes are those the
/// connection writes anyway, shared, and kept only until the answer starts.
const REPLAY_BYTES: usize = 4 << 20;
/// The timeouts of a request whose options name none (those of the default
/// client of `wasi:http`).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// What is read of a body the plugin stopped reading, to find its end: a
/// provider stops at its protocol's last event, and the end of the HTTP
/// message (the last chunk of a chunked body) is all that follows it.
const DRAIN_BYTES: usize = 64 << 10;
/// How long the end of such a body is waited for.
const DRAIN_FOR: Duration = Duration::from_secs(2);
/// How long a request waits for a connection to its origin that is still
/// reading the end of its last answer, before it opens another: the end
/// normally follows the last event at once.
const DRAIN_WAIT: Duration = Duration::from_millis(50);

/// Where a connection goes: TLS or not, host and port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Origin {
    tls: bool,
    /// Lowercase, without the brackets of an IPv6 address or a trailing dot.
    host: String,
    port: u16,
}

impl Origin {
    fn of(uri: &http::Uri) -> Result<Self, HttpError> {
        let host = uri.host().ok_or(HttpError::HttpRequestUriInvalid)?;
        let tls = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Self { tls, host, port })
    }

    /// The origin as a destination of a grant, for the rule that judges
    /// the addresses its host resolves to.
    fn destination(&self) -> Destination {
        Destination {
            scheme: if self.tls {
                Scheme::Https
            } else {
                Scheme::Http
            },
            host: self.host.clone(),
            port: self.port,
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.destination(), f)
    }
}

/// An open connection: where requests go, and the count of bytes read from
/// it, which tells whether any of an answer arrived.
struct Conn {
    sender: SendRequest<WasiBody>,
    read: Arc<AtomicU64>,
}

/// A connection waiting for the plugin's next request, until `until`.
struct Idle {
    conn: Conn,
    until: Instant,
}

impl Idle {
    fn usable(&self) -> bool {
        Instant::now() < self.until && !self.conn.sender.is_closed()
    }
}

/// The idle connections of one plugin, by origin.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<HashMap<Origin, Vec<Idle>>>,
    /// Connections reading the end of an answer the plugin stopped
    /// reading, by origin.
    draining: Mutex<HashMap<Origin, usize>>,
    /// Told when such a connection is done (kept or closed).
    drained: tokio::sync::Notify,
}

impl Pool {
    /// A kept connection to `origin`, the most recently used first.
    /// Expired and closed ones are dropped (closed).
    fn take(&self, origin: &Origin) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let list = idle.get_mut(origin)?;
        let mut found = None;
        while let Some(c) = list.pop() {
            if c.usable() {
                found = Some(c.conn);
                break;
            }
        }
        if list.is_empty() {
            idle.remove(origin);
        }
        found
    }

    /// Counts a connection to `origin` in or out of draining.
    fn draining(&self, origin: &Origin, more: bool) {
        let mut draining = self.draining.lock().unwrap_or_else(PoisonError::into_inner);
        let n = draining.entry(origin.clone()).or_default();
        if more {
            *n += 1;
        } else {
            *n = n.saturating_sub(1);
            if *n == 0 {
                draining.remove(origin);
            }
            drop(draining);
            self.drained.notify_waiters();
        }
    }

    /// Waits (at most [`DRAIN_WAIT`]) for a connection to `origin` that is
    /// draining; `false` when there is none or it takes longer.
    async fn wait_for_drained(&self, origin: &Origin) -> bool {
        let drained = self.drained.notified();
        tokio::pin!(drained);
        drained.as_mut().enable();
        let any = self
            .draining
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(origin);
        any && tokio::time::timeout(DRAIN_WAIT, drained).await.is_ok()
    }

    /// Keeps `conn` for the next request to `origin` for `keep` at most,
    /// within the limits; what does not fit is the oldest, and is closed.
    fn put(&self, origin: Origin, conn: Conn, keep: Duration) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        for list in idle.values_mut() {
            list.retain(Idle::usable);
        }
        idle.retain(|_, list| !list.is_empty());
        let list = idle.entry(origin).or_default();
        if list.len() >= IDLE_PER_ORIGIN {
            list.remove(0);
        }
        list.push(Idle {
            conn,
            until: Instant::now() + keep,
        });
        while idle.values().map(Vec::len).sum::<usize>() > IDLE_PER_PLUGIN {
            // The first of each list is its origin's longest idle; the one
            // that expires first goes.
            let oldest = idle
                .iter()
                .filter_map(|(o, list)| list.first().map(|c| (c.until, o.clone())))
                .min_by_key(|(until, _)| *until)
                .map(|(_, o)| o);
            let Some(oldest) = oldest else { break };
            if let Some(list) = idle.get_mut(&oldest) {
                list.remove(0);
                if list.is_empty() {
                    idle.remove(&oldest);
                }
            }
        }
    }
}

/// The timeouts of one request.
struct Timeouts {
    connect: Duration,
    first_byte: Duration,
    between_bytes: Duration,
}

impl Timeouts {
    fn of(options: Option<&RequestOptions>) -> Self {
        let pick = |f: fn(&RequestOptions) -> Option<Duration>| {
            options.and_then(f).unwrap_or(DEFAULT_TIMEOUT)
        };
        Self {
            connect: pick(|o| o.connect_timeout),
            first_byte: pick(|o| o.first_byte_timeout),
            // A zero interval would be a timer that is always due.
            between_bytes: pick(|o| o.between_bytes_timeout).max(Duration::from_nanos(1)),
        }
    }
}

/// What a request is sent with, but its body: each attempt gets the body
/// again from its [`Replay`].
struct Head {
    method: http::Method,
    uri: http::Uri,
    version: http::Version,
    headers: http::HeaderMap,
}

impl Head {
    fn with(&self, body: WasiBody) -> http::Request<WasiBody> {
        let mut request = http::Request::new(body);
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// Sends `request` (already checked and given its credentials) for
/// `plugin` on a kept connection to its origin, or a new one, and returns
/// the response, whose body gives the connection back to `pool` once it is
/// read to its end.
pub(crate) async fn send(
    pool: &Arc<Pool>,
    request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    plugin: &str,
) -> Result<http::Response<WasiBody>, HttpError> {
    let origin = Origin::of(request.uri())?;
    let timeouts = Timeouts::of(options.as_ref());
    let (parts, body) = request.into_parts();
    // Only a proxy is sent the scheme and authority; the connection is
    // to the origin itself, so the request line has the path alone.
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let head = Head {
        uri: http::Uri::try_from(path).map_err(|_| HttpError::HttpRequestUriInvalid)?,
        method: parts.method,
        version: parts.version,
        headers: parts.headers,
    };
    let replay = Replay::new(body);

    loop {
        let Some(conn) = pool.take(&origin) else {
            if pool.wait_for_drained(&origin).await {
                continue;
            }
            break;
        };
        match on_kept(conn, &head, &replay, &timeouts).await? {
            Kept::Answered(response, conn) => {
                replay.forget();
                return Ok(kept(response, conn, pool, origin, &timeouts));
            }
            Kept::Closed => {}
            Kept::Lost(e) => {
                if !replay.whole() {
                    return Err(e.into());
                }
                tracing::debug!(
                    target: "corral::egress",
                    plugin,
                    "a kept connection to {origin} closed before any of the answer arrived ({e}); sending the request again on a new connection"
                );
                break;
            }
        }
    }
    let mut conn = connect(&origin, timeouts.connect, plugin).await?;
    let response = tokio::time::timeout(
        timeouts.first_byte,
        conn.sender.send_request(head.with(replay.body())),
    )
    .await
    .map_err(|_| HttpError::ConnectionReadTimeout)??;
    replay.forget();
    Ok(kept(response, conn, pool, origin, &timeouts))
}

/// How a request on a kept connection went.
enum Kept {
    Answered(http::Response<Incoming>, Conn),
    /// The connection was closed before any of the request went out.
    Closed,
    /// The request failed before any byte of its answer arrived.
    Lost(hyper::Error),
}

/// Sends the request on `conn`, a kept connection. An error after some of
/// the answer arrived, or a timeout, is the request's error.
async fn on_kept(
    mut conn: Conn,
    head: &Head,
    replay: &Replay,
    timeouts: &Timeouts,
) -> Result<Kept, HttpError> {
    // A connection whose answer just ended takes a request as soon as its
    // task has finished the message; a closed one is left behind.
    let ready = tokio::time::timeout(timeouts.first_byte, conn.sender.ready())
        .await
        .map_err(|_| HttpError::ConnectionReadTimeout)?;
    if ready.is_err() {
        return Ok(Kept::Closed);
    }
    let before = conn.read.load(Ordering::Acquire);
    let sent = tokio::time::timeout(
        timeouts.first_byte,
        conn.sender.try_send_request(head.with(replay.body())),
    )
    .await
    .map_err(|_| HttpError::ConnectionReadTimeout)?;
    let mut failed = match sent {
        Ok(response) => return Ok(Kept::Answered(response, conn)),
        Err(e) => e,
    };
    if failed.take_message().is_some() {
        return Ok(Kept::Closed);
    }
    let e = failed.into_error();
    if conn.read.load(Ordering::Acquire) == before {
        Ok(Kept::Lost(e))
    } else {
        Err(e.into())
    }
}

/// A byte stream a connection runs on: TCP, or TLS over TCP.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// Opens a connection to `origin` (an address it may reach, TLS for
/// `https`, the HTTP/1.1 handshake) within `timeout`. Its I/O runs on a
/// task of its own, which ends when the connection closes.
async fn connect(origin: &Origin, timeout: Duration, plugin: &str) -> Result<Conn, HttpError> {
    let open = async {
        let tcp = reach(origin, plugin).await?;
        // A request is written whole at once; waiting for more would only
        // delay it.
        let _ = tcp.set_nodelay(true);
        let read = Arc::new(AtomicU64::new(0));
        let counted = Counted {
            inner: tcp,
            read: read.clone(),
        };
        let stream: Box<dyn Stream> = if origin.tls {
            let name = server_name(&origin.host)?;
            Box::new(
                tls_connector()
                    .connect(name, counted)
                    .await
                    .map_err(HttpError::Tls)?,
            )
        } else {
            Box::new(counted)
        };
        let (sender, connection) = hyper::client::conn::http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(target: "corral::egress", "connection ended: {e}");
            }
        });
        Ok(Conn { sender, read })
    };
    tokio::time::timeout(timeout, open)
        .await
        .map_err(|_| HttpError::ConnectionTimeout)?
}

/// A TCP connection to `origin`, made to an address its host resolves to
/// that its grant may reach, in the order the resolver gave them. The
/// address judged is the address connected to.
async fn reach(origin: &Origin, plugin: &str) -> Result<TcpStream, HttpError> {
    let addrs: Vec<SocketAddr> = match origin.host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, origin.port)],
        Err(_) => match tokio::net::lookup_host((origin.host.as_str(), origin.port)).await {
            Ok(found) => found.collect(),
            Err(e) => {
                tracing::debug!(target: "corral::egress", plugin, "cannot resolve {}: {e}", origin.host);
                return Err(HttpError::DnsError {
                    rcode: None,
                    info_code: None,
                });
            }
        },
    };
    let grant = origin.destination();
    let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = addrs
        .into_iter()
        .partition(|a| grant.may_connect_to(a.ip()));
    if allowed.is_empty() {
        let shown: Vec<String> = refused.iter().map(|a| a.ip().to_string()).collect();
        tracing::warn!(
            target: "corral::egress",
            "plugin `{plugin}`: request to {origin} denied: `{}` resolves to {}, a loopback or private address, which a grant reaches only when it names the address itself (or `localhost`); grant \"{}://{}:{}\" to allow it",
            origin.host,
            shown.join(", "),
            if origin.tls { "https" } else { "http" },
            refused.first().map_or_else(String::new, |a| match a.ip() {
                IpAddr::V6(ip) => format!("[{ip}]"),
                IpAddr::V4(ip) => ip.to_string(),
            }),
            origin.port,
        );
        return Err(HttpError::DestinationIpProhibited);
    }
    let mut last = None;
    for addr in allowed {
        match TcpStream::connect(addr).await {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = Some(e),
        }
    }
    Err(HttpError::Connect(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no address to connect to")
    })))
}

/// A stream that counts the bytes read from it.
struct Counted<S> {
    inner: S,
    read: Arc<AtomicU64>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let n = buf.filled().len() - before;
        self.read.fetch_add(n as u64, Ordering::Release);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The TLS client of every plugin: the web PKI's roots, built once.
fn tls_connector() -> tokio_rustls::TlsConnector {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        Arc::new(
            rustls::ClientConfig::builder()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    });
    tokio_rustls::TlsConnector::from(config.clone())
}

/// The name a TLS certificate must be for: the IP of an address
/// (`::1`, `127.0.0.1`), otherwise the host name.
fn server_name(host: &str) -> Result<rustls::pki_types::ServerName<'static>, HttpError> {
    use rustls::pki_types::ServerName;
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ServerName::from(ip));
    }
    ServerName::try_from(host.to_owned()).map_err(HttpError::InvalidDnsNameError)
}

/// How long a connection may wait for its next request after `response`,
/// by what its server said: not at all after `Connection: close` (or an
/// HTTP/1.0 answer that does not ask to be kept), at most the announced
/// `Keep-Alive: timeout=N` less a margin, else [`IDLE_FOR`].
fn keep_for<B>(response: &http::Response<B>) -> Option<Duration> {
    let headers = response.headers();
    let tokens = |name: http::header::HeaderName| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|t| t.trim().to_ascii_lowercase())
            .collect::<Vec<_>>()
    };
    let connection = tokens(http::header::CONNECTION);
    let keep_alive_asked = connection.iter().any(|t| t == "keep-alive");
    if connection.iter().any(|t| t == "close")
        || (response.version() < http::Version::HTTP_11 && !keep_alive_asked)
    {
        return None;
    }
    let announced = tokens(http::HeaderName::from_static("keep-alive"))
        .iter()
        .filter_map(|t| t.strip_prefix("timeout="))
        .find_map(|n| n.trim().parse::<u64>().ok());
    match announced {
        None => Some(IDLE_FOR),
        Some(secs) => {
            let timeout = Duration::from_secs(secs);
            let keep = timeout.saturating_sub((timeout / 4).min(KEEP_ALIVE_MARGIN));
            (!keep.is_zero()).then(|| keep.min(IDLE_FOR))
        }
    }
}

/// `response` with a body that times out between bytes like the default
/// client's, and gives `conn` back to `pool` once it is read whole (unless
/// its server said not to keep it).
fn kept(
    response: http::Response<Incoming>,
    conn: Conn,
    pool: &Arc<Pool>,
    origin: Origin,
    timeouts: &Timeouts,
) -> http::Response<WasiBody> {
    let stall = timeouts.between_bytes;
    let back = keep_for(&response).map(|keep| Back {
        conn,
        keep,
        pool: Arc::downgrade(pool),
        origin,
    });
    response.map(|incoming| {
        let mut body = KeptBody {
            incoming: Some(incoming),
            stall,
            timer: Box::pin(tokio::time::sleep(stall)),
            back,
        };
        // A response without a body (a `HEAD`, a 204) is whole already.
        if body.is_end_stream() {
            body.give_back();
        }
        http_body_util::BodyExt::boxed_unsync(body)
    })
}

/// Where a connection goes back to once its answer ended, and for how long.
struct Back {
    conn: Conn,
    keep: Duration,
    pool: Weak<Pool>,
    origin: Origin,
}

/// A response body on a kept connection.
struct KeptBody {
    /// Always there until the body is dropped.
    incoming: Option<Incoming>,
    stall: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// The connection, until the body ends (then back to the pool) or
    /// fails (then closed with it); none when it is not to be kept.
    back: Option<Back>,
}

impl KeptBody {
    /// Hands the connection back: its answer ended whole. (The next
    /// request waits for it to be ready: HTTP/1.1 finishes the message on
    /// the connection's own task.)
    fn give_back(&mut self) {
        if let Some(back) = self.back.take()
            && let Some(pool) = back.pool.upgrade()
        {
            pool.put(back.origin, back.conn, back.keep);
        }
    }
}

impl Drop for KeptBody {
    /// A body dropped before its end keeps its connection only if the rest
    /// of it is short and arrives soon ([`DRAIN_BYTES`], [`DRAIN_FOR`]).
    fn drop(&mut self) {
        let (Some(back), Some(mut incoming)) = (self.back.take(), self.incoming.take()) else {
            return;
        };
        let (Ok(runtime), Some(pool)) =
            (tokio::runtime::Handle::try_current(), back.pool.upgrade())
        else {
            return;
        };
        pool.draining(&back.origin, true);
        runtime.spawn(async move {
            let drain = async {
                let mut left = DRAIN_BYTES;
                while let Some(frame) = http_body_util::BodyExt::frame(&mut incoming).await {
                    let Ok(frame) = frame else { return false };
                    let n = frame.data_ref().map_or(0, Bytes::len);
                    let Some(rest) = left.checked_sub(n) else {
                        return false;
                    };
                    left = rest;
                }
                true
            };
            let origin = back.origin.clone();
            if tokio::time::timeout(DRAIN_FOR, drain).await == Ok(true) {
                pool.put(back.origin, back.conn, back.keep);
            }
            pool.draining(&origin, false);
        });
    }
}

impl Body for KeptBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = self.get_mut();
        let Some(incoming) = this.incoming.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(&mut *incoming).poll_frame(cx) {
            Poll::Ready(None) => {
                this.give_back();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                let deadline = tokio::time::Instant::now() + this.stall;
                this.timer.as_mut().reset(deadline);
                if incoming.is_end_stream() {
                    this.give_back();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.back = None;
                let e = if e.is_timeout() {
                    HttpError::HttpResponseTimeout
                } else {
                    HttpError::from(e)
                };
                Poll::Ready(Some(Err(e)))
            }
            Poll::Pending => {
                ready!(this.timer.as_mut().poll(cx));
                this.back = None;
                Poll::Ready(Some(Err(HttpError::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

/// A request's body, kept as it is sent (up to [`REPLAY_BYTES`]) so that
/// the request can go again from its start; each [`Replay::body`] reads the
/// kept frames, then the rest of the plugin's body.
#[derive(Clone)]
struct Replay(Arc<Mutex<Recorded>>);

struct Recorded {
    source: WasiBody,
    /// The frames read from `source` so far, while `whole`.
    frames: Vec<Recorded1>,
    bytes: usize,
    /// Whether `frames` holds all that was read from `source`: false once
    /// it outgrew [`REPLAY_BYTES`], failed, or the answer started.
    whole: bool,
    /// Whether `source` ended.
    ended: bool,
    /// What `source` said of itself before it was read.
    hint: SizeHint,
    empty: bool,
}

/// One frame of a request body, as kept.
enum Recorded1 {
    Data(Bytes),
    Trailers(http::HeaderMap),
}

impl Replay {
    fn new(source: WasiBody) -> Self {
        Self(Arc::new(Mutex::new(Recorded {
            hint: source.size_hint(),
            empty: source.is_end_stream(),
            source,
            frames: Vec::new(),
            bytes: 0,
            whole: true,
            ended: false,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The body from its start (what was kept, then the rest).
    fn body(&self) -> WasiBody {
        http_body_util::BodyExt::boxed_unsync(ReplayBody {
            replay: self.clone(),
            next: 0,
        })
    }

    /// Whether the body can be sent again from its start.
    fn whole(&self) -> bool {
        self.lock().whole
    }

    /// Lets go of what was kept: the answer started, so the request will
    /// not be sent again.
    fn forget(&self) {
        let mut r = self.lock();
        r.whole = false;
        r.frames = Vec::new();
    }
}

/// One sending of a [`Replay`].
struct ReplayBody {
    replay: Replay,
    /// The next kept frame to send.
    next: usize,
}

impl Body for ReplayBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = self.get_mut();
        let mut r = this.replay.lock();
        if r.whole && this.next < r.frames.len() {
            let frame = match &r.frames[this.next] {
                Recorded1::Data(b) => Frame::data(b.clone()),
                Recorded1::Trailers(t) => Frame::trailers(t.clone()),
            };
            this.next += 1;
            return Poll::Ready(Some(Ok(frame)));
        }
        if r.ended {
            return Poll::Ready(None);
        }
        let polled = ready!(Pin::new(&mut r.source).poll_frame(cx));
        match &polled {
            None => r.ended = true,
            Some(Err(_)) => {
                r.whole = false;
                r.frames = Vec::new();
            }
            Some(Ok(frame)) if r.whole => {
                let kept = match (frame.data_ref(), frame.trailers_ref()) {
                    (Some(b), _) => Some((Recorded1::Data(b.clone()), b.len())),
                    (None, Some(t)) => Some((Recorded1::Trailers(t.clone()), 0)),
                    (None, None) => None,
                };
                if let Some((kept, n)) = kept {
                    r.bytes += n;
                    if r.bytes > REPLAY_BYTES {
                        r.whole = false;
                        r.frames = Vec::new();
                    } else {
                        r.frames.push(kept);
                        this.next += 1;
                    }
                }
            }
            Some(Ok(_)) => {}
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        let r = self.replay.lock();
        r.empty || (r.ended && (!r.whole || self.next >= r.frames.len()))
    }

    fn size_hint(&self) -> SizeHint {
        if self.next == 0 {
            self.replay.lock().hint
        } else {
            SizeHint::default()
        }
    }
}

#[cfg(test)]
mod tests {
    //! Against a real HTTP/1.1 server on loopback that counts the
    //! connections it accepts and the requests it reads.

    use super::*;
    use http_body_util::BodyExt as _;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

    /// How the server answers.
    #[derive(Clone, Copy)]
    enum Answer {
        /// `n` bytes with a `content-length`, connection kept.
        Length(usize),
        /// An event stream in chunks, connection kept.
        Chunked,
        /// `n` bytes, then the server closes the connection.
        LengthThenClose(usize),
        /// `n` bytes, and in the same write a second, forged response that
        /// nothing asked for.
        LengthThenForged(usize),
        /// `n` bytes to the first request of a connection; the second is
        /// read, and the connection closed without a byte of answer (a
        /// server closing an idle connection as a request reaches it).
        ClosedOnSecond(usize),
        /// `n` bytes with `connection: close`, the connection left open.
        LengthSaysClose(usize),
    }

    struct Server {
        port: u16,
        accepted: Arc<AtomicUsize>,
        requests: Arc<AtomicUsize>,
    }

    async fn server(answer: Answer) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let (a, r) = (accepted.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let n = a.fetch_add(1, Ordering::SeqCst) + 1;
                let r = r.clone();
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    let mut on_this = 0;
                    loop {
                        let mut length = 0usize;
                        let mut line = String::new();
                        if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        loop {
                            let mut h = String::new();
                            if stream.read_line(&mut h).await.unwrap_or(0) == 0 || h == "\r\n" {
                                break;
                            }
                            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:")
                            {
                                length = v.trim().parse().unwrap();
                            }
                        }
                        let mut body = vec![0; length];
                        stream.read_exact(&mut body).await.unwrap();
                        let seq = r.fetch_add(1, Ordering::SeqCst) + 1;
                        on_this += 1;
                        if matches!(answer, Answer::ClosedOnSecond(_)) && on_this == 2 {
                            return;
                        }
                        let text = format!("connection {n} request {seq};");
                        let out = stream.get_mut();
                        match answer {
                            Answer::Length(size)
                            | Answer::LengthThenClose(size)
                            | Answer::LengthThenForged(size)
                            | Answer::ClosedOnSecond(size)
                            | Answer::LengthSaysClose(size) => {
                                let body =
                                    text.clone() + &".".repeat(size.saturating_sub(text.len()));
                                let close = if matches!(answer, Answer::LengthSaysClose(_)) {
                                    "connection: close\r\n"
                                } else {
                                    ""
                                };
                                let mut all = format!(
                                    "HTTP/1.1 200 OK\r\n{close}content-length: {}\r\n\r\n{body}",
                                    body.len()
                                );
                                if matches!(answer, Answer::LengthThenForged(_)) {
                                    all.push_str(
                                        "HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nFORGED",
                                    );
                                }
                                if out.write_all(all.as_bytes()).await.is_err() {
                                    return;
                                }
                                if matches!(answer, Answer::LengthThenClose(_)) {
                                    return;
                                }
                            }
                            Answer::Chunked => {
                                let mut all = String::from(
                                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
                                );
                                for part in
                                    [format!("data: {text}\n\n"), "data: [DONE]\n\n".to_owned()]
                                {
                                    all.push_str(&format!("{:x}\r\n{part}\r\n", part.len()));
                                }
                                if out.write_all(all.as_bytes()).await.is_err() {
                                    return;
                                }
                                // The end of the message comes a little
                                // after the stream's last event.
                                tokio::time::sleep(Duration::from_millis(20)).await;
                                if out.write_all(b"0\r\n\r\n").await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        Server {
            port,
            accepted,
            requests,
        }
    }

    fn post(port: u16) -> http::Request<WasiBody> {
        let body = http_body_util::Full::new(Bytes::from_static(b"{}"))
            .map_err(|never| match never {})
            .boxed_unsync();
        http::Request::post(format!("http://127.0.0.1:{port}/v1/chat"))
            .header("content-length", "2")
            .body(body)
            .unwrap()
    }

    async fn whole(response: http::Response<WasiBody>) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    /// Waits (a bounded while) for the pool to hold `n` idle connections:
    /// a connection goes back on a task of its own.
    async fn kept(pool: &Pool, n: usize) {
        for _ in 0..200 {
            let idle: usize = pool.idle.lock().unwrap().values().map(Vec::len).sum();
            if idle == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the pool never held {n} idle connections");
    }

    #[tokio::test]
    async fn requests_whose_responses_were_read_whole_share_one_connection() {
        for answer in [Answer::Length(64), Answer::Chunked] {
            let s = server(answer).await;
            let pool = Arc::new(Pool::default());
            for i in 1..=3 {
                let text = whole(send(&pool, post(s.port), None, "test").await.unwrap()).await;
                assert!(
                    text.contains(&format!("connection 1 request {i};")),
                    "{text}"
                );
                kept(&pool, 1).await;
            }
            assert_eq!(s.accepted.load(Ordering::SeqCst), 1);
            assert_eq!(s.requests.load(Ordering::SeqCst), 3);
        }
    }

    #[tokio::test]
    async fn a_stream_left_after_its_last_event_is_read_to_its_end_and_its_connection_kept() {
        let s = server(Answer::Chunked).await;
        let pool = Arc::new(Pool::default());
        for i in 1..=3 {
            let mut body = send(&pool, post(s.port), None, "test")
                .await
                .unwrap()
                .into_body();
            let mut seen = String::new();
            while !seen.contains("[DONE]") {
                let frame = body.frame().await.unwrap().unwrap();
                seen.push_str(std::str::from_utf8(frame.data_ref().unwrap()).unwrap());
            }
            assert!(
                seen.contains(&format!("connection 1 request {i};")),
                "{seen}"
            );
            drop(body);
            kept(&pool, 1).await;
        }
        assert_eq!(s.accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_response_dropped_part_way_closes_its_connection() {
        let s = server(Answer::Length(4 << 20)).await;
        let pool = Arc::new(Pool::default());
        let mut body = send(&pool, post(s.port), None, "test")
            .await
            .unwrap()
            .into_body();
        let first = body.frame().await.unwrap().unwrap();
        assert!(
            first
                .data_ref()
                .unwrap()
                .starts_with(b"connection 1 request 1;")
        );
        drop(body);
        // The next request is answered on a new connection, from the start
        // of its own answer, not from the rest of the first one.
        let text = whole(send(&pool, post(s.port), None, "test").await.unwrap()).await;
        assert!(
            text.starts_with("connection 2 request 2;"),
            "{}",
            &text[..40]
        );
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_kept_connection_the_server_closed_is_replaced_and_nothing_is_sent_twice() {
        let s = server(Answer::LengthThenClose(64)).await;
        let pool = Arc::new(Pool::default());
        let text = whole(send(&pool, post(s.port), None, "test").await.unwrap()).await;
        assert!(text.starts_with("connection 1 request 1;"), "{text}");
        for i in 2..=4 {
            let text = whole(send(&pool, post(s.port), None, "test").await.unwrap()).await;
            assert!(
                text.starts_with(&format!("connection {i} request {i};")),
                "{text}"
            );
        }
        assert_eq!(s.requests.load(Ordering::SeqCst), 4);
        assert_eq!(s.accepted.load(Ordering::SeqCst), 4);
    }

    /// Before the request was sent again, the second request here failed
    /// with hyper's "connection closed before message completed", which a
    /// plugin sees as "the server did not speak valid HTTP" (issue 41).
    #[tokio::test]
    async fn a_request_a_kept_connection_lost_before_any_answer_goes_again_on_a_new_one() {
        let s = server(Answer::ClosedOnSecond(32)).await;
        let pool = Arc::new(Pool::default());
        let text = whole(send(&pool, post(s.port), None, "test").await.unwrap()).await;
        assert!(text.starts_with("connection 1 request 1;"), "{text}");
        kept(&pool, 1).await;
        // Read on the kept connection and dropped there; answered on the
        // next.
        let text = whole(send(&pool, post(s.port), None, "test").await.unwrap()).await;
        assert!(text.starts_with("connection 2 request 3;"), "{text}");
        assert_eq!(s.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_connection_whose_server_said_close_is_not_kept() {
        let s = server(Answer::LengthSaysClose(32)).await;
        let pool = Arc::new(Pool::default());
        for i in 1..=3 {
            let text = whole(send(&pool, post(s.port), None, "test").await.unwrap()).await;
            assert!(
                text.starts_with(&format!("connection {i} request {i};")),
                "{text}"
            );
        }
        assert_eq!(s.accepted.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_connection_is_kept_as_long_as_its_server_says() {
        let answer = |version: http::Version, headers: &[(&str, &str)]| {
            let mut r = http::Response::builder().version(version);
            for (k, v) in headers {
                r = r.header(*k, *v);
            }
            keep_for(&r.body(()).unwrap())
        };
        use http::Version as V;
        assert_eq!(answer(V::HTTP_11, &[]), Some(IDLE_FOR));
        assert_eq!(
            answer(V::HTTP_11, &[("keep-alive", "timeout=5, max=100")]),
            Some(Duration::from_secs(4))
        );
        assert_eq!(
            answer(V::HTTP_11, &[("Keep-Alive", "max=5, timeout=1")]),
            Some(Duration::from_millis(750))
        );
        assert_eq!(
            answer(V::HTTP_11, &[("keep-alive", "timeout=600")]),
            Some(IDLE_FOR)
        );
        assert_eq!(answer(V::HTTP_11, &[("keep-alive", "timeout=0")]), None);
        assert_eq!(answer(V::HTTP_11, &[("connection", "Close")]), None);
        assert_eq!(
            answer(V::HTTP_11, &[("connection", "upgrade, close")]),
            None
        );
        assert_eq!(answer(V::HTTP_10, &[]), None);
        assert_eq!(
            answer(V::HTTP_10, &[("connection", "keep-alive")]),
            Some(IDLE_FOR)
        );
    }

    #[tokio::test]
    async fn localhost_reaches_loopback() {
        let s = server(Answer::Length(16)).await;
        let pool = Arc::new(Pool::default());
        // `localhost` names loopback itself.
        let request = http::Request::get(format!("http://localhost:{}/", s.port))
            .body(
                http_body_util::Empty::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .unwrap();
        let text = whole(send(&pool, request, None, "test").await.unwrap()).await;
        assert!(text.starts_with("connection 1 request 1;"), "{text}");
        // Any other name is judged by the addresses it resolves to (the
        // integration test `egress_address` has a name for loopback).
    }

    #[tokio::test]
    async fn a_response_nothing_asked_for_never_answers_the_next_request() {
        let s = server(Answer::LengthThenForged(32)).await;
        let pool = Arc::new(Pool::default());
        for _ in 0..4 {
            let text = whole(send(&pool, post(s.port), None, "test").await.unwrap()).await;
            assert!(text.starts_with("connection "), "{text}");
            assert!(!text.contains("FORGED"), "{text}");
        }
    }

    #[tokio::test]
    async fn a_pool_keeps_a_bounded_number_of_connections() {
        let pool = Arc::new(Pool::default());
        let mut servers = Vec::new();
        for _ in 0..IDLE_PER_PLUGIN + 3 {
            let s = server(Answer::Length(16)).await;
            whole(send(&pool, post(s.port), None, "test").await.unwrap()).await;
            servers.push(s);
        }
        // Six at once to one origin: four are kept.
        let s = server(Answer::Length(16)).await;
        let bodies: Vec<_> =
            futures::future::join_all((0..6).map(|_| send(&pool, post(s.port), None, "test")))
                .await;
        // Each goes back as its answer is read to the end.
        for b in bodies {
            whole(b.unwrap()).await;
        }
        let idle = pool.idle.lock().unwrap();
        let total: usize = idle.values().map(Vec::len).sum();
        assert_eq!(total, IDLE_PER_PLUGIN);
        let to_last = idle
            .iter()
            .find(|(o, _)| o.port == s.port)
            .map(|(_, l)| l.len());
        assert_eq!(to_last, Some(IDLE_PER_ORIGIN));
    }

    #[test]
    fn tls_names_are_the_host_or_the_ip() {
        use rustls::pki_types::ServerName;
        assert_eq!(
            server_name("api.openai.com").unwrap(),
            ServerName::try_from("api.openai.com").unwrap()
        );
        assert!(matches!(
            server_name("::1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("127.0.0.1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(server_name("bad_host!").is_err());
    }
}
