//! The named configurations a benchmark can compare.
//!
//! Every configuration runs two ranks bound to cores with the runtime's own traffic
//! (OOB) on the loopback, so the only difference between two columns of a table is
//! the transport. Ours are listed only when their component was built.

use mca_harness::{McaConfig, component_build_dir};

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
    /// Whether it can run here (its component was built).
    pub fn available(&self) -> bool {
        self.needs
            .is_none_or(|file| component_build_dir().join(file).is_file())
    }
}

fn stock(name: &str, params: &[(&str, &str)], about: &'static str) -> BenchConfig {
    BenchConfig {
        config: McaConfig::new(name, params),
        needs: None,
        about,
        loss: None,
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

/// Every configuration known by name, stock first.
pub fn registry() -> Vec<BenchConfig> {
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
            "cm + rofi on libfabric shm (host matching below libfabric 1.19; the stock MTL \
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
