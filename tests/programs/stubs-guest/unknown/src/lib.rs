//! A tool plugin that imports interfaces corral does not provide: one named
//! like the Node.js shims `jco --bundle` adds, and one from another host.
//! corral must refuse it at load, naming each import and its likely cause.
#[path = "../../../shared/tool.rs"]
#[macro_use]
mod tool;

use corral_sdk::{Output, tools};
use schemars::JsonSchema;
use serde::Deserialize;

mod node {
    wit_bindgen::generate!({
        inline: "
            package jco:node;
            interface fs { read-file-sync: func(path: string) -> string; }
            world shims { import fs; }
        ",
    });
}

mod elsewhere {
    wit_bindgen::generate!({
        inline: "
            package acme:widgets;
            interface frob { frob: func() -> u32; }
            world widgets { import frob; }
        ",
    });
}

#[derive(Deserialize, JsonSchema)]
struct Args {}

tool! {
    Frob, "frob", Args, [Read],
    "Calls both foreign imports.",
    |_| {
        // Called, so that the linker keeps both imports.
        let text = node::jco::node::fs::read_file_sync("x");
        let n = elsewhere::acme::widgets::frob::frob();
        Ok(Output::text(format!("{text}{n}")))
    }
}

tools!(Frob);
