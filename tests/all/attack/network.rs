//! Attack tests: network (see mod.rs).
