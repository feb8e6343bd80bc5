//! Every message whole and in words, through the binary: the error paths
//! users met with a library's raw text end in what happened, why and the
//! fix, never a `Debug` dump, a library type name, `(os error N)` or a
//! backtrace; text mode never cuts the line that carries the fix. Each case
//! printed one of those patterns on the build before this test.

use crate::support::cassette::{answer_turn, calls_turn};
use crate::support::mock::write_call;
use crate::support::output::printed;
use crate::support::text::has;
use crate::*;

/// What no user-facing message may carry.
const RAW: &[&str] = &[
    "os error",
    "bad magic number",
    "0x0,",
    "error sending request for url",
    "Transport [",
    "rmcp::",
    "backtrace",
    "panicked",
];

fn assert_in_words(what: &str, out: &str) {
    for raw in RAW {
        assert!(!out.contains(raw), "{what}: `{raw}` in:\n{out}");
    }
}

#[test]
fn plugin_inspect_of_a_file_that_is_no_component_says_what_it_is() {
    let sb = Sandbox::new();
    sb.write("not.wasm", "hello\n");
    let o = Cli::new().run(&sb.ws(), &["plugin", "inspect", "not.wasm"]);
    let out = printed(&o);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("wasm32-wasip2"), "the fix is named: {out}");
    assert_in_words("inspect", &out);
}

#[test]
fn a_cassette_outside_the_replay_grant_is_named_with_the_fix() {
    let sb = Sandbox::new();
    let outside = sb.outside().join("c.json");
    std::fs::write(&outside, "[]").expect("cassette");
    sb.write(
        "corral.toml",
        &format!(
            "[agent]\nprovider = \"replay\"\n[plugins.replay]\nsource = \"builtin:replay\"\n\
             grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
             config = {{ cassette = {:?} }}\n",
            outside.display().to_string()
        ),
    );
    let o = Cli::new().run(&sb.ws(), &["run", "hi"]);
    let out = printed(&o);
    has(&out, "put it inside the workspace");
    assert_in_words("cassette", &out);
}

#[test]
fn a_download_that_cannot_connect_says_why() {
    let sb = Sandbox::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let url = format!("http://127.0.0.1:{port}/x.wasm");
    let pin = "0".repeat(64);
    let o = Cli::new().run(
        &sb.ws(),
        &["plugin", "add", &url, "--sha256", &pin, "--yes"],
    );
    let out = printed(&o);
    assert!(!o.status.success(), "{out}");
    has(&out, "connection refused");
    assert_in_words("download", &out);
}

#[test]
fn a_toml_syntax_error_names_the_file_and_line() {
    let (sb, cli) = workspace_and_cli();
    let user = cli.home.path().join("config/corral/corral.toml");
    std::fs::write(&user, "[trust]\nproject_may_loosen = true\nmodel = \n").expect("toml");
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    let out = printed(&o);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains(&format!("{}:3:", user.display())), "{out}");
    assert_in_words("toml", &out);
}

#[test]
fn a_denial_in_text_mode_is_shown_whole_with_its_fix() {
    let sb = Sandbox::with_manifest(
        "[agent]\nprovider = \"replay\"\n[plugins.replay]\nsource = \"builtin:replay\"\n\
         grants.fs = [{ path = \".\", access = \"ro\" }]\nconfig = { cassette = \"c.cassette.json\" }\n",
    );
    crate::support::cassette::write(
        &sb,
        "c.cassette.json",
        &[
            calls_turn(&[write_call(
                "w1",
                "a-file-with-a-rather-long-name-so-that-the-line-is-long.txt",
                "x",
            )]),
            answer_turn("Done."),
        ],
    );
    let o = Cli::new().run(&sb.ws(), &["run", "--mode", "read-only", "write it"]);
    let out = printed(&o);
    let line = out
        .lines()
        .find(|l| l.contains("⎿ error"))
        .unwrap_or_else(|| panic!("no error line in:\n{out}"));
    // The line ends where the policy's message does (it was cut at 100
    // characters, mid-word: "… `write_file` would wri").
    assert!(line.trim_end().ends_with("would write"), "cut: {line}");
    assert_in_words("denial", &out);
}
