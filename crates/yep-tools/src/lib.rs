//! The checks an author or user runs against a server: [`doctor`] (spawn it as the runtime
//! would and grade it against its manifest and the wire) and [`conformance`] (the golden
//! transcripts of `conformance/`, their matching language and their replay). Built on
//! yep-host's public API only, and no part of what an agent embeds: the `yep` CLI runs them.

pub mod conformance;
pub mod doctor;
