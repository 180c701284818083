//! The CUDA-aware Open MPI builds with rsmcuda built for each: 4.1.4 (`make ompi-cuda`,
//! configure-support/ompi-cuda; `make components-ompi-cuda`: build/ompi-cuda/mca) and
//! the 5.0.7 of tests/ompi5.rs, configured with CUDA (`make ompi5`, `make
//! components-ompi5`); and the CUDA driver stand-in (`make cuda-standin`:
//! build/cuda-standin/libcuda.so.1, tools/cuda-standin), for the end-to-end
//! device-memory tests (tests/cuda.rs).
//!
//! The tests print why they skip and pass when a piece is missing, so that `make
//! check` does not need the long build; `make check-cuda` builds everything first and
//! sets `RMCA_REQUIRE_OMPI_CUDA=1`, which turns a missing piece into a failure.
//!
//! The stand-in is loaded only where a configuration of this module puts it first in
//! `LD_LIBRARY_PATH` and sets `RMCA_CUDA_STANDIN=1` (without it, it refuses to act as
//! a driver). With `RMCA_CUDA_REAL_DRIVER=1` the same tests run on the machine's own
//! driver instead (a real GPU), and the stand-in's counters are not asked for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::static_ompi::{compile_once, is_installation, path_from_env, skip_unless_required};
use crate::{McaConfig, ompi5, repo_root};

/// One CUDA-aware Open MPI with our rsmcuda built for it.
#[derive(Debug, Clone)]
pub struct CudaBuild {
    /// `ompi41` or `ompi50`: names configurations and the program directory.
    pub series: &'static str,
    pub prefix: PathBuf,
    pub components: PathBuf,
    /// The make target that builds what is missing.
    make: &'static str,
}

/// Open MPI 4.1.4 configured `--with-cuda` (`RMCA_OMPI_CUDA_PREFIX`, set by `make
/// check-cuda` to `make -s ompi-cuda-prefix`), rsmcuda in build/ompi-cuda/mca.
pub fn ompi41() -> CudaBuild {
    CudaBuild {
        series: "ompi41",
        prefix: path_from_env("RMCA_OMPI_CUDA_PREFIX", || {
            repo_root().join("build/ompi-cuda/no-prefix-given")
        }),
        components: repo_root().join("build/ompi-cuda/mca"),
        make: "make ompi-cuda components-ompi-cuda",
    }
}

/// The Open MPI 5.0 of tests/ompi5.rs, configured with CUDA (configure-support/ompi5),
/// rsmcuda in build/ompi5/mca.
pub fn ompi50() -> CudaBuild {
    CudaBuild {
        series: "ompi50",
        prefix: ompi5::prefix(),
        components: ompi5::component_dir(),
        make: "make ompi5 components-ompi5",
    }
}

/// Where `make cuda-standin` puts `libcuda.so.1` (and `libcuda.so` to link with).
pub fn standin_dir() -> PathBuf {
    path_from_env("RMCA_CUDA_STANDIN_DIR", || {
        repo_root().join("build/cuda-standin")
    })
}

/// The CUDA headers the installations were configured with (`RMCA_CUDA_INCLUDE`, set
/// by `make check-cuda`; else the copy configure-support/ompi-cuda links beside its
/// prefix).
pub fn cuda_include_dir() -> PathBuf {
    path_from_env("RMCA_CUDA_INCLUDE", || {
        ompi41()
            .prefix
            .parent()
            .map_or_else(PathBuf::new, |work| work.join("cuda/include"))
    })
}

/// True when the tests run on the machine's driver (a real GPU), not the stand-in.
pub fn real_driver() -> bool {
    std::env::var_os("RMCA_CUDA_REAL_DRIVER").is_some_and(|v| v == "1")
}

impl CudaBuild {
    /// Whether everything the tests need exists; otherwise prints why they skip (or
    /// panics under `RMCA_REQUIRE_OMPI_CUDA`).
    pub fn available(&self) -> bool {
        let cuda_component = match self.series {
            "ompi50" => "lib/openmpi/mca_accelerator_cuda.so",
            _ => "lib/openmpi/mca_btl_smcuda.so",
        };
        let missing = if !is_installation(&self.prefix) {
            Some(format!("no Open MPI at {}", self.prefix.display()))
        } else if !self.prefix.join(cuda_component).is_file() {
            Some(format!(
                "the Open MPI at {} is not built with CUDA (no {cuda_component})",
                self.prefix.display()
            ))
        } else if !self.components.join("mca_btl_rsmcuda.so").is_file() {
            Some(format!(
                "no rsmcuda built for it in {}",
                self.components.display()
            ))
        } else if !real_driver() && !standin_dir().join("libcuda.so.1").is_file() {
            Some(format!(
                "no CUDA driver stand-in in {} (`make cuda-standin`)",
                standin_dir().display()
            ))
        } else if !cuda_include_dir().join("cuda.h").is_file() {
            Some(format!(
                "no cuda.h in {} (configure-support/cuda-headers)",
                cuda_include_dir().display()
            ))
        } else {
            None
        };
        match missing {
            None => true,
            Some(why) => skip_unless_required(
                "RMCA_REQUIRE_OMPI_CUDA",
                &format!("{why} (`{}`; `make check-cuda` builds all)", self.make),
            ),
        }
    }

    /// `config` on this installation with our components built for it, the stand-in
    /// first in the library path (unless [`real_driver`]) and its per-process counters
    /// written to `report` (a fresh directory per job; see [`Counters`]).
    pub fn config(&self, config: McaConfig, report: &Path) -> McaConfig {
        let name = format!("{}-cuda-{}", config.name, self.series);
        let config = config
            .on_prefix_with(&self.prefix, &self.components)
            .named(&name);
        if real_driver() {
            return config;
        }
        let library_path = match std::env::var("LD_LIBRARY_PATH") {
            Ok(old) if !old.is_empty() => format!("{}:{old}", standin_dir().display()),
            _ => standin_dir().display().to_string(),
        };
        config
            .with_env("LD_LIBRARY_PATH", &library_path)
            .with_env("RMCA_CUDA_STANDIN", "1")
            .with_env("RMCA_CUDA_STANDIN_REPORT", &report.display().to_string())
    }

    /// `tests/cuda/<name>.c` compiled with this installation's `mpicc`, against
    /// `cuda.h` and linked with `-lcuda` (the stand-in's soname is the driver's, so the
    /// same binary runs on a real driver), into build/cuda-programs/<series>; again
    /// whenever the source, check.h or the installation's `mpicc` is newer.
    pub fn program(&self, name: &str) -> PathBuf {
        static COMPILING: Mutex<()> = Mutex::new(());
        let _one_at_a_time = COMPILING.lock().unwrap_or_else(|e| e.into_inner());
        let source = repo_root().join("tests/cuda").join(format!("{name}.c"));
        let out_dir = repo_root().join("build/cuda-programs").join(self.series);
        std::fs::create_dir_all(&out_dir).expect("create build/cuda-programs");
        let binary = out_dir.join(name);
        let link_dir = std::ffi::OsString::from(format!("-L{}", standin_dir().display()));
        compile_once(
            &self.prefix.join("bin/mpicc"),
            &source,
            &[repo_root().join("tests/programs"), cuda_include_dir()],
            &[],
            &[&link_dir, std::ffi::OsStr::new("-lcuda")],
            &binary,
        );
        binary
    }
}

/// The stand-in's counters of every process of a job, read from the report directory
/// (`<pid>.counts`, `name value` lines).
#[derive(Debug, Default)]
pub struct Counters {
    pub per_process: Vec<BTreeMap<String, u64>>,
}

impl Counters {
    pub fn read(report: &Path) -> Counters {
        let mut per_process = Vec::new();
        let Ok(entries) = std::fs::read_dir(report) else {
            return Counters::default();
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for file in files
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == "counts"))
        {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            per_process.push(
                text.lines()
                    .filter_map(|line| {
                        let (name, value) = line.split_once(' ')?;
                        Some((name.to_owned(), value.trim().parse().ok()?))
                    })
                    .collect(),
            );
        }
        Counters { per_process }
    }

    /// `name` summed over the processes (0 where a process never counted it).
    pub fn total(&self, name: &str) -> u64 {
        self.per_process
            .iter()
            .map(|p| p.get(name).copied().unwrap_or(0))
            .sum()
    }

    /// `name` of each process, in file order.
    pub fn each(&self, name: &str) -> Vec<u64> {
        self.per_process
            .iter()
            .map(|p| p.get(name).copied().unwrap_or(0))
            .collect()
    }
}

/// Values of `device_buffers ... pvar NAME VALUE` lines, summed over ranks.
pub fn pvar_total(stdout: &str, name: &str) -> Option<u64> {
    let mut total = None;
    for line in stdout.lines() {
        let Some((_, rest)) = line.split_once(": pvar ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        if words.next() != Some(name) {
            continue;
        }
        if let Some(value) = words.next().and_then(|v| v.parse::<u64>().ok()) {
            *total.get_or_insert(0) += value;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pvar_lines_are_summed_over_ranks() {
        let out = "device_buffers rank 0: pvar btl_rsmcuda_cuda_ipc_cache_hits 5\n\
                   device_buffers rank 1: pvar btl_rsmcuda_cuda_ipc_cache_hits 7\n\
                   device_buffers rank 1: pvar btl_rsmcuda_x absent\n";
        assert_eq!(pvar_total(out, "btl_rsmcuda_cuda_ipc_cache_hits"), Some(12));
        assert_eq!(pvar_total(out, "btl_rsmcuda_x"), None);
        assert_eq!(pvar_total(out, "other"), None);
    }

    #[test]
    fn counters_are_read_per_process() {
        let dir = std::env::temp_dir().join(format!("rmca-counters-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("10.counts"), "copy.dtod.count 3\nipc.open.ok 1\n").unwrap();
        std::fs::write(dir.join("11.counts"), "copy.dtod.count 4\n").unwrap();
        std::fs::write(dir.join("notes.txt"), "copy.dtod.count 100\n").unwrap();
        let counters = Counters::read(&dir);
        assert_eq!(counters.total("copy.dtod.count"), 7);
        assert_eq!(counters.each("ipc.open.ok"), vec![1, 0]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
