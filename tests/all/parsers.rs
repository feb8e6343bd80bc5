//! One parser per language: the permission policy judges the argv the
//! `shell` plugin runs. Each command line goes to the policy's splitter
//! (`corral::policy::shell_split`, what its rules match) and through the
//! real binary to `run_command` (`corral tool call`), which runs
//! `printf '[%s]\n' …` so that every argument it received comes back
//! bracketed; the two must agree word for word, and refuse the same lines.
//! Then `corral run` shows a deny rule holding on what actually runs.

use crate::support::mock::{Call, argv_call, command_call, openai_tool_result};
use crate::support::model::calls_then;
use crate::support::output::assert_exit;
use crate::support::run::argv;
use crate::*;
use serde_json::{Value, json};

/// How both sides must read a line.
#[derive(Debug)]
enum Read {
    /// These words after `printf '[%s]\n'`, on both sides.
    Words(&'static [&'static str]),
    /// Shell syntax: the policy keeps its words as text (a deny rule still
    /// sees them), the plugin runs it only through `sh -c`, which is not
    /// granted here.
    Shell,
    /// Incomplete: no words for the policy, nothing run by the plugin.
    Refused,
}

/// A workspace whose `shell` plugin may run `printf` with any arguments,
/// and nothing else (no `sh`).
fn printf_workspace(extra: &str) -> Sandbox {
    Sandbox::with_manifest(&format!(
        "[plugins.shell]\nsource = \"builtin:shell\"\n\
             grants.exec = [{{ program = \"printf\", args = [\"**\"] }}]\n{extra}"
    ))
}

/// What `run_command` answered for `line`: `Ok(stdout)` when the program
/// ran, `Err(message)` otherwise.
fn plugin_run(cli: &Cli, sb: &Sandbox, line: &str) -> Result<String, String> {
    let args = json!({ "command": line }).to_string();
    let o = cli.run(
        &sb.ws(),
        &["tool", "call", "run_command", "--args", &args, "--json"],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "{line:?}: not JSON ({e}): {text}{}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    match (&v["ok"]["content"], v["ok"]["is_error"].as_bool()) {
        (Value::String(content), Some(false)) => Ok(content
            .split_once("--- stdout ---\n")
            .map(|(_, out)| out.to_owned())
            .unwrap_or_default()),
        (Value::String(content), _) => Err(content.clone()),
        _ => Err(v["error"].to_string()),
    }
}

/// What `printf '[%s]\n' words…` prints.
fn bracketed(words: &[String]) -> String {
    words.iter().map(|w| format!("[{w}]\n")).collect()
}

#[test]
fn the_policy_and_the_shell_plugin_read_every_command_line_alike() {
    use Read::{Refused, Shell, Words};
    let table: &[(&str, Read)] = &[
        // Backslash-newline is a line continuation, unquoted and in double
        // quotes; single quotes keep it.
        ("a\\\nb", Words(&["ab"])),
        ("\"a\\\nb\"", Words(&["ab"])),
        ("'a\\\nb'", Words(&["a\\\nb"])),
        ("a \\\n b", Words(&["a", "b"])),
        ("x\\\n", Words(&["x"])),
        // Quotes and escapes.
        ("a\\ b 'c d' \"e f\"", Words(&["a b", "c d", "e f"])),
        (
            r#""q \"x\" \\ \$ \y" 'it'\''s'"#,
            Words(&[r#"q "x" \ $ \y"#, "it's"]),
        ),
        ("\"\" ''", Words(&["", ""])),
        ("a\"b c\"'d e'f", Words(&["ab cd ef"])),
        // `--` and options are plain words.
        ("-- -x --y=z", Words(&["--", "-x", "--y=z"])),
        // Glob characters inside a word, quoted or escaped stay literal.
        (
            "src/*.rs a=b '*.rs' \\*.rs \\~ \\#x",
            Words(&["src/*.rs", "a=b", "*.rs", "*.rs", "~", "#x"]),
        ),
        (
            "'a;b' \"c|d\" 'e&&f' \\; a#b",
            Words(&["a;b", "c|d", "e&&f", ";", "a#b"]),
        ),
        // Shell syntax: only a shell carries it out.
        ("*.rs", Shell),
        ("a; printf x", Shell),
        ("a && printf x", Shell),
        ("a | wc", Shell),
        ("a > f", Shell),
        ("$HOME", Shell),
        ("\"$HOME\"", Shell),
        ("`id`", Shell),
        ("~/x", Shell),
        ("a # a comment", Shell),
        ("a\nprintf x", Shell),
        // Incomplete lines: a lone trailing backslash, an open quote.
        ("ab\\", Refused),
        ("a \\", Refused),
        ("'open", Refused),
        ("\"open", Refused),
        ("\"open\\\"", Refused),
    ];
    let sb = printf_workspace("");
    let cli = Cli::new();
    let mut wrong = Vec::new();
    for (rest, read) in table {
        let line = format!("printf '[%s]\\n' {rest}");
        let policy = corral_policy::shell_split(&line);
        let plugin = plugin_run(&cli, &sb, &line);
        let prefixed = |words: &[&str]| {
            ["printf", "[%s]\\n"]
                .into_iter()
                .chain(words.iter().copied())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        let ok = match read {
            Words(words) => {
                let expected = prefixed(words);
                policy.as_ref() == Some(&expected)
                    && plugin.as_ref().ok() == Some(&bracketed(&expected[2..]))
            }
            Shell => {
                policy.is_some()
                    && plugin
                        .as_ref()
                        .is_err_and(|e| e.contains("uses shell syntax") && e.contains("`sh`"))
            }
            Refused => {
                policy.is_none()
                    && plugin.as_ref().is_err_and(|e| {
                        e.contains("the command line is incomplete") && e.contains("not run")
                    })
            }
        };
        if !ok {
            wrong.push(format!(
                "{line:?} should be {read:?}\n  policy: {policy:?}\n  plugin: {plugin:?}"
            ));
        }
    }
    // The empty line: no words on either side, and nothing runs.
    assert_eq!(corral_policy::shell_split(""), Some(vec![]));
    let empty = plugin_run(&cli, &sb, "");
    assert!(
        empty
            .as_ref()
            .is_err_and(|e| e.contains("the command is empty")),
        "{empty:?}"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Through `corral run`: a deny rule about an argv holds however the line
/// spells it, because the policy judges the argv the plugin runs. A trailing
/// backslash used to hide the line from the rule (the policy saw an
/// unbalanced line) while the plugin ran it; a backslash-newline ran as a
/// newline inside the word the policy had read without one.
#[test]
fn a_deny_rule_judges_the_argv_that_runs() {
    const KEY: (&str, &str) = ("TEST_OPENAI_KEY", "sk-parsers-test");
    let calls: Vec<Call> = vec![
        command_call("c1", "printf '[%s]\\n' secret"),
        command_call("c2", "printf '[%s]\\n' secret\\"),
        command_call("c3", "printf '[%s]\\n' sec\\\nret"),
        command_call("c4", "printf '[%s]\\n' \"sec\\\nret\""),
        command_call("c5", "printf '[%s]\\n' pub\\\nlic"),
        argv_call("c6", &["printf", "[%s]\n", "secret"]),
    ];
    let reply = calls.clone();
    let mock = calls_then("Printing.", reply, "Done.");
    let sb = Sandbox::with_manifest(&crate::support::manifest::openai_project(
        mock.port,
        "[plugins.shell]\nsource = \"builtin:shell\"\n\
             grants.exec = [{ program = \"printf\", args = [\"**\"] }]\n\n\
             [policy]\ndeny = [\"run_command(printf * secret)\"]\n",
    ));
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &argv("run --provider openai --mode full-auto print"),
        &[KEY],
    );
    assert_exit(&o, 0);
    let req = &mock.requests()[1];
    let result = |id: &str| openai_tool_result(req, id);
    let denied = "denied by the permission policy: deny rule \"run_command(printf * secret)\"";
    for id in ["c1", "c3", "c4", "c6"] {
        assert!(result(id).contains(denied), "{id}: {}", result(id));
    }
    let c2 = result("c2");
    assert!(
        c2.contains("the command line is incomplete") && !c2.contains("[secret"),
        "c2: {c2}"
    );
    let c5 = result("c5");
    assert!(c5.contains("[public]\n"), "c5: {c5}");
}
