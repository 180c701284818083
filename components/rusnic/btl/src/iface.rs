//! `btl_rusnic_if_include` / `if_exclude`: which local IPv4 addresses the component
//! uses, by interface name or CIDR, and which of a peer's addresses we talk to.

use std::net::Ipv4Addr;

use crate::raw::IfAddr;

/// One element of an include/exclude list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IfSpec {
    Name(String),
    Cidr { net: Ipv4Addr, prefix: u8 },
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix.min(32)))
    }
}

/// True if `a` and `b` lie in the same `prefix`-bit network.
pub fn same_net(a: Ipv4Addr, b: Ipv4Addr, prefix: u8) -> bool {
    (u32::from(a) ^ u32::from(b)) & mask(prefix) == 0
}

impl IfSpec {
    fn matches(&self, ifa: &IfAddr) -> bool {
        match self {
            IfSpec::Name(n) => *n == ifa.name,
            IfSpec::Cidr { net, prefix } => same_net(*net, ifa.addr, *prefix),
        }
    }
}

/// Parses "eth0,10.1.0.0/16,lo"; an empty or missing string is an empty list.
pub fn parse_list(text: &str) -> Result<Vec<IfSpec>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some((net, prefix)) = item.split_once('/') {
            let net: Ipv4Addr = net
                .parse()
                .map_err(|_| format!("'{item}' is not an IPv4 CIDR (a.b.c.d/n)"))?;
            let prefix: u8 = prefix
                .parse()
                .ok()
                .filter(|p| *p <= 32)
                .ok_or_else(|| format!("'{item}': the prefix length must be 0..32"))?;
            out.push(IfSpec::Cidr { net, prefix });
        } else if item.parse::<Ipv4Addr>().is_ok() {
            return Err(format!(
                "'{item}' is an address, not a network: write it as {item}/32"
            ));
        } else if item.len() > 15 || item.chars().any(|c| c.is_whitespace() || c == '/') {
            return Err(format!("'{item}' is not an interface name"));
        } else {
            out.push(IfSpec::Name(item.to_string()));
        }
    }
    Ok(out)
}

/// The usable addresses: up, matching `include` (if any), not matching `exclude`.
pub fn select(all: &[IfAddr], include: &[IfSpec], exclude: &[IfSpec]) -> Vec<IfAddr> {
    all.iter()
        .filter(|a| a.up)
        .filter(|a| include.is_empty() || include.iter().any(|s| s.matches(a)))
        .filter(|a| !exclude.iter().any(|s| s.matches(a)))
        .cloned()
        .collect()
}

/// Which of `peer`'s addresses (ip, prefix) to send to: a loopback one when the peer
/// shares our node and we may use loopback too, else one on a subnet we share, else
/// none (unreachable through this component).
pub fn pick_peer_addr(
    ours: &[IfAddr],
    peer: &[(Ipv4Addr, u8)],
    same_node: bool,
) -> Option<Ipv4Addr> {
    if same_node
        && ours.iter().any(|a| a.addr.is_loopback())
        && let Some((ip, _)) = peer.iter().find(|(ip, _)| ip.is_loopback())
    {
        return Some(*ip);
    }
    for (ip, prefix) in peer.iter().filter(|(ip, _)| !ip.is_loopback()) {
        if ours
            .iter()
            .filter(|a| !a.addr.is_loopback())
            .any(|a| same_net(a.addr, *ip, a.prefix.min(*prefix)))
        {
            return Some(*ip);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifa(name: &str, addr: [u8; 4], prefix: u8) -> IfAddr {
        IfAddr {
            name: name.into(),
            addr: Ipv4Addr::from(addr),
            prefix,
            up: true,
        }
    }

    #[test]
    fn parses_names_and_cidrs_and_rejects_garbage() {
        assert_eq!(parse_list("").unwrap(), vec![]);
        assert_eq!(
            parse_list("eth0, 10.1.0.0/16").unwrap(),
            vec![
                IfSpec::Name("eth0".into()),
                IfSpec::Cidr {
                    net: Ipv4Addr::new(10, 1, 0, 0),
                    prefix: 16
                }
            ]
        );
        assert!(parse_list("10.1.0.0/33").is_err());
        assert!(parse_list("10.1.0/8").is_err());
        assert!(parse_list("10.1.0.1").unwrap_err().contains("/32"));
    }

    #[test]
    fn selects_by_name_and_network() {
        let all = vec![
            ifa("lo", [127, 0, 0, 1], 8),
            ifa("eth0", [10, 77, 0, 2], 24),
        ];
        let inc = parse_list("10.77.0.0/24").unwrap();
        assert_eq!(select(&all, &inc, &[]), vec![all[1].clone()]);
        let exc = parse_list("lo").unwrap();
        assert_eq!(select(&all, &[], &exc), vec![all[1].clone()]);
        assert_eq!(select(&all, &[], &[]).len(), 2);
    }

    #[test]
    fn picks_loopback_on_one_node_and_a_shared_subnet_across_nodes() {
        let ours = vec![
            ifa("lo", [127, 0, 0, 1], 8),
            ifa("eth0", [10, 77, 0, 2], 24),
        ];
        let peer = vec![
            (Ipv4Addr::new(127, 0, 0, 1), 8),
            (Ipv4Addr::new(10, 77, 0, 3), 24),
        ];
        assert_eq!(
            pick_peer_addr(&ours, &peer, true),
            Some(Ipv4Addr::new(127, 0, 0, 1))
        );
        assert_eq!(
            pick_peer_addr(&ours, &peer, false),
            Some(Ipv4Addr::new(10, 77, 0, 3))
        );
        let far = vec![(Ipv4Addr::new(192, 168, 1, 1), 24)];
        assert_eq!(pick_peer_addr(&ours, &far, false), None);
    }
}
