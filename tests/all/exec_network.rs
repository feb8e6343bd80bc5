//! Per-destination network for programs granted `exec`
//! (`network = ["http://127.0.0.1:PORT"]`), through `corral tool call`: the
//! program reaches its granted destinations through corral's proxy and
//! nothing else (there is no route around it), `false` and `true` keep
//! their meaning, bad entries are clear errors, and the proxy bounds what a
//! program can make it hold.

use crate::support::http::server;
use crate::support::output::printed;
use crate::support::run::tool_call;
use crate::support::skip;
use crate::support::text::{has, has_all, lacks};
use crate::*;
use serde_json::json;
use std::sync::atomic::Ordering;

fn shell_with(sb: &Sandbox, grants: &str) {
    sb.write(
        "corral.toml",
        &format!("[plugins.shell]\nsource = \"builtin:shell\"\ngrants.exec = [{grants}]\n"),
    );
}

fn run(cli: &Cli, sb: &Sandbox, argv: &[&str]) -> String {
    printed(&tool_call(cli, sb, "run_command", json!({ "argv": argv })))
}

fn curl(cli: &Cli, sb: &Sandbox, extra: &[&str], url: &str) -> String {
    let mut argv = vec!["curl", "-sS", "--max-time", "5"];
    argv.extend(extra);
    argv.push(url);
    run(cli, sb, &argv)
}

/// The Done-when case: granted `http://127.0.0.1:A`, curl reaches A and is
/// refused B with the proxy's 403; going around the proxy reaches nothing;
/// an `https` grant is a CONNECT tunnel to that port only.
#[test]
fn a_program_reaches_its_granted_port_and_no_other() {
    if corral_exec::resolve("curl").is_none() {
        skip::missing("curl is not installed", "apt-get install curl");
        return;
    }
    let (a, hits_a) = server("server-a-answered");
    let (b, hits_b) = server("server-b-answered");
    let (sb, cli) = workspace_and_cli();
    shell_with(
        &sb,
        &format!(
            r#"{{ program = "curl", args = ["**"], network = ["http://127.0.0.1:{a}", "https://127.0.0.1:{b}"] }}"#
        ),
    );
    let url_a = format!("http://127.0.0.1:{a}/x");
    let url_b = format!("http://127.0.0.1:{b}/x");

    let out = curl(&cli, &sb, &[], &url_a);
    has(&out, "server-a-answered");
    assert_eq!(hits_a.load(Ordering::SeqCst), 1);

    // B is granted only as https (CONNECT): a plain request is refused.
    let out = curl(&cli, &sb, &[], &url_b);
    lacks(&out, "server-b-answered");
    assert!(
        out.contains(&format!(
            "corral: http://127.0.0.1:{b} is not a destination this program is granted"
        )),
        "{out}"
    );
    has(&out, "add it to the `network` list");
    assert_eq!(hits_b.load(Ordering::SeqCst), 0, "B got a connection");

    // A tunnel (curl -p sends CONNECT) to B works; one to A is refused.
    let out = curl(&cli, &sb, &["-p"], &url_b);
    has(&out, "server-b-answered");
    let out = curl(&cli, &sb, &["-p"], &url_a);
    lacks(&out, "server-a-answered");
    has(&out, "403");
    assert_eq!(
        hits_a.load(Ordering::SeqCst),
        1,
        "A got a second connection"
    );

    // Around the proxy there is no route: not even to the granted port.
    let out = curl(&cli, &sb, &["--noproxy", "*"], &url_a);
    lacks(&out, "server-a-answered");
    assert!(out.contains("exit code 7"), "curl could connect: {out}");
    assert_eq!(
        hits_a.load(Ordering::SeqCst),
        1,
        "a direct connection reached A"
    );
}

/// `network = false` is still no network at all, and `true` still any.
#[test]
fn false_and_true_keep_their_meaning() {
    if corral_exec::resolve("curl").is_none() {
        skip::missing("curl is not installed", "apt-get install curl");
        return;
    }
    let (a, hits_a) = server("server-a-answered");
    let (sb, cli) = workspace_and_cli();
    let url = format!("http://127.0.0.1:{a}/");
    shell_with(
        &sb,
        r#"{ program = "curl", args = ["**"], network = false }"#,
    );
    let out = curl(&cli, &sb, &[], &url);
    lacks(&out, "server-a-answered");
    assert_eq!(hits_a.load(Ordering::SeqCst), 0);
    shell_with(
        &sb,
        r#"{ program = "curl", args = ["**"], network = true }"#,
    );
    let out = curl(&cli, &sb, &[], &url);
    has(&out, "server-a-answered");
}

/// Entries that are not `http(s)://host[:port]` are refused when the
/// manifest loads, saying what is wrong and what to write.
#[test]
fn a_bad_destination_is_a_clear_error() {
    let sb = Sandbox::new();
    // `corral trust` is where a project's manifest is first judged.
    let cli = Cli::untrusting();
    for (entry, why) in [
        (
            r#"["ftp://x"]"#,
            "the scheme `ftp` is not one corral's proxy carries",
        ),
        (r#"["crates.io"]"#, "it has no scheme"),
        (r#"["https://crates.io/index"]"#, "no path"),
        (r#"[443]"#, "is a integer, not a string"),
        (r#""yes""#, "must be true, false or a list of destinations"),
    ] {
        shell_with(
            &sb,
            &format!(r#"{{ program = "sh", args = ["**"], network = {entry} }}"#),
        );
        let trust = cli.run(&sb.ws(), &["trust", "--yes"]);
        assert!(!trust.status.success(), "{entry}: {}", printed(&trust));
        let out = printed(&trust);
        assert!(out.contains(why), "{entry}: {out}");
        assert!(out.contains("corral.toml:3"), "{entry}: {out}");
        assert!(out.contains("https://crates.io:443"), "{entry}: {out}");
    }
}

/// What a program can make the proxy hold is bounded: an oversized head is
/// cut with a 431, connections past the cap get a 503 at once, and one that
/// never sends a request line is closed with a 408 after the head timeout.
#[test]
fn the_proxy_bounds_what_a_program_makes_it_hold() {
    let (a, _) = server("server-a-answered");
    let (sb, cli) = workspace_and_cli();
    shell_with(
        &sb,
        &format!(
            r#"{{ program = "python3", args = ["-c", "*"], network = ["http://127.0.0.1:{a}"] }}"#
        ),
    );
    let script = format!(
        r#"
import socket, time
P = ('127.0.0.1', {port})
def first_line(s):
    s.settimeout(15)
    data = b''
    while b'\r\n' not in data:
        chunk = s.recv(1024)
        if not chunk: break
        data += chunk
    return data.split(b'\r\n')[0].decode()
s = socket.create_connection(P)
s.sendall(b'GET http://127.0.0.1:{a}/ HTTP/1.1\r\nX: ' + b'a' * 40000)
print('big:', first_line(s)); s.close()
idle = [socket.create_connection(P) for _ in range({cap})]
time.sleep(0.3)
extra = socket.create_connection(P)
print('over:', first_line(extra))
t = time.time()
print('idle:', first_line(idle[0]), round(time.time() - t))
"#,
        port = corral_exec::PROXY_PORT,
        cap = corral_exec::MAX_CONNECTIONS,
    );
    let out = run(&cli, &sb, &["python3", "-c", &script]);
    has_all(
        &out,
        &[
            "big: HTTP/1.1 431 Request Header Fields Too Large",
            "over: HTTP/1.1 503 Service Unavailable",
            "idle: HTTP/1.1 408 Request Timeout",
        ],
    );
}

/// The same grant for a user other than root, whose namespaces are made
/// inside a user namespace of its own: run as `nobody` when the tests run
/// as root (skipped otherwise, or where `setpriv` is missing).
#[test]
fn a_user_other_than_root_gets_the_same_confinement() {
    // SAFETY: getuid takes nothing and cannot fail.
    if unsafe { libc::getuid() } != 0 {
        skip::cannot_run_here("needs root (to become nobody)");
        return;
    }
    if corral_exec::resolve("setpriv").is_none() {
        skip::missing("setpriv is not installed", "apt-get install util-linux");
        return;
    }
    if corral_exec::resolve("curl").is_none() {
        skip::missing("curl is not installed", "apt-get install curl");
        return;
    }
    let (a, hits_a) = server("server-a-answered");
    let (b, hits_b) = server("server-b-answered");
    let root = tempfile::tempdir().expect("tempdir");
    let (ws, home) = (root.path().join("ws"), root.path().join("home"));
    let config = home.join("config/corral");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&config).expect("config");
    // The user's own manifest: a project's may not widen the shell plugin.
    std::fs::write(
        config.join("corral.toml"),
        format!(
            "[plugins.shell]\nsource = \"builtin:shell\"\ngrants.exec = [{{ program = \"curl\", args = [\"**\"], network = [\"http://127.0.0.1:{a}\"] }}]\n"
        ),
    )
    .expect("manifest");
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(root.path())
        .status()
        .expect("chown");
    assert!(chown.success());
    std::fs::set_permissions(
        root.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let call = |url: &str, extra: &[&str]| {
        let mut argv = vec!["curl", "-sS", "--max-time", "5"];
        argv.extend(extra);
        argv.push(url);
        let o = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_corral"))
            .args(["tool", "call", "run_command", "--args"])
            .arg(json!({ "argv": argv }).to_string())
            .arg("--workspace")
            .arg(&ws)
            .current_dir(&ws)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env("XDG_DATA_HOME", home.join("data"))
            .env_remove("CORRAL_LOG")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("corral as nobody");
        printed(&o)
    };
    let out = call(&format!("http://127.0.0.1:{a}/"), &[]);
    if out.contains("Permission denied") && out.contains("corral_") {
        skip::cannot_run_here(format!("nobody cannot run the test binary here: {out}"));
        return;
    }
    has(&out, "server-a-answered");
    let out = call(&format!("http://127.0.0.1:{b}/"), &[]);
    has(&out, "is not a destination this program is granted");
    let out = call(&format!("http://127.0.0.1:{a}/"), &["--noproxy", "*"]);
    has(&out, "exit code 7");
    assert_eq!(hits_a.load(Ordering::SeqCst), 1);
    assert_eq!(hits_b.load(Ordering::SeqCst), 0);
}
