//! Publishing our endpoint name and reading the peers' through the modex.

use mca::component::Exported;
use mca::proc::{self, Proc};
use mca::{Error, Result, sys};
use rofi_core::provider::inherit::Inherited;

use crate::Rofi;

/// What a process publishes: its endpoint name, the name of its endpoint for peers on
/// its node if it opened one (`mtl_rofi_local_provider`), its receive-context count
/// (senders need it to name the context a communicator's messages must reach), and its
/// choice of provider and matching (peers that chose differently cannot talk, so
/// add_procs refuses them with both choices named instead of hanging).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub name: Vec<u8>,
    pub local: Option<Vec<u8>>,
    pub ctxts: u32,
    pub choice: Inherited,
}

/// Layout: `name ++ local ++ choice ++ len(local) ++ len(choice) ++ ctxts`, the numbers
/// 4-byte little-endian, the choice as `Inherited::encode` writes it.
fn encode(p: &Published) -> Vec<u8> {
    let local = p.local.as_deref().unwrap_or_default();
    let choice = p.choice.encode();
    let mut blob = p.name.clone();
    blob.extend_from_slice(local);
    blob.extend_from_slice(choice.as_bytes());
    blob.extend_from_slice(&(local.len() as u32).to_le_bytes());
    blob.extend_from_slice(&(choice.len() as u32).to_le_bytes());
    blob.extend_from_slice(&p.ctxts.to_le_bytes());
    blob
}

fn decode(mut blob: Vec<u8>) -> Option<Published> {
    let trailer = |blob: &mut Vec<u8>| {
        let at = blob.len().checked_sub(4)?;
        let n = u32::from_le_bytes(blob[at..].try_into().ok()?);
        blob.truncate(at);
        Some(n)
    };
    let ctxts = trailer(&mut blob)?;
    let choice_len = trailer(&mut blob)? as usize;
    let local_len = trailer(&mut blob)? as usize;
    let at = blob.len().checked_sub(choice_len)?;
    let choice = String::from_utf8(blob.split_off(at)).ok()?;
    let choice = Inherited::parse(Some(&choice)).ok()??;
    let at = blob.len().checked_sub(local_len)?;
    let local = (local_len > 0).then(|| blob.split_off(at));
    Some(Published {
        name: blob,
        local,
        ctxts: ctxts.max(1),
        choice,
    })
}

pub fn send(published: &Published) -> Result<()> {
    let blob = encode(published);
    // SAFETY: Rofi::raw() is the exported component structure.
    unsafe { proc::modex_send(Rofi::raw(), &blob) }
}

/// What `p` published, and whether it is on this node.
pub fn recv(p: *mut sys::ompi_proc_t) -> Result<(Published, bool)> {
    // SAFETY: `p` is a live ompi_proc_t from the PML, whose first member is its
    // opal_proc_t.
    let peer = unsafe { Proc::from_raw(p.cast()) };
    // SAFETY: Rofi::raw() is the exported component structure.
    let blob = unsafe { peer.modex_recv(Rofi::raw()) }?;
    let published = decode(blob).ok_or(Error::UNREACH)?;
    Ok((published, peer.is_local()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_names_the_context_count_and_the_choice_come_back() {
        for (local, host_matching) in [(None, false), (Some(b"fi_shm://42:0\0".to_vec()), true)] {
            let p = Published {
                name: vec![7; 16],
                local,
                ctxts: 3,
                choice: Inherited {
                    provider: "tcp;ofi_rxm".to_owned(),
                    fabric: "192.0.2.0/24".to_owned(),
                    host_matching,
                },
            };
            assert_eq!(decode(encode(&p)), Some(p));
        }
    }

    #[test]
    fn a_short_blob_or_an_unreadable_choice_is_refused() {
        assert_eq!(decode(vec![1, 2, 3]), None);
        assert_eq!(decode(vec![9, 0, 0, 0, 1, 0, 0, 0, 0]), None);
        // A choice of 3 bytes ("shm") that is not one.
        let mut blob = b"ep".to_vec();
        blob.extend_from_slice(b"shm");
        blob.extend_from_slice(&[0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(decode(blob), None);
    }
}
