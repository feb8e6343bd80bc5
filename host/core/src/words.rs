//! Errors of the libraries corral stands on, said in words: what failed
//! and why, without a library's type names or the `(os error N)` the
//! system's numbers add.

/// An I/O error as a short cause: the kinds users meet, in words; any
/// other as its own text without `(os error N)`.
pub fn io(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound => "it does not exist".into(),
        K::PermissionDenied => "permission denied".into(),
        K::ConnectionRefused => "nothing is listening there (connection refused)".into(),
        K::ConnectionReset => "the other side closed the connection".into(),
        K::TimedOut => "it did not answer in time".into(),
        K::AlreadyExists => "something is already there".into(),
        K::BrokenPipe => "the other side stopped reading (broken pipe)".into(),
        _ => without_os_error(&e.to_string()),
    }
}

/// `text` without a trailing ` (os error N)`.
pub fn without_os_error(text: &str) -> String {
    match text.find(" (os error ") {
        Some(at) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

/// Why an HTTP request failed, from the deepest cause reqwest and hyper
/// keep: `error sending request for url (…)` alone says neither.
pub fn http(e: &reqwest::Error) -> String {
    let mut cause: Option<String> = None;
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        cause = Some(match s.downcast_ref::<std::io::Error>() {
            Some(io_error) => io(io_error),
            None => without_os_error(&s.to_string()),
        });
        source = s.source();
    }
    let what = if e.is_timeout() {
        "the request timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_body() || e.is_decode() {
        "the answer could not be read"
    } else if e.is_redirect() {
        "too many redirects"
    } else {
        "the request failed"
    };
    match cause {
        Some(cause) if cause.contains("dns error") || cause.contains("failed to lookup") => {
            format!("{what}: the host name could not be resolved ({cause})")
        }
        Some(cause) => format!("{what}: {cause}"),
        None => what.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn os_numbers_are_left_out() {
        let e = std::io::Error::from_raw_os_error(libc_eio());
        assert!(!super::io(&e).contains("os error"), "{}", super::io(&e));
        assert_eq!(
            super::without_os_error("Broken pipe (os error 32)"),
            "Broken pipe"
        );
    }

    /// EIO, the same number on every Linux architecture.
    fn libc_eio() -> i32 {
        5
    }

    #[tokio::test]
    async fn a_refused_connection_says_so() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let e = reqwest::get(format!("http://127.0.0.1:{port}/"))
            .await
            .expect_err("nothing listens");
        let said = super::http(&e);
        assert!(said.contains("connection refused"), "{said}");
        assert!(!said.contains("os error"), "{said}");
    }
}
