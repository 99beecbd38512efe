//! The package store: one home directory holds the approved packages, the lock, the settings,
//! the secrets and the logs. Every mutation takes a file lock on the home and commits through a
//! journal, so a crash (even `kill -9`) leaves the home fully as before or fully as after.
//!
//! No processes (beyond `git`) and no async runtime: the CLI and an embedding agent call it
//! directly. It draws nothing either: an install reports its steps and downloads to the
//! caller's [`Progress`].
//!
//! Also here, because the store is where they are enforced: [`manifest`], the `plugin.json` a
//! user approves, and [`text`], the escaping of anything a package says before a terminal
//! sees it.

pub mod approval;
pub mod broker;
pub mod claude;
pub mod code;
pub mod components;
pub mod config;
pub mod fetch;
pub mod fsutil;
pub mod grants;
pub mod hash;
pub mod launcher;
pub mod lockfile;
pub mod manifest;
pub mod marketplace;
pub mod mcp;
pub mod mcp_skills;
pub mod progress;
pub mod settings;
pub mod skill;
pub mod snapshot;
pub mod source;
pub mod state;
pub mod summary;
pub mod text;
pub mod tooltext;
pub mod verify;
pub mod zot;

mod error;
mod home;
mod install;
mod journal;
mod list;
mod package;

pub use error::StoreError;
pub(crate) use error::io;
pub use home::{Home, HomeLock};
pub use install::{
    AlwaysYes, Approver, InstallOptions, Installed, Outcome, UpdateOptions, ZotRunner,
};
pub use list::{ConfigStatus, Listed};
pub use package::{command_resolves, contributions};
pub use progress::{Progress, ProgressEvent};
