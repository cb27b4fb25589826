//! File tools: read, write, edit, list, search and diff files in the
//! directories the caller's profile grants. Plain `std::fs`: the host
//! preopens the granted directories (the workspace as `.`, so relative paths
//! start there) and refuses denied paths, so a path outside the grants simply
//! does not exist.

mod diff;
mod fsio;
mod list;
mod read;
mod search;
mod walk;
mod write;

use diff::file_diff;
use list::list_dir;
use read::read_file;
use search::search_files;
use toolhost_sdk::export_plugin;
use write::{edit_file, write_file};

export_plugin!(
    read_file,
    write_file,
    edit_file,
    list_dir,
    search_files,
    file_diff
);
