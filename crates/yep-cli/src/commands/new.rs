//! `yep new <name>`: scaffold an extension package in Python, TypeScript or Rust.

use crate::author::scaffold::{Lang, NewOptions, scaffold};
use crate::output::stdout_line;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The extension's name (A-Z a-z 0-9 _ -).
    name: String,
    /// The language of the server and its tests.
    #[arg(long, value_enum, default_value = "python")]
    lang: LangArg,
    /// A tool (repeatable).
    #[arg(long = "tool", value_name = "NAME")]
    tools: Vec<String>,
    /// A hook subscription, `pre_tool_use:GLOB` or `post_tool_use:GLOB` (repeatable).
    #[arg(long = "hook", value_name = "EVENT:GLOB")]
    hooks: Vec<String>,
    /// Static prompt text.
    #[arg(long, value_name = "TEXT")]
    prompt: Option<String>,
    /// A prompt recomputed every turn.
    #[arg(long)]
    dynamic_prompt: bool,
    /// A slash command (repeatable).
    #[arg(long = "command", value_name = "NAME")]
    commands: Vec<String>,
    /// Push a status line.
    #[arg(long)]
    status: bool,
    /// Ask the user questions.
    #[arg(long)]
    ui_ask: bool,
    /// Receive the session's trace events.
    #[arg(long)]
    trace: bool,
    /// Ship skills (`skills/<name>/SKILL.md`).
    #[arg(long)]
    skills: bool,
    /// Where the package directory goes (default: the current directory).
    #[arg(long, value_name = "PARENT", default_value = ".")]
    dir: PathBuf,
    /// Print the files written as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LangArg {
    /// Python 3, standard library only.
    Python,
    /// JavaScript for Node 18+ (ES modules), typed by the SDK's `.d.ts`: no build step.
    #[value(alias = "javascript")]
    Typescript,
    /// Rust, built with cargo.
    Rust,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let hooks = args
        .hooks
        .iter()
        .map(|h| match h.split_once(':') {
            Some((event, glob)) => Ok((event.to_string(), glob.to_string())),
            None => Err(anyhow::anyhow!(
                "--hook {h:?}: use pre_tool_use:GLOB or post_tool_use:GLOB"
            )),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let lang = match args.lang {
        LangArg::Python => Lang::Python,
        LangArg::Typescript => Lang::Typescript,
        LangArg::Rust => Lang::Rust,
    };
    let options = NewOptions {
        name: args.name,
        lang,
        tools: args.tools,
        hooks,
        prompt: args.prompt,
        dynamic_prompt: args.dynamic_prompt,
        commands: args.commands,
        status: args.status,
        ui_ask: args.ui_ask,
        trace: args.trace,
        skills: args.skills,
        parent: args.dir,
    };
    let done = scaffold(&options).map_err(|e| {
        let message = format!("failed to scaffold `{}`: {e}", options.name);
        if message.contains("declares no contributions") {
            crate::output::hinted(
                message,
                &[
                    "say what it contributes, e.g. `--tool NAME`, `--hook pre_tool_use:GLOB`, `--prompt`, `--command NAME`, `--status` (see `yep new --help`)",
                ],
            )
        } else {
            anyhow::anyhow!(message)
        }
    })?;
    if args.json {
        stdout_line(&serde_json::to_string_pretty(&done)?);
        return Ok(ExitCode::SUCCESS);
    }
    stdout_line(&format!(
        "created {} ({} files)",
        done.dir.display(),
        done.files.len()
    ));
    stdout_line(&format!(
        "  edit the handler bodies in {}",
        done.dir.join(&done.edit).display()
    ));
    stdout_line(&format!("  written in {}", done.language));
    for step in &done.next {
        stdout_line(&format!("  next: {step}"));
    }
    Ok(ExitCode::SUCCESS)
}
