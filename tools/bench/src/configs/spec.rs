//! A configuration from the command line: a known name, `NAME@lossP`, or a custom
//! `NAME=--mca K V ... -x VAR=value`.

use mca_harness::McaConfig;

use super::registry::{BenchConfig, registry};
use super::series::Series;

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
    use crate::configs::series::OMPI5;

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
