//! Compiles the bundled plugins (`plugins/*`) to wasm32-wasip2 and embeds them.
//! `plugins/declarative` is not offered as a plugin: it is the wrapper that
//! runs the tools of declarative `*.toml` files.

#[path = "build/guests.rs"]
mod guests;

use std::fmt::Write as _;

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
        writeln!(
            code,
            "    BundledPlugin {{ name: {:?}, wasm: include_bytes!({:?}) }},",
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
