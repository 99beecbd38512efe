//! A server whose handler prints to stdout, to prove the SDK keeps such output off the wire.
#![allow(clippy::print_stdout)]

use serde_json::json;
use yep_sdk::Server;

fn main() -> std::io::Result<()> {
    Server::new("stray")
        .tool("noisy", |_args, _ctx| {
            println!("stray print inside a handler");
            Ok(json!("quiet result"))
        })
        .serve()
}
