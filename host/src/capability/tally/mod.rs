//! `tally`: a capability that exists to prove the recipe of the README's
//! "Adding a capability", end to end, in the unit tests only: a number that
//! goes up by one at each `next` of a store, under `tally:use`, at most
//! `tally.max` times. Its folder and its line in `list` are all there is.

mod imports;
mod rules;
mod section;
#[cfg(test)]
mod tests;

pub use rules::TallyRules;
pub use section::{TALLY_USE, Tally, TallyConfig};
