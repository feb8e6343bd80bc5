//! Plain HTTP servers on loopback that answer whatever they are asked.

use std::io::{Read, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A loopback HTTP server answering every request with `marker`; counts
/// the connections it got.
pub fn server(marker: &'static str) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    serve(listener, move |_, s| {
        counted.fetch_add(1, Ordering::SeqCst);
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{marker}",
            marker.len()
        );
    });
    (port, hits)
}

/// Serves `listener` on a thread of its own: for each connection, reads the
/// request's head ([`read_head`]) and calls `answer` with it and the stream.
pub fn serve(
    listener: TcpListener,
    mut answer: impl FnMut(&[u8], &mut TcpStream) + Send + 'static,
) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let head = read_head(&mut s);
            answer(&head, &mut s);
        }
    });
}

/// What `s` sends up to the blank line that ends a request's head (all it
/// sent if it stops or fails before).
pub fn read_head(s: &mut impl Read) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    head
}
