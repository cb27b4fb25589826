//! Attack tests: masks (see mod.rs).
