//! What each process publishes for its peers: where its two channels listen, the
//! protocol settings both ends must agree on, and the key its peers tag datagrams to it
//! with (the modex reaches the job's processes only).

use std::net::Ipv4Addr;

use rusnic_core::Key;

/// 3: the key (version 2 had none; a peer from such a build is refused by name).
const VERSION: u8 = 3;

/// The modex blob (little-endian, versioned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contact {
    /// Which backend the publisher runs (both ends must speak the same one).
    pub backend: u8,
    /// Initial sequence number of the publisher's send direction.
    pub isn: u16,
    pub mtu_priority: u16,
    pub mtu_data: u16,
    pub max_fragment_size: u32,
    /// The publisher's `payload_crc` policy (both ends must apply the same).
    pub payload_crc: u8,
    /// UDP ports of the priority and data channels.
    pub ports: [u16; 2],
    /// Usable IPv4 addresses with their prefix lengths.
    pub addrs: Vec<(Ipv4Addr, u8)>,
    /// The publisher's secret: datagrams to it must carry this key's tag.
    pub key: Key,
}

impl Contact {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![VERSION, self.backend];
        b.extend_from_slice(&self.isn.to_le_bytes());
        b.extend_from_slice(&self.mtu_priority.to_le_bytes());
        b.extend_from_slice(&self.mtu_data.to_le_bytes());
        b.extend_from_slice(&self.max_fragment_size.to_le_bytes());
        b.push(self.payload_crc);
        b.extend_from_slice(&self.ports[0].to_le_bytes());
        b.extend_from_slice(&self.ports[1].to_le_bytes());
        b.extend_from_slice(&self.key.to_bytes());
        let n = self.addrs.len().min(255);
        b.push(n as u8);
        for (ip, prefix) in &self.addrs[..n] {
            b.extend_from_slice(&ip.octets());
            b.push(*prefix);
        }
        b
    }

    pub fn decode(b: &[u8]) -> Result<Contact, String> {
        const KEY: usize = 17;
        const FIXED: usize = KEY + Key::LEN + 1;
        // The version first: another build's blob has another length too.
        match b.first() {
            Some(&v) if v != VERSION => {
                return Err(format!(
                    "contact blob version {v} (this build speaks {VERSION})"
                ));
            }
            _ => {}
        }
        if b.len() < FIXED {
            return Err(format!("contact blob of {} bytes is truncated", b.len()));
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let n = usize::from(b[FIXED - 1]);
        if b.len() != FIXED + 5 * n {
            return Err(format!(
                "contact blob of {} bytes does not hold {n} addresses",
                b.len()
            ));
        }
        let addrs = (0..n)
            .map(|i| {
                let o = FIXED + 5 * i;
                (Ipv4Addr::new(b[o], b[o + 1], b[o + 2], b[o + 3]), b[o + 4])
            })
            .collect();
        Ok(Contact {
            backend: b[1],
            isn: u16_at(2),
            mtu_priority: u16_at(4),
            mtu_data: u16_at(6),
            max_fragment_size: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            payload_crc: b[12],
            ports: [u16_at(13), u16_at(15)],
            addrs,
            key: Key::from_bytes(b[KEY..KEY + Key::LEN].try_into().expect("16 bytes")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejections() {
        let c = Contact {
            backend: 1,
            isn: 65530,
            mtu_priority: 832,
            mtu_data: 9000,
            max_fragment_size: 262_144,
            payload_crc: 1,
            ports: [31100, 31101],
            addrs: vec![(Ipv4Addr::LOCALHOST, 8), (Ipv4Addr::new(10, 77, 0, 2), 24)],
            key: Key::from_bytes([0x5A; Key::LEN]),
        };
        let b = c.encode();
        assert_eq!(Contact::decode(&b).unwrap(), c);
        assert!(Contact::decode(&b[..b.len() - 1]).is_err());
        assert!(Contact::decode(&b[..5]).is_err());
        let mut v = b.clone();
        v[0] = 9;
        assert!(Contact::decode(&v).unwrap_err().contains("version"));
        // A contact from the build before the key (version 2, 18 + 5n bytes) is
        // refused by its version, not as truncated.
        let mut old = vec![2u8; 18];
        old.extend_from_slice(&[127, 0, 0, 1, 8, 10, 77, 0, 2, 24]);
        old[17] = 2;
        let e = Contact::decode(&old).unwrap_err();
        assert!(e.contains("version 2") && e.contains("speaks 3"), "{e}");
    }
}
