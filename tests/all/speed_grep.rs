//! `grep` in the sandbox finds a few literals (`TODO|FIXME`) with one
//! forward `memmem` scan per literal instead of the regex engine's
//! byte-at-a-time automaton (wasm has no Teddy). It must report exactly the
//! lines a plain line-by-line check finds, however the literals are spread:
//! many of one and none of the other, both on one line, at a file's first
//! or last byte, in files read one after another at the same address.

use crate::*;
use serde_json::json;

/// `(path, line number, text)` of each line of each file that holds one of
/// `needles`, in path order: what the search must find.
fn expected(files: &[(String, String)], needles: &[&str]) -> Vec<(String, u64, String)> {
    let mut sorted: Vec<&(String, String)> = files.iter().collect();
    sorted.sort();
    let mut out = Vec::new();
    for (path, text) in sorted {
        for (i, line) in text.lines().enumerate() {
            if needles.iter().any(|n| line.contains(n)) {
                out.push((path.clone(), i as u64 + 1, line.to_owned()));
            }
        }
    }
    out
}

/// The matching lines `corral tool call grep` printed.
fn grep(cli: &Cli, sb: &Sandbox, args: serde_json::Value) -> Vec<(String, u64, String)> {
    let o = cli.run(
        &sb.ws(),
        &["tool", "call", "grep", "--args", &args.to_string()],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
        .lines()
        .map(|l| {
            let mut parts = l.splitn(3, ':');
            let path = parts.next().unwrap_or_default().to_owned();
            let n = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            (path, n, parts.next().unwrap_or_default().to_owned())
        })
        .collect()
}

#[test]
fn grep_of_a_few_literals_finds_every_line_the_regex_does() {
    let sb = Sandbox::new();
    std::fs::remove_file(sb.ws().join("hello.txt")).expect("rm");
    let mut files = Vec::new();
    let filler = "nothing to see on this line at all\n".repeat(40);
    for i in 0..60 {
        let text = match i % 6 {
            // Many of one literal, none of the other.
            0 => format!("{filler}{}", "x TODO y\n".repeat(30)),
            // The other one only, last in the file, without a newline.
            1 => format!("{filler}tail FIXME"),
            // Both on one line, and both glued together.
            2 => format!("TODO and FIXME\n{filler}TODOFIXME\nFIXMETODO\n"),
            // At the first byte, then far apart.
            3 => format!("FIXME first\n{filler}{filler}TODO later\n"),
            // Near misses only.
            4 => format!("{filler}TOD O FIXM E todo fixme\n"),
            _ => filler.clone(),
        };
        let path = format!("d{}/f{i:02}.txt", i % 4);
        sb.write(&path, &text);
        files.push((path, text));
    }
    let cli = Cli::new();
    let want = expected(&files, &["TODO", "FIXME"]);
    assert!(want.len() > 300, "{}", want.len());
    let got = grep(
        &cli,
        &sb,
        json!({"pattern": "TODO|FIXME", "max_results": 100_000}),
    );
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);

    // A class and a literal that is a prefix of a longer one.
    let want = expected(&files, &["Todo", "todo", "FIXM"]);
    let got = grep(
        &cli,
        &sb,
        json!({"pattern": "[Tt]odo|FIXM(E)?", "max_results": 100_000}),
    );
    assert_eq!(got, want);

    // Fixed strings: `|` is a character, found by the regex engine alone.
    sb.write("pipe.txt", "a TODO|FIXME b\nTODO\n");
    let got = grep(
        &cli,
        &sb,
        json!({"pattern": "TODO|FIXME", "fixed_strings": true}),
    );
    assert_eq!(
        got,
        vec![("pipe.txt".to_owned(), 1, "a TODO|FIXME b".to_owned())]
    );
}
