//! The command line of the benchmark programs: `--name VALUE` options and `--name` switches.
//! Each program takes the helpers it needs; not every one takes switches or strict numbers.

use std::str::FromStr;

/// The word after `name` on the command line, when `name` is there.
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// Whether the switch `name` is on the command line.
#[allow(dead_code, reason = "not every program takes switches")]
pub fn flag(args: &[String], name: &str) -> bool {
    args.iter().any(|a| a == name)
}

/// The word after `name` parsed as a `T`, or `default` without `name`; a word that does not
/// parse ends the program with status 2.
#[allow(dead_code, reason = "not every program rejects malformed numbers")]
pub fn num<T: FromStr>(args: &[String], name: &str, default: T) -> T {
    match arg(args, name) {
        None => default,
        Some(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("{name}: cannot parse {v:?}");
            std::process::exit(2)
        }),
    }
}

/// The host's cores (1 where the count is unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
