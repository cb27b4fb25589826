//! Attack tests: tenants (see mod.rs).
