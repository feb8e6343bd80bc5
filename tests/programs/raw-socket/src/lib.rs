//! Opens a raw TCP connection (`wasi:sockets`), bypassing HTTP.
#[path = "../../shared/tool.rs"]
#[macro_use]
mod tool;

use corral_sdk::{Error, Output, tools};
use schemars::JsonSchema;
use serde::Deserialize;
use std::io::{Read, Write};

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// `ip:port`
    addr: String,
}

tool! {
    Connect, "tcp_connect", Args, [Network],
    "Connects to addr and sends a line.",
    |args| {
        let mut s = std::net::TcpStream::connect(&args.addr)
            .map_err(|e| Error::Failed(format!("connect {}: {:?}: {e}", args.addr, e.kind())))?;
        s.write_all(b"hello\n")
            .map_err(|e| Error::Failed(e.to_string()))?;
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        Ok(Output::text(
            String::from_utf8_lossy(&buf[..n]).into_owned(),
        ))
    }
}

tools!(Connect);
