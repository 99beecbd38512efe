//! The yep-sdk echo server the harness drives (the `examples/echo` server, built here so one
//! `cargo run -p yep-bench` builds every peer). With `--hang`, its hooks and its dynamic prompt
//! never answer (they sleep an hour): the server that the host's timeouts and background
//! dispatch are measured against.
#![deny(clippy::print_stdout)]

use std::time::Duration;

fn main() -> std::io::Result<()> {
    let server = yep_example_echo::server();
    if std::env::args().any(|a| a == "--hang") {
        let hour = Duration::from_secs(3600);
        return server
            .on_hook(move |_| {
                std::thread::sleep(hour);
                yep_sdk::HookDecision::allow()
            })
            .dynamic_prompt(move || {
                std::thread::sleep(hour);
                String::new()
            })
            .serve();
    }
    server.serve()
}
