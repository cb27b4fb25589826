//! The list's invariants: each capability with a table is listed under its
//! key, its needs come before it, its permissions are named after its key;
//! and a capability is described by the permissions a tool declares.

use super::CAPABILITIES;
use super::list::foreach_capability;
use super::sandbox::Capability;
use super::section::Section;
use crate::contract::Permission;

/// One listed capability with a table: its name in the list, its key, its
/// needs, its profile section and its permissions.
type Listed = (
    &'static str,
    &'static str,
    &'static [&'static str],
    Option<&'static str>,
    &'static [Permission],
);

macro_rules! listed {
    (sections: [$($(#[$sm:meta])* $skey:ident: $scap:path [$($g:ident)?]),* $(,)?],
     others: [$($rest:tt)*] $(,)?) => {
        /// Every capability with a table, in the list's order.
        fn listed() -> Vec<Listed> {
            vec![$(
                $(#[$sm])*
                (
                    stringify!($skey),
                    <$scap as Section>::KEY,
                    <$scap as Section>::NEEDS,
                    <$scap as Capability>::INFO.section,
                    <$scap as Capability>::INFO.permissions,
                ),
            )*]
        }
    };
}
foreach_capability!(listed);

#[test]
fn each_capability_is_listed_under_its_key_after_what_it_needs_with_permissions_named_after_it() {
    let listed = listed();
    let mut before: Vec<&str> = Vec::new();
    for (name, key, needs, section, permissions) in listed {
        assert_eq!(name, key, "listed as {name:?}");
        assert_eq!(
            section,
            Some(key),
            "{key}'s description names another section"
        );
        assert!(!before.contains(&key), "{key} is listed twice");
        for need in needs {
            assert!(
                before.contains(need),
                "{key} needs {need:?}, which is not listed before it"
            );
        }
        for permission in permissions {
            assert_eq!(permission.capability(), key, "{key} declares {permission}");
        }
        before.push(key);
    }
    let mut names: Vec<_> = CAPABILITIES.iter().map(|c| c.info.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), CAPABILITIES.len(), "{names:?}");
}

#[test]
fn a_capability_is_described_by_the_permissions_declared() {
    let file = CAPABILITIES
        .iter()
        .find(|c| c.info.name == "file")
        .expect("the file capability is linked");
    let read = file.info.describe(&["file:read"]);
    // Only what file:read gives: reading (in file.write grants too).
    assert_eq!(read, file.info.each[0]);
    assert!(
        read.starts_with("read in") && !read.contains("; write"),
        "{read}"
    );
    let both = file.info.describe(&["file:read", "file:write"]);
    assert!(both.contains("; write in"), "{both}");
    // One permission, one description.
    for linked in CAPABILITIES {
        if linked.info.each.is_empty() {
            let all: Vec<&str> = linked.info.permissions.iter().map(|p| p.as_str()).collect();
            assert_eq!(linked.info.describe(&all), linked.info.description);
        } else {
            assert_eq!(linked.info.each.len(), linked.info.permissions.len());
        }
    }
}
