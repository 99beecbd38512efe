//! The floor's tiny Rust child: echoes each stdin line back (`block`: blocking reads; `spin`:
//! busy-poll stdin for 50 µs before each read). With `hook`, it is instead a spawn-per-event
//! hook: it reads one JSON event from stdin and prints an allow decision.
#![deny(clippy::print_stdout)]

use std::io::{BufRead, Read, Write};

fn main() -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    if std::env::args().nth(1).as_deref() == Some("hook") {
        let mut event = String::new();
        stdin.lock().read_to_string(&mut event)?;
        let parsed: serde_json::Value = serde_json::from_str(&event).unwrap_or_default();
        let block = parsed["args"]["forbidden"] == true;
        writeln!(stdout, "{}", serde_json::json!({ "block": block }))?;
        return stdout.flush();
    }
    let spin = std::env::args().nth(1).as_deref() == Some("spin");
    let mut line = String::new();
    let mut input = stdin.lock();
    loop {
        line.clear();
        if spin {
            spin_until_readable(0);
        }
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        stdout.write_all(line.as_bytes())?;
        stdout.flush()?;
    }
}

fn spin_until_readable(fd: i32) {
    let until = std::time::Instant::now() + std::time::Duration::from_micros(50);
    while std::time::Instant::now() < until {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        if unsafe { libc::poll(&mut pfd, 1, 0) } != 0 {
            return;
        }
        std::hint::spin_loop();
    }
}
