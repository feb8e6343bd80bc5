//! A plugin's network grant is judged by the address a name resolves to,
//! not by the name: `web_fetch` granted `http://NAME:PORT`, where NAME
//! resolves to loopback, does not reach the loopback server there, while a
//! grant that names the address itself (or `localhost`) does. Through the
//! binary, `corral tool call web_fetch`.
//!
//! The name is the machine's own host name, which /etc/hosts maps to a
//! loopback address on the usual Linux machine (Debian writes
//! `127.0.1.1 HOST`; containers write `127.0.0.1 HOST`), so no file has to
//! be edited; glibc does not resolve `*.localhost` names, and `localtest.me`
//! needs public DNS. Where the host name does not resolve to loopback the
//! test says so and skips.
//!
//! Before the address was judged, the refused fetch below read the
//! loopback server's page (`LOOPBACK-PAGE` in its output, one connection
//! accepted).

use crate::support::output::{assert_exit, stderr, stdout};
use crate::support::run::tool_call;
use crate::support::text::has;
use crate::{Cli, Sandbox};
use serde_json::json;
use std::io::Write as _;
use std::net::{IpAddr, TcpListener, ToSocketAddrs as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A server on `ip` that answers every request with a page and counts the
/// connections it accepts.
struct Loopback {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

fn loopback(ip: IpAddr) -> Loopback {
    let listener = TcpListener::bind((ip, 0)).expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let a = accepted.clone();
    crate::support::http::serve(listener, move |_, stream| {
        a.fetch_add(1, Ordering::SeqCst);
        let body = "LOOPBACK-PAGE";
        let _ = stream.write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
    });
    Loopback { port, accepted }
}

/// The machine's host name and the loopback address it resolves to, or
/// why there is none.
fn loopback_name() -> Result<(String, IpAddr), String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_err(|e| format!("cannot read the host name: {e}"))?
        .trim()
        .to_ascii_lowercase();
    if name.is_empty() || name == "localhost" {
        return Err(format!("the host name is `{name}`"));
    }
    let addrs: Vec<IpAddr> = (name.as_str(), 80)
        .to_socket_addrs()
        .map_err(|e| format!("the host name `{name}` does not resolve: {e}"))?
        .map(|a| a.ip())
        .collect();
    match addrs.first() {
        Some(ip) if addrs.iter().all(IpAddr::is_loopback) => Ok((name, *ip)),
        _ => Err(format!(
            "the host name `{name}` resolves to {addrs:?}, not only to loopback"
        )),
    }
}

fn granted(origin: &str) -> Sandbox {
    Sandbox::with_manifest(&format!(
        "[plugins.web-fetch]\nsource = \"builtin:web-fetch\"\ngrants.net = [\"{origin}\"]\n"
    ))
}

#[test]
fn a_name_that_resolves_to_loopback_does_not_reach_it() {
    let (name, ip) = match loopback_name() {
        Ok(found) => found,
        Err(why) => {
            crate::support::skip::cannot_run_here(format!("no name for loopback: {why}"));
            return;
        }
    };
    let server = loopback(ip);
    let cli = Cli::new();
    let origin = format!("http://{name}:{}", server.port);
    let sb = granted(&origin);
    let o = tool_call(&cli, &sb, "web_fetch", json!({"url": format!("{origin}/")}));
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(!out.contains("LOOPBACK-PAGE"), "{out}\n{err}");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 0, "{out}\n{err}");
    assert!(
        err.contains(&format!("`{name}` resolves to {ip}")),
        "the refusal names the address:\n{out}\n{err}"
    );
    assert_ne!(o.status.code(), Some(0), "{out}\n{err}");

    // The grant that names the address itself reaches it.
    let at = if ip.is_ipv6() {
        format!("http://[{ip}]:{}", server.port)
    } else {
        format!("http://{ip}:{}", server.port)
    };
    let sb = granted(&at);
    let o = tool_call(&cli, &sb, "web_fetch", json!({"url": format!("{at}/")}));
    assert_exit(&o, 0);
    has(&stdout(&o), "LOOPBACK-PAGE");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
}

#[test]
fn localhost_granted_by_name_reaches_loopback() {
    let server = loopback(IpAddr::from([127, 0, 0, 1]));
    let origin = format!("http://localhost:{}", server.port);
    let sb = granted(&origin);
    let o = tool_call(
        &Cli::new(),
        &sb,
        "web_fetch",
        json!({"url": format!("{origin}/")}),
    );
    assert_exit(&o, 0);
    has(&stdout(&o), "LOOPBACK-PAGE");
}
