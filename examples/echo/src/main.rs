//! `yep-example-echo`: the example capability server on stdio.
#![deny(clippy::print_stdout)]

fn main() -> std::io::Result<()> {
    yep_example_echo::server().serve()
}
