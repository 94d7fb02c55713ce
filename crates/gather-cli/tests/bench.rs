//! `gather bench`: the JSON it writes has the documented schema and sane values, it accepts the
//! workloads' short and full names, and rejects bad options with exit code 2. Nothing here
//! asserts a time: the runs are tiny (`--scale`, `--repeat 2`) and only their shape is checked.

use std::process::{Command, Output};

fn gather(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gather"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the JSON was written"))
        .expect("valid JSON")
}

#[test]
fn bench_writes_the_documented_json_with_sane_values() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let o = gather(&[
        "bench",
        "--only",
        "W0,W1",
        "--json",
        json.to_str().unwrap(),
        "--scale",
        "0.05",
        "--repeat",
        "2",
        "--warmup",
        "1",
        "--bandwidth-mib",
        "16",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(
        table.contains("W0_tiny") && table.contains("W1_seed"),
        "{table}"
    );
    assert!(table.contains("scale 0.05"), "{table}");

    let v = read_json(&json);
    // the documented fields, in the documented order, then the extra ones
    let top: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert!(top.contains(&"scale"), "{top:?}");
    let text = std::fs::read_to_string(&json).unwrap();
    let pos = |k: &str| text.find(&format!("\"{k}\"")).unwrap();
    assert!(pos("bandwidth_gbps") < pos("threads") && pos("threads") < pos("workloads"));
    assert!(pos("name") < pos("median_s") && pos("min_s") < pos("gbps"));
    assert!(pos("gbps") < pos("peak_rss_bytes") && pos("peak_rss_bytes") < pos("reps"));

    let bw = v["bandwidth_gbps"].as_f64().unwrap();
    assert!(bw > 0.0 && bw.is_finite(), "{bw}");
    assert_eq!(v["threads"], 2);
    assert_eq!(v["scale"], 0.05);
    assert_eq!(v["bandwidth_bytes"], 16 << 20);
    assert_eq!(v["isolated"], true);
    let ws = v["workloads"].as_array().unwrap();
    let names: Vec<&str> = ws.iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["W0_tiny", "W1_seed"]);
    for w in ws {
        let med = w["median_s"].as_f64().unwrap();
        let min = w["min_s"].as_f64().unwrap();
        assert!(min > 0.0 && min <= med && med < 10.0, "{w}");
        let gbps = w["gbps"].as_f64().unwrap();
        let mb = w["min_bytes"].as_f64().unwrap();
        assert!((gbps - mb / med / 1e9).abs() <= 1e-9 * gbps.max(1.0), "{w}");
        let rss = w["peak_rss_bytes"].as_u64().unwrap();
        assert!(rss > 1 << 20 && rss < 1 << 40, "{w}");
        assert_eq!(w["verified"], true, "{w}");
        assert_eq!(w["reps"], 2, "{w}");
        let pct = w["pct_bandwidth"].as_f64().unwrap();
        assert!((pct - 100.0 * gbps / bw).abs() < 1e-6 * pct.max(1.0), "{w}");
    }
    // W1 at scale 0.05: x[50,1000], index[50,500]; the output is 50 * 500 float32
    assert_eq!(ws[1]["out_bytes"], 50 * 500 * 4);
    assert_eq!(ws[1]["shapes"], "x[50,1000] index[50,500]");
    // W0 is a latency: batches of calls, well under a millisecond per call even unoptimised
    assert_eq!(ws[0]["calls_per_rep"], 1000);
    assert!(ws[0]["median_s"].as_f64().unwrap() < 1e-3);
    // W0's first call allocates a 16-byte output; the code it pages in (about 1 MB of the
    // executable) is reported apart and not counted as extra memory
    let w0 = &ws[0];
    assert!(w0["paged_in_bytes"].as_u64().is_some(), "{w0}");
    if w0["rss_hwm_reset"] == true {
        assert!(w0["extra_bytes"].as_u64().unwrap() < 256 << 10, "{w0}");
        assert_eq!(w0["memory_ok"], true, "{w0}");
    }
}

#[test]
fn bench_in_process_accepts_full_names_and_a_given_bandwidth() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("b.json");
    let o = gather(&[
        "bench",
        "--only",
        "W3_topk_patches,w11",
        "--in-process",
        "--threads",
        "1",
        "--json",
        json.to_str().unwrap(),
        "--scale",
        "0.02",
        "--repeat",
        "1",
        "--bandwidth-gbps",
        "40",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = read_json(&json);
    assert_eq!(v["bandwidth_gbps"], 40.0);
    assert_eq!(v["bandwidth_given"], true);
    assert_eq!(v["threads"], 1);
    assert_eq!(v["isolated"], false);
    let names: Vec<&str> = v["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "W3_topk_patches",
            "W11a_scatter_2d_set",
            "W11b_scatter_2d_add"
        ]
    );
}

#[test]
fn bench_rejects_unknown_workloads_and_bad_numbers_with_exit_2() {
    for (args, needle) in [
        (&["bench", "--only", "W1,W12"][..], "unknown workload `W12`"),
        (&["bench", "--threads", "0"][..], "--threads"),
        (&["bench", "--scale", "0"][..], "--scale"),
        (&["bench", "--repeat", "0"][..], "--repeat"),
    ] {
        let o = gather(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn bench_help_explains_the_numbers_and_gives_examples() {
    let o = gather(&["bench", "--help"]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    for needle in [
        "Examples:",
        "gather bench --only W3,W6",
        "Minimal bytes",
        "Default 2 (not the number of cores)",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    assert!(!text.contains("--worker"), "internal flag shown: {text}");
}
