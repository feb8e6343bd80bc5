//! corral's HTTP proxy for a program granted only some destinations
//! ([`super::Network::Only`]): the one way out of the program's network
//! namespace. `CONNECT host:port` opens a tunnel to an `https` destination,
//! an absolute-form request (`GET http://host:port/path`) is forwarded to an
//! `http` one; anything else is refused with a 403 that says why. The proxy
//! resolves names itself and connects only to the addresses it checked, so
//! a name that resolves to loopback or a private network (DNS rebinding
//! included) is refused unless the grant names such an address itself.
//!
//! What a program can make it hold is bounded: a request head of
//! [`MAX_HEAD`] bytes read within [`HEAD_TIMEOUT`], [`MAX_CONNECTIONS`]
//! connections at once, fixed buffers per tunnel. The proxy lives as long
//! as its [`Proxy`] guard, which the launch holds beside the child: dropped,
//! it closes the listener and every connection.

use super::network::{Destination, Scheme};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Bytes of a request head the proxy reads before it gives up.
pub const MAX_HEAD: usize = 16 * 1024;
/// Connections served at once; more are answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long resolving and connecting to a destination may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The running proxy; dropping it stops it and closes every connection.
#[derive(Debug)]
pub struct Proxy {
    task: tokio::task::AbortHandle,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Serves `listener` (a socket in the program's namespace) for a
    /// program granted `grant`, on the current tokio runtime.
    pub fn serve(
        listener: std::net::TcpListener,
        grant: Vec<Destination>,
    ) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let grant: Arc<[Destination]> = grant.into();
        let task = tokio::spawn(accept_loop(listener, grant)).abort_handle();
        Ok(Self { task })
    }
}

async fn accept_loop(listener: tokio::net::TcpListener, grant: Arc<[Destination]>) {
    // Owned by this task: aborting it drops the set, which aborts every
    // connection's task.
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else {
                    // Out of descriptors, say: wait instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                if conns.len() >= MAX_CONNECTIONS {
                    // Never waits on the client: one try, then closed.
                    let _ = client.try_write(&response(
                        503,
                        &format!("corral's proxy serves at most {MAX_CONNECTIONS} connections of a program at once"),
                    ));
                    continue;
                }
                conns.spawn(serve(client, grant.clone()));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// A refusal or an error, as a small complete HTTP response.
fn response(status: u16, why: &str) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        _ => "Service Unavailable",
    };
    let body = format!("corral: {why}\n");
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One client connection: its request head judged, then a tunnel or one
/// forwarded request.
async fn serve(mut client: TcpStream, grant: Arc<[Destination]>) {
    let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(read)) => read,
        Ok(Err(Some((status, why)))) => {
            let _ = client.write_all(&response(status, &why)).await;
            return;
        }
        Ok(Err(None)) => return,
        Err(_) => {
            let why = format!("no request head within {} s", HEAD_TIMEOUT.as_secs());
            let _ = client.write_all(&response(408, &why)).await;
            return;
        }
    };
    let request = match Request::parse(&head) {
        Ok(r) => r,
        Err(why) => {
            let _ = client.write_all(&response(400, &why)).await;
            return;
        }
    };
    let Some(dest) = grant
        .iter()
        .find(|d| d.matches(request.scheme, &request.host, request.port))
    else {
        let granted: Vec<String> = grant.iter().map(Destination::to_string).collect();
        let why = format!(
            "{} is not a destination this program is granted (granted: {}); add it to the `network` list of its grants.exec entry to allow it",
            request.shown(),
            granted.join(", ")
        );
        tracing::info!(target: "corral::exec", "proxy refused {}", request.shown());
        let _ = client.write_all(&response(403, &why)).await;
        return;
    };
    let mut upstream = match connect_checked(&request.host, request.port, dest).await {
        Ok(s) => s,
        Err((status, why)) => {
            let _ = client
                .write_all(&response(status, &format!("{}: {why}", request.shown())))
                .await;
            return;
        }
    };
    let first = match request.scheme {
        Scheme::Https => {
            if client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_err()
            {
                return;
            }
            rest
        }
        Scheme::Http => {
            let mut out = request.forwarded_head(&head);
            out.extend_from_slice(&rest);
            out
        }
    };
    if upstream.write_all(&first).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// Reads up to the end of the request head (`\r\n\r\n`), at most
/// [`MAX_HEAD`] bytes: the head, and what followed it. An error is an
/// answer to send, or `None` when the client went away.
async fn read_head(client: &mut TcpStream) -> Result<(Vec<u8>, Vec<u8>), Option<(u16, String)>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = client.read(&mut chunk).await.map_err(|_| None)?;
        if n == 0 {
            return Err(None);
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = from + at + 4;
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(Some((
                431,
                format!("the request head is longer than {MAX_HEAD} bytes"),
            )));
        }
    }
}

/// The destination a request asks for.
struct Request {
    scheme: Scheme,
    host: String,
    port: u16,
    /// For a forwarded request: the method, the origin-form target, the version.
    line: Option<(String, String, String)>,
}

impl Request {
    fn parse(head: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8")?;
        let line = text.lines().next().unwrap_or_default();
        let mut parts = line.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("the request line is not `METHOD TARGET HTTP/1.x`".into());
        };
        if !version.starts_with("HTTP/1.") {
            return Err("only HTTP/1.x requests are proxied".into());
        }
        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = split_authority(target, None)?;
            return Ok(Self {
                scheme: Scheme::Https,
                host,
                port,
                line: None,
            });
        }
        let lower = target.to_ascii_lowercase();
        let Some(after) = lower.strip_prefix("http://").map(|_| &target[7..]) else {
            return Err(if lower.starts_with("https://") {
                "an https URL goes through the proxy with CONNECT, not as a plain request".into()
            } else {
                "a proxied request names an absolute `http://` URL or uses CONNECT".into()
            });
        };
        let cut = after.find(['/', '?']).unwrap_or(after.len());
        let (authority, path) = after.split_at(cut);
        let (host, port) = split_authority(authority, Some(80))?;
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else if path.is_empty() {
            "/".into()
        } else {
            path.to_owned()
        };
        Ok(Self {
            scheme: Scheme::Http,
            host,
            port,
            line: Some((method.to_owned(), path, version.to_owned())),
        })
    }

    fn shown(&self) -> String {
        Destination {
            scheme: self.scheme,
            host: self.host.clone(),
            port: self.port,
        }
        .to_string()
    }

    /// The head sent to an `http` destination: the request line in origin
    /// form, the client's headers but the hop-by-hop and proxy ones, the
    /// `Host` of the URL and `Connection: close`, so that a later request
    /// on the same connection cannot ride this one's check.
    fn forwarded_head(&self, head: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(head);
        let (method, path, version) = self.line.clone().unwrap_or_default();
        let mut out = format!("{method} {path} {version}\r\n");
        for line in text.split("\r\n").skip(1).filter(|l| !l.is_empty()) {
            let name = line.split(':').next().unwrap_or_default().trim();
            let hop = [
                "host",
                "connection",
                "proxy-connection",
                "proxy-authorization",
                "keep-alive",
            ]
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h));
            if !hop {
                out.push_str(line);
                out.push_str("\r\n");
            }
        }
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        out.push_str(&format!(
            "Host: {host}:{}\r\nConnection: close\r\n\r\n",
            self.port
        ));
        out.into_bytes()
    }
}

/// `host:port` (or `[v6]:port`) of a request; the port may be left out
/// when there is a `default`.
fn split_authority(text: &str, default: Option<u16>) -> Result<(String, u16), String> {
    let bad = || format!("`{}` is not a host and port", text.escape_debug());
    if text.contains('@') {
        return Err("a proxied URL may not carry a user or password".into());
    }
    let (host, port) = if let Some(v6) = text.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or_else(bad)?;
        (host, after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    let port = match (port, default) {
        (Some(p), _) => p.parse::<u16>().map_err(|_| bad())?,
        (None, Some(d)) => d,
        (None, None) => return Err(bad()),
    };
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// Connects to `host:port`, to an address checked here: one on loopback,
/// a private or link-local network only when `dest` names such an address
/// (see [`Destination::may_connect_to`]).
async fn connect_checked(
    host: &str,
    port: u16,
    dest: &Destination,
) -> Result<TcpStream, (u16, String)> {
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::lookup_host((host, port))).await
            {
                Ok(Ok(found)) => found.collect(),
                _ => return Err((502, "the name does not resolve".into())),
            }
        }
    };
    let allowed: Vec<SocketAddr> = addrs
        .iter()
        .copied()
        .filter(|a| dest.may_connect_to(a.ip()))
        .collect();
    if allowed.is_empty() {
        return Err((
            403,
            "it resolves only to loopback or private addresses, which a grant must name by address to reach".into(),
        ));
    }
    for addr in allowed {
        if let Ok(Ok(stream)) =
            tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await
        {
            return Ok(stream);
        }
    }
    Err((502, "no connection could be made".into()))
}

#[cfg(test)]
mod tests {
    use super::Request;
    use crate::network::Scheme;

    #[test]
    fn requests_name_their_destination() {
        let r =
            Request::parse(b"CONNECT crates.io:443 HTTP/1.1\r\nHost: x\r\n\r\n").expect("parses");
        assert_eq!(
            (r.scheme, r.host.as_str(), r.port),
            (Scheme::Https, "crates.io", 443)
        );
        let r = Request::parse(b"GET http://127.0.0.1:8080/a?b HTTP/1.1\r\nHost: x\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n")
            .expect("parses");
        assert_eq!(
            (r.scheme, r.host.as_str(), r.port),
            (Scheme::Http, "127.0.0.1", 8080)
        );
        let head = String::from_utf8(r.forwarded_head(b"GET http://127.0.0.1:8080/a?b HTTP/1.1\r\nHost: x\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n")).expect("text");
        assert_eq!(
            head,
            "GET /a?b HTTP/1.1\r\nAccept: */*\r\nHost: 127.0.0.1:8080\r\nConnection: close\r\n\r\n"
        );
        for bad in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"GET https://x/ HTTP/1.1\r\n\r\n",
            b"CONNECT x HTTP/1.1\r\n\r\n",
            b"GET http://u@x/ HTTP/1.1\r\n\r\n",
            b"GET http://x/ SPDY\r\n\r\n",
        ] {
            assert!(
                Request::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
