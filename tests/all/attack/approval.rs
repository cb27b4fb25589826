//! Attack tests: approval (see mod.rs).
