//! The named configurations a benchmark can compare.
//!
//! Every configuration runs two ranks bound to cores with the runtime's own traffic
//! (OOB) on the loopback, so the only difference between two columns of a table is
//! the transport. Ours are listed only when their component was built.
//!
//! Two Open MPI series: the system's 4.1 (names as they are) and 5.0 (`NAME-ompi5`, as
//! in tests/ompi5.rs:
//! the installation of configure-support/ompi5 with ours from build/ompi5/mca), so that
//! one invocation can measure both in the same interleaved rounds.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mca_harness::{McaConfig, component_build_dir, repo_root};

/// The Open MPI series a configuration runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Series {
    /// The system's Open MPI (Debian 12: 4.1.4), ours from build/mca.
    Ompi41,
    /// Open MPI 5.0 (`make ompi5`), ours from build/ompi5/mca.
    Ompi50,
}

impl Series {
    /// `4.1` or `5.0`.
    pub fn label(self) -> &'static str {
        match self {
            Series::Ompi41 => "4.1",
            Series::Ompi50 => "5.0",
        }
    }

    /// `4.1` (also `4`, `ompi4`) or `5.0` (also `5`, `ompi5`).
    pub fn parse(text: &str) -> Result<Series, String> {
        match text.trim() {
            "4.1" | "4" | "ompi4" => Ok(Series::Ompi41),
            "5.0" | "5" | "ompi5" => Ok(Series::Ompi50),
            other => Err(format!("unknown Open MPI series '{other}' (4.1 or 5.0)")),
        }
    }

    /// A comma-separated list of series, each once, in the order given.
    pub fn parse_list(text: &str) -> Result<Vec<Series>, String> {
        let mut list = Vec::new();
        for word in text.split(',') {
            let series = Series::parse(word)?;
            if !list.contains(&series) {
                list.push(series);
            }
        }
        Ok(list)
    }

    /// The name in this series of the 4.1 configuration `name41`: the same name on
    /// 4.1, its counterpart on 5.0 (None when 5.0 has none).
    pub fn name(self, name41: &str) -> Option<String> {
        match self {
            Series::Ompi41 => Some(name41.to_owned()),
            Series::Ompi50 => OMPI5
                .iter()
                .find(|(base, _, _)| *base == name41)
                .map(|(_, name, _)| (*name).to_owned()),
        }
    }
}

/// The 4.1 configurations that have a 5.0 counterpart: its name and its line in
/// `--list`. The counterpart has the same parameters, except that 5.0's shared-memory
/// BTL is `sm` (4.1's `vader`, renamed).
const OMPI5: &[(&str, &str, &str)] = &[
    (
        "stock-tcp",
        "stock-tcp-ompi5",
        "Open MPI 5.0: ob1 + the TCP BTL on the loopback",
    ),
    (
        "stock-vader",
        "stock-sm-ompi5",
        "Open MPI 5.0: ob1 + sm shared memory (4.1's vader, renamed)",
    ),
    (
        "stock-ofi-tcp",
        "stock-ofi-tcp-ompi5",
        "Open MPI 5.0: cm + the OFI MTL on libfabric tcp;ofi_rxm",
    ),
    (
        "stock-ofi-rxd",
        "stock-ofi-rxd-ompi5",
        "Open MPI 5.0: cm + the OFI MTL on libfabric's reliable datagrams over udp",
    ),
    (
        "rusnic",
        "rusnic-ompi5",
        "Open MPI 5.0: ob1 + rusnic built against 5.0, native UDP backend",
    ),
    (
        "rusnic-noput",
        "rusnic-noput-ompi5",
        "Open MPI 5.0: rusnic without emulated PUT",
    ),
    (
        "rusnic-ofi",
        "rusnic-ofi-ompi5",
        "Open MPI 5.0: ob1 + rusnic, libfabric udp FI_EP_DGRAM backend",
    ),
    (
        "rofi-tcp",
        "rofi-tcp-ompi5",
        "Open MPI 5.0: cm + rofi built against 5.0 on libfabric tcp;ofi_rxm",
    ),
    (
        "rofi-shm",
        "rofi-shm-ompi5",
        "Open MPI 5.0: cm + rofi on libfabric shm (rofi matches the host side: shm loses CQ data on a truncated receive)",
    ),
    (
        "rofi-rxd",
        "rofi-rxd-ompi5",
        "Open MPI 5.0: cm + rofi on libfabric's reliable datagrams over udp",
    ),
    (
        "rsmcuda",
        "rsmcuda-ompi5",
        "Open MPI 5.0: ob1 + rsmcuda built against 5.0, shared memory (host path)",
    ),
];

/// A configuration the runner knows by name.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub config: McaConfig,
    /// The component file this configuration needs in build/mca, if it is ours.
    pub needs: Option<&'static str>,
    /// One line for `--list`.
    pub about: &'static str,
    /// How packet loss reaches this transport (`NAME@lossP`), if it can.
    pub loss: Option<LossTarget>,
    /// The Open MPI it runs on.
    pub series: Series,
}

/// Where nftables must drop packets to make a transport's wire lossy.
#[derive(Debug, Clone, Copy)]
pub struct LossTarget {
    /// `udp` or `tcp`.
    pub proto: &'static str,
    /// The port range the transport is pinned to, e.g. `31000-31999`.
    pub ports: &'static str,
    /// The MCA parameters that pin it there.
    pub params: &'static [(&'static str, &'static str)],
}

impl BenchConfig {
    /// Whether it can run here (its component was built: for 5.0, in build/ompi5/mca;
    /// whether the 5.0 installation exists is [`locate`]'s question).
    pub fn available(&self) -> bool {
        self.needs
            .is_none_or(|file| self.component_dir().join(file).is_file())
    }

    /// Where the component of ours it needs is built.
    pub fn component_dir(&self) -> PathBuf {
        match self.series {
            Series::Ompi41 => component_build_dir(),
            Series::Ompi50 => mca_harness::ompi5::component_dir(),
        }
    }
}

fn stock(name: &str, params: &[(&str, &str)], about: &'static str) -> BenchConfig {
    BenchConfig {
        config: McaConfig::new(name, params),
        needs: None,
        about,
        loss: None,
        series: Series::Ompi41,
    }
}

fn ours(
    name: &str,
    params: &[(&str, &str)],
    needs: &'static str,
    about: &'static str,
) -> BenchConfig {
    BenchConfig {
        needs: Some(needs),
        ..stock(name, params, about)
    }
}

fn stock_ofi(name: &str, provider: &str, about: &'static str) -> BenchConfig {
    let mut c = stock(
        name,
        &[
            ("pml", "cm"),
            ("mtl", "ofi"),
            ("mtl_ofi_provider_include", provider),
        ],
        about,
    );
    c.config = c.config.with_env("FI_TCP_IFACE", "lo");
    c
}

/// rusnic's datagrams, pinned below the ephemeral port range.
const RUSNIC_LOSS: LossTarget = LossTarget {
    proto: "udp",
    ports: "31100-31199",
    params: &[
        ("btl_rusnic_port_min", "31100"),
        ("btl_rusnic_port_max", "31199"),
    ],
};

/// Where `default+ours` finds our components: a scratch `make install`
/// (configure-support/install-components, the same script) made by [`prepare`].
pub fn installed_dir() -> std::path::PathBuf {
    mca_harness::repo_root().join("build/bench/installed")
}

/// A job with no `--mca` flag at all, seeing the components in `dirs` (then the
/// system's): what a user's default job gets.
fn default_job(
    name: &str,
    dirs: &str,
    needs: Option<&'static str>,
    about: &'static str,
) -> BenchConfig {
    let path = if dirs.is_empty() {
        mca_harness::system_component_dir().to_owned()
    } else {
        format!("{dirs}:{}", mca_harness::system_component_dir())
    };
    let mut c = stock(name, &[], about);
    c.config = c.config.with_env("OMPI_MCA_mca_base_component_path", &path);
    c.needs = needs;
    c
}

/// Makes what the configurations need before they run: the scratch install of
/// `default+ours`.
pub fn prepare(configs: &[BenchConfig]) -> Result<(), String> {
    if !configs.iter().any(|c| c.config.name == "default+ours") {
        return Ok(());
    }
    let dir = installed_dir();
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(
        mca_harness::repo_root().join("configure-support/install-components"),
    )
    .arg(component_build_dir())
    .arg(&dir)
    .output()
    .map_err(|e| format!("install-components: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "install-components into {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// The Open MPI 5 installation: `RMCA_OMPI5_PREFIX`, else what
/// `configure-support/ompi5 --print-prefix` (`make -s ompi5-prefix`) prints. The
/// script answers at once when `make ompi5` has built it (and builds it otherwise: its
/// progress goes to stderr).
pub fn ompi5_prefix() -> Result<PathBuf, String> {
    if let Some(prefix) = std::env::var_os("RMCA_OMPI5_PREFIX").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(prefix));
    }
    let script = repo_root().join("configure-support/ompi5");
    let out = Command::new(&script)
        .arg("--print-prefix")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().map(str::trim).rfind(|l| !l.is_empty()) {
        Some(prefix) if out.status.success() => Ok(PathBuf::from(prefix)),
        _ => Err(format!(
            "{} --print-prefix failed ({}): no Open MPI 5 prefix; `make ompi5` builds it, \
             or set RMCA_OMPI5_PREFIX",
            script.display(),
            out.status
        )),
    }
}

/// Checks that every configuration can run here, and points the 5.0 ones at the
/// installation `prefix5()` names (asked only if there is one) with ours from
/// `components5`. Returns that prefix, if asked. Ours must have been built for their
/// series (`make`, `make components-ompi5`), which is checked before the prefix is
/// asked for.
pub fn locate(
    configs: &mut [BenchConfig],
    components5: &Path,
    prefix5: impl FnOnce() -> Result<PathBuf, String>,
) -> Result<Option<PathBuf>, String> {
    for c in configs.iter() {
        let Some(file) = c.needs else { continue };
        match c.series {
            Series::Ompi41 if !component_build_dir().join(file).is_file() => {
                return Err(format!(
                    "{} needs build/mca/{file} (run make first)",
                    c.config.name
                ));
            }
            Series::Ompi50 if !components5.join(file).is_file() => {
                return Err(format!(
                    "{} needs {file} built against Open MPI 5 in {}: run `make components-ompi5` \
                     (it builds Open MPI 5.0.7 first, as `make ompi5` does, if needed)",
                    c.config.name,
                    components5.display()
                ));
            }
            _ => {}
        }
    }
    if !configs.iter().any(|c| c.series == Series::Ompi50) {
        return Ok(None);
    }
    let prefix = prefix5()?;
    if !mca_harness::static_ompi::is_installation(&prefix) {
        return Err(format!(
            "no Open MPI 5 installation at {} (bin/mpirun, bin/mpicc, bin/ompi_info): \
             `make ompi5` builds one and `make -s ompi5-prefix` prints its prefix; \
             RMCA_OMPI5_PREFIX names another",
            prefix.display()
        ));
    }
    // The stock 5.0 configurations see the same component path as ours, as the 4.1
    // ones do (build/mca first): it must exist for mpirun to parse it.
    std::fs::create_dir_all(components5).map_err(|e| format!("{}: {e}", components5.display()))?;
    for c in configs.iter_mut().filter(|c| c.series == Series::Ompi50) {
        c.config = c.config.clone().on_prefix_with(&prefix, components5);
    }
    Ok(Some(prefix))
}

/// Every configuration known by name: 4.1's, stock first, then 5.0's.
pub fn registry() -> Vec<BenchConfig> {
    let mut all = registry41();
    let ompi5: Vec<BenchConfig> = all.iter().filter_map(ompi5_counterpart).collect();
    all.extend(ompi5);
    all
}

/// The 5.0 counterpart of a 4.1 configuration, if it has one (not yet pointed at the
/// installation: see [`locate`]).
fn ompi5_counterpart(base: &BenchConfig) -> Option<BenchConfig> {
    let (_, name, about) = OMPI5.iter().find(|(b, _, _)| *b == base.config.name)?;
    let mut config = base.config.clone().named(name);
    for (key, value) in &mut config.params {
        if key == "btl" {
            *value = value
                .split(',')
                .map(|b| if b == "vader" { "sm" } else { b })
                .collect::<Vec<_>>()
                .join(",");
        }
    }
    Some(BenchConfig {
        config,
        about,
        series: Series::Ompi50,
        ..base.clone()
    })
}

/// The configurations on the system's Open MPI (4.1), stock first.
fn registry41() -> Vec<BenchConfig> {
    let installed = installed_dir().display().to_string();
    vec![
        default_job(
            "default",
            "",
            None,
            "no --mca flag, Open MPI's own components only (Debian's defaults: ob1 + vader here)",
        ),
        BenchConfig {
            loss: Some(LossTarget {
                proto: "tcp",
                // Wide: the TCP BTL cannot rebind a port whose connection is in TIME-WAIT.
                ports: "31000-31999",
                params: &[
                    ("btl_tcp_port_min_v4", "31000"),
                    ("btl_tcp_port_range_v4", "1000"),
                ],
            }),
            ..stock(
                "stock-tcp",
                &[
                    ("pml", "ob1"),
                    ("btl", "self,tcp"),
                    ("btl_tcp_if_include", "lo"),
                ],
                "ob1 + the TCP BTL on the loopback",
            )
        },
        stock(
            "stock-vader",
            &[("pml", "ob1"), ("btl", "self,vader")],
            "ob1 + vader shared memory",
        ),
        stock_ofi(
            "stock-ofi-tcp",
            "tcp;ofi_rxm",
            "cm + the OFI MTL on libfabric tcp;ofi_rxm",
        ),
        stock_ofi(
            "stock-ofi-shm",
            "shm",
            "cm + the OFI MTL on libfabric shm (4.1.4's MTL declines it here: cm cannot be selected)",
        ),
        stock_ofi(
            "stock-ofi-rxd",
            "udp;ofi_rxd",
            "cm + the OFI MTL on libfabric's reliable datagrams over udp",
        ),
        BenchConfig {
            loss: Some(RUSNIC_LOSS),
            ..ours(
                "rusnic",
                &[
                    ("pml", "ob1"),
                    ("btl", "self,rusnic"),
                    ("btl_rusnic_if_include", "lo"),
                ],
                "mca_btl_rusnic.so",
                "ob1 + rusnic, native UDP backend (sendmmsg/recvmmsg) on the loopback",
            )
        },
        BenchConfig {
            loss: Some(RUSNIC_LOSS),
            ..ours(
                "rusnic-notlp",
                &[
                    ("pml", "ob1"),
                    ("btl", "self,rusnic"),
                    ("btl_rusnic_if_include", "lo"),
                    ("btl_rusnic_tail_probe", "0"),
                ],
                "mca_btl_rusnic.so",
                "rusnic without tail-loss probes: a lost last datagram waits for the retransmission timeout",
            )
        },
        BenchConfig {
            loss: Some(RUSNIC_LOSS),
            ..ours(
                "rusnic-norack",
                &[
                    ("pml", "ob1"),
                    ("btl", "self,rusnic"),
                    ("btl_rusnic_if_include", "lo"),
                    ("btl_rusnic_rack", "0"),
                ],
                "mca_btl_rusnic.so",
                "rusnic without RACK loss detection (the default): a lost retransmission waits for the retransmission timeout",
            )
        },
        BenchConfig {
            loss: Some(RUSNIC_LOSS),
            ..ours(
                "rusnic-rack",
                &[
                    ("pml", "ob1"),
                    ("btl", "self,rusnic"),
                    ("btl_rusnic_if_include", "lo"),
                    ("btl_rusnic_rack", "1"),
                ],
                "mca_btl_rusnic.so",
                "rusnic with RACK loss detection (off by default): lost retransmissions repaired without the timeout",
            )
        },
        BenchConfig {
            loss: Some(RUSNIC_LOSS),
            ..ours(
                "rusnic-noput",
                &[
                    ("pml", "ob1"),
                    ("btl", "self,rusnic"),
                    ("btl_rusnic_if_include", "lo"),
                    ("btl_rusnic_flags", "send,inplace"),
                ],
                "mca_btl_rusnic.so",
                "rusnic without emulated PUT: large messages take ob1's send/receive pipeline",
            )
        },
        BenchConfig {
            loss: Some(RUSNIC_LOSS),
            ..ours(
                "rusnic-ofi",
                &[
                    ("pml", "ob1"),
                    ("btl", "self,rusnic"),
                    ("btl_rusnic_backend", "ofi"),
                    ("btl_rusnic_if_include", "lo"),
                ],
                "mca_btl_rusnic.so",
                "ob1 + rusnic, libfabric udp FI_EP_DGRAM backend",
            )
        },
        ours(
            "rofi-tcp",
            &[
                ("pml", "cm"),
                ("mtl", "rofi"),
                ("mtl_rofi_provider_include", "tcp;ofi_rxm"),
            ],
            "mca_mtl_rofi.so",
            "cm + rofi on libfabric tcp;ofi_rxm",
        ),
        ours(
            "rofi-shm",
            &[
                ("pml", "cm"),
                ("mtl", "rofi"),
                ("mtl_rofi_provider_include", "shm"),
            ],
            "mca_mtl_rofi.so",
            "cm + rofi on libfabric shm (rofi matches the host side; the stock MTL \
             declines shm, stock-vader is the shared-memory reference)",
        ),
        ours(
            "rofi-rxd",
            &[
                ("pml", "cm"),
                ("mtl", "rofi"),
                ("mtl_rofi_provider_include", "udp;ofi_rxd"),
            ],
            "mca_mtl_rofi.so",
            "cm + rofi on libfabric's reliable datagrams over udp (pairs with stock-ofi-rxd)",
        ),
        ours(
            "rsmcuda",
            &[("pml", "ob1"), ("btl", "self,rsmcuda")],
            "mca_btl_rsmcuda.so",
            "ob1 + rsmcuda shared memory (host path)",
        ),
        default_job(
            "default+ours",
            &installed,
            Some("mca_btl_rsmcuda.so"),
            "no --mca flag after `make install` of ours (a scratch install): must match default",
        ),
    ]
}

/// The configuration called `name`, `name@lossP` (the same while nftables drops P %
/// of its packets), or a custom one from `name=--mca k v ...`.
pub fn resolve(spec: &str) -> Result<BenchConfig, String> {
    if let Some((name, args)) = spec.split_once('=') {
        return custom(name, args);
    }
    if let Some((name, percent)) = spec.split_once("@loss") {
        return with_loss(resolve(name)?, percent);
    }
    let mut candidates = registry().into_iter().filter(|c| c.config.name == spec);
    candidates.next().ok_or_else(|| {
        if spec == "stock-vader-ompi5" {
            return "unknown configuration 'stock-vader-ompi5': Open MPI 5.0 calls vader sm \
                    (stock-sm-ompi5)"
                .to_owned();
        }
        let names: Vec<String> = registry().into_iter().map(|c| c.config.name).collect();
        format!(
            "unknown configuration '{spec}' (known: {}; or NAME='--mca key value ...')",
            names.join(", ")
        )
    })
}

fn with_loss(base: BenchConfig, percent: &str) -> Result<BenchConfig, String> {
    let name = base.config.name.clone();
    let target = base
        .loss
        .ok_or_else(|| format!("{name}: no known port range to inject loss on"))?;
    if !percent
        .parse::<f64>()
        .is_ok_and(|p| (0.0..=100.0).contains(&p))
    {
        return Err(format!(
            "{name}@loss{percent}: the loss must be a percentage"
        ));
    }
    let mut config = base.config;
    for (key, value) in target.params {
        config = config.with(key, value);
    }
    let config = config
        .with_loss(&[
            "--percent",
            percent,
            "--proto",
            target.proto,
            "--ports",
            target.ports,
        ])
        .named(&format!("{name}@loss{percent}"));
    Ok(BenchConfig {
        config,
        about: "the same while nftables drops packets",
        ..base
    })
}

/// A configuration given on the command line as `--mca key value` triples and
/// `-x VAR=value` environment settings.
fn custom(name: &str, args: &str) -> Result<BenchConfig, String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!(
            "bad configuration name '{name}' (letters, digits, - _ .)"
        ));
    }
    let words: Vec<&str> = args.split_whitespace().collect();
    let mut config = McaConfig::new(name, &[]);
    let mut i = 0;
    while i < words.len() {
        match words[i] {
            "--mca" | "-mca" if i + 2 < words.len() => {
                config = config.with(words[i + 1], words[i + 2]);
                i += 3;
            }
            "-x" if i + 1 < words.len() => {
                let (key, value) = words[i + 1]
                    .split_once('=')
                    .ok_or_else(|| format!("{name}: -x needs VAR=value, got '{}'", words[i + 1]))?;
                config = config.with_env(key, value);
                i += 2;
            }
            other => {
                return Err(format!(
                    "{name}: only '--mca KEY VALUE' and '-x VAR=value' are accepted, got '{other}'"
                ));
            }
        }
    }
    Ok(BenchConfig {
        config,
        needs: None,
        about: "given on the command line",
        loss: None,
        series: Series::Ompi41,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<String> = registry().into_iter().map(|c| c.config.name).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    #[test]
    fn custom_configurations_parse_mca_triples_and_env() {
        let c = resolve("mine=--mca pml ob1 --mca btl self,tcp -x FI_LOG_LEVEL=warn").unwrap();
        assert_eq!(c.config.name, "mine");
        assert_eq!(
            c.config.params,
            vec![
                ("pml".to_owned(), "ob1".to_owned()),
                ("btl".to_owned(), "self,tcp".to_owned())
            ]
        );
        assert_eq!(
            c.config.env,
            vec![("FI_LOG_LEVEL".to_owned(), "warn".to_owned())]
        );
    }

    #[test]
    fn loss_variants_pin_the_ports_they_drop_on() {
        let c = resolve("stock-tcp@loss5").unwrap();
        assert_eq!(c.config.name, "stock-tcp@loss5");
        let loss = c.config.loss.unwrap().join(" ");
        assert_eq!(loss, "--percent 5 --proto tcp --ports 31000-31999");
        assert!(
            c.config
                .params
                .contains(&("btl_tcp_port_min_v4".to_owned(), "31000".to_owned()))
        );
        assert!(
            resolve("stock-vader@loss5")
                .unwrap_err()
                .contains("no known port range")
        );
        assert!(
            resolve("stock-tcp@lossx")
                .unwrap_err()
                .contains("percentage")
        );
    }

    #[test]
    fn series_parse_alone_and_in_lists() {
        assert_eq!(Series::parse("4.1"), Ok(Series::Ompi41));
        assert_eq!(Series::parse("5"), Ok(Series::Ompi50));
        assert_eq!(
            Series::parse_list("5.0,4.1,5.0"),
            Ok(vec![Series::Ompi50, Series::Ompi41])
        );
        assert!(Series::parse_list("4.1,6.0").unwrap_err().contains("'6.0'"));
        assert_eq!(Series::Ompi50.label(), "5.0");
    }

    #[test]
    fn every_ompi5_configuration_is_named_for_its_series_and_uses_sm() {
        let all = registry();
        let (ours5, ours41): (Vec<_>, Vec<_>) =
            all.iter().partition(|c| c.series == Series::Ompi50);
        assert_eq!(ours5.len(), OMPI5.len());
        assert!(ours41.iter().all(|c| !c.config.name.ends_with("-ompi5")));
        for c in &ours5 {
            assert!(c.config.name.ends_with("-ompi5"), "{}", c.config.name);
            assert!(c.config.prefix.is_none(), "the prefix comes from locate");
            for (key, value) in &c.config.params {
                assert!(
                    !value.contains("vader"),
                    "{key}={value} in {}",
                    c.config.name
                );
            }
        }
        let sm = resolve("stock-sm-ompi5").unwrap();
        assert!(
            sm.config
                .params
                .contains(&("btl".to_owned(), "self,sm".to_owned()))
        );
        assert_eq!(
            Series::Ompi50.name("stock-vader").unwrap(),
            "stock-sm-ompi5"
        );
        assert_eq!(Series::Ompi50.name("rusnic").unwrap(), "rusnic-ompi5");
        assert_eq!(Series::Ompi41.name("rusnic").unwrap(), "rusnic");
        assert_eq!(Series::Ompi50.name("default+ours"), None);
        // Ours on 5.0 need the same component file, from build/ompi5/mca.
        let rofi = resolve("rofi-tcp-ompi5").unwrap();
        assert_eq!(rofi.needs, Some("mca_mtl_rofi.so"));
        assert!(rofi.component_dir().ends_with("build/ompi5/mca"));
    }

    #[test]
    fn ompi5_names_combine_with_loss_and_vader_points_to_sm() {
        let c = resolve("rusnic-ompi5@loss5").unwrap();
        assert_eq!(c.config.name, "rusnic-ompi5@loss5");
        assert_eq!(c.series, Series::Ompi50);
        assert!(c.config.loss.unwrap().join(" ").contains("--proto udp"));
        assert!(
            resolve("stock-vader-ompi5")
                .unwrap_err()
                .contains("stock-sm-ompi5")
        );
    }

    /// A scratch directory with an installation-shaped prefix and a component
    /// directory holding `so` (empty files: locate only looks).
    fn scratch(test: &str, so: &[&str]) -> (PathBuf, PathBuf, PathBuf) {
        let root = std::env::temp_dir().join(format!("rmca-bench-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let prefix = root.join("prefix");
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        for tool in ["mpirun", "mpicc", "ompi_info"] {
            std::fs::write(prefix.join("bin").join(tool), "").unwrap();
        }
        let components = root.join("mca");
        std::fs::create_dir_all(&components).unwrap();
        for file in so {
            std::fs::write(components.join(file), "").unwrap();
        }
        (root, prefix, components)
    }

    #[test]
    fn locate_points_the_ompi5_configurations_at_the_installation() {
        let (root, prefix, components) = scratch("locate", &["mca_btl_rusnic.so"]);
        let mut configs = vec![
            resolve("stock-tcp").unwrap(),
            resolve("stock-tcp-ompi5").unwrap(),
            resolve("rusnic-ompi5").unwrap(),
        ];
        let found = locate(&mut configs, &components, || Ok(prefix.clone())).unwrap();
        assert_eq!(found.as_deref(), Some(prefix.as_path()));
        assert!(configs[0].config.prefix.is_none());
        for c in &configs[1..] {
            assert_eq!(c.config.prefix.as_deref(), Some(prefix.as_path()));
            assert_eq!(c.config.components.as_deref(), Some(components.as_path()));
            assert_eq!(c.config.mpirun(), prefix.join("bin/mpirun"));
        }
        // Without a 5.0 configuration the prefix is not asked for.
        let mut only41 = vec![resolve("stock-vader").unwrap()];
        let asked = locate(&mut only41, &components, || panic!("asked")).unwrap();
        assert!(asked.is_none());
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn locate_names_the_make_target_of_what_is_missing() {
        let (root, prefix, components) = scratch("missing", &[]);
        // Ours not built for 5.0: refused before the prefix is asked for.
        let mut configs = vec![resolve("rsmcuda-ompi5").unwrap()];
        let e = locate(&mut configs, &components, || panic!("asked")).unwrap_err();
        assert!(
            e.contains("make components-ompi5") && e.contains("mca_btl_rsmcuda.so"),
            "{e}"
        );
        // No installation at the prefix.
        let mut configs = vec![resolve("stock-sm-ompi5").unwrap()];
        let e = locate(&mut configs, &components, || Ok(root.join("nowhere"))).unwrap_err();
        assert!(
            e.contains("make ompi5") && e.contains("RMCA_OMPI5_PREFIX"),
            "{e}"
        );
        // The finder's own error passes through.
        let e = locate(&mut configs, &components, || Err("no prefix".to_owned())).unwrap_err();
        assert_eq!(e, "no prefix");
        assert!(locate(&mut configs, &components, || Ok(prefix.clone())).is_ok());
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn bad_specs_are_refused_with_a_reason() {
        assert!(
            resolve("nosuch")
                .unwrap_err()
                .contains("unknown configuration")
        );
        assert!(resolve("x=--mca pml").unwrap_err().contains("only '--mca"));
        assert!(resolve("x=-x NOVALUE").unwrap_err().contains("VAR=value"));
        assert!(
            resolve("bad name=--mca a b")
                .unwrap_err()
                .contains("bad configuration name")
        );
    }
}
