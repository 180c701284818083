//! The body of tests/static_build.rs (Open MPI 4.1.4) and tests/ompi5_static.rs (5.0.7):
//! the checks that hold for any Open MPI built with ours compiled in. Each test file
//! describes its series in a [`StaticBuild`], runs these, and keeps only what differs
//! (its conformance configurations, the version and interface lines 5.0 reports, and
//! what each series' own contrast is).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::ompi_info;
use crate::{McaConfig, assert_every_parameter_has_help};

/// One of ours compiled in: `framework`, `component`, and the library of the
/// installation that must contain it.
#[derive(Debug, Clone, Copy)]
pub struct Member {
    pub framework: &'static str,
    pub component: &'static str,
    pub library: &'static str,
}

/// Ours, in either series: the BTLs inside libopen-pal, the MTL inside libmpi.
pub const MEMBERS: &[Member] = &[
    Member {
        framework: "btl",
        component: "rusnic",
        library: "libopen-pal.so",
    },
    Member {
        framework: "btl",
        component: "rsmcuda",
        library: "libopen-pal.so",
    },
    Member {
        framework: "mtl",
        component: "rofi",
        library: "libmpi.so",
    },
];

/// The help files installed with the prefix.
const HELP_FILES: &[&str] = &[
    "help-mpi-btl-rusnic.txt",
    "help-mpi-btl-rsmcuda.txt",
    "help-mtl-rofi.txt",
    "help-rmca.txt",
];

/// What the checks need to know of one series' static build.
#[derive(Debug, Clone)]
pub struct StaticBuild {
    /// Its installation prefix.
    pub prefix: PathBuf,
    /// Appended to a conformance configuration's name ("-static", "-ompi5-static").
    pub name_suffix: &'static str,
    /// Environment for the jobs and for every `ompi_info` given another component path
    /// (5.0's PMIx lists the files it cannot load from it unless told not to).
    pub env: &'static [(&'static str, &'static str)],
    /// Parameter names (by ending) left out when the static build's parameters are
    /// compared with the plugins': those the two prefixes register differently for a
    /// reason that is not our code.
    pub ignored_parameter_endings: &'static [&'static str],
}

impl StaticBuild {
    /// `config` (named `<name><name_suffix>`) on this installation.
    pub fn config(&self, config: McaConfig) -> McaConfig {
        let name = format!("{}{}", config.name, self.name_suffix);
        let mut config = config.on_prefix(&self.prefix);
        for (k, v) in self.env {
            config = config.with_env(k, v);
        }
        config.named(&name)
    }

    /// `ompi_info` of `prefix` with `component_path` as its component path and this
    /// series' environment.
    pub fn ompi_info_with_path(
        &self,
        prefix: &Path,
        args: &[&str],
        component_path: &str,
    ) -> String {
        let mut env = vec![("OMPI_MCA_mca_base_component_path", component_path)];
        env.extend(self.env.iter().copied());
        ompi_info(prefix, args, &env)
    }

    /// The components the `ompi_info` of `prefix` sees when its component path is an
    /// empty directory (beside the static build's prefix): exactly those compiled into
    /// the libraries.
    pub fn components_without_dsos(&self, prefix: &Path) -> String {
        let empty = self.prefix.with_file_name("empty-component-dir");
        std::fs::create_dir_all(&empty).expect("create an empty component directory");
        self.ompi_info_with_path(prefix, &["--parsable"], empty.to_str().expect("utf-8 path"))
    }

    /// Checks that `ompi_info` lists each of ours, with its component directory and
    /// without any (compiled in); returns both listings (`--parsable`) for the series'
    /// own checks: (everything, static only).
    pub fn assert_ours_are_static_members(&self) -> (String, String) {
        let everything = ompi_info(&self.prefix, &["--parsable"], &[]);
        let static_only = self.components_without_dsos(&self.prefix);
        for Member {
            framework,
            component,
            ..
        } in MEMBERS
        {
            assert!(
                listed(&everything, framework, component),
                "ompi_info does not list {framework} {component}:\n{everything}"
            );
            assert!(
                listed(&static_only, framework, component),
                "{framework} {component} disappears without the component directory: \
                 it is not compiled in:\n{static_only}"
            );
        }
        (everything, static_only)
    }

    /// No `mca_<framework>_<component>.*` of ours anywhere under the prefix.
    pub fn assert_no_shared_object_of_ours(&self) {
        let mut stack = vec![self.prefix.clone()];
        let mut found = Vec::new();
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("read the prefix") {
                let path = entry.expect("directory entry").path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                if MEMBERS
                    .iter()
                    .any(|m| name.starts_with(&format!("mca_{}_{}.", m.framework, m.component)))
                {
                    found.push(path);
                }
            }
        }
        assert!(found.is_empty(), "DSOs of static components: {found:?}");
    }

    /// Each component structure lives in the library it belongs to, and none of the
    /// Rust code around it (one private copy of the standard library per component) is
    /// exported from Open MPI's libraries.
    pub fn assert_libraries_export_the_structures_and_no_rust(&self) {
        let lib = self.prefix.join("lib");
        for Member {
            framework,
            component,
            library,
        } in MEMBERS
        {
            let symbols = exported(&lib.join(library));
            let structure = format!("mca_{framework}_{component}_component");
            assert!(
                symbols.contains(&structure),
                "{library} does not export {structure}"
            );
        }
        for library in ["libopen-pal.so", "libmpi.so"] {
            let rust: Vec<String> = exported(&lib.join(library))
                .into_iter()
                .filter(|s| s.starts_with("_ZN") || s.starts_with("_R") || s.contains("rust_"))
                .collect();
            assert!(rust.is_empty(), "{library} exports Rust symbols: {rust:?}");
        }
    }

    /// `ompi_info --param <framework> <component> --level 9` of the static build.
    pub fn parameters(&self, member: &Member) -> String {
        ompi_info(
            &self.prefix,
            &[
                "--param",
                member.framework,
                member.component,
                "--level",
                "9",
            ],
            &[],
        )
    }

    /// The parameters of each of ours register, every one with its help text, and the
    /// help files are installed with the prefix. Returns each member's parameter
    /// listing (`parameters`), in [`MEMBERS`]' order.
    pub fn assert_parameters_and_help(&self) -> Vec<String> {
        let listings = MEMBERS
            .iter()
            .map(|m| {
                let text = self.parameters(m);
                let prefix = format!("{}_{}_", m.framework, m.component);
                let count = assert_every_parameter_has_help(&text, &prefix);
                assert!(count > 0, "no {prefix}* parameters:\n{text}");
                text
            })
            .collect();
        let share = self.prefix.join("share/openmpi");
        for help in HELP_FILES {
            assert!(
                share.join(help).is_file(),
                "{help} not installed in {}",
                share.display()
            );
        }
        listings
    }

    /// The static member's parameters (`static_listing`) are the plugin's
    /// (`plugin_listing`): the static build is the code of this checkout, not a stale
    /// object left in Open MPI's build tree.
    pub fn assert_same_parameters(
        &self,
        member: &Member,
        static_listing: &str,
        plugin_listing: &str,
        rebuild: &str,
    ) {
        let (framework, component) = (member.framework, member.component);
        assert_eq!(
            self.parameter_names(static_listing),
            self.parameter_names(plugin_listing),
            "{framework} {component}: the static member's parameters differ from the \
             plugin's (rebuild with {rebuild})"
        );
    }

    /// The names of the parameters an `ompi_info` listing shows, less the ignored ones.
    pub fn parameter_names(&self, ompi_info: &str) -> BTreeSet<String> {
        ompi_info
            .split("parameter \"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .filter(|name| {
                !self
                    .ignored_parameter_endings
                    .iter()
                    .any(|e| name.ends_with(e))
            })
            .map(str::to_owned)
            .collect()
    }
}

/// Whether an `ompi_info --parsable` listing has `framework` `component`.
pub fn listed(ompi_info: &str, framework: &str, component: &str) -> bool {
    let prefix = format!("mca:{framework}:{component}:version:");
    ompi_info.lines().any(|l| l.starts_with(&prefix))
}

/// What a library's dynamic symbol table defines (`readelf --dyn-syms`).
pub fn exported(library: &Path) -> Vec<String> {
    let out = std::process::Command::new("readelf")
        .args(["--dyn-syms", "-W"])
        .arg(library)
        .output()
        .expect("run readelf");
    assert!(
        out.status.success(),
        "readelf {}: {}",
        library.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains(" UND "))
        .filter_map(|l| l.split_whitespace().nth(7).map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "mca:btl:rusnic:version:\"api:3.3.0\"\n\
                           mca:btl:tcp:version:\"mca:2.1.0\"\n";

    #[test]
    fn listed_matches_the_component_exactly() {
        assert!(listed(LISTING, "btl", "rusnic"));
        assert!(listed(LISTING, "btl", "tcp"));
        assert!(!listed(LISTING, "btl", "rsmcuda"));
        assert!(!listed(LISTING, "mtl", "rusnic"));
        assert!(!listed("mca:btl:rusnicx:version:", "btl", "rusnic"));
    }

    #[test]
    fn parameter_names_leave_out_the_ignored_endings() {
        let build = StaticBuild {
            prefix: PathBuf::from("/nonexistent"),
            name_suffix: "-x",
            env: &[],
            ignored_parameter_endings: &["_accelerator_eager_limit"],
        };
        let text = "MCA btl rusnic: parameter \"btl_rusnic_verbose\" (current value: \"0\")\n\
                    MCA btl rusnic: parameter \"btl_rusnic_accelerator_eager_limit\" (x)\n\
                    MCA btl rusnic: parameter \"btl_rusnic_mtu\" (x)\n";
        let names: Vec<String> = build.parameter_names(text).into_iter().collect();
        assert_eq!(names, ["btl_rusnic_mtu", "btl_rusnic_verbose"]);
        let all = StaticBuild {
            ignored_parameter_endings: &[],
            ..build
        };
        assert_eq!(all.parameter_names(text).len(), 3);
    }
}
