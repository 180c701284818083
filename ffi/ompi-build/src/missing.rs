//! What an installation's headers need besides themselves.
//!
//! A distribution's package can install a configuration that names headers it does not
//! install (Debian 13's libopenmpi-dev 5.0.7: `opal_config.h` includes the threads and
//! timer implementation headers by name, upstream's `make install` leaves them out),
//! and an Open MPI built with an external PMIx includes `pmix.h` from wherever that
//! PMIx put it (Debian: `pmix2/include` of the multiarch library directory), which the
//! wrapper compiler does not name because applications never need it.

use std::path::PathBuf;
use std::process::Command;

/// The headers `opal_config.h` names for the components compiled into the libraries
/// (`#define MCA_<framework>_..._HEADER "<path>"`; empty names are skipped).
#[must_use]
pub fn headers_named_by_config(config: &str) -> Vec<String> {
    config
        .lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix("#define MCA_")?;
            let (name, value) = rest.split_once(char::is_whitespace)?;
            if !name.ends_with("_HEADER") {
                return None;
            }
            let path = value.trim().strip_prefix('"')?.strip_suffix('"')?;
            (!path.is_empty()).then(|| path.to_owned())
        })
        .collect()
}

/// The Open MPI headers `header` includes by a project path (`#include "opal/..."`,
/// `"ompi/..."`); an unreadable file names none.
#[must_use]
pub fn project_includes(header: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(header).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix('#')?.trim_start();
            let quoted = rest.strip_prefix("include")?.trim_start();
            let path = quoted.strip_prefix('"')?.split('"').next()?;
            (path.starts_with("opal/") || path.starts_with("ompi/")).then(|| path.to_owned())
        })
        .collect()
}

/// Whether this Open MPI was configured with an external PMIx (`pmix.h` not in its
/// own include directories).
#[must_use]
pub fn uses_external_pmix(config: &str) -> bool {
    config.lines().any(|line| {
        let mut words = line.split_whitespace();
        words.next() == Some("#define")
            && words.next() == Some("OPAL_USING_INTERNAL_PMIX")
            && words.next() == Some("0")
    })
}

/// The include directories of the PMIx `pkg-config` knows (`pmix.pc`).
pub fn pmix_include_dirs() -> Result<Vec<PathBuf>, String> {
    let out = Command::new("pkg-config")
        .args(["--cflags-only-I", "pmix"])
        .output()
        .map_err(|e| format!("cannot run pkg-config: {e}; install pkg-config"))?;
    if !out.status.success() {
        return Err(format!(
            "this Open MPI uses an external PMIx, and pkg-config does not know it ({}); \
             install PMIx's development package (Debian: libpmix-dev)",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|flag| flag.strip_prefix("-I"))
        .map(PathBuf::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN_13: &str = r#"
#define MCA_memcpy_IMPLEMENTATION_HEADER "opal/mca/memcpy/base/memcpy_base_default.h"
#define MCA_ompi_mtl_DIRECT_CALL_HEADER ""
#define MCA_threads_mutex_base_include_HEADER "opal/mca/threads/pthreads/threads_pthreads_mutex.h"
#define MCA_timer_IMPLEMENTATION_HEADER "opal/mca/timer/linux/timer_linux.h"
#define MCA_threads_mutex_base_include 1
/* #define MCA_fake_HEADER "not/a/define.h" */
#define OPAL_USING_INTERNAL_PMIX 0
"#;

    #[test]
    fn the_configuration_names_its_implementation_headers() {
        assert_eq!(
            headers_named_by_config(DEBIAN_13),
            [
                "opal/mca/memcpy/base/memcpy_base_default.h",
                "opal/mca/threads/pthreads/threads_pthreads_mutex.h",
                "opal/mca/timer/linux/timer_linux.h",
            ]
        );
    }

    #[test]
    fn project_includes_are_the_quoted_opal_and_ompi_ones() {
        let dir = std::env::temp_dir().join(format!("ompi-build-includes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let header = dir.join("threads_pthreads_threads.h");
        std::fs::write(
            &header,
            "#include <pthread.h>\n#include \"opal/mca/threads/pthreads/threads_pthreads.h\"\n\
             #  include \"ompi/foo.h\" /* why */\n#include \"local.h\"\n",
        )
        .unwrap();
        assert_eq!(
            project_includes(&header),
            ["opal/mca/threads/pthreads/threads_pthreads.h", "ompi/foo.h"]
        );
        assert!(project_includes(&dir.join("absent.h")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_external_pmix_is_recognised() {
        assert!(uses_external_pmix(DEBIAN_13));
        assert!(!uses_external_pmix("#define OPAL_USING_INTERNAL_PMIX 1\n"));
        assert!(!uses_external_pmix(""));
    }
}
