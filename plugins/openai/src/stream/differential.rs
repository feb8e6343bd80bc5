//! The one-pass reader against serde, on many generated chunks: seeded
//! random documents of the streamed-chunk shape with everything the reader
//! must get right or decline — escapes, raw and escaped unicode, surrogate
//! pairs and lone halves, numbers of every form, deep nesting, missing,
//! extra, duplicate and escaped fields, values of the wrong type, and
//! broken JSON. Wherever the reader takes a chunk, it must read what serde
//! reads, and the chunk must be one the serde path would treat as plain
//! text (no tool calls, refusal, usage or error); where serde refuses a
//! chunk, the reader must decline it.

use super::{Chunk, fast};

/// Documents per run: about a second in a debug build.
const CASES: usize = 40_000;

/// Writes random JSON of the chunk's shape.
struct Gen {
    rng: fastrand::Rng,
    out: String,
}

impl Gen {
    fn one_in(&mut self, n: u32) -> bool {
        self.rng.u32(0..n) == 0
    }

    fn ws(&mut self) {
        if self.one_in(4) {
            for _ in 0..self.rng.usize(1..3) {
                let c = [' ', '\n', '\r', '\t'][self.rng.usize(0..4)];
                self.out.push(c);
            }
        }
    }

    /// A string literal: plain text, multi-byte characters, every escape,
    /// surrogate pairs, and now and then something serde refuses.
    fn string(&mut self) {
        self.out.push('"');
        for _ in 0..self.rng.usize(0..12) {
            match self.rng.u32(0..20) {
                0 => {
                    let e = ["\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"];
                    self.out.push_str(e[self.rng.usize(0..e.len())]);
                }
                1 => {
                    let c = self.rng.u32(0..0xD800);
                    self.out.push_str(&format!("\\u{c:04x}"));
                }
                2 => {
                    // A surrogate pair, upper- or lower-case hex.
                    let c = self.rng.u32(0x10000..0x110000) - 0x10000;
                    let (hi, lo) = (0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
                    if self.one_in(2) {
                        self.out.push_str(&format!("\\u{hi:04X}\\u{lo:04X}"));
                    } else {
                        self.out.push_str(&format!("\\u{hi:04x}\\u{lo:04x}"));
                    }
                }
                3 => {
                    let c = ['é', '日', '🦀', '–', '\u{7f}', '\u{80}', '\u{ffff}'];
                    self.out.push(c[self.rng.usize(0..c.len())]);
                }
                4 if self.one_in(8) => {
                    // Refused by serde: a lone surrogate, a bad escape, a
                    // raw control character, a short `\u`.
                    let bad = [
                        "\\ud800",
                        "\\udc00x",
                        "\\ud800\\u0041",
                        "\\x",
                        "\t",
                        "\u{1}",
                        "\\u12",
                    ];
                    self.out.push_str(bad[self.rng.usize(0..bad.len())]);
                }
                5 => {
                    // Long enough runs for the eight-byte scan.
                    for _ in 0..self.rng.usize(8..40) {
                        match self.rng.u8(b' '..=b'~') {
                            b'"' | b'\\' => self.out.push('.'),
                            b => self.out.push(char::from(b)),
                        }
                    }
                }
                _ => self.out.push(char::from(self.rng.u8(b'a'..=b'z'))),
            }
        }
        self.out.push('"');
    }

    fn number(&mut self) {
        let forms = [
            "0",
            "1",
            "2",
            "-1",
            "-0",
            "0.0",
            "1.5",
            "1e2",
            "1E+2",
            "-2.5e-3",
            "01",
            "1.",
            "-",
            ".5",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999",
        ];
        let pick = self.rng.usize(0..forms.len());
        self.out.push_str(forms[pick]);
    }

    /// Any value, nested up to `depth` more levels.
    fn value(&mut self, depth: u32) {
        self.ws();
        match self.rng.u32(0..8) {
            0 => self.string(),
            1 => self.number(),
            2 => self
                .out
                .push_str(["true", "false", "null", "tru", "nul"][self.rng.usize(0..5)]),
            3 | 4 if depth > 0 => {
                let n = self.rng.usize(0..4);
                self.out.push('[');
                for i in 0..n {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.value(depth - 1);
                }
                if n > 0 && self.one_in(30) {
                    self.out.push(',');
                }
                self.ws();
                self.out.push(']');
            }
            5 | 6 if depth > 0 => {
                let n = self.rng.usize(0..4);
                let fields: Vec<Field> = (0..n).map(|_| Field::Other).collect();
                self.object(&fields, depth - 1);
            }
            _ => self.out.push_str("null"),
        }
        self.ws();
    }

    /// Nesting around `[]` deep enough to cross either parser's limit.
    fn deep(&mut self) {
        let n = self.rng.usize(90..140);
        self.out.push_str(&"[".repeat(n));
        self.out.push_str(&"]".repeat(n));
    }

    fn key(&mut self, name: &str) {
        self.ws();
        if self.one_in(40) {
            // An escaped key: serde decodes it, the reader declines.
            let mut escaped = String::new();
            for c in name.chars() {
                escaped.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            self.out.push_str(&format!("\"{escaped}\""));
        } else {
            self.out.push_str(&format!("\"{name}\""));
        }
        self.ws();
        self.out.push(':');
    }

    fn object(&mut self, fields: &[Field], depth: u32) {
        self.ws();
        self.out.push('{');
        for (i, field) in fields.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.field(*field, depth);
        }
        self.ws();
        self.out.push('}');
        self.ws();
    }

    fn field(&mut self, field: Field, depth: u32) {
        match field {
            Field::Id => {
                self.key("id");
                self.string_or_else(depth);
            }
            Field::Choices => {
                self.key("choices");
                match self.rng.u32(0..12) {
                    0 => self.out.push_str("null"),
                    1 => self.value(depth),
                    _ => {
                        let n = [0, 1, 1, 1, 1, 2, 3][self.rng.usize(0..7)];
                        self.out.push('[');
                        for i in 0..n {
                            if i > 0 {
                                self.out.push(',');
                            }
                            self.choice(depth);
                        }
                        self.ws();
                        self.out.push(']');
                    }
                }
            }
            Field::Usage | Field::Error => {
                self.key(if field == Field::Usage {
                    "usage"
                } else {
                    "error"
                });
                if self.one_in(3) {
                    self.value(depth);
                } else {
                    self.out.push_str("null");
                }
            }
            Field::Index => {
                self.key("index");
                match self.rng.u32(0..6) {
                    0 => self.number(),
                    1 => self.value(depth),
                    2 => self.out.push('1'),
                    _ => self.out.push('0'),
                }
            }
            Field::Delta => {
                self.key("delta");
                match self.rng.u32(0..10) {
                    0 => self.out.push_str("null"),
                    1 => self.value(depth),
                    _ => {
                        let mut fields = vec![Field::Content];
                        self.extras(
                            &mut fields,
                            &[Field::Refusal, Field::ToolCalls, Field::Role],
                        );
                        self.object(&fields, depth);
                    }
                }
            }
            Field::Finish => {
                self.key("finish_reason");
                self.string_or_else(depth);
            }
            Field::Content => {
                self.key("content");
                self.string_or_else(depth);
            }
            Field::Refusal | Field::ToolCalls => {
                self.key(if field == Field::Refusal {
                    "refusal"
                } else {
                    "tool_calls"
                });
                match self.rng.u32(0..3) {
                    0 => self.value(depth),
                    1 if field == Field::Refusal => self.string(),
                    _ => self.out.push_str("null"),
                }
            }
            Field::Role => {
                self.key("role");
                self.out.push_str("\"assistant\"");
            }
            Field::Other => {
                let names = [
                    "object",
                    "created",
                    "model",
                    "logprobs",
                    "system_fingerprint",
                    "x",
                ];
                let name = names[self.rng.usize(0..names.len())];
                self.key(name);
                if self.one_in(60) {
                    self.deep();
                } else {
                    self.value(depth);
                }
            }
        }
    }

    /// Mostly a string or `null`, sometimes any value.
    fn string_or_else(&mut self, depth: u32) {
        match self.rng.u32(0..8) {
            0 => self.out.push_str("null"),
            1 => self.value(depth),
            _ => self.string(),
        }
    }

    fn choice(&mut self, depth: u32) {
        let mut fields = vec![Field::Delta];
        self.extras(&mut fields, &[Field::Index, Field::Finish, Field::Other]);
        self.object(&fields, depth);
    }

    /// Adds some of `optional` to `fields`, sometimes drops one, sometimes
    /// repeats one, and shuffles them.
    fn extras(&mut self, fields: &mut Vec<Field>, optional: &[Field]) {
        for &f in optional {
            if !self.one_in(3) {
                fields.push(f);
            }
        }
        if self.one_in(6) {
            fields.remove(self.rng.usize(0..fields.len()));
        }
        if !fields.is_empty() && self.one_in(25) {
            let again = fields[self.rng.usize(0..fields.len())];
            fields.push(again);
        }
        self.rng.shuffle(fields);
    }

    /// One whole chunk, maybe broken afterwards.
    fn chunk(&mut self) -> String {
        self.out.clear();
        let mut fields = vec![Field::Choices];
        self.extras(
            &mut fields,
            &[
                Field::Id,
                Field::Other,
                Field::Other,
                Field::Usage,
                Field::Error,
            ],
        );
        let depth = self.rng.u32(0..4);
        self.object(&fields, depth);
        let mut doc = std::mem::take(&mut self.out);
        match self.rng.u32(0..40) {
            0 => doc.truncate(doc.floor_char_boundary(self.rng.usize(0..doc.len().max(1)))),
            1 => doc.push_str(["x", "}", ",", " {}", "\u{0}"][self.rng.usize(0..5)]),
            2 => doc = format!("[{doc}]"),
            _ => {}
        }
        doc
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Id,
    Choices,
    Usage,
    Error,
    Index,
    Delta,
    Finish,
    Content,
    Refusal,
    ToolCalls,
    Role,
    Other,
}

/// Checks the reader against serde on one document; returns whether the
/// reader took it.
pub(super) fn agree(data: &str) -> bool {
    let serde: Result<Chunk<'_>, _> = serde_json::from_str(data);
    let Some(fast) = fast::parse(data) else {
        return false;
    };
    let chunk = match serde {
        Ok(chunk) => chunk,
        Err(e) => panic!("the reader took what serde refuses ({e}): {data}"),
    };
    assert_eq!(fast.id, chunk.id, "id of {data}");
    assert!(chunk.error.is_none(), "an error chunk was taken: {data}");
    assert!(chunk.usage.is_none(), "a usage chunk was taken: {data}");
    let choice = chunk
        .choices
        .iter()
        .flatten()
        .find(|c| c.index.unwrap_or(0) == 0);
    assert_eq!(fast.has_choice, choice.is_some(), "choice of {data}");
    if let Some(choice) = choice {
        let delta = choice.delta.as_ref();
        assert_eq!(
            fast.content,
            delta.and_then(|d| d.content.clone()),
            "content of {data}"
        );
        assert_eq!(
            fast.finish_reason,
            choice.finish_reason.clone(),
            "finish of {data}"
        );
        assert!(
            delta.is_none_or(|d| d.refusal.is_none() && d.tool_calls.is_none()),
            "a refusal or tool calls were taken: {data}"
        );
    }
    true
}

#[test]
fn the_reader_agrees_with_serde_on_generated_chunks() {
    let mut generator = Gen {
        rng: fastrand::Rng::with_seed(0x00c0_4a11),
        out: String::new(),
    };
    let (mut taken, mut refused) = (0, 0);
    for _ in 0..CASES {
        let data = generator.chunk();
        if agree(&data) {
            taken += 1;
        } else if serde_json::from_str::<Chunk<'_>>(&data).is_err() {
            refused += 1;
        }
    }
    // The generator must reach both sides often enough to mean something.
    assert!(
        taken > CASES / 20,
        "only {taken} of {CASES} chunks were taken"
    );
    assert!(
        refused > CASES / 20,
        "only {refused} of {CASES} chunks were refused by serde"
    );
}
