//! Authoring: what `yep new` writes, and `yep manifest sync` keeps in line with the code.

pub mod json_edit;
pub mod scaffold;
pub mod sync;
