//! Claude Code plugins: no server, but command hooks, each a short-lived process run
//! contained ([`crate::process::run_to_end`]), with Claude Code's contract on stdin and
//! stdout ([`io`]), and slash commands expanded as Claude Code expands them ([`command`]).

pub mod command;
pub mod io;
