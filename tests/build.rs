//! Compiles the test-only guests (`tests/plugins/*`) to wasm32-wasip2 and
//! exposes their paths as constants (`toolhost_tests::MISBEHAVE`, ...).

#[path = "../host/build/guests.rs"]
mod guests;

use std::fmt::Write as _;

fn main() {
    let guests = guests::build("tests/plugins");
    let mut code = String::new();
    for guest in &guests {
        let constant = guest.name.to_uppercase().replace('-', "_");
        writeln!(
            code,
            "/// Path of the `{}` test guest.\npub const {constant}: &str = {:?};",
            guest.name,
            guest.wasm.display().to_string()
        )
        .unwrap();
    }
    guests::write_out("guests.rs", &code);
}
