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
//! - A request is sent at most once: when a kept connection turns out to be
//!   closed before the request went out, the request goes on a new one;
//!   once any of it was written, an error is the request's error.
//! - A pool keeps at most [`IDLE_PER_ORIGIN`] connections per origin and
//!   [`IDLE_PER_PLUGIN`] in all, each for at most [`IDLE_FOR`].

use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody};

/// Idle connections a plugin keeps to one origin.
pub(crate) const IDLE_PER_ORIGIN: usize = 4;
/// Idle connections a plugin keeps in all (a plugin that fetches from many
/// hosts keeps the most recent).
pub(crate) const IDLE_PER_PLUGIN: usize = 16;
/// How long an idle connection is kept: under the keep-alive time of the
/// usual servers, so a kept connection is rarely one the server is closing.
pub(crate) const IDLE_FOR: Duration = Duration::from_secs(50);
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

/// Where a connection goes: TLS or not, and `host:port`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Origin {
    tls: bool,
    authority: String,
}

/// A connection waiting for the plugin's next request.
struct Idle {
    sender: SendRequest<WasiBody>,
    since: Instant,
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
    fn take(&self, origin: &Origin) -> Option<SendRequest<WasiBody>> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let list = idle.get_mut(origin)?;
        let mut found = None;
        while let Some(c) = list.pop() {
            if c.since.elapsed() < IDLE_FOR && !c.sender.is_closed() {
                found = Some(c.sender);
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

    /// Keeps `sender` for the next request to `origin`, within the limits;
    /// what does not fit is the oldest, and is closed.
    fn put(&self, origin: Origin, sender: SendRequest<WasiBody>) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        for list in idle.values_mut() {
            list.retain(|c| c.since.elapsed() < IDLE_FOR && !c.sender.is_closed());
        }
        idle.retain(|_, list| !list.is_empty());
        let list = idle.entry(origin).or_default();
        if list.len() >= IDLE_PER_ORIGIN {
            list.remove(0);
        }
        list.push(Idle {
            sender,
            since: Instant::now(),
        });
        while idle.values().map(Vec::len).sum::<usize>() > IDLE_PER_PLUGIN {
            let oldest = idle
                .iter()
                .filter_map(|(o, list)| list.first().map(|c| (c.since, o.clone())))
                .min_by_key(|(since, _)| *since)
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

/// Sends `request` (already checked and given its credentials) on a kept
/// connection to its origin, or a new one, and returns the response, whose
/// body gives the connection back to `pool` once it is read to its end.
pub(crate) async fn send(
    pool: &Arc<Pool>,
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<http::Response<WasiBody>, HttpError> {
    let uri = request.uri();
    let authority = uri.authority().ok_or(HttpError::HttpRequestUriInvalid)?;
    let tls = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
    let authority = if authority.port().is_some() {
        authority.to_string()
    } else {
        format!("{authority}:{}", if tls { 443 } else { 80 })
    };
    let origin = Origin { tls, authority };
    let timeouts = Timeouts::of(options.as_ref());
    // Only a proxy is sent the scheme and authority; the connection is
    // to the origin itself, so the request line has the path alone.
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    *request.uri_mut() = http::Uri::try_from(path).map_err(|_| HttpError::HttpRequestUriInvalid)?;

    loop {
        let Some(mut sender) = pool.take(&origin) else {
            if pool.wait_for_drained(&origin).await {
                continue;
            }
            break;
        };
        // A connection whose answer just ended takes a request as soon as
        // its task has finished the message; a closed one is left behind.
        let ready = tokio::time::timeout(timeouts.first_byte, sender.ready())
            .await
            .map_err(|_| HttpError::ConnectionReadTimeout)?;
        if ready.is_err() {
            continue;
        }
        let sent = tokio::time::timeout(timeouts.first_byte, sender.try_send_request(request))
            .await
            .map_err(|_| HttpError::ConnectionReadTimeout)?;
        match sent {
            Ok(response) => return Ok(kept(response, sender, pool, origin, &timeouts)),
            // Closed before any of the request went out: another connection.
            Err(mut e) => match e.take_message() {
                Some(again) => request = again,
                None => return Err(e.into_error().into()),
            },
        }
    }
    let mut sender = connect(&origin, timeouts.connect).await?;
    let response = tokio::time::timeout(timeouts.first_byte, sender.send_request(request))
        .await
        .map_err(|_| HttpError::ConnectionReadTimeout)??;
    Ok(kept(response, sender, pool, origin, &timeouts))
}

/// A byte stream a connection runs on: TCP, or TLS over TCP.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// Opens a connection to `origin` (TCP, TLS for `https`, the HTTP/1.1
/// handshake) within `timeout`. Its I/O runs on a task of its own, which
/// ends when the connection closes.
async fn connect(origin: &Origin, timeout: Duration) -> Result<SendRequest<WasiBody>, HttpError> {
    let open = async {
        let tcp = TcpStream::connect(&origin.authority)
            .await
            .map_err(HttpError::Connect)?;
        // A request is written whole at once; waiting for more would only
        // delay it.
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Stream> = if origin.tls {
            let name = server_name(&origin.authority)?;
            Box::new(
                tls_connector()
                    .connect(name, tcp)
                    .await
                    .map_err(HttpError::Tls)?,
            )
        } else {
            Box::new(tcp)
        };
        let (sender, connection) = hyper::client::conn::http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(target: "corral::egress", "connection ended: {e}");
            }
        });
        Ok(sender)
    };
    tokio::time::timeout(timeout, open)
        .await
        .map_err(|_| HttpError::ConnectionTimeout)?
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

/// The name a TLS certificate must be for: the IP of an IP authority
/// (`[::1]:443`, `127.0.0.1:443`), otherwise the host without its port.
fn server_name(authority: &str) -> Result<rustls::pki_types::ServerName<'static>, HttpError> {
    use rustls::pki_types::ServerName;
    if let Ok(addr) = authority.parse::<std::net::SocketAddr>() {
        return Ok(ServerName::from(addr.ip()));
    }
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host);
    ServerName::try_from(host.to_owned()).map_err(HttpError::InvalidDnsNameError)
}

/// `response` with a body that times out between bytes like the default
/// client's, and gives `sender` back to `pool` once it is read whole.
fn kept(
    response: http::Response<Incoming>,
    sender: SendRequest<WasiBody>,
    pool: &Arc<Pool>,
    origin: Origin,
    timeouts: &Timeouts,
) -> http::Response<WasiBody> {
    let stall = timeouts.between_bytes;
    response.map(|incoming| {
        let mut body = KeptBody {
            incoming: Some(incoming),
            stall,
            timer: Box::pin(tokio::time::sleep(stall)),
            back: Some((sender, Arc::downgrade(pool), origin)),
        };
        // A response without a body (a `HEAD`, a 204) is whole already.
        if body.is_end_stream() {
            body.give_back();
        }
        http_body_util::BodyExt::boxed_unsync(body)
    })
}

/// A response body on a kept connection.
struct KeptBody {
    /// Always there until the body is dropped.
    incoming: Option<Incoming>,
    stall: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// The connection, until the body ends (then back to the pool) or
    /// fails (then closed with it).
    back: Option<(SendRequest<WasiBody>, Weak<Pool>, Origin)>,
}

impl KeptBody {
    /// Hands the connection back: its answer ended whole. (The next
    /// request waits for it to be ready: HTTP/1.1 finishes the message on
    /// the connection's own task.)
    fn give_back(&mut self) {
        if let Some((sender, pool, origin)) = self.back.take()
            && let Some(pool) = pool.upgrade()
        {
            pool.put(origin, sender);
        }
    }
}

impl Drop for KeptBody {
    /// A body dropped before its end keeps its connection only if the rest
    /// of it is short and arrives soon ([`DRAIN_BYTES`], [`DRAIN_FOR`]).
    fn drop(&mut self) {
        let (Some((sender, pool, origin)), Some(mut incoming)) =
            (self.back.take(), self.incoming.take())
        else {
            return;
        };
        let (Ok(runtime), Some(pool)) = (tokio::runtime::Handle::try_current(), pool.upgrade())
        else {
            return;
        };
        pool.draining(&origin, true);
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
            if tokio::time::timeout(DRAIN_FOR, drain).await == Ok(true) {
                pool.put(origin.clone(), sender);
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
                        let text = format!("connection {n} request {seq};");
                        let out = stream.get_mut();
                        match answer {
                            Answer::Length(size)
                            | Answer::LengthThenClose(size)
                            | Answer::LengthThenForged(size) => {
                                let body =
                                    text.clone() + &".".repeat(size.saturating_sub(text.len()));
                                let mut all = format!(
                                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
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
                let text = whole(send(&pool, post(s.port), None).await.unwrap()).await;
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
            let mut body = send(&pool, post(s.port), None).await.unwrap().into_body();
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
        let mut body = send(&pool, post(s.port), None).await.unwrap().into_body();
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
        let text = whole(send(&pool, post(s.port), None).await.unwrap()).await;
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
        let text = whole(send(&pool, post(s.port), None).await.unwrap()).await;
        assert!(text.starts_with("connection 1 request 1;"), "{text}");
        for i in 2..=4 {
            let text = whole(send(&pool, post(s.port), None).await.unwrap()).await;
            assert!(
                text.starts_with(&format!("connection {i} request {i};")),
                "{text}"
            );
        }
        assert_eq!(s.requests.load(Ordering::SeqCst), 4);
        assert_eq!(s.accepted.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_response_nothing_asked_for_never_answers_the_next_request() {
        let s = server(Answer::LengthThenForged(32)).await;
        let pool = Arc::new(Pool::default());
        for _ in 0..4 {
            let text = whole(send(&pool, post(s.port), None).await.unwrap()).await;
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
            whole(send(&pool, post(s.port), None).await.unwrap()).await;
            servers.push(s);
        }
        // Six at once to one origin: four are kept.
        let s = server(Answer::Length(16)).await;
        let bodies: Vec<_> =
            futures::future::join_all((0..6).map(|_| send(&pool, post(s.port), None))).await;
        // Each goes back as its answer is read to the end.
        for b in bodies {
            whole(b.unwrap()).await;
        }
        let idle = pool.idle.lock().unwrap();
        let total: usize = idle.values().map(Vec::len).sum();
        assert_eq!(total, IDLE_PER_PLUGIN);
        let to_last = idle
            .iter()
            .find(|(o, _)| o.authority.ends_with(&format!(":{}", s.port)))
            .map(|(_, l)| l.len());
        assert_eq!(to_last, Some(IDLE_PER_ORIGIN));
    }

    #[test]
    fn tls_names_are_the_host_or_the_ip() {
        use rustls::pki_types::ServerName;
        assert_eq!(
            server_name("api.openai.com:443").unwrap(),
            ServerName::try_from("api.openai.com").unwrap()
        );
        assert!(matches!(
            server_name("[::1]:443").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("127.0.0.1:8443").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(server_name("bad_host!:443").is_err());
    }
}
