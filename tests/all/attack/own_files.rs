//! Attack tests: own_files (see mod.rs).
