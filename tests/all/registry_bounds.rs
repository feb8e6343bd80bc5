//! What a registry is handed and sends back is bounded, through the real
//! binary: registry credentials go only to the registry the user names
//! (never to one a project's `from` picked), and an OCI layer over the size
//! limit is refused while it streams, leaving no file behind.

use crate::support::output::printed as text;
use crate::support::registry::{Registry, publish, read_user_manifest, store_dir};
use crate::support::text::{has, lacks};
use crate::*;
use corral_test_programs::ECHO;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A loopback "registry" that asks for Basic auth on every request and
/// records each request's `Authorization` header (or `-` without one).
fn recording_registry() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut auth = "-".to_owned();
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if line == "\r\n" {
                    break;
                }
                if let Some((k, v)) = line.split_once(':')
                    && k.eq_ignore_ascii_case("authorization")
                {
                    auth = v.trim().to_owned();
                }
                line.clear();
            }
            record.lock().unwrap().push(auth);
            let _ = stream.write_all(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"test\"\r\n\
                  Content-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (port, seen)
}

const CREDENTIALS: [(&str, &str); 2] = [
    ("CORRAL_REGISTRY_USERNAME", "alice"),
    ("CORRAL_REGISTRY_PASSWORD", "s3cret-password"),
];

#[test]
fn registry_credentials_never_follow_a_projects_from() {
    let (port, seen) = recording_registry();
    let sb = Sandbox::new();
    // A trusted project declares a plugin "from" a registry of its choosing.
    sb.write(
        "corral.toml",
        &format!(
            "[plugins.lure]\nsource = {ECHO:?}\nfrom = \"oci://127.0.0.1:{port}/tools/lure:1\"\n"
        ),
    );
    let cli = Cli::new();
    let other = "127.0.0.1:1".to_owned();
    for bound in [None, Some(other.as_str())] {
        let mut env = CREDENTIALS.to_vec();
        if let Some(b) = bound {
            env.push(("CORRAL_REGISTRY", b));
        }
        let o = cli.run_env(&sb.ws(), &["plugin", "update", "lure", "--yes"], &env);
        let t = text(&o);
        assert!(!o.status.success(), "{t}");
        let seen = seen.lock().unwrap();
        assert!(!seen.is_empty(), "the project's registry was asked: {t}");
        assert!(
            seen.iter().all(|a| a == "-"),
            "the project's registry received credentials (CORRAL_REGISTRY={bound:?}): {seen:?}"
        );
        assert!(t.contains("was not sent"), "the error says why: {t}");
        lacks(&t, "s3cret");
    }
    // The registry the user names does get them: the recorder can see them.
    let bound = format!("127.0.0.1:{port}");
    let mut env = CREDENTIALS.to_vec();
    env.push(("CORRAL_REGISTRY", &bound));
    let o = cli.run_env(&sb.ws(), &["plugin", "update", "lure", "--yes"], &env);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        seen.lock().unwrap().iter().any(|a| a.starts_with("Basic ")),
        "{:?}",
        seen.lock().unwrap()
    );
}

#[test]
fn an_oci_layer_over_the_limit_is_refused_and_leaves_no_file() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let (sb, cli) = workspace_and_cli();
    sb.write("r.toml", "[plugin]\nname = \"big\"\n[requests]\n");
    let reference = registry.reference("tools/big:1");
    publish(&cli, &sb, ECHO, &reference, "r.toml");
    let size = std::fs::metadata(ECHO).unwrap().len();
    let limit_kb = (size / 2 / 1024).max(1).to_string();
    let o = cli.run_env(
        &sb.ws(),
        &["plugin", "add", &reference, "--yes"],
        &[("CORRAL_OCI_MAX_LAYER_KB", &limit_kb)],
    );
    let t = text(&o);
    assert!(
        !o.status.success(),
        "a {size}-byte layer got past a {limit_kb} KiB limit: {t}"
    );
    assert!(t.contains("over the") && t.contains("KiB limit"), "{t}");
    assert!(
        t.contains("CORRAL_OCI_MAX_LAYER_KB"),
        "the error names the fix: {t}"
    );
    assert!(!read_user_manifest(&cli).contains("plugins.big"));
    let left: Vec<_> = std::fs::read_dir(store_dir(&cli))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    // A bad value is an error, not the default.
    let o = cli.run_env(
        &sb.ws(),
        &["plugin", "add", &reference, "--yes"],
        &[("CORRAL_OCI_MAX_LAYER_KB", "lots")],
    );
    assert!(!o.status.success(), "{}", text(&o));
    has(&text(&o), "not a whole number");
    // Under the default limit the same layer installs.
    let o = cli.run(&sb.ws(), &["plugin", "add", &reference, "--yes"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(read_user_manifest(&cli).contains("plugins.big"));
}
