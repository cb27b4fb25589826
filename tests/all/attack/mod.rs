//! Attack tests: each reproduces a way into the sandbox or the host that an
//! adversarial review found, through the real `toolhost` binary or a real
//! server, and asserts the effect did not happen (the byte never reached
//! the operator's terminal, the file is not setuid, host git ran nothing,
//! the masked content never appeared, the other tenant's call went on).
//! Every test here failed on the commit before its fix.

mod approval;
mod epoch;
mod escapes;
mod git;
mod guard;
mod guard_planted;
mod handles;
mod identity;
mod killed;
mod lane;
mod masks;
mod namespaces;
mod network;
mod on_thread;
mod output_size;
mod own_files;
mod own_missing;
mod own_races;
mod params;
mod proxy;
mod save_content;
mod search_races;
mod server;
mod special_files;
mod tasks;
mod tenants;
mod tty;
mod url_rules;
mod walk;
