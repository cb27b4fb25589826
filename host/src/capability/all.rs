//! Every capability, in the order it is linked (WASI before them).

use super::sandbox::Linked;
use super::{env, file, log, network, progress, terminal};

/// Every capability, in the order it is linked (WASI before them).
pub(crate) static CAPABILITIES: &[Linked] = &[
    Linked::of::<file::FileAccess>(),
    Linked::of::<env::Environment>(),
    Linked::of::<network::Network>(),
    Linked::of::<terminal::Terminal>(),
    Linked::of::<log::Log>(),
    Linked::of::<progress::Reports>(),
];
