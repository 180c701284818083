//! The Open MPI series a configuration runs on, and the names of the 4.1
//! configurations' 5.0 counterparts.

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
pub(super) const OMPI5: &[(&str, &str, &str)] = &[
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
