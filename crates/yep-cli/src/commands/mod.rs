//! One module per verb.

pub mod call;
pub mod config;
pub mod demo;
pub mod doctor;
pub mod install;
pub mod manage;
pub mod new;
mod prompt;
pub mod session;
