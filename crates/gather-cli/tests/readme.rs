//! The README's transcripts of the `gather` command are real: every `$ gather ...` line of the
//! `console` blocks of its "The `gather` command" section is run (in order, in one fresh
//! folder), and its output must be the lines that follow it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Splits a command line the way the shell does for these transcripts: words separated by
/// blanks, single quotes keep what they enclose.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for ch in line.chars() {
        match ch {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    assert!(!quoted, "unbalanced quote in {line}");
    if any {
        out.push(cur);
    }
    out
}

/// `(command, expected output)` of every transcript line of the section.
fn transcripts(readme: &str) -> Vec<(String, String)> {
    let start = readme
        .find("## The `gather` command")
        .expect("the section exists");
    let section = &readme[start..];
    let end = section[3..]
        .find("\n## ")
        .map(|e| e + 3)
        .unwrap_or(section.len());
    let section = &section[..end];
    let mut out: Vec<(String, String)> = Vec::new();
    let mut in_block = false;
    for line in section.lines() {
        if line.starts_with("```") {
            in_block = line == "```console";
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.push((cmd.to_string(), String::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push_str(line);
            last.1.push('\n');
        }
    }
    out
}

fn listing(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.iter().map(|n| format!("{n}\n")).collect()
}

#[test]
fn the_readme_transcripts_are_what_the_command_prints() {
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let list = transcripts(&readme);
    assert!(list.len() >= 8, "only {} transcripts found", list.len());
    for sub in ["explain", "check", "infer", "run"] {
        assert!(
            list.iter()
                .any(|(c, _)| c.starts_with(&format!("gather {sub} "))),
            "no transcript of {sub}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    for (cmd, want) in &list {
        let w = words(cmd);
        let got = match w[0].as_str() {
            "ls" => listing(dir.path()),
            "gather" => {
                let o = Command::new(env!("CARGO_BIN_EXE_gather"))
                    .args(&w[1..])
                    .current_dir(dir.path())
                    .output()
                    .unwrap();
                String::from_utf8(o.stdout).unwrap() + &String::from_utf8(o.stderr).unwrap()
            }
            other => panic!("unexpected command `{other}` in the README"),
        };
        assert_eq!(&got, want, "output of `{cmd}`");
    }
}

#[test]
fn words_keep_single_quoted_text_together() {
    assert_eq!(
        words("gather x --input '[[1, 2]]' -o a.npy"),
        vec!["gather", "x", "--input", "[[1, 2]]", "-o", "a.npy"]
    );
}

/// The README's picture is exactly what `gather explain --svg` draws for the seed example today.
#[test]
fn the_readme_picture_is_what_explain_svg_draws() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("`gather explain gather") && l.contains("--svg docs/"))
        .expect("the README names the command that drew its picture");
    let words = words(line.trim_matches('`'));
    let checked_in = words.last().unwrap().clone();
    assert!(
        readme.contains(&format!("]({checked_in})")),
        "the picture is shown"
    );
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.svg");
    let mut args: Vec<String> = words[1..words.len() - 1].to_vec();
    args.push(fresh.to_string_lossy().into_owned());
    let out = Command::new(env!("CARGO_BIN_EXE_gather"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&fresh).unwrap(),
        std::fs::read_to_string(root.join(&checked_in)).unwrap(),
        "regenerate {checked_in} with the README's command"
    );
}
