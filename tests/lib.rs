//! Paths of the test-only guest plugins built by `build.rs`; the tests
//! themselves live in `all/`.

include!(concat!(env!("OUT_DIR"), "/guests.rs"));
