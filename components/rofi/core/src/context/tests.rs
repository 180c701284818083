use super::*;
use crate::testutil::Rng;

#[test]
fn without_grouping_everything_shares_context_zero() {
    let mut m = ContextMap::new(false, 8);
    assert_eq!(m.num_ctxts(), 1);
    let a = m.add_comm(0).unwrap();
    assert_eq!((a.ctx, a.create, a.warn_exhausted), (0, true, false));
    for cid in [1, 7, u32::MAX] {
        let a = m.add_comm(cid).unwrap();
        assert_eq!((a.ctx, a.create, a.warn_exhausted), (0, false, false));
    }
    assert_eq!(m.context_of(u32::MAX), 0);
    assert_eq!(
        m.del_comm(7),
        Some(Release {
            ctx: 0,
            destroy: false
        })
    );
    assert_eq!(m.users_of(0), 3);
}

#[test]
fn large_sparse_cids_never_overflow_and_share_round_robin() {
    let mut m = ContextMap::new(true, 4);
    let cids = [0u32, 1, 5, 1 << 20, (1 << 30) - 1, 3_000_000_000, u32::MAX];
    let got: Vec<_> = cids.iter().map(|&c| m.add_comm(c).unwrap()).collect();
    let ctxs: Vec<u32> = got.iter().map(|a| a.ctx).collect();
    assert_eq!(ctxs, [0, 1, 2, 3, 0, 1, 2]);
    let creates: Vec<bool> = got.iter().map(|a| a.create).collect();
    assert_eq!(creates, [true, true, true, true, false, false, false]);
    let warns = got.iter().filter(|a| a.warn_exhausted).count();
    assert_eq!(warns, 1, "the limit warning is printed once");
    assert!(got[4].warn_exhausted);
    for (&cid, a) in cids.iter().zip(&got) {
        assert_eq!(m.context_of(cid), a.ctx);
    }
    assert_eq!(
        m.context_of(12345),
        0,
        "unknown CIDs use the default context"
    );
    assert_eq!(
        m.add_comm(u32::MAX),
        Err(ContextError::AlreadyMapped {
            cid: u32::MAX,
            ctx: 2
        })
    );
}

#[test]
fn freed_contexts_are_destroyed_once_and_reused_first() {
    let mut m = ContextMap::new(true, 2);
    m.add_comm(10).unwrap();
    m.add_comm(11).unwrap();
    m.add_comm(12).unwrap(); // shares ctx 0
    assert_eq!(
        m.del_comm(11),
        Some(Release {
            ctx: 1,
            destroy: true
        })
    );
    let a = m.add_comm(13).unwrap();
    assert_eq!((a.ctx, a.create, a.warn_exhausted), (1, true, false));
    assert_eq!(
        m.del_comm(10),
        Some(Release {
            ctx: 0,
            destroy: false
        })
    );
    assert_eq!(
        m.del_comm(12),
        Some(Release {
            ctx: 0,
            destroy: true
        })
    );
    assert_eq!(m.del_comm(12), None);
    assert_eq!(m.del_comm(99), None);
}

#[test]
fn random_add_del_keeps_refcounts_consistent() {
    let mut rng = Rng::new(0xC0FFEE);
    for n in [1u32, 2, 3, 16] {
        let mut m = ContextMap::new(true, n);
        let mut live: Vec<(u32, u32)> = Vec::new();
        let mut created = vec![false; n as usize];
        for _ in 0..5000 {
            if live.is_empty() || rng.chance(55) {
                let cid = rng.next_u64() as u32;
                if live.iter().any(|&(c, _)| c == cid) {
                    continue;
                }
                let a = m.add_comm(cid).unwrap();
                assert!(a.ctx < n);
                assert_eq!(
                    a.create, !created[a.ctx as usize],
                    "create iff context absent"
                );
                created[a.ctx as usize] = true;
                live.push((cid, a.ctx));
            } else {
                let (cid, ctx) = live.swap_remove(rng.below(live.len() as u64) as usize);
                let r = m.del_comm(cid).unwrap();
                assert_eq!(r.ctx, ctx);
                let still = live.iter().filter(|&&(_, c)| c == ctx).count();
                assert_eq!(r.destroy, still == 0);
                if r.destroy {
                    created[ctx as usize] = false;
                }
            }
            for c in 0..n {
                let users = live.iter().filter(|&&(_, x)| x == c).count() as u32;
                assert_eq!(m.users_of(c), users);
            }
        }
    }
}

#[test]
fn sep_plans_clamp_and_compute_rx_bits() {
    let req = |n, local| SepRequest {
        num_ctxts: n,
        local_ranks: local,
    };
    // sockets: 16 contexts, 2 ranks per node -> 8 each.
    let p = SepPlan::compute(req(4, 2), 16, 16).unwrap();
    assert_eq!((p.num_ctxts, p.clamped_from, p.rx_ctx_bits), (4, None, 3));
    let p = SepPlan::compute(req(20, 2), 16, 16).unwrap();
    assert_eq!(
        (p.num_ctxts, p.clamped_from, p.rx_ctx_bits),
        (8, Some(20), 4)
    );
    let p = SepPlan::compute(req(1, 1), 16, 4).unwrap();
    assert_eq!((p.num_ctxts, p.rx_ctx_bits), (1, 1));
    assert_eq!(
        SepPlan::compute(req(1, 1), 1, 1),
        Err(SepError::Unavailable { available: 1 })
    );
    assert!(matches!(
        SepPlan::compute(req(2, 17), 16, 16),
        Err(SepError::LocalRanksExceedContexts { .. })
    ));
    assert_eq!(
        sep_request(false, true, 1, 2),
        Err(SepError::GroupingNeedsSep)
    );
    assert_eq!(
        sep_request(true, false, 0, 2),
        Err(SepError::BadContextCount(0))
    );
    assert_eq!(sep_request(false, false, 0, 2), Ok(None));
    assert_eq!(sep_request(true, true, 3, 0), Ok(Some(req(3, 1))));
    assert!(
        SepError::GroupingNeedsSep
            .to_string()
            .contains("enable_sep")
    );
}
