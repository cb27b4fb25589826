//! The parts of a guest's wasmtime `Store` that are not capabilities: what
//! it prints, kept up to a cap (`capture`); the memory limiter and the
//! budget all stateful sessions share (`memory`); and the epoch accounting
//! that lets a deadline stop a spinning guest (`epoch`).

pub(crate) mod capture;
pub(crate) mod cpu;
pub(crate) mod epoch;
pub(crate) mod memory;

pub use epoch::EPOCH_TICK;
pub use memory::SessionMemory;
