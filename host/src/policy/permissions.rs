//! Permissions a tool declares (`file:read`, `network:fetch`, `database:write`)
//! and the profile's allow, deny and approval-required patterns that decide them.

use std::fmt;
use std::str::FromStr;

use super::wildcard;

/// A permission or a pattern over permissions: `*` matches any run of
/// characters, so `file:*` covers `file:read` and `*` covers everything.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PermissionPattern(String);

impl PermissionPattern {
    /// Parses a pattern: lower-case `a-z`, `0-9`, `_ . - : *`, with no empty
    /// `:`-separated segment.
    pub fn parse(text: &str) -> Result<Self, PermissionPatternError> {
        let problem = if text.is_empty() {
            Some("is empty".to_owned())
        } else if let Some(bad) = text.chars().find(|&c| !is_pattern_char(c)) {
            Some(format!(
                "contains {bad:?}; use lower-case letters, digits, '_', '.', '-', ':' and '*'"
            ))
        } else if text.split(':').any(str::is_empty) {
            Some("has an empty segment; separate non-empty segments with ':'".to_owned())
        } else {
            None
        };
        match problem {
            Some(problem) => Err(PermissionPatternError {
                pattern: text.to_owned(),
                problem,
            }),
            None => Ok(Self(text.to_owned())),
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True if `permission` matches this pattern.
    pub fn matches(&self, permission: &str) -> bool {
        wildcard::matches(&self.0, permission)
    }
}

fn is_pattern_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '-' | ':' | '*')
}

impl FromStr for PermissionPattern {
    type Err = PermissionPatternError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl fmt::Display for PermissionPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A permission pattern in the config that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("permission pattern {pattern:?} {problem}, e.g. \"file:read\" or \"network:*\"")]
pub struct PermissionPatternError {
    /// The pattern as written.
    pub pattern: String,
    /// What is wrong with it.
    pub problem: String,
}

/// How a profile answers one permission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionDecision {
    /// Allowed without asking.
    Allowed,
    /// Allowed once a human approves; `pattern` is the approval rule that matched.
    NeedsApproval {
        /// The `approval_required` pattern that matched.
        pattern: PermissionPattern,
    },
    /// Explicitly denied; deny wins over allow and approval.
    Denied {
        /// The `deny` pattern that matched.
        pattern: PermissionPattern,
    },
    /// No `allow` pattern matches.
    NotGranted,
    /// The profile grants it, but the caller's session narrowed it away.
    Narrowed {
        /// Which narrowing rule refused it, in words.
        rule: String,
    },
}

/// A profile's permission rules. Defaults deny: with no `allow` pattern nothing
/// is granted.
///
/// Order of decision: a `deny` match refuses; then a permission no `allow`
/// pattern matches is not granted; then an `approval_required` match asks a
/// human; everything else is allowed. An approval rule never grants a
/// permission by itself: it only gates permissions that `allow` covers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PermissionRules {
    /// Patterns a permission must match to be granted.
    pub allow: Vec<PermissionPattern>,
    /// Patterns that refuse a permission outright.
    pub deny: Vec<PermissionPattern>,
    /// Patterns whose permissions need a human's approval.
    pub approval_required: Vec<PermissionPattern>,
    /// Narrowings a session applied on top, each of which must let a
    /// permission through (they only take away). Shared, not copied, by
    /// the profiles narrowed alike.
    pub narrowed: Vec<std::sync::Arc<Narrowing>>,
}

/// A session's narrowing of its profile: only permissions matching `allow`
/// (when given) and none matching `deny`. It never grants anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Narrowing {
    /// When given, the session keeps only the permissions matching these.
    #[serde(default, deserialize_with = "patterns_opt")]
    pub allow: Option<Vec<PermissionPattern>>,
    /// Permissions the session gives up.
    #[serde(default, deserialize_with = "patterns")]
    pub deny: Vec<PermissionPattern>,
}

impl Narrowing {
    /// How many patterns it holds (`allow` and `deny`).
    pub fn patterns(&self) -> usize {
        self.allow.as_ref().map_or(0, Vec::len) + self.deny.len()
    }

    /// The bytes of its patterns' text.
    pub fn bytes(&self) -> usize {
        let allow = self.allow.iter().flatten();
        allow.chain(&self.deny).map(|p| p.as_str().len()).sum()
    }

    /// Why this narrowing refuses `permission`, if it does.
    pub fn refuses(&self, permission: &str) -> Option<String> {
        if let Some(pattern) = first_match(&self.deny, permission) {
            return Some(format!("the session denied \"{pattern}\""));
        }
        match &self.allow {
            Some(allow) if first_match(allow, permission).is_none() => {
                let kept: Vec<&str> = allow.iter().map(PermissionPattern::as_str).collect();
                Some(format!("the session keeps only [{}]", kept.join(", ")))
            }
            _ => None,
        }
    }
}

fn patterns<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<PermissionPattern>, D::Error> {
    let texts = <Vec<String> as serde::Deserialize>::deserialize(d)?;
    texts
        .iter()
        .map(|t| PermissionPattern::parse(t).map_err(serde::de::Error::custom))
        .collect()
}

fn patterns_opt<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<PermissionPattern>>, D::Error> {
    patterns(d).map(Some)
}

impl PermissionRules {
    /// Parses the three pattern lists of a profile.
    pub fn parse<S: AsRef<str>>(
        allow: &[S],
        deny: &[S],
        approval_required: &[S],
    ) -> Result<Self, PermissionPatternError> {
        let parse_all = |texts: &[S]| -> Result<Vec<_>, PermissionPatternError> {
            texts
                .iter()
                .map(|text| PermissionPattern::parse(text.as_ref()))
                .collect()
        };
        Ok(Self {
            allow: parse_all(allow)?,
            deny: parse_all(deny)?,
            approval_required: parse_all(approval_required)?,
            narrowed: Vec::new(),
        })
    }

    /// These rules with a session's narrowings on top.
    pub fn narrowed(&self, narrowings: &[std::sync::Arc<Narrowing>]) -> Self {
        let mut rules = self.clone();
        rules.narrowed.extend(narrowings.iter().cloned());
        rules
    }

    /// These rules with `other`'s on top: its denies first, its allows and
    /// approvals added (a tool's or the global layer's rules).
    pub fn layered(&self, other: &PermissionRules) -> Self {
        let mut rules = self.clone();
        rules.deny.splice(0..0, other.deny.iter().cloned());
        rules.allow.extend(other.allow.iter().cloned());
        rules
            .approval_required
            .extend(other.approval_required.iter().cloned());
        rules.narrowed.extend(other.narrowed.iter().cloned());
        rules
    }

    /// Decides one permission (deny, then allow, then a session's
    /// narrowing, then approval).
    pub fn decide(&self, permission: &str) -> PermissionDecision {
        if let Some(pattern) = first_match(&self.deny, permission) {
            return PermissionDecision::Denied {
                pattern: pattern.clone(),
            };
        }
        if first_match(&self.allow, permission).is_none() {
            return PermissionDecision::NotGranted;
        }
        if let Some(rule) = self.narrowed.iter().find_map(|n| n.refuses(permission)) {
            return PermissionDecision::Narrowed { rule };
        }
        match first_match(&self.approval_required, permission) {
            Some(pattern) => PermissionDecision::NeedsApproval {
                pattern: pattern.clone(),
            },
            None => PermissionDecision::Allowed,
        }
    }

    /// Checks every permission a tool declares. Returns the ones that need
    /// approval (in order, without duplicates), or the first refusal.
    pub fn check_all<S: AsRef<str>>(
        &self,
        permissions: &[S],
    ) -> Result<Vec<String>, PermissionRefusal> {
        let mut needs_approval: Vec<String> = Vec::new();
        for permission in permissions {
            let permission = permission.as_ref();
            match self.decide(permission) {
                PermissionDecision::Allowed => {}
                PermissionDecision::NeedsApproval { .. } => {
                    if !needs_approval.iter().any(|p| p == permission) {
                        needs_approval.push(permission.to_owned());
                    }
                }
                PermissionDecision::Denied { pattern } => {
                    return Err(PermissionRefusal::Denied {
                        permission: permission.to_owned(),
                        pattern,
                    });
                }
                PermissionDecision::NotGranted => {
                    return Err(PermissionRefusal::NotGranted {
                        permission: permission.to_owned(),
                    });
                }
                PermissionDecision::Narrowed { rule } => {
                    return Err(PermissionRefusal::Narrowed {
                        permission: permission.to_owned(),
                        rule,
                    });
                }
            }
        }
        Ok(needs_approval)
    }

    /// Patterns listed identically in both `allow` and `deny` (deny wins, so the
    /// allow entry is dead); config validation reports them as overlapping rules.
    pub fn overlaps(&self) -> Vec<String> {
        let mut overlaps: Vec<String> = Vec::new();
        for pattern in &self.allow {
            if self.deny.contains(pattern) && !overlaps.iter().any(|o| o == pattern.as_str()) {
                overlaps.push(pattern.as_str().to_owned());
            }
        }
        overlaps
    }
}

fn first_match<'a>(
    patterns: &'a [PermissionPattern],
    permission: &str,
) -> Option<&'a PermissionPattern> {
    patterns.iter().find(|pattern| pattern.matches(permission))
}

/// Why a declared permission was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PermissionRefusal {
    /// A `deny` pattern matched.
    #[error(
        "permission {permission:?} is denied by the profile's deny rule \"{pattern}\"; \
         remove or narrow that rule to allow it"
    )]
    Denied {
        /// The permission that was refused.
        permission: String,
        /// The deny pattern that matched.
        pattern: PermissionPattern,
    },
    /// No `allow` pattern matched.
    #[error(
        "permission {permission:?} is not in the profile's allow list; \
         add it (or a pattern such as {suggestion:?}) to allow",
        suggestion = family_pattern(permission)
    )]
    NotGranted {
        /// The permission that was refused.
        permission: String,
    },
    /// The caller's session narrowed it away.
    #[error("permission {permission:?} is not available in this session: {rule}")]
    Narrowed {
        /// The permission that was refused.
        permission: String,
        /// The narrowing rule, in words.
        rule: String,
    },
}

/// `network:fetch` -> `network:*`, the pattern a config author most likely wants.
fn family_pattern(permission: &str) -> String {
    match permission.split_once(':') {
        Some((family, _)) => format!("{family}:*"),
        None => permission.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str], approval: &[&str]) -> PermissionRules {
        PermissionRules::parse(allow, deny, approval).expect("valid test patterns")
    }

    fn pattern(text: &str) -> PermissionPattern {
        PermissionPattern::parse(text).expect("valid test pattern")
    }

    #[test]
    fn patterns_accept_the_documented_alphabet() {
        for text in [
            "file:read",
            "file:*",
            "*",
            "network:fetch",
            "database:write",
            "my_tool.v2-beta:do",
        ] {
            assert!(PermissionPattern::parse(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn patterns_reject_bad_text_with_a_clear_message() {
        let error = PermissionPattern::parse("File:read").unwrap_err();
        assert_eq!(
            error.to_string(),
            "permission pattern \"File:read\" contains 'F'; use lower-case letters, digits, \
             '_', '.', '-', ':' and '*', e.g. \"file:read\" or \"network:*\""
        );
        assert!(
            PermissionPattern::parse("")
                .unwrap_err()
                .problem
                .contains("empty")
        );
        assert!(PermissionPattern::parse("file read").is_err());
        assert!(
            PermissionPattern::parse("file:")
                .unwrap_err()
                .problem
                .contains("segment")
        );
        assert!(PermissionPattern::parse(":read").is_err());
        assert!(PermissionPattern::parse("file::read").is_err());
        assert!(PermissionPattern::parse("fïle:read").is_err());
        assert!("file:?".parse::<PermissionPattern>().is_err());
    }

    #[test]
    fn wildcards_match_families() {
        assert!(pattern("file:*").matches("file:read"));
        assert!(pattern("file:*").matches("file:write"));
        assert!(!pattern("file:*").matches("network:fetch"));
        assert!(!pattern("file:*").matches("filesystem:read"));
        assert!(pattern("*").matches("database:write"));
        assert!(pattern("*:read").matches("env:read"));
        assert!(!pattern("file:read").matches("file:read:all"));
    }

    #[test]
    fn allow_grants_and_absence_does_not() {
        let rules = rules(&["file:read", "network:*"], &[], &[]);
        assert_eq!(rules.decide("file:read"), PermissionDecision::Allowed);
        assert_eq!(rules.decide("network:fetch"), PermissionDecision::Allowed);
        assert_eq!(rules.decide("file:write"), PermissionDecision::NotGranted);
        assert_eq!(
            rules.decide("database:write"),
            PermissionDecision::NotGranted
        );
    }

    #[test]
    fn empty_rules_grant_nothing() {
        let rules = PermissionRules::default();
        assert_eq!(rules.decide("file:read"), PermissionDecision::NotGranted);
        assert!(rules.check_all::<&str>(&[]).unwrap().is_empty());
    }

    #[test]
    fn deny_wins_over_allow_and_approval() {
        let rules = rules(&["*"], &["terminal:*"], &["terminal:execute"]);
        assert_eq!(
            rules.decide("terminal:execute"),
            PermissionDecision::Denied {
                pattern: pattern("terminal:*")
            }
        );
        assert_eq!(rules.decide("file:write"), PermissionDecision::Allowed);
    }

    #[test]
    fn approval_gates_allowed_permissions_only() {
        let rules = rules(&["file:*"], &[], &["file:write", "terminal:execute"]);
        assert_eq!(
            rules.decide("file:write"),
            PermissionDecision::NeedsApproval {
                pattern: pattern("file:write")
            }
        );
        assert_eq!(rules.decide("file:read"), PermissionDecision::Allowed);
        // Approval alone never grants.
        assert_eq!(
            rules.decide("terminal:execute"),
            PermissionDecision::NotGranted
        );
    }

    #[test]
    fn check_all_collects_approvals_in_order_without_duplicates() {
        let rules = rules(&["*"], &[], &["terminal:*", "database:write"]);
        let needs = rules
            .check_all(&[
                "file:read",
                "database:write",
                "terminal:execute",
                "database:write",
            ])
            .unwrap();
        assert_eq!(needs, ["database:write", "terminal:execute"]);
    }

    #[test]
    fn check_all_reports_the_first_refusal() {
        let rules = rules(&["file:read", "network:*"], &["terminal:*"], &[]);
        let denied = rules
            .check_all(&["file:read", "terminal:execute", "env:read"])
            .unwrap_err();
        assert_eq!(
            denied.to_string(),
            "permission \"terminal:execute\" is denied by the profile's deny rule \"terminal:*\"; \
             remove or narrow that rule to allow it"
        );
        let missing = rules.check_all(&["file:read", "env:read"]).unwrap_err();
        assert_eq!(
            missing,
            PermissionRefusal::NotGranted {
                permission: "env:read".into()
            }
        );
        assert_eq!(
            missing.to_string(),
            "permission \"env:read\" is not in the profile's allow list; \
             add it (or a pattern such as \"env:*\") to allow"
        );
    }

    #[test]
    fn the_design_profiles_decide_as_documented() {
        let readonly = rules(
            &["file:read", "network:*"],
            &["file:write", "terminal:execute"],
            &[],
        );
        assert_eq!(readonly.decide("file:read"), PermissionDecision::Allowed);
        assert!(matches!(
            readonly.decide("file:write"),
            PermissionDecision::Denied { .. }
        ));
        let developer = rules(&["*"], &["env:write"], &["terminal:execute"]);
        assert!(matches!(
            developer.decide("terminal:execute"),
            PermissionDecision::NeedsApproval { .. }
        ));
        assert!(matches!(
            developer.decide("env:write"),
            PermissionDecision::Denied { .. }
        ));
        assert_eq!(
            developer.decide("database:write"),
            PermissionDecision::Allowed
        );
    }

    #[test]
    fn overlaps_lists_identical_allow_and_deny_entries_once() {
        let rules = rules(
            &["file:read", "network:*", "file:read", "env:read"],
            &["network:*", "file:read", "terminal:*"],
            &[],
        );
        assert_eq!(rules.overlaps(), ["file:read", "network:*"]);
        assert!(
            self::rules(&["*"], &["file:write"], &[])
                .overlaps()
                .is_empty()
        );
    }

    #[test]
    fn parse_reports_the_bad_pattern() {
        let error = PermissionRules::parse(&["file:read"], &["Terminal"], &[]).unwrap_err();
        assert_eq!(error.pattern, "Terminal");
    }
}
