//! What a server's command says about its first start: a launcher that builds or fetches the
//! program before running it (`go run .`, `npx -y tsx`, `cargo run`, `uvx`) can take minutes
//! the first time (a cold build cache, packages to download), where a program that is already
//! there starts in well under a second. A dialect that waits for a first frame uses this to
//! wait longer for such a one, and to say why.

use std::path::Path;

/// Why a server's first start may be slow: what its command is and what it does first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowStart {
    /// The command as it is written, from the program's file name on (`go run .`), escaped
    /// and cut short.
    pub command: String,
    /// What it does before the program runs.
    pub does: Prelude,
}

/// What a launcher does before the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prelude {
    /// Compiles it (`go run`, `cargo run`, `tsx`).
    Builds,
    /// Fetches it or its packages (`npx`, `uvx`).
    Downloads,
    /// Either, depending on what is cached (`deno run`, `uv run`, `nix run`).
    BuildsOrDownloads,
}

impl std::fmt::Display for SlowStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let does = match self.does {
            Prelude::Builds => "builds",
            Prelude::Downloads => "may download",
            Prelude::BuildsOrDownloads => "may build or download",
        };
        write!(f, "`{}` {does} on its first start", self.command)
    }
}

/// How long a server started by a launcher that builds or fetches first may take to answer
/// its handshake: a cold build cache or a slow network takes minutes.
pub(crate) const SLOW_START_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// How long such a server is waited for before the user is told why (at most the ordinary
/// wait): a [`PROGRESS_TARGET`] info line.
pub(crate) const SLOW_START_NOTICE: std::time::Duration = std::time::Duration::from_secs(3);

/// The `tracing` target of what the host says while a start takes long; the CLI shows it.
pub(crate) const PROGRESS_TARGET: &str = "yep_host::progress";

/// How long to wait for the handshake of a server whose ordinary wait is `timeout`: that, or
/// for a [`SlowStart`] the longer of it and [`SLOW_START_WAIT`].
pub(crate) fn patience(
    slow: Option<&SlowStart>,
    timeout: std::time::Duration,
) -> std::time::Duration {
    match slow {
        Some(_) => timeout.max(SLOW_START_WAIT),
        None => timeout,
    }
}

/// `handshake`, with the user told why after [`SLOW_START_NOTICE`] (or `timeout`, the
/// ordinary wait, if sooner) when `slow`: "waiting for <extension>'s <answer>: `npx …` may
/// download on its first start (up to 10 min)".
pub(crate) async fn told_while<F: std::future::Future>(
    extension: &str,
    answer: &str,
    slow: Option<&SlowStart>,
    timeout: std::time::Duration,
    handshake: F,
) -> F::Output {
    let notice = async {
        if let Some(slow) = slow {
            tokio::time::sleep(SLOW_START_NOTICE.min(timeout)).await;
            tracing::info!(
                target: PROGRESS_TARGET,
                "waiting for {}'s {answer}: {slow} (up to {})",
                crate::text::escape(extension),
                said(patience(Some(slow), timeout))
            );
        }
        std::future::pending::<std::convert::Infallible>().await
    };
    tokio::select! {
        biased;
        done = handshake => done,
        never = notice => match never {},
    }
}

/// A wait as a person reads it: `300 ms`, `90 s`, `10 min`.
pub(crate) fn said(wait: std::time::Duration) -> String {
    match wait.as_millis() {
        ms if ms < 1000 => format!("{ms} ms"),
        ms if ms < 120_000 || ms % 60_000 != 0 => format!("{} s", wait.as_secs()),
        ms => format!("{} min", ms / 60_000),
    }
}

/// The most of a command [`SlowStart::command`] shows.
const SHOWN_CHARS: usize = 60;

/// Whether `program` with `args` builds or fetches at start, and so may be slow the first time.
/// Decided from the program's file name (wherever it lives) and its subcommand: `go run`,
/// `cargo run`, `dotnet run`, `swift run`, `cabal run`, `stack run`, `zig run`, `tsx`,
/// `ts-node`, `npx`, `pnpx`, `bunx`, `bun x`, `npm exec`/`npm x`, `pnpm dlx`, `yarn dlx`,
/// `uvx`, `uv run`, `uv tool run`, `pipx run`, `deno run`/`deno x`, `nix run`/`nix shell`.
/// Anything else (a built binary, `node`, `python3`, `go build` run by hand) starts as fast as
/// it starts.
pub(crate) fn slow_start(program: &str, args: &[String]) -> Option<SlowStart> {
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
    let name = name.strip_suffix(".exe").unwrap_or(name);
    let sub = subcommand(args);
    let does = match (name, sub) {
        ("go" | "cargo" | "dotnet" | "swift" | "cabal" | "stack" | "zig", Some("run")) => {
            Prelude::Builds
        }
        ("tsx" | "ts-node" | "ts-node-esm", _) => Prelude::Builds,
        ("npx" | "pnpx" | "bunx" | "uvx", _) => Prelude::Downloads,
        ("bun", Some("x")) | ("npm", Some("exec" | "x")) => Prelude::Downloads,
        ("pnpm" | "yarn", Some("dlx")) => Prelude::Downloads,
        ("pipx", Some("run")) => Prelude::Downloads,
        ("uv", Some("run" | "tool")) => Prelude::BuildsOrDownloads,
        ("deno", Some("run" | "x" | "serve" | "task")) => Prelude::BuildsOrDownloads,
        ("nix", Some("run" | "shell" | "develop")) => Prelude::BuildsOrDownloads,
        _ => return None,
    };
    let written = std::iter::once(name)
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    let escaped = crate::text::escape(&written);
    let command = match escaped.char_indices().nth(SHOWN_CHARS) {
        Some((i, _)) => format!("{}…", &escaped[..i]),
        None => escaped.into_owned(),
    };
    Some(SlowStart { command, does })
}

/// A command line's subcommand: its first argument that is no flag (`+toolchain` for cargo
/// counts as one), past `go -C <dir>`.
fn subcommand(args: &[String]) -> Option<&str> {
    let mut args = args.iter().map(String::as_str);
    while let Some(arg) = args.next() {
        if arg == "-C" {
            args.next();
        } else if !arg.starts_with('-') && !arg.starts_with('+') {
            return Some(arg);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(command: &str) -> Option<String> {
        let mut words = command.split(' ').map(String::from);
        let program = words.next().unwrap();
        let args: Vec<String> = words.collect();
        slow_start(&program, &args).map(|s| s.to_string())
    }

    #[test]
    fn launchers_that_build_or_fetch_at_start_are_known_by_name_and_subcommand() {
        for (command, shown) in [
            ("go run .", "`go run .` builds on its first start"),
            (
                "/usr/local/go/bin/go run .",
                "`go run .` builds on its first start",
            ),
            (
                "go -C src run ./cmd",
                "`go -C src run ./cmd` builds on its first start",
            ),
            (
                "cargo +nightly run --release",
                "`cargo +nightly run --release` builds on its first start",
            ),
            (
                "npx -y tsx ./index.ts",
                "`npx -y tsx ./index.ts` may download on its first start",
            ),
            (
                "pnpx tsx index.ts",
                "`pnpx tsx index.ts` may download on its first start",
            ),
            (
                "bunx cowsay",
                "`bunx cowsay` may download on its first start",
            ),
            (
                "bun x cowsay",
                "`bun x cowsay` may download on its first start",
            ),
            (
                "npm exec -- tsx a.ts",
                "`npm exec -- tsx a.ts` may download on its first start",
            ),
            (
                "pnpm dlx tsx a.ts",
                "`pnpm dlx tsx a.ts` may download on its first start",
            ),
            (
                "tsx ./index.ts",
                "`tsx ./index.ts` builds on its first start",
            ),
            (
                "uvx mcp-server-time",
                "`uvx mcp-server-time` may download on its first start",
            ),
            (
                "uv run server.py",
                "`uv run server.py` may build or download on its first start",
            ),
            (
                "deno run -A main.ts",
                "`deno run -A main.ts` may build or download on its first start",
            ),
            ("dotnet run", "`dotnet run` builds on its first start"),
        ] {
            assert_eq!(said(command).as_deref(), Some(shown), "{command}");
        }
    }

    #[test]
    fn programs_that_are_already_there_are_not_slow_starts() {
        for command in [
            "node index.js",
            "python3 main.py",
            "./todo",
            "go build .",
            "go",
            "cargo",
            "npm start",
            "uv pip list",
            "deno --version",
            "gopher run",
        ] {
            assert_eq!(said(command), None, "{command}");
        }
    }

    #[test]
    fn what_is_shown_of_a_command_is_escaped_and_cut_short() {
        let long = format!("go run \u{1b}[2J{}", "x".repeat(100));
        let shown = said(&long).unwrap();
        assert!(!shown.contains('\u{1b}'), "{shown:?}");
        assert!(
            shown.contains("\\x1b[2J") && shown.contains("x…`"),
            "{shown}"
        );
    }
}
