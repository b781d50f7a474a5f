//! `store`: the command line of filterstore. Parsing and the command modules live in
//! `cli/src/cli/` (binary-only); this file parses, dispatches and turns errors into exit codes.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // clap prints usage errors itself and exits 2 (0 for --help / --version).
    let args = cli::Cli::parse();
    match args.command.run(&args.global) {
        Ok(code) => code.into(),
        Err(e) => {
            // A closed stdout (`store scan | head`) is not worth a message.
            if !e.quiet {
                eprintln!("store: {}", e.message);
            }
            e.code.into()
        }
    }
}
