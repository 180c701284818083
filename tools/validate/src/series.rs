//! The Open MPI series the suites run on, each with its pairs of ours beside stock:
//! Debian's 4.1.4 (the system Open MPI, ours from build/mca) and the project's 5.0.x
//! (`RMCA_OMPI5_PREFIX`, configure-support/ompi5; ours from build/ompi5/mca, built by
//! `make components-ompi5`).

use std::path::PathBuf;

use mca_harness::McaConfig;
use mca_harness::ompi5::{self, on_ompi5};
use mca_harness::static_ompi::is_installation;

/// One of ours beside the stock configuration it is compared with.
#[derive(Clone)]
pub struct Pair {
    /// What `--components` selects it by: rusnic, rsmcuda, rofi, rofi-shm.
    pub component: &'static str,
    pub stock: McaConfig,
    pub ours: McaConfig,
}

/// The components `--components` accepts.
pub const COMPONENTS: [&str; 4] = ["rusnic", "rsmcuda", "rofi", "rofi-shm"];

/// An Open MPI series: where it is, and the pairs run on it.
pub struct Series {
    /// `4.1` or `5.0`: `--series`, the table's first column, the findings' tag.
    pub name: &'static str,
    /// The installation; `None`: the system Open MPI the harness was built against.
    pub prefix: Option<PathBuf>,
    pub pairs: Vec<Pair>,
}

/// The series `--series` accepts.
pub const SERIES: [&str; 2] = ["4.1", "5.0"];

fn rofi(name: &str, provider: &str) -> McaConfig {
    McaConfig::new(
        name,
        &[
            ("pml", "cm"),
            ("mtl", "rofi"),
            ("mtl_rofi_provider_include", provider),
        ],
    )
}

/// The pairs of one series, shared-memory stock being vader on 4.1 and sm on 5.0.
/// rofi on libfabric's shm is compared with the stock OFI MTL on tcp;ofi_rxm: that
/// MTL declines shm on both series (its hints ask for FI_REMOTE_COMM), and the
/// closest stock stack is the same PML, cm; ob1 over shared memory would make
/// failures of cm ours (on 5.0, cm has no one-sided component: MPI_Win_create fails
/// with MPI_ERR_WIN under the stock OFI MTL and rofi alike).
fn pairs(stock_shm: McaConfig, wrap: impl Fn(McaConfig) -> McaConfig) -> Vec<Pair> {
    vec![
        Pair {
            component: "rusnic",
            stock: wrap(McaConfig::stock_tcp()),
            ours: wrap(McaConfig::new(
                "rusnic",
                &[("pml", "ob1"), ("btl", "self,rusnic")],
            )),
        },
        Pair {
            component: "rsmcuda",
            stock: wrap(stock_shm),
            ours: wrap(McaConfig::new(
                "rsmcuda",
                &[("pml", "ob1"), ("btl", "self,rsmcuda")],
            )),
        },
        Pair {
            component: "rofi",
            stock: wrap(McaConfig::stock_ofi_tcp()),
            ours: wrap(rofi("rofi", "tcp;ofi_rxm")),
        },
        Pair {
            component: "rofi-shm",
            stock: wrap(McaConfig::stock_ofi_tcp()),
            ours: wrap(rofi("rofi-shm", "shm")),
        },
    ]
}

/// The series named `name` with the pairs of `components`, or why it cannot run:
/// 5.0 needs its installation and our components built for it, and says so loudly
/// when either is missing (a validation asked for is never skipped).
pub fn series(name: &str, components: &[String]) -> Result<Series, String> {
    let selected = |all: Vec<Pair>| -> Vec<Pair> {
        all.into_iter()
            .filter(|p| components.iter().any(|c| c == p.component))
            .collect()
    };
    match name {
        "4.1" => Ok(Series {
            name: "4.1",
            prefix: None,
            pairs: selected(pairs(McaConfig::stock_vader(), |c| c)),
        }),
        "5.0" => {
            let prefix = ompi5::prefix();
            if !is_installation(&prefix) {
                return Err(format!(
                    "Open MPI 5.0 was asked for but there is no installation at {} \
                     (RMCA_OMPI5_PREFIX; `make validate` sets it to \
                     `configure-support/ompi5 --print-prefix`, which builds it)",
                    prefix.display()
                ));
            }
            let dir = ompi5::component_dir();
            let chosen = selected(pairs(
                McaConfig::new("stock-sm", &[("pml", "ob1"), ("btl", "self,sm")]),
                on_ompi5,
            ));
            let missing: Vec<String> = chosen
                .iter()
                .map(|p| match p.component {
                    "rusnic" => "mca_btl_rusnic.so",
                    "rsmcuda" => "mca_btl_rsmcuda.so",
                    _ => "mca_mtl_rofi.so",
                })
                .filter(|so| !dir.join(so).is_file())
                .map(str::to_owned)
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "Open MPI 5.0 was asked for but {} not built for it in {} \
                     (`make components-ompi5`)",
                    missing.join(", "),
                    dir.display()
                ));
            }
            Ok(Series {
                name: "5.0",
                prefix: Some(prefix),
                pairs: chosen,
            })
        }
        other => Err(format!(
            "unknown series {other} (known: {})",
            SERIES.join(" ")
        )),
    }
}

/// Stock failures whose cause is known, by series and `suite/program`: printed beside
/// the test in the list of failures on stock (they fail on ours too, so they are
/// never counted against ours).
const KNOWN_STOCK: [(&str, &str, &str); 2] = [
    (
        "5.0",
        "pt2pt/sendself",
        "Open MPI 5.0.7's defect: a receive type of a negative-stride vector of \
         MPI_C_DOUBLE_COMPLEX (\"Found 27 errors\" on sm, tcp and ofi; 4.1.4 passes)",
    ),
    (
        "5.0",
        "datatype/tmatchsize",
        "this 5.0.7 is configured without Fortran (--disable-mpi-fortran): \
         MPI_Type_match_size finds no type and returns MPI_ERR_ARG on every transport",
    ),
];

/// Why `test` (`suite/program`) fails on stock in `series`, where that is known.
pub fn known_stock_failure(series: &str, test: &str) -> Option<&'static str> {
    KNOWN_STOCK
        .iter()
        .find(|(s, t, _)| *s == series && *t == test)
        .map(|(_, _, why)| *why)
}
