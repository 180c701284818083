use super::*;
use crate::provider::probe::{Check, CheckSet, Matching};

/// The provider tests' listing entry, on a domain named after its fabric, with a
/// 4 KiB inject size.
fn prov(name: &str, fabric: &str) -> ProviderInfo {
    ProviderInfo {
        inject_size: 4096,
        ..crate::provider::tests::prov(name, fabric, fabric)
    }
}

/// What a process on this machine lists without FI_PROVIDER, in libfabric's order.
fn everything() -> Vec<ProviderInfo> {
    vec![
        prov("tcp;ofi_rxm", "192.0.2.0/24"),
        prov("tcp;ofi_rxm", "127.0.0.1/32"),
        prov("udp;ofi_rxd", "192.0.2.0/24"),
        prov("shm", "shm"),
        prov("sockets", "192.0.2.0/24"),
    ]
}

fn req() -> Requirements {
    Requirements {
        single_node: true,
        ..Requirements::default()
    }
}

fn shm_host() -> Inherited {
    Inherited {
        provider: "shm".to_owned(),
        fabric: "shm".to_owned(),
        host_matching: true,
    }
}

#[test]
fn the_value_reads_back_as_written() {
    for inherited in [
        shm_host(),
        Inherited {
            provider: "tcp;ofi_rxm".to_owned(),
            fabric: "::1/128".to_owned(),
            host_matching: false,
        },
        Inherited {
            provider: "udp;ofi_rxd".to_owned(),
            fabric: String::new(),
            host_matching: true,
        },
    ] {
        let v = inherited.encode();
        assert_eq!(Inherited::parse(Some(&v)), Ok(Some(inherited)), "{v}");
    }
    assert_eq!(shm_host().encode(), "host|shm|shm");
    assert_eq!(
        Inherited::parse(Some(" tagged|tcp;ofi_rxm|lo \n"))
            .unwrap()
            .unwrap()
            .fabric,
        "lo"
    );
}

#[test]
fn unset_or_blank_is_no_inheritance() {
    assert_eq!(Inherited::parse(None), Ok(None));
    assert_eq!(Inherited::parse(Some("")), Ok(None));
    assert_eq!(Inherited::parse(Some("  ")), Ok(None));
}

#[test]
fn a_malformed_value_is_refused_naming_it() {
    for bad in [
        "shm",
        "host|shm",
        "auto|shm|shm",
        "host||shm",
        "host|shm|a|b",
        "HOST|shm|shm",
    ] {
        let e = Inherited::parse(Some(bad)).unwrap_err();
        assert_eq!(e, ParseError(bad.to_owned()));
        assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        assert!(e.to_string().contains("mtl_rofi_inherited_choice"), "{e}");
    }
}

/// Open MPI 5.0.7, `-x FI_PROVIDER=shm`: the parent lists only shm, whose probe fails
/// (libfabric 1.17), and matches messages itself; its children do not get the variable
/// and list everything. Choosing for themselves they took tcp;ofi_rxm with tagged
/// matching (add_procs then refused the parent); by the inherited choice they take shm
/// with host matching, as the parent did.
#[test]
fn a_child_without_the_parents_environment_chooses_as_the_parent() {
    let mut parent_list = vec![prov("shm", "shm")];
    parent_list[0].matching = Matching::Failed(CheckSet::of(&[Check::IgnoreAfterExact]));
    let parent = select(&parent_list, &NameFilter::Default, &req());
    let parent_chosen = parent.chosen.expect("the parent chose shm");
    assert!(parent_chosen.host_matching);
    let handed_on = Inherited::of(&parent_list[parent_chosen.index], &parent_chosen);
    assert_eq!(handed_on, shm_host());

    let child_list = everything();
    let alone = select(&child_list, &NameFilter::Default, &req())
        .chosen
        .unwrap();
    assert_eq!(child_list[alone.index].name, "tcp;ofi_rxm");
    assert!(
        !alone.host_matching,
        "the disagreement this module prevents"
    );

    let inherited = Inherited::parse(Some(&handed_on.encode()))
        .unwrap()
        .unwrap();
    let child = select_inherited(&child_list, &inherited, &req());
    let c = child.chosen.expect("the child chose");
    assert_eq!(child_list[c.index].name, "shm");
    assert!(c.host_matching);
    assert_eq!(
        Inherited::of(&child_list[c.index], &c),
        handed_on,
        "grandchildren alike"
    );
}

#[test]
fn every_other_candidate_is_rejected_with_the_parents_choice() {
    let list = everything();
    let s = select_inherited(&list, &shm_host(), &req());
    assert_eq!(s.verdicts.len(), list.len());
    let mut indices: Vec<usize> = s.verdicts.iter().map(|v| v.index).collect();
    indices.sort_unstable();
    assert_eq!(indices, (0..list.len()).collect::<Vec<_>>());
    for v in &s.verdicts {
        assert_eq!(v.name, list[v.index].name);
        if v.name == "shm" {
            assert_eq!(v.outcome, Outcome::Chosen);
        } else {
            assert_eq!(
                v.outcome,
                Outcome::Rejected(Rejection::NotInherited(shm_host()))
            );
        }
    }
    let report = s.report();
    assert!(
        report.contains(
            "tcp;ofi_rxm [192.0.2.0/24]: rejected: the process that spawned this job chose \
             shm [shm] with host matching (mtl_rofi_inherited_choice)"
        ),
        "{report}"
    );
}

/// A parent that found tagged matching correct: the child uses it, on the parent's
/// fabric, with no probe of its own (its entries stay `Unprobed`).
#[test]
fn tagged_matching_is_inherited_on_the_parents_fabric() {
    let list = everything();
    let inherited = Inherited {
        provider: "tcp;ofi_rxm".to_owned(),
        fabric: "127.0.0.1/32".to_owned(),
        host_matching: false,
    };
    let s = select_inherited(&list, &inherited, &req());
    let c = s.chosen.unwrap();
    assert_eq!(c.index, 1);
    assert!(!c.host_matching && c.defect.is_none());
}

#[test]
fn another_fabric_of_the_provider_serves_where_the_parents_is_missing() {
    let list = everything();
    let inherited = Inherited {
        provider: "tcp;ofi_rxm".to_owned(),
        fabric: "198.51.100.0/24".to_owned(),
        host_matching: false,
    };
    let c = select_inherited(&list, &inherited, &req()).chosen.unwrap();
    assert_eq!((list[c.index].name.as_str(), c.index), ("tcp;ofi_rxm", 0));
}

#[test]
fn a_missing_provider_chooses_nothing() {
    let list = vec![prov("tcp;ofi_rxm", "192.0.2.0/24")];
    let s = select_inherited(&list, &shm_host(), &req());
    assert_eq!(s.chosen, None);
    assert_eq!(
        s.verdicts[0].outcome,
        Outcome::Rejected(Rejection::NotInherited(shm_host()))
    );
}

/// Inherited tagged matching is `never` host matching: a provider with a known defect
/// (rxd) is refused rather than used natively.
#[test]
fn inherited_tagged_matching_still_refuses_a_known_defect() {
    let list = everything();
    let inherited = Inherited {
        provider: "udp;ofi_rxd".to_owned(),
        fabric: "192.0.2.0/24".to_owned(),
        host_matching: false,
    };
    let s = select_inherited(&list, &inherited, &req());
    assert_eq!(s.chosen, None);
    assert!(matches!(
        s.verdicts.iter().find(|v| v.index == 2).unwrap().outcome,
        Outcome::Rejected(Rejection::Defect(_))
    ));
    let host = Inherited {
        host_matching: true,
        ..inherited
    };
    let c = select_inherited(&list, &host, &req()).chosen.unwrap();
    assert_eq!((c.index, c.host_matching), (2, true));
}

#[test]
fn the_requirements_keep_everything_but_matching() {
    let r = Requirements {
        thread_multiple: true,
        ..req()
    };
    let host = shm_host().requirements(&r);
    assert_eq!(host.host_matching, HostMatching::Always);
    assert!(host.thread_multiple && host.single_node);
    let tagged = Inherited {
        host_matching: false,
        ..shm_host()
    };
    assert_eq!(tagged.requirements(&r).host_matching, HostMatching::Never);
}

#[test]
fn peers_disagree_on_provider_or_matching_not_on_fabric() {
    let tcp = |fabric: &str, host_matching| Inherited {
        provider: "tcp;ofi_rxm".to_owned(),
        fabric: fabric.to_owned(),
        host_matching,
    };
    assert_eq!(disagreement(&shm_host(), &shm_host()), None);
    assert_eq!(
        disagreement(&tcp("192.0.2.0/24", false), &tcp("198.51.100.0/24", false)),
        None
    );
    let why = disagreement(&tcp("lo", false), &shm_host()).unwrap();
    assert!(
        why.starts_with(
            "this process uses tcp;ofi_rxm [lo] with tagged matching and a peer shm [shm] \
             with host matching: they were given different providers"
        ),
        "{why}"
    );
    assert!(why.contains("mtl_rofi_inherited_choice"), "{why}");
    let why = disagreement(&tcp("lo", true), &tcp("lo", false)).unwrap();
    assert!(
        why.contains("with tagged matching: their matching probes or settings"),
        "{why}"
    );
}
