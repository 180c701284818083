//! The configurations known by name: 4.1's (stock first), then their 5.0
//! counterparts. Ours are listed only when their component was built.

use std::path::PathBuf;

use mca_harness::{McaConfig, component_build_dir};

use super::series::{OMPI5, Series};

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
/// (configure-support/install-components, the same script) made by `setup::prepare`.
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
                "rusnic without RACK loss detection (on by default since 2026-12-03): a lost retransmission waits for the retransmission timeout",
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
}
