//! The yep-sdk echo server the harness drives (the `examples/echo` server, built here so one
//! `cargo run -p yep-bench` builds every peer).
#![deny(clippy::print_stdout)]

fn main() -> std::io::Result<()> {
    yep_example_echo::server().serve()
}
