//! A tool plugin that imports more than its grants cover: `process`, raw
//! `wasi:sockets` and `wasi:http`. Each tool tries one of them and reports,
//! as text, the error value the host answered with, so a test can tell a
//! denying stub from a trap or a refusal at load. `read_note` reads a file,
//! to show the plugin works where it is granted.
#[path = "../../shared/tool.rs"]
#[macro_use]
mod tool;

use corral_sdk::process::Command;
use corral_sdk::{Error, Output, tools};
use schemars::JsonSchema;
use serde::Deserialize;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, OutgoingRequest, Scheme};
use wasip2::sockets::network::{IpAddressFamily, IpSocketAddress, Ipv4SocketAddress};
use wasip2::sockets::{instance_network, ip_name_lookup, tcp_create_socket};

#[derive(Deserialize, JsonSchema)]
struct PathArgs {
    /// A file relative to the workspace root.
    path: String,
}

tool! {
    ReadNote, "read_note", PathArgs, [Read],
    "Returns the text of a file.",
    |args| {
        let path = corral_sdk::workspace_path(&args.path)?;
        std::fs::read_to_string(path)
            .map(Output::text)
            .map_err(|e| corral_sdk::io_error(&args.path, &e))
    }
}

#[derive(Deserialize, JsonSchema)]
struct ProgramArgs {
    /// The program to run.
    program: String,
}

tool! {
    RunProgram, "run_program", ProgramArgs, [Execute],
    "Runs a program through corral:plugin/process.",
    |args| {
        match Command::new(&args.program).run() {
            Ok(out) => Ok(Output::text(format!(
                "process.run ran {}: exit {:?}",
                args.program, out.exit_code
            ))),
            Err(e) => Err(Error::Failed(format!("process.run returned {e:?}"))),
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct ConnectArgs {
    /// Port on 127.0.0.1.
    port: u16,
}

tool! {
    TcpConnect, "tcp_connect", ConnectArgs, [Network],
    "Opens a raw TCP connection to 127.0.0.1:port and looks up `localhost`.",
    |args| {
        let connect = connect(args.port);
        let lookup = lookup("localhost");
        let report = format!("tcp connect: {connect:?}; name lookup: {lookup:?}");
        if connect.is_ok() || lookup.is_ok() {
            Ok(Output::text(report))
        } else {
            Err(Error::Failed(report))
        }
    }
}

/// Connects through `wasi:sockets/tcp` itself, the way a libc would.
fn connect(port: u16) -> std::result::Result<(), String> {
    let network = instance_network::instance_network();
    let socket = tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4)
        .map_err(|e| format!("create-tcp-socket: {}", e.name()))?;
    let to = IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port,
        address: (127, 0, 0, 1),
    });
    socket
        .start_connect(&network, to)
        .map_err(|e| format!("start-connect: {}", e.name()))?;
    socket.subscribe().block();
    socket
        .finish_connect()
        .map(drop)
        .map_err(|e| format!("finish-connect: {}", e.name()))
}

/// Resolves `name` through `wasi:sockets/ip-name-lookup`.
fn lookup(name: &str) -> std::result::Result<(), String> {
    let network = instance_network::instance_network();
    let stream = ip_name_lookup::resolve_addresses(&network, name)
        .map_err(|e| format!("resolve-addresses: {}", e.name()))?;
    loop {
        match stream.resolve_next_address() {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => return Err("no address".to_owned()),
            Err(ip_name_lookup::ErrorCode::WouldBlock) => stream.subscribe().block(),
            Err(e) => return Err(format!("resolve-next-address: {}", e.name())),
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct UrlArgs {
    /// `http://host:port/path`
    url: String,
}

tool! {
    HttpGet, "http_get", UrlArgs, [Network],
    "Sends a GET through wasi:http/outgoing-handler.",
    |args| {
        get(&args.url)
            .map(|status| Output::text(format!("wasi:http answered {status}")))
            .map_err(|e| Error::Failed(format!("wasi:http returned {e}")))
    }
}

/// The status of a GET of `url`, or the error the host answered with.
fn get(url: &str) -> std::result::Result<u16, String> {
    let (scheme, rest) = url.split_once("://").ok_or("no scheme")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let req = OutgoingRequest::new(Fields::new());
    let scheme = if scheme == "https" {
        Scheme::Https
    } else {
        Scheme::Http
    };
    req.set_scheme(Some(&scheme)).map_err(|()| "bad scheme")?;
    req.set_authority(Some(authority))
        .map_err(|()| "bad authority")?;
    req.set_path_with_query(Some(if path.is_empty() { "/" } else { path }))
        .map_err(|()| "bad path")?;
    let pending = outgoing_handler::handle(req, None).map_err(|e| format!("{e:?}"))?;
    pending.subscribe().block();
    let response = pending
        .get()
        .ok_or("no response")?
        .map_err(|()| "response taken twice")?
        .map_err(|e| format!("{e:?}"))?;
    Ok(response.status())
}

tools!(ReadNote, RunProgram, TcpConnect, HttpGet);
