//! Authoring: what `yep new` writes.

pub mod scaffold;
