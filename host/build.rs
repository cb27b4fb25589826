//! Compiles the bundled plugins (`plugins/*`) to wasm32-wasip2 and embeds them.

#[path = "build/guests.rs"]
mod guests;

use std::fmt::Write as _;

fn main() {
    let guests = guests::build("plugins");
    let mut code = String::from(
        "/// Every bundled plugin, by name.\npub static PLUGINS: &[BundledPlugin] = &[\n",
    );
    for guest in &guests {
        writeln!(
            code,
            "    BundledPlugin {{ name: {:?}, wasm: include_bytes!({:?}) }},",
            guest.name,
            guest.wasm.display().to_string()
        )
        .unwrap();
    }
    code.push_str("];\n");
    guests::write_out("bundled.rs", &code);
}
