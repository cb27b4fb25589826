//! Network: the `http` import under profiles (allowed and denied hosts,
//! private addresses, redirects, DNS, size and time caps).
