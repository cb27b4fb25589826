//! The tally's rules, with no wasmtime: how far a store may count.

/// The tally rules of a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TallyRules {
    /// Most `next` calls a store answers; `None`: no limit.
    pub max: Option<u32>,
}

impl TallyRules {
    /// Whether a store may answer its `next`-th call (counting from 1).
    pub fn allows(&self, next: u32) -> bool {
        self.max.is_none_or(|max| next <= max)
    }
}

#[cfg(test)]
mod tests {
    use super::TallyRules;

    #[test]
    fn a_tally_counts_up_to_its_max_and_without_one_on_and_on() {
        let two = TallyRules { max: Some(2) };
        assert!(two.allows(1) && two.allows(2) && !two.allows(3));
        assert!(TallyRules { max: None }.allows(u32::MAX));
        assert!(!TallyRules { max: Some(0) }.allows(1));
    }
}
