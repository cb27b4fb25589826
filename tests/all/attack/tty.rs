//! Attack tests: tty (see mod.rs).
