//! Settings everywhere, through the binary: `--profile` and `-c` on the
//! interactive UI, on `resume` into it and across `/new`; the
//! `OPENAI_BASE_URL` error's snippet leading to a working setup; and config
//! errors that name the file (and line) to edit.
//!
//! Each test failed before its fix; the comment on each says how.

use crate::support::mock::{MockServer, Reply, openai_sse};
use crate::support::output::assert_exit;
use crate::support::output::{stderr, stdout};
use crate::support::text::{has, lacks};
use crate::support::tui::{Pane, quote, ui_command};
use crate::*;

/// Appends `text` to the user's config of `cli`.
fn user_config(cli: &Cli, text: &str) -> PathBuf {
    let file = cli.home.path().join("config/corral/corral.toml");
    let old = std::fs::read_to_string(&file).unwrap_or_default();
    std::fs::create_dir_all(file.parent().expect("dir")).expect("config dir");
    std::fs::write(&file, format!("{old}\n{text}")).expect("user config");
    file
}

// Before: `corral --profile demo` and `corral -c k=v` were refused ("apply
// only to the interactive UI" before a subcommand, and the UI had no such
// flags); `resume --last -c ... --profile ...` opened the UI without them;
// `/new` dropped them.
#[test]
fn the_ui_takes_profile_and_overrides_and_keeps_them() {
    let (sb, cli) = workspace_and_cli();
    user_config(
        &cli,
        "[profiles.demo]\nprovider = \"replay\"\nmodel = \"profiled-model\"\n",
    );
    let ws = format!("--workspace {}", quote(&sb.ws()));
    let base = ui_command(&cli, &sb.ws(), "echo CORRAL-EXIT=$?; sleep 600");
    let command = base.replace(&ws, &format!("--profile demo -c mode=auto-edit {ws}"));
    let Some(pane) = Pane::start(&command) else {
        return;
    };
    let screen = pane.wait_for("ask anything");
    let screen = pane.wait(&format!("the profile's model in {screen}"), |s| {
        s.contains("replay/profiled-model") && s.contains("auto-edit")
    });
    lacks(&screen, "error");
    pane.submit("What is this project?");
    pane.wait_for("This is corral");
    pane.submit("/new");
    pane.wait("a new session with the same settings", |s| {
        !s.contains("This is corral")
            && s.contains("replay/profiled-model")
            && s.contains("auto-edit")
    });
    pane.press("C-d");
    let screen = pane.wait_for("CORRAL-EXIT=");
    has(&screen, "CORRAL-EXIT=0");
    drop(pane);

    // `resume --last` into the UI, with its own -c over the profile.
    let resume = base.replace(
        &ws,
        &format!("resume --last -c model=resumed-model --profile demo {ws}"),
    );
    let pane = Pane::start(&resume).expect("tmux");
    let screen = pane.wait_for("resumed session");
    pane.wait(&format!("the -c model in {screen}"), |s| {
        s.contains("replay/resumed-model")
    });
    pane.press("C-d");
    pane.wait_for("CORRAL-EXIT=0");
}

// Before: the snippet the error suggested replaced the built-in entry
// without a model, so following it led to a second error (no model).
#[test]
fn the_base_url_error_snippet_leads_to_a_working_setup() {
    let mock = MockServer::start(|_, _| Reply::Sse(openai_sse("From the local server.", &[])));
    let (sb, cli) = workspace_and_cli();
    let url = format!("http://127.0.0.1:{}/v1", mock.port);
    let env = [
        ("OPENAI_BASE_URL", url.as_str()),
        ("OPENAI_API_KEY", "k-local"),
    ];
    let o = cli.run_env(&sb.ws(), &["run", "--provider", "openai", "hi"], &env);
    assert_exit(&o, 2);
    let err = stderr(&o);
    let file = cli.home.path().join("config/corral/corral.toml");
    has(&err, format!("add this to {}", file.display()));
    // The snippet, as the user copies it into that file.
    let snippet: String = err
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("[plugins.openai]"))
        .take_while(|l| !l.trim_start().starts_with("or unset"))
        .map(|l| format!("{}\n", l.trim()))
        .collect();
    assert!(snippet.contains("config = { model"), "{err}");
    user_config(&cli, &snippet);
    let o = cli.run_env(&sb.ws(), &["run", "--provider", "openai", "hi"], &env);
    assert!(o.status.success(), "{snippet}\n{}", stderr(&o));
    assert!(stdout(&o).contains("From the local server."));
    let requests = mock.requests();
    assert_eq!(requests[0].header("authorization"), Some("Bearer k-local"));
}

// Before: a TOML error in the user's file, read for `--profile`, named the
// file without a line; the no-provider error did not say where the config
// file is.
#[test]
fn config_errors_name_the_file_and_line() {
    let (sb, cli) = workspace_and_cli();
    let file = user_config(&cli, "[profiles.x]\nmodel = = \"m\"\n");
    let o = cli.run(&sb.ws(), &["run", "--profile", "x", "hi"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    // Cli::new's file has two lines, and a blank one is added before ours.
    assert!(err.contains(&format!("{}:5:", file.display())), "{err}");

    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["run", "hi"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    has(&err, "no model provider is configured");
    let file = cli.home.path().join("config/corral/corral.toml");
    has(&err, file.display().to_string());
}
