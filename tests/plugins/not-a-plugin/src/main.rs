//! Test guest: a WASI command component, which is not a toolhost plugin.

fn main() {
    println!("hello from a command component");
}
