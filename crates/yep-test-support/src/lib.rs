//! What yep's tests share, so that every test runs a program the same way:
//!
//! - [`Sealed`]: the environment a test runs a program in. Its `HOME`, `TMPDIR` and yep home
//!   are the test run's own, never the machine's: a developer's `~/.gitconfig`, npm cache or
//!   `YEP_SANDBOX` cannot change what a test sees;
//! - [`bins`]: the binaries cargo built for the tests, found beside the test binary;
//! - [`fixtures`]: trees copied from a corpus, git repositories, edits;
//! - [`package`]: package directories as an author leaves them;
//! - [`procs`]: processes a test started, seen from `/proc`;
//! - [`text`]: what a program wrote, as text, and the checks of what users read.

pub mod bins;
pub mod fixtures;
pub mod package;
pub mod procs;
pub mod sealed;
pub mod text;

pub use package::Package;

/// The `ctor` crate, for [`seal_this_test_binary!`].
#[doc(hidden)]
pub use ctor;

/// Seal this integration-test binary before its `main` runs ([`Sealed::seal_process`]): put
/// it once at the top of `tests/all/main.rs`.
#[macro_export]
macro_rules! seal_this_test_binary {
    () => {
        #[$crate::ctor::ctor(crate_path = $crate::ctor)]
        unsafe fn seal_this_test_binary() {
            // SAFETY: before `main`, so before any other thread.
            unsafe { $crate::Sealed::seal_process() }
        }
    };
}
pub use sealed::Sealed;
