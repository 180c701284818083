//! rmca-bench: `make bench` and `make demo`.
//!
//! Measures named MCA configurations with tests/bench/mpibench (two ranks bound to
//! cores) in one invocation, interleaved (every round runs every configuration, in a
//! rotated order) and repeated, and the machine's limits with tests/bench/limits in
//! the same rounds (with libfabric's fi_pingpong as the limit of the providers the OFI
//! MTLs run on); prints medians with ratios to a baseline and writes CSV, JSON
//! and PNG plots under build/bench/<stamp>/ (build/bench/latest points there). Then
//! NetPIPE for each pair of ours and its stock counterpart, and this run's ratios
//! against the previous committed ones (regressions.txt: flagged, never failed).

mod configs;
mod demo;
mod fi_pingpong;
mod floors;
mod imb;
mod loss;
mod measure;
mod memory;
mod netpipe;
mod options;
mod pairs;
mod plot;
mod regress;
mod report;
mod results;
mod run;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--memory") {
        return memory::main(&args[1..]).unwrap_or_else(|e| {
            eprintln!("rmca-bench: {e}");
            ExitCode::from(2)
        });
    }
    let result = options::parse_options(args).and_then(|opts| match opts {
        Some(mut opts) => {
            opts.ompi5_prefix = configs::locate(
                &mut opts.configs,
                &mca_harness::ompi5::component_dir(),
                configs::ompi5_prefix,
            )?;
            measure::measure(&opts)
        }
        None => Ok(ExitCode::SUCCESS),
    });
    result.unwrap_or_else(|e| {
        eprintln!("rmca-bench: {e}");
        ExitCode::from(2)
    })
}
