//! `web_fetch` and the `web_search` template through the binary, against
//! HTTP servers on loopback that the tests start: what comes back, what the
//! caps cut, which redirects are followed, how results are labelled, and
//! where a search API key goes.

use crate::support::cassette::{answer_turn, call_turn};
use crate::support::events::{events, find, label, labels};
use crate::support::output::{assert_exit, ok_stdout, printed, stderr, stdout};
use crate::support::run::replay_events;
use crate::support::run::tool_call;
use crate::support::text::{has, has_all, lacks, tail};
use crate::{Cli, Sandbox, workspace_and_cli};
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What a [`Site`] answers to one request.
struct Page {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Body,
}

enum Body {
    Text(String),
    /// An HTML body without a length that goes on for 256 MiB (the count
    /// of bytes the server managed to write is in [`Site::written`]).
    Endless,
}

fn page(content_type: &str, body: &str) -> Page {
    Page {
        status: 200,
        headers: vec![("content-type", content_type.to_owned())],
        body: Body::Text(body.to_owned()),
    }
}

fn redirect(to: String) -> Page {
    Page {
        status: 302,
        headers: vec![("location", to)],
        body: Body::Text(String::new()),
    }
}

/// One request a [`Site`] received: its target and headers.
#[derive(Clone, Debug)]
struct Seen {
    target: String,
    headers: Vec<(String, String)>,
}

/// An HTTP/1.1 server on loopback; each connection is answered by `answer`
/// from the request's target (`/path?query`).
struct Site {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    written: Arc<AtomicUsize>,
}

impl Site {
    fn start(answer: impl Fn(&str) -> Page + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let written: Arc<AtomicUsize> = Arc::default();
        let answer = Arc::new(answer);
        let (s, w) = (seen.clone(), written.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().take(32) {
                let Ok(stream) = stream else { continue };
                let (s, w, answer) = (s.clone(), w.clone(), answer.clone());
                std::thread::spawn(move || serve(stream, &s, &w, &*answer));
            }
        });
        Self {
            port,
            seen,
            written,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

fn serve(
    stream: TcpStream,
    seen: &Mutex<Vec<Seen>>,
    written: &AtomicUsize,
    answer: &(dyn Fn(&str) -> Page + Send + Sync),
) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.trim_end().split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    seen.lock().expect("lock").push(Seen {
        target: target.clone(),
        headers,
    });
    let reply = answer(&target);
    let mut out = stream;
    let mut head = format!("HTTP/1.1 {} X\r\nconnection: close\r\n", reply.status);
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    match reply.body {
        Body::Text(text) => {
            head.push_str(&format!("content-length: {}\r\n\r\n", text.len()));
            let _ = out.write_all(head.as_bytes());
            let _ = out.write_all(text.as_bytes());
        }
        Body::Endless => {
            head.push_str("content-type: text/html\r\n\r\n");
            let _ = out.write_all(head.as_bytes());
            let chunk = "<p>more and more text</p>\n".repeat(2500);
            while written.load(Ordering::Relaxed) < 256 << 20 {
                if out.write_all(chunk.as_bytes()).is_err() {
                    break;
                }
                written.fetch_add(chunk.len(), Ordering::Relaxed);
            }
        }
    }
}

/// A workspace whose `web-fetch` is granted exactly `origins`.
fn granted(origins: &[String]) -> Sandbox {
    Sandbox::with_manifest(&format!(
        "[plugins.web-fetch]\nsource = \"builtin:web-fetch\"\ngrants.net = {origins:?}\n"
    ))
}

fn origin(site: &Site) -> String {
    format!("http://127.0.0.1:{}", site.port)
}

const ARTICLE: &str = "<!doctype html><html><head><title>Notes</title>\
    <style>body { color: STYLE-TEXT }</style><script>var leaked = 'SCRIPT-TEXT';</script></head>\
    <body><nav><a href=\"/\">NAV-TEXT</a></nav><main><h1>Release notes</h1>\
    <p>Read <a href=\"https://example.com/docs\">the docs</a> first.</p><h2>Changes</h2>\
    <ul><li>faster</li></ul><script>document.write('SCRIPT-TEXT')</script></main>\
    <footer>FOOTER-TEXT</footer></body></html>";

#[test]
fn an_html_page_comes_back_as_markdown_without_scripts() {
    let site = Site::start(|_| page("text/html; charset=utf-8", ARTICLE));
    let sb = granted(&[origin(&site)]);
    let cli = Cli::new();
    let o = tool_call(&cli, &sb, "web_fetch", json!({"url": site.url("/notes")}));
    let text = ok_stdout(&o, "web_fetch /notes");
    has_all(
        &text,
        &[
            "# Release notes",
            "## Changes",
            "[the docs](https://example.com/docs)",
            "faster",
        ],
    );
    for noise in [
        "SCRIPT-TEXT",
        "STYLE-TEXT",
        "NAV-TEXT",
        "FOOTER-TEXT",
        "<p>",
    ] {
        assert!(!text.contains(noise), "{noise} in:\n{text}");
    }
}

#[test]
fn json_and_text_pass_through_and_other_types_are_refused() {
    let body = r#"{"name":"corral","tags":["wasm","agent"],"n":3}"#;
    let site = Site::start(move |target| match target {
        "/data.json" => page("application/json", body),
        "/notes.txt" => page("text/plain", "# not a heading\n<b>kept as is</b>\n"),
        _ => page("image/png", "\u{89}PNG\r\n"),
    });
    let sb = granted(&[origin(&site)]);
    let cli = Cli::new();
    let o = tool_call(
        &cli,
        &sb,
        "web_fetch",
        json!({"url": site.url("/data.json")}),
    );
    assert_exit(&o, 0);
    has(&stdout(&o), body);

    let o = tool_call(
        &cli,
        &sb,
        "web_fetch",
        json!({"url": site.url("/notes.txt")}),
    );
    assert_exit(&o, 0);
    has(&stdout(&o), "# not a heading\n<b>kept as is</b>");

    let o = tool_call(
        &cli,
        &sb,
        "web_fetch",
        json!({"url": site.url("/logo.png")}),
    );
    assert_exit(&o, 1);
    has(&stderr(&o), "is `image/png`, which web_fetch does not read");
}

#[test]
fn a_redirect_is_followed_only_to_a_granted_origin() {
    // Nothing may reach this port: it is not granted.
    let elsewhere = TcpListener::bind("127.0.0.1:0").expect("bind");
    elsewhere.set_nonblocking(true).expect("nonblocking");
    let ungranted = elsewhere.local_addr().expect("addr").port();
    let target = Site::start(|_| page("text/html", "<h1>Arrived</h1>"));
    let target_url = target.url("/landing");
    let start = Site::start(move |path| match path {
        "/away" => redirect(format!("http://127.0.0.1:{ungranted}/steal")),
        _ => redirect(target_url.clone()),
    });
    let sb = granted(&[origin(&start), origin(&target)]);
    let cli = Cli::new();

    let o = tool_call(&cli, &sb, "web_fetch", json!({"url": start.url("/away")}));
    assert_exit(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "redirected to http://127.0.0.1:{ungranted}/steal, whose origin \
             http://127.0.0.1:{ungranted} is not granted to web-fetch; the redirect was not followed"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "add \"http://127.0.0.1:{ungranted}\" to grants.net in [plugins.web-fetch]"
        )),
        "{err}"
    );
    match elsewhere.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the ungranted port was reached: {other:?}"),
    }

    let o = tool_call(&cli, &sb, "web_fetch", json!({"url": start.url("/hop")}));
    assert_exit(&o, 0);
    let text = stdout(&o);
    has(&text, format!("URL: {}", target.url("/landing")));
    has(&text, "# Arrived");
}

#[test]
fn no_origin_is_granted_by_default() {
    let site = Site::start(|_| page("text/plain", "hello"));
    let (sb, cli) = workspace_and_cli();
    let o = tool_call(&cli, &sb, "web_fetch", json!({"url": site.url("/")}));
    assert_exit(&o, 1);
    let want = format!(
        "http://127.0.0.1:{} is not granted to web-fetch, so {} was not fetched; to allow it, add \
         \"http://127.0.0.1:{}\" to grants.net in [plugins.web-fetch] of corral.toml",
        site.port,
        site.url("/"),
        site.port
    );
    has(&stderr(&o), &want);
    assert!(site.seen().is_empty());
}

#[test]
fn an_endless_body_is_cut_with_a_note_and_read_no_further() {
    let site = Site::start(|_| Page {
        status: 200,
        headers: vec![],
        body: Body::Endless,
    });
    let long = "word ".repeat(40_000);
    let text_site = Site::start(move |_| page("text/plain", &long));
    let sb = granted(&[origin(&site), origin(&text_site)]);
    let cli = Cli::new();

    let o = tool_call(&cli, &sb, "web_fetch", json!({"url": site.url("/big")}));
    assert_exit(&o, 0);
    let text = stdout(&o);
    assert!(
        text.contains("[the body was cut: only its first 2097152 bytes were read"),
        "{}",
        tail(&text, 600)
    );
    // The plugin stopped reading at its cap: the server could push only
    // what the cap and the socket buffers hold, not the 256 MiB it offered.
    let written = site.written.load(Ordering::Relaxed);
    assert!(written < 32 << 20, "the server wrote {written} bytes");

    let o = tool_call(
        &cli,
        &sb,
        "web_fetch",
        json!({"url": text_site.url("/long.txt"), "max_chars": 1000}),
    );
    assert_exit(&o, 0);
    let text = stdout(&o);
    has(
        &text,
        "[the text was cut: showing the first 1000 of 200000 characters",
    );
    assert!(text.len() < 2000, "{} bytes", text.len());
}

#[test]
fn a_fetched_page_is_labelled_untrusted_in_the_session() {
    let site = Site::start(|_| page("text/html", ARTICLE));
    let sb = Sandbox::new();
    sb.write(".gitignore", "*.cassette.json\n");
    sb.write(
        "corral.toml",
        &format!(
            "[policy]\nmode = \"auto-edit\"\nallow = [\"web_fetch\"]\n\n\
             [plugins.web-fetch]\nsource = \"builtin:web-fetch\"\ngrants.net = [{:?}]\n\n\
             [plugins.replay]\nsource = \"builtin:replay\"\n\
             grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
             config = {{ cassette = \"guard.cassette.json\" }}\n",
            origin(&site)
        ),
    );
    crate::support::guard::cassette(
        &sb,
        &[
            call_turn("w1", "web_fetch", json!({"url": site.url("/notes")})),
            answer_turn("Read it."),
        ],
    );
    let cli = Cli::new();
    let o = cli.run(
        &sb.ws(),
        &["run", "--provider", "replay", "--json", "Read the notes"],
    );
    assert_exit(&o, 0);
    let events = events(&o);
    let end = find(&events, "tool_call_end", "w1");
    assert_eq!(
        labels(end),
        vec![label("untrusted", &origin(&site))],
        "{}",
        printed(&o)
    );
    assert!(
        end["outcome"]["content"]
            .as_str()
            .is_some_and(|c| c.contains("# Release notes")),
        "{end}"
    );
}

const SEARCH_KEY: &str = "searx-key-5d1e";

#[test]
fn web_search_lists_results_and_only_the_server_sees_the_key() {
    let site = Site::start(|target| {
        let results = json!({"query": "rust wasm", "results": [
            {"title": "The Rust book", "url": "https://doc.rust-lang.org/book/", "content": "Learn Rust."},
            {"title": "wasmtime", "url": "https://wasmtime.dev/", "content": "A runtime for WebAssembly."}
        ]});
        if target.starts_with("/search?") {
            page("application/json", &results.to_string())
        } else {
            Page {
                status: 404,
                headers: vec![],
                body: Body::Text("not found".into()),
            }
        }
    });
    let sb = Sandbox::new();
    let o = origin(&site);
    sb.write(
        "corral.toml",
        &format!(
            "[plugins.web-search]\nsource = \"builtin:web-search\"\ngrants.net = [{o:?}]\n\
             grants.secrets = [{{ origin = {o:?}, header = \"authorization\", value = \"Bearer ${{env:TEST_SEARCH_KEY}}\" }}]\n\
             config = {{ base_url = {o:?} }}\n"
        ),
    );
    let cli = Cli::new();
    let out = cli.run_env(
        &sb.ws(),
        &[
            "tool",
            "call",
            "web_search",
            "--json",
            "--args",
            &json!({"query": "rust wasm"}).to_string(),
        ],
        &[("TEST_SEARCH_KEY", SEARCH_KEY)],
    );
    assert_exit(&out, 0);
    let text = stdout(&out);
    has_all(&text, &["1. The Rust book", "https://wasmtime.dev/"]);
    lacks(&printed(&out), SEARCH_KEY);

    let seen = site.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].target, "/search?q=rust+wasm&format=json");
    let auth: Vec<&str> = seen[0]
        .headers
        .iter()
        .filter(|(k, _)| k == "authorization")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(auth, [format!("Bearer {SEARCH_KEY}")]);
}

// ---- a new origin asks through the policy unless granted ----

/// A workspace where the policy allows `web_fetch` (and the same plugin
/// under a second name, `two_web_fetch`) outright, so that only an
/// origin outside `grants.net` asks; `granted` is web-fetch's grant.
fn asking(granted: &[String], mode: &str, turns: &[serde_json::Value]) -> Sandbox {
    let sb = Sandbox::new();
    sb.write(".gitignore", "*.cassette.json\n");
    sb.write(
        "corral.toml",
        &format!(
            "[policy]\nmode = {mode:?}\nallow = [\"web_fetch\", \"two_web_fetch\"]\n\n\
             [plugins.web-fetch]\nsource = \"builtin:web-fetch\"\ngrants.net = {granted:?}\n\n\
             [plugins.two]\nsource = \"builtin:web-fetch\"\ntool_prefix = \"two_\"\n\n\
             [plugins.replay]\nsource = \"builtin:replay\"\n\
             grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
             config = {{ cassette = \"guard.cassette.json\" }}\n"
        ),
    );
    crate::support::guard::cassette(&sb, turns);
    sb
}

/// `corral run --json --approvals stdin`: each approval request is
/// answered by `answer` (the request, with the model's call id); `check`
/// runs before each answer, while the call waits. The events, with model
/// ids.
fn run_answering(
    cli: &Cli,
    sb: &Sandbox,
    answer: impl Fn(&serde_json::Value) -> serde_json::Value,
    check: impl Fn(&str),
) -> Vec<serde_json::Value> {
    let child = crate::support::run::replaying(cli, sb, "Fetch the pages");
    crate::support::run::answer_approvals(child, |event| {
        check(event["call"]["model_id"].as_str().unwrap_or_default());
        answer(event)
    })
}

fn content(end: &serde_json::Value) -> String {
    end["outcome"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn an_ungranted_origin_asks_and_an_approval_widens_that_call_only() {
    let site = Site::start(|target| page("text/plain", &format!("page {target}")));
    let url = |p: &str| site.url(p);
    let turns = [
        call_turn("w1", "web_fetch", json!({"url": url("/one")})),
        call_turn("w2", "web_fetch", json!({"url": url("/two")})),
        call_turn("w3", "web_fetch", json!({"url": url("/three")})),
        call_turn("w4", "web_fetch", json!({"url": url("/four")})),
        call_turn("w5", "two_web_fetch", json!({"url": url("/five")})),
        answer_turn("Fetched."),
    ];
    let sb = asking(&[], "ask", &turns);
    let cli = Cli::new();
    let hits = |n: usize| {
        let seen = site.seen();
        assert_eq!(seen.len(), n, "{seen:?}");
    };
    let events = run_answering(
        &cli,
        &sb,
        |event| match event["call"]["model_id"].as_str() {
            Some("w1") => json!({"decision": "approve"}),
            Some("w2") => json!({"decision": "deny"}),
            Some("w3") => json!({"decision": "approve_for_session"}),
            Some("w5") => json!({"decision": "deny"}),
            other => panic!("asked about {other:?}: {event}"),
        },
        // Nothing is sent while a call waits for its answer.
        |id| match id {
            "w1" => hits(0),
            "w2" | "w3" => hits(1),
            "w5" => hits(3),
            other => panic!("asked about {other}"),
        },
    );
    let o = origin(&site);
    let asked = find(&events, "approval_requested", "w1");
    let reason = asked["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!(
            "`web_fetch` would reach {o}, which grants.net of [plugins.web-fetch] does not name"
        )),
        "{reason}"
    );
    assert_eq!(
        asked["session_covers"],
        format!("every web_fetch call, and web-fetch reaching {o}")
    );
    assert!(content(find(&events, "tool_call_end", "w1")).contains("page /one"));
    // Approved once: the next call to the same origin asks again, and a
    // denial sends nothing.
    let denied = content(find(&events, "tool_call_end", "w2"));
    assert!(
        denied.contains(&format!(
            "add \"{o}\" to grants.net in [plugins.web-fetch] of corral.toml"
        )),
        "{denied}"
    );
    assert!(content(find(&events, "tool_call_end", "w3")).contains("page /three"));
    // Approved for the session: no prompt for web-fetch's next call…
    assert!(
        !events
            .iter()
            .any(|e| e["type"] == "approval_requested" && e["call"]["id"] == "w4"),
        "{events:#?}"
    );
    assert_eq!(
        find(&events, "permission", "w4")["decision"],
        "allow",
        "{events:#?}"
    );
    assert!(content(find(&events, "tool_call_end", "w4")).contains("page /four"));
    // …but never for another plugin.
    find(&events, "approval_requested", "w5");
    let targets: Vec<String> = site.seen().into_iter().map(|s| s.target).collect();
    assert_eq!(targets, ["/one", "/three", "/four"]);
}

#[test]
fn a_granted_origin_runs_unasked_and_an_approval_does_not_cover_a_redirect() {
    // Nothing may reach this port: it is neither granted nor approved.
    let elsewhere = TcpListener::bind("127.0.0.1:0").expect("bind");
    elsewhere.set_nonblocking(true).expect("nonblocking");
    let ungranted = elsewhere.local_addr().expect("addr").port();
    let granted_site = Site::start(|_| page("text/plain", "granted page"));
    let asked_site = Site::start(move |_| redirect(format!("http://127.0.0.1:{ungranted}/steal")));
    let turns = [
        call_turn("g1", "web_fetch", json!({"url": granted_site.url("/")})),
        call_turn("r1", "web_fetch", json!({"url": asked_site.url("/away")})),
        answer_turn("Done."),
    ];
    let sb = asking(&[origin(&granted_site)], "ask", &turns);
    let cli = Cli::new();
    let events = run_answering(
        &cli,
        &sb,
        |event| {
            assert_eq!(event["call"]["model_id"], "r1", "{event}");
            json!({"decision": "approve"})
        },
        |_| {},
    );
    assert!(content(find(&events, "tool_call_end", "g1")).contains("granted page"));
    let r1 = content(find(&events, "tool_call_end", "r1"));
    assert!(
        r1.contains(&format!(
            "redirected to http://127.0.0.1:{ungranted}/steal, whose origin http://127.0.0.1:{ungranted} is not granted"
        )),
        "{r1}"
    );
    assert_eq!(asked_site.seen().len(), 1);
    match elsewhere.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the redirect's origin was reached: {other:?}"),
    }
}

#[test]
fn without_anyone_to_ask_an_ungranted_origin_is_refused_with_how_to_grant_it() {
    let site = Site::start(|_| page("text/plain", "nobody should read this"));
    let o = origin(&site);
    for mode in ["ask", "read-only"] {
        let sb = asking(
            &[],
            mode,
            &[
                call_turn("w1", "web_fetch", json!({"url": site.url("/")})),
                answer_turn("Could not."),
            ],
        );
        let cli = Cli::new();
        let events = replay_events(&cli, &sb, "Fetch it");
        let end = content(find(&events, "tool_call_end", "w1"));
        assert!(
            end.contains(&format!(
                "{o} is not granted to web-fetch: to allow it without asking, add \"{o}\" to grants.net in [plugins.web-fetch] of corral.toml"
            )),
            "{mode}: {end}"
        );
        assert!(site.seen().is_empty(), "{mode}: the site was reached");
    }
}
