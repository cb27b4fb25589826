//! The one list of capabilities. What needs every capability is generated
//! from it: the linked imports (`all::CAPABILITIES`), the profile's fields
//! (`profile`), the tables of `toolhost.toml` (`config::file`) and their
//! resolution (`config::profile`). No lookup by name, at config time or per
//! call. (Each folder's `mod` line stays written in `capability/mod.rs`, so
//! that rustfmt, which does not look inside macros, formats it.)
//!
//! `sections`: capabilities with a `[profiles.P.<key>]` table, in the
//! TOML's order, which is the order of `expected one of ...` in messages,
//! of problems, of linking and of `toolhost check`; `[global]` marks a
//! `[global.<key>]` layer too. `others`: capabilities with imports only.
//!
//! Every consumer is a `macro_rules!` beside what it makes, matching
//! `(sections: [$($(#[$meta])* $key: $type [$($global)?]),*], others:
//! [$($(#[$meta])* $key: $type),*])`.

macro_rules! foreach_capability {
    ($then:ident) => {
        $then! {
            sections: [
                file: crate::capability::file::FileAccess [global],
                network: crate::capability::network::Network [],
                terminal: crate::capability::terminal::Terminal [global],
                env: crate::capability::env::Environment [],
                #[cfg(test)]
                tally: crate::capability::tally::Tally [],
            ],
            others: [
                log: crate::capability::log::Log,
                progress: crate::capability::progress::Reports,
            ],
        }
    };
}
pub(crate) use foreach_capability;
