//! Permission profiles: the rules that decide, with no wasmtime in sight.
