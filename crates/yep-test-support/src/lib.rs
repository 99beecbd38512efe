//! What yep's tests share, so that every test runs a program the same way:
//!
//! - [`Sealed`]: the environment a test runs a program in. Its `HOME`, `TMPDIR` and yep home
//!   are the test run's own, never the machine's: a developer's `~/.gitconfig`, npm cache or
//!   `YEP_SANDBOX` cannot change what a test sees;
//! - [`bins`]: the binaries cargo built for the tests, found beside the test binary;
//! - [`fixtures`]: trees copied from a corpus, git repositories, edits;
//! - [`package`]: package directories as an author leaves them;
//! - [`text`]: what a program wrote, as text, and the checks of what users read.

pub mod bins;
pub mod fixtures;
pub mod package;
pub mod sealed;
pub mod text;

pub use package::Package;
pub use sealed::Sealed;
