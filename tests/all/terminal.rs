//! Terminal: the `terminal` import under profiles (allowed and denied
//! commands, dangerous commands in each mode, approvals, limits).
