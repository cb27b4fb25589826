//! Attack tests: identity (see mod.rs).
