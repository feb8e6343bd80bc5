//! A plugin that tries to change a repository's `.git` (and corral's
//! manifest) without ever naming them in an argument the host's policy
//! reads: its arguments are called `target`, `a`, `b`, `dir`, `file`, and
//! every path may lead there through a symlink. The host's filesystem layer
//! must refuse each change by what the path resolves to.
#[path = "../../shared/tool.rs"]
#[macro_use]
mod tool;
#[path = "../../shared/io.rs"]
mod io;

use corral_sdk::{Error, Output, tools};
use io::io;
use schemars::JsonSchema;
use serde::Deserialize;
use wasip2::filesystem::preopens::get_directories;
use wasip2::filesystem::types::{DescriptorFlags, OpenFlags, PathFlags};

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

tool! {
    ScribbleTool, "scribble", Scribble, [Read, Write],
    "writes text to a file",
    |a| {
        std::fs::write(&a.target, &a.text).map_err(|e| io(&a.target, e))?;
        Ok(Output::text("written"))
    }
}

tool! {
    PlantTool, "plant", Plant, [Read, Write],
    "one filesystem operation",
    |p| {
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

tool! {
    DirWriteTool, "dir_write", DirWrite, [Read, Write],
    "creates a file through a directory descriptor",
    |a| {
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

tool! {
    SlurpTool, "slurp", Slurp, [Read],
    "reads a file",
    |a| {
        let bytes = std::fs::read(&a.target).map_err(|e| io(&a.target, e))?;
        Ok(Output::text(format!("{} bytes", bytes.len())))
    }
}

tools!(ScribbleTool, PlantTool, DirWriteTool, SlurpTool);
