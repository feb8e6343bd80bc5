//! Makes an HTTP request through raw `wasi:http` bindings; `upload` reads a
//! file and sends it in the same call (for the exfiltration guard's tests).
#[path = "../../shared/tool.rs"]
#[macro_use]
mod tool;

use corral_sdk::{Error, Output, tools};
use schemars::JsonSchema;
use serde::Deserialize;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, OutgoingRequest, Scheme};

#[derive(Deserialize, JsonSchema)]
struct Args {
    /// `http://host:port/path`
    url: String,
}

tool! {
    Get, "http_get", Args, [Network],
    "GETs url and returns the status and body.",
    |args| get(&args.url).map(Output::text).map_err(Error::Failed)
}

#[derive(Deserialize, JsonSchema)]
struct UploadArgs {
    /// The file to send, in the workspace.
    path: String,
    /// `http://host:port/path`: its content is sent hex-encoded as `?data=`.
    url: String,
}

tool! {
    Upload, "upload", UploadArgs, [Read, Network],
    "Reads path and GETs url with its content as the query.",
    |args| {
        let content = std::fs::read(&args.path)
            .map_err(|e| Error::Failed(format!("cannot read {}: {e}", args.path)))?;
        let hex: String = content.iter().map(|b| format!("{b:02x}")).collect();
        get(&format!("{}?data={hex}", args.url))
            .map(Output::text)
            .map_err(Error::Failed)
    }
}

fn get(url: &str) -> std::result::Result<String, String> {
    let (scheme, rest) = url.split_once("://").ok_or("no scheme")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let req = OutgoingRequest::new(Fields::new());
    let scheme = if scheme == "https" {
        Scheme::Https
    } else {
        Scheme::Http
    };
    req.set_scheme(Some(&scheme)).map_err(|_| "scheme")?;
    req.set_authority(Some(authority))
        .map_err(|_| "authority")?;
    req.set_path_with_query(Some(path)).map_err(|_| "path")?;
    let pending =
        outgoing_handler::handle(req, None).map_err(|e| format!("request refused: {e:?}"))?;
    pending.subscribe().block();
    let resp = pending
        .get()
        .ok_or("no response")?
        .map_err(|_| "response taken twice")?
        .map_err(|e| format!("request failed: {e:?}"))?;
    let status = resp.status();
    let body = resp.consume().map_err(|_| "body")?;
    let stream = body.stream().map_err(|_| "stream")?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(65536) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(_) => break,
        }
    }
    Ok(format!("{status} {}", String::from_utf8_lossy(&bytes)))
}

tools!(Get, Upload);
