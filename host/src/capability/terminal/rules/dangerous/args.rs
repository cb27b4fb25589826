//! Reading a program's arguments: flags in long or clustered short form, and
//! the operands between the options.

/// True if `args` has a long option in `long` (or an abbreviation of one
/// at least four letters long, as GNU tools and git take: `--recur`,
/// `--forc`) or a short-option cluster containing `short` (`-fd` has `f`
/// and `d`). Stops at `--`.
pub(crate) fn has_flag(args: &[String], short: char, long: &[&str]) -> bool {
    args.iter().take_while(|a| *a != "--").any(|arg| {
        let long_match = long.iter().any(|l| {
            let name = arg.split('=').next().unwrap_or(arg);
            arg == l
                || arg
                    .strip_prefix(l)
                    .is_some_and(|rest| rest.starts_with('='))
                || (name.len() >= 6 && name.starts_with("--") && l.starts_with(name))
        });
        let short_match = arg
            .strip_prefix('-')
            .is_some_and(|flags| !flags.starts_with('-') && flags.contains(short));
        long_match || short_match
    })
}

/// The arguments that are not options, skipping the values of `with_value`.
pub(crate) fn operands<'a>(args: &'a [String], with_value: &[&str]) -> Vec<&'a str> {
    let mut operands = Vec::new();
    let mut iter = args.iter();
    let mut options_done = false;
    while let Some(arg) = iter.next() {
        if options_done || !arg.starts_with('-') || arg == "-" {
            operands.push(arg.as_str());
        } else if arg == "--" {
            options_done = true;
        } else if with_value.contains(&arg.as_str()) {
            iter.next();
        }
    }
    operands
}
