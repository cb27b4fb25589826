//! Compiles the bundled plugins (`plugins/*`) to wasm32-wasip2 and embeds them.
//! `plugins/declarative` is not offered as a plugin: it is the wrapper that
//! runs the tools of declarative `*.toml` files.

#[path = "build/guests.rs"]
mod guests;

use std::fmt::Write as _;

use sha2::{Digest as _, Sha256};

fn main() {
    let guests = guests::build("plugins");
    let mut code = String::from(
        "/// Every bundled plugin, by name.\npub static PLUGINS: &[BundledPlugin] = &[\n",
    );
    let mut wrapper = None;
    for guest in &guests {
        if guest.name == "declarative" {
            wrapper = Some(guest.wasm.display().to_string());
            continue;
        }
        // The hash that names this version (`ContentHash`), computed here
        // so that a start reads none of the embedded bytes.
        let bytes = std::fs::read(&guest.wasm).expect("reading a built plugin");
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        writeln!(
            code,
            "    BundledPlugin {{ name: {:?}, wasm: include_bytes!({:?}), hash: {hash:?} }},",
            guest.name,
            guest.wasm.display().to_string()
        )
        .unwrap();
    }
    code.push_str("];\n");
    let wrapper = wrapper.expect("plugins/declarative (the declarative tools' wrapper) is missing");
    writeln!(
        code,
        "/// The wrapper plugin that runs declarative HTTP tools.\n\
         pub static DECLARATIVE_WRAPPER: &[u8] = include_bytes!({wrapper:?});"
    )
    .unwrap();
    guests::write_out("bundled.rs", &code);
}
