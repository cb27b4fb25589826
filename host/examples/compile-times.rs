//! How long each bundled plugin takes to compile with the host's Cranelift
//! settings and with the fastest Cranelift settings a first tier could use
//! (no optimisation, single-pass register allocation), one after the other.
//!
//! Usage: `compile-times [RUNS]` (release: `cargo run --release -p toolhost
//! --example compile-times`)

use std::time::Instant;

use wasmtime::{Config, Engine, OptLevel, RegallocAlgorithm};

fn engine(fast: bool) -> Engine {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.wasm_component_model(true);
    config.concurrency_support(false);
    if fast {
        config.cranelift_opt_level(OptLevel::None);
        config.cranelift_regalloc_algorithm(RegallocAlgorithm::SinglePass);
    }
    Engine::new(&config).expect("an engine")
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let engines = [("host settings", engine(false)), ("fastest", engine(true))];
    for plugin in toolhost::bundled::PLUGINS {
        for (name, engine) in &engines {
            let mut times: Vec<f64> = (0..runs)
                .map(|_| {
                    let began = Instant::now();
                    wasmtime::component::Component::new(engine, plugin.wasm).expect("compiles");
                    began.elapsed().as_secs_f64() * 1000.0
                })
                .collect();
            times.sort_by(f64::total_cmp);
            println!(
                "{:10} {:>9} B  {name:14} median {:7.1} ms",
                plugin.name,
                plugin.wasm.len(),
                times[runs / 2]
            );
        }
    }
}
