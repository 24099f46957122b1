//! How much a command says: `-q`, the default, or `-v` (each `-v` one
//! more). Process-wide, set once by `squadctl` from its arguments and read
//! by any module that prints a note (`root`'s "acting on the main
//! checkout"), so that none of them has to reach up into the command line.
//! squadd never sets it: the default is to speak.

use std::sync::atomic::{AtomicU8, Ordering};

/// 0 with `-q`, 1 by default, 1 + the number of `-v`.
static VERBOSITY: AtomicU8 = AtomicU8::new(1);

/// Sets the level from `-q` and the number of `-v`.
pub(crate) fn set(quiet: bool, verbose: u8) {
    VERBOSITY.store(if quiet { 0 } else { 1 + verbose }, Ordering::Relaxed);
}

/// Whether `-q` was given.
pub(crate) fn quiet() -> bool {
    VERBOSITY.load(Ordering::Relaxed) == 0
}

/// Whether `-v` was given.
pub(crate) fn verbose() -> bool {
    VERBOSITY.load(Ordering::Relaxed) > 1
}
