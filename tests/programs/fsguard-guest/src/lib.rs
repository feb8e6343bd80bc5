//! A plugin that tries to change a repository's `.git` (and corral's
//! manifest) without ever naming them in an argument the host's policy
//! reads: its arguments are called `target`, `a`, `b`, `dir`, `file`, and
//! every path may lead there through a symlink. The host's filesystem layer
//! must refuse each change by what the path resolves to.
use corral_sdk::{Effect, Error, Output, Result, Tool, tools};
use schemars::JsonSchema;
use serde::Deserialize;
use wasip2::filesystem::preopens::get_directories;
use wasip2::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};

fn io(what: &str, e: std::io::Error) -> Error {
    Error::Failed(format!("{what}: {:?}: {e}", e.kind()))
}

/// Arguments of `scribble`.
#[derive(Deserialize, JsonSchema)]
struct Scribble {
    target: String,
    text: String,
}

/// Arguments of `plant`: one operation on one or two paths.
#[derive(Deserialize, JsonSchema)]
struct Plant {
    op: String,
    a: String,
    #[serde(default)]
    b: String,
}

/// Arguments of `dir_write`: a file created through a directory
/// descriptor the plugin opened itself.
#[derive(Deserialize, JsonSchema)]
struct DirWrite {
    dir: String,
    file: String,
    text: String,
}

/// Arguments of `slurp`.
#[derive(Deserialize, JsonSchema)]
struct Slurp {
    target: String,
}

struct ScribbleTool;
impl Tool for ScribbleTool {
    type Args = Scribble;
    const NAME: &'static str = "scribble";
    const DESCRIPTION: &'static str = "writes text to a file";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Write];
    fn run(a: Scribble) -> Result<Output> {
        std::fs::write(&a.target, &a.text).map_err(|e| io(&a.target, e))?;
        Ok(Output::text("written"))
    }
}

struct PlantTool;
impl Tool for PlantTool {
    type Args = Plant;
    const NAME: &'static str = "plant";
    const DESCRIPTION: &'static str = "one filesystem operation";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Write];
    fn run(p: Plant) -> Result<Output> {
        let (a, b) = (&p.a, &p.b);
        let r = match p.op.as_str() {
            "append" => std::fs::OpenOptions::new()
                .append(true)
                .open(a)
                .and_then(|mut f| std::io::Write::write_all(&mut f, b.as_bytes())),
            "mkdir" => std::fs::create_dir(a),
            "rmdir" => std::fs::remove_dir(a),
            "remove" => std::fs::remove_file(a),
            "rename" => std::fs::rename(a, b),
            "link" => std::fs::hard_link(a, b),
            "symlink" => {
                // std's symlink for WASI is unstable; ask WASI directly.
                let (root, _) = get_directories()
                    .into_iter()
                    .next()
                    .ok_or_else(|| Error::Failed("no preopened directory".into()))?;
                root.symlink_at(a, b)
                    .map_err(|e| Error::Failed(format!("symlink {a} {b}: {e:?}")))?;
                Ok(())
            }
            other => return Err(Error::InvalidArguments(format!("unknown op {other}"))),
        };
        r.map_err(|e| io(&format!("{} {a} {b}", p.op), e))?;
        Ok(Output::text("done"))
    }
}

struct DirWriteTool;
impl Tool for DirWriteTool {
    type Args = DirWrite;
    const NAME: &'static str = "dir_write";
    const DESCRIPTION: &'static str = "creates a file through a directory descriptor";
    const EFFECTS: &'static [Effect] = &[Effect::Read, Effect::Write];
    fn run(a: DirWrite) -> Result<Output> {
        let (root, _) = get_directories()
            .into_iter()
            .next()
            .ok_or_else(|| Error::Failed("no preopened directory".into()))?;
        let dir = root
            .open_at(
                PathFlags::SYMLINK_FOLLOW,
                &a.dir,
                OpenFlags::DIRECTORY,
                DescriptorFlags::READ | DescriptorFlags::MUTATE_DIRECTORY,
            )
            .map_err(|e| Error::Failed(format!("open {}: {e:?}", a.dir)))?;
        let file = dir
            .open_at(
                PathFlags::empty(),
                &a.file,
                OpenFlags::CREATE | OpenFlags::TRUNCATE,
                DescriptorFlags::WRITE,
            )
            .map_err(|e| Error::Failed(format!("create {}: {e:?}", a.file)))?;
        file.write(a.text.as_bytes(), 0)
            .map_err(|e| Error::Failed(format!("write {}: {e:?}", a.file)))?;
        Ok(Output::text("written"))
    }
}

struct SlurpTool;
impl Tool for SlurpTool {
    type Args = Slurp;
    const NAME: &'static str = "slurp";
    const DESCRIPTION: &'static str = "reads a file";
    const EFFECTS: &'static [Effect] = &[Effect::Read];
    fn run(a: Slurp) -> Result<Output> {
        let bytes = std::fs::read(&a.target).map_err(|e| io(&a.target, e))?;
        Ok(Output::text(format!("{} bytes", bytes.len())))
    }
}

tools!(ScribbleTool, PlantTool, DirWriteTool, SlurpTool);
