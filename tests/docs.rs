//! The documentation checked against the code. Every README (the top one, the
//! components', tests/*/README.md ...), docs/*.md and CHANGELOG.md may name only:
//! make targets the Makefile defines; parameters and MPI_T pvars of ours (`btl_rusnic_*`,
//! `btl_rsmcuda_*`, `mtl_rofi_*`) that the built components register (as `ompi_info`
//! lists them); `--mca` names this Open MPI registers; repository
//! paths that exist. The top README (with docs/tests.md, which it links) names every make
//! target, has a troubleshooting entry for every show_help topic of configure-support/help, and no entry for a topic
//! that does not exist. No tracked file uses the word for an MPI Session in any other sense.
//!
//! The checkers are plain functions over text, so each is also run on a broken
//! snippet below: a checker that found nothing there would pass anything.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use mca_harness::{component_path, repo_root};

/// The prefixes of our parameters and pvars.
const OURS: [&str; 3] = ["btl_rusnic_", "btl_rsmcuda_", "mtl_rofi_"];

/// `--mca` names that only Open MPI 5.0 registers (the docs describe both series; the
/// Open MPI these tests run against is 4.1).
const OMPI5_ONLY: [&str; 2] = ["accelerator", "smsc"];

/// Every Markdown file of the documentation, relative to the repository root.
fn doc_files() -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = dir.join(&name);
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir {
                if !name.starts_with('.')
                    && !["target", "build", "ompi-headers"].contains(&name.as_str())
                {
                    walk(root, &rel, out);
                }
            } else if name == "README.md"
                || (dir == Path::new("docs") && name.ends_with(".md"))
                || rel == Path::new("CHANGELOG.md")
            {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo_root(), Path::new(""), &mut out);
    out.sort();
    out
}

fn read(rel: &Path) -> String {
    std::fs::read_to_string(repo_root().join(rel))
        .unwrap_or_else(|e| panic!("{}: {e}", rel.display()))
}

/// The code of a Markdown text: fenced blocks (without their `# comments`) and inline
/// code spans, one piece per line or span.
fn code_pieces(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            let comment = line.char_indices().find(|&(at, c)| {
                c == '#' && (at == 0 || line[..at].ends_with(char::is_whitespace))
            });
            let code = comment.map_or(line, |(at, _)| &line[..at]);
            pieces.push(code.to_string());
        } else {
            pieces.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    pieces
}

/// The make targets a text runs: `make [-s] [VAR=value ...] target` in its code.
fn make_targets_named(text: &str) -> BTreeSet<String> {
    let mut targets = BTreeSet::new();
    for piece in code_pieces(text) {
        let words: Vec<&str> = piece.split_whitespace().collect();
        for (i, word) in words.iter().enumerate() {
            if *word != "make" {
                continue;
            }
            let next = words[i + 1..]
                .iter()
                .find(|w| !w.starts_with('-') && !w.contains('='));
            if let Some(target) = next {
                let target = target.trim_end_matches([',', ';', ')', ':', '.']);
                if !target.is_empty()
                    && target
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                {
                    targets.insert(target.to_string());
                }
            }
        }
    }
    targets
}

/// The targets the Makefile defines (rule heads, not variable assignments).
fn makefile_targets(makefile: &str) -> BTreeSet<String> {
    let mut targets = BTreeSet::new();
    for line in makefile.lines() {
        if line.starts_with(['\t', '#', ' ', '.']) || line.contains(":=") || line.contains("?=") {
            continue;
        }
        if let Some((heads, _)) = line.split_once(':')
            && !heads.contains('=')
            && !heads.contains('$')
        {
            targets.extend(heads.split_whitespace().map(str::to_string));
        }
    }
    targets
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
}

/// Our parameter and pvar names in a text, with `prefix_{a,b}_rest` expanded; a bare
/// prefix (`btl_rusnic_*`) names none.
fn our_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for prefix in OURS {
        for (at, _) in text.match_indices(prefix) {
            if text[..at].ends_with(is_name_char) {
                continue;
            }
            let rest = &text[at + prefix.len()..];
            let stem_len = rest.find(|c| !is_name_char(c)).unwrap_or(rest.len());
            let stem = &rest[..stem_len];
            let after = &rest[stem_len..];
            let mut tails = vec![String::new()];
            if let Some(inner) = after.strip_prefix('{').and_then(|a| a.split_once('}')) {
                let (alternatives, more) = inner;
                let more_len = more.find(|c| !is_name_char(c)).unwrap_or(more.len());
                tails = alternatives
                    .split(',')
                    .map(|a| format!("{}{}", a.trim(), &more[..more_len]))
                    .collect();
            }
            for tail in tails {
                let name = format!("{prefix}{stem}{tail}");
                if name.len() > prefix.len() && !name.ends_with('_') {
                    names.insert(name);
                }
            }
        }
    }
    names
}

/// The names given to `--mca` in a text's code.
fn mca_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for piece in code_pieces(text) {
        let words: Vec<&str> = piece.split_whitespace().collect();
        for pair in words.windows(2) {
            if pair[0] == "--mca" && pair[1].starts_with(|c: char| c.is_ascii_lowercase()) {
                names.insert(pair[1].trim_end_matches(['`', ',']).to_string());
            }
        }
    }
    names
}

/// Repository paths a text names (relative to the repository root or to the text's own
/// directory), each with the base it was found under; `build/` and `target/` are made
/// by the build and not checked.
fn paths_named(text: &str, doc_dir: &Path) -> Vec<String> {
    let root = repo_root();
    let ok = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut missing = Vec::new();
    for token in text.split(|c: char| !ok(c)) {
        let token = token.trim_end_matches(['.', '-']);
        if !token.contains('/') || token.starts_with('/') || token.contains("//") {
            continue;
        }
        let first = token.split('/').next().unwrap_or("");
        if first.is_empty() || ["build", "target", "."].contains(&first) {
            continue;
        }
        let bases = [root.clone(), root.join(doc_dir)];
        let known: Vec<&PathBuf> = bases.iter().filter(|b| b.join(first).exists()).collect();
        if !known.is_empty() && !known.iter().any(|b| b.join(token).exists()) {
            missing.push(token.to_string());
        }
    }
    missing
}

/// The `[topic]`s of a show_help file.
fn help_topics(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter(|l| l.starts_with('[') && l.ends_with(']'))
        .map(|l| l[1..l.len() - 1].to_string())
        .collect()
}

/// The section of a Markdown text under the first heading that names `needle`, up to
/// the next heading of the same or a higher level.
fn section<'a>(text: &'a str, needle: &str) -> Option<&'a str> {
    let mut start = None;
    let mut level = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes > 0 && line[hashes..].starts_with(' ') {
            match start {
                None if line.contains(needle) => {
                    start = Some(offset + line.len());
                    level = hashes;
                }
                Some(s) if hashes <= level => return Some(&text[s..offset]),
                _ => {}
            }
        }
        offset += line.len();
    }
    start.map(|s| &text[s..])
}

/// What a troubleshooting section lacks and what it names in vain: (missing, stale).
fn troubleshooting_gaps(section: &str, topics: &BTreeSet<String>) -> (Vec<String>, Vec<String>) {
    let named: BTreeSet<String> = section
        .split("`[")
        .skip(1)
        .filter_map(|s| s.split_once("]`").map(|(t, _)| t.to_string()))
        .collect();
    (
        topics.difference(&named).cloned().collect(),
        named.difference(topics).cloned().collect(),
    )
}

/// Every MCA variable and MPI_T pvar this Open MPI registers, ours included, and every
/// framework.
fn registered_mca_names() -> BTreeSet<String> {
    let out = Command::new("ompi_info")
        .args(["--all", "--level", "9", "--parsable"])
        .env("OMPI_MCA_mca_base_component_path", component_path())
        .output()
        .expect("run ompi_info");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() > 4 && fields[0] == "mca" {
            names.insert(fields[1].to_string());
            if fields[3] == "param" || fields[3] == "pvar" {
                names.insert(fields[4].to_string());
            }
        }
    }
    names
}

#[test]
fn every_make_target_a_doc_names_exists_and_the_user_docs_name_every_target() {
    let defined = makefile_targets(&read(Path::new("Makefile")));
    assert!(
        defined.contains("check") && defined.contains("gpu-bundle"),
        "{defined:?}"
    );
    let mut wrong = Vec::new();
    for doc in doc_files() {
        for target in make_targets_named(&read(&doc)) {
            if !defined.contains(&target) {
                wrong.push(format!("{}: make {target}", doc.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "make targets the Makefile does not define:\n{}",
        wrong.join("\n")
    );
    // The README names the targets a user runs and links docs/tests.md for the
    // building blocks; between them every target is named.
    let readme = read(Path::new("README.md"));
    assert!(
        readme.contains("(docs/tests.md)"),
        "README.md must link docs/tests.md"
    );
    let mut named = make_targets_named(&readme);
    named.extend(make_targets_named(&read(Path::new("docs/tests.md"))));
    let unnamed: Vec<&String> = defined
        .iter()
        .filter(|t| *t != "all" && !named.contains(*t))
        .collect();
    assert!(
        unnamed.is_empty(),
        "make targets neither README.md nor docs/tests.md names: {unnamed:?}"
    );
}

/// A user's guide read once: its length is kept, the history goes to CHANGELOG.md and
/// docs/bench.
#[test]
fn the_readme_stays_under_300_lines() {
    let lines = read(Path::new("README.md")).lines().count();
    assert!(lines < 300, "README.md has {lines} lines (at most 299)");
}

#[test]
fn every_parameter_and_pvar_a_doc_names_is_registered() {
    let registered = registered_mca_names();
    for prefix in OURS {
        assert!(
            registered.iter().any(|n| n.starts_with(prefix)),
            "ompi_info lists no {prefix}* (make components?)"
        );
    }
    assert!(
        registered.contains("btl_rusnic_num_foreign_recvs"),
        "ompi_info lists no pvar of ours"
    );
    let mut wrong = Vec::new();
    for doc in doc_files() {
        let text = read(&doc);
        for name in our_names(&text) {
            if !registered.contains(&name) {
                wrong.push(format!("{}: {name}", doc.display()));
            }
        }
        for name in mca_names(&text) {
            if !registered.contains(&name) && !OMPI5_ONLY.contains(&name.as_str()) {
                wrong.push(format!("{}: --mca {name}", doc.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "names ompi_info does not list:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_repository_path_a_doc_names_exists() {
    let mut wrong = Vec::new();
    for doc in doc_files() {
        let dir = doc.parent().unwrap_or(Path::new(""));
        for path in paths_named(&read(&doc), dir) {
            wrong.push(format!("{}: {path}", doc.display()));
        }
    }
    assert!(
        wrong.is_empty(),
        "paths that do not exist:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_help_topic_has_its_troubleshooting_entry() {
    let readme = read(Path::new("README.md"));
    let dir = repo_root().join("configure-support/help");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("help dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    let mut wrong = Vec::new();
    for file in files {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let topics = help_topics(&std::fs::read_to_string(&file).expect("help file"));
        assert!(!topics.is_empty(), "{name} has no topics");
        let Some(entries) = section(&readme, &name) else {
            wrong.push(format!("README.md has no section naming {name}"));
            continue;
        };
        let (missing, stale) = troubleshooting_gaps(entries, &topics);
        wrong.extend(
            missing
                .iter()
                .map(|t| format!("{name}: [{t}] has no entry")),
        );
        wrong.extend(
            stale
                .iter()
                .map(|t| format!("{name}: entry [{t}] is no topic")),
        );
    }
    assert!(
        wrong.is_empty(),
        "README.md troubleshooting:\n{}",
        wrong.join("\n")
    );
}

/// Allowed: the word as part of MPI Sessions (MPI-4), MPI_T pvar sessions, the test
/// file of the former, Open MPI 5.0's own message about them, and the field of
/// `opal_process_info` that names a job's temporary directory on a node.
const SESSION_ALLOWED: [&str; 8] = [
    "opal_process_info.job_session_dir",
    "mpi_session",
    "mpi session",
    "mpi-4 session",
    "mpi_t_pvar_session",
    "pvar_session",
    "ompi5_sessions",
    "mpi sessions related",
];

fn session_lines_not_allowed(lines: &str) -> Vec<String> {
    lines
        .lines()
        .filter(|l| {
            let lower = l.to_lowercase();
            lower.contains("session") && !SESSION_ALLOWED.iter().any(|a| lower.contains(a))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn no_tracked_file_names_a_session_but_mpi_sessions() {
    let out = Command::new("git")
        // This file names the word to look for it; its checker is tested below.
        .args(["grep", "-n", "-i", "session", "--", ".", ":!tests/docs.rs"])
        .current_dir(repo_root())
        .output()
        .expect("run git grep");
    let found = String::from_utf8_lossy(&out.stdout);
    assert!(
        found.contains("MPI_Session"),
        "git grep found nothing: {found}"
    );
    let wrong = session_lines_not_allowed(&found);
    assert!(
        wrong.is_empty(),
        "not about MPI Sessions:\n{}",
        wrong.join("\n")
    );
}

/// Each checker on a broken text: it must find what is wrong there.
#[test]
fn the_checkers_find_what_is_broken() {
    let broken = "Run `make chekc` or\n```sh\nOMPI_PREFIX=/x make -s no-such-target   # make demo\n```\n\
                  Tune `btl_rusnic_windw`, `btl_rsmcuda_{fifo_size,fifo_sise}`, `--mca mtl_rofi_bogus 1`;\n\
                  see tests/no_such_file.rs and [x](components/rusnic/nowhere.md).\n";
    assert_eq!(
        make_targets_named(broken),
        ["chekc", "no-such-target"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    let names = our_names(broken);
    assert!(
        names.contains("btl_rusnic_windw") && names.contains("btl_rsmcuda_fifo_sise"),
        "{names:?}"
    );
    assert!(names.contains("btl_rsmcuda_fifo_size"), "{names:?}");
    assert!(mca_names(broken).contains("mtl_rofi_bogus"));
    assert_eq!(
        paths_named(broken, Path::new("")),
        ["tests/no_such_file.rs", "components/rusnic/nowhere.md"]
    );
    let topics: BTreeSet<String> = ["no ports", "bad contact"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let readme = "## Troubleshooting\n### rusnic (help-x.txt)\n| `[no ports]` | ... |\n| `[gone]` | |\n## Next\n`[bad contact]`\n";
    let entries = section(readme, "help-x.txt").expect("section");
    assert_eq!(
        troubleshooting_gaps(entries, &topics),
        (vec!["bad contact".to_string()], vec!["gone".to_string()])
    );
    assert_eq!(
        makefile_targets("X := 1\nall: a\n.PHONY: all\na b: c\n\techo x: y\n"),
        ["a", "all", "b"].iter().map(|s| s.to_string()).collect()
    );
    let grep = "README.md:3:Session 14's run\nx.c:1:MPI_Session_init\nt.rs:2:ompi5_sessions\n";
    assert_eq!(
        session_lines_not_allowed(grep),
        ["README.md:3:Session 14's run"]
    );
}
