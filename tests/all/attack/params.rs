//! Attack tests: params (see mod.rs).
