//! Attack tests: git (see mod.rs).
