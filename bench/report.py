#!/usr/bin/python3
"""Turn one scenario's raw iobench runs into results/bench/<name>.{json,md,png}.

usage: bench/report.py RESULTS_DIR NAME   (NAME: scenario, or scenario-icount)

Per case and variant: the median over runs of the mean IOPS (and of the mean
latency when iobench tracked it); the ratio is feature / baseline of the
medians. The setup block records the kernel, the QEMU command line and the
devices, so a number can be reproduced.
"""
import json
import os
import statistics
import sys


# fio's clat_ns.percentile keys the report shows
CLAT_PERCENTILES = ("50.000000", "99.000000", "99.900000")


def load_runs(raw, case, variant):
    runs = []
    n = 1
    while True:
        path = os.path.join(raw, f"{case}.{variant}.{n}.json")
        if not os.path.exists(path):
            return runs
        with open(path) as f:
            runs.append(json.load(f))
        n += 1


def summarize(cmd, runs):
    iops = [r["iops"] for r in runs]
    out = {"command": cmd, "runs": len(runs), "iops": iops,
           "iops_median": statistics.median(iops)}
    mib = [r["bw_bytes"] / 2**20 for r in runs if "bw_bytes" in r]
    if mib:
        out["mib_s"] = mib
        out["mib_s_median"] = statistics.median(mib)
    # guest CPU busy time (all CPUs) per GiB moved, when iobench measured it
    cpu = [r["system_cpu_busy_s"] / (r["ios"] * r["options"]["bs"] / 2**30)
           for r in runs if "system_cpu_busy_s" in r and r["ios"]]
    if cpu:
        out["cpu_s_per_gib"] = cpu
        out["cpu_s_per_gib_median"] = statistics.median(cpu)
    # bytes on a network link during the run (bench/scenarios/copy-fabrics.sh):
    # bytes sent per byte moved and, for a shaped link, the share of its
    # capacity used
    if runs and all("wire_bytes" in r and r["ios"] for r in runs):
        out["wire_per_byte_median"] = statistics.median(
            r["wire_bytes"] / (r["ios"] * r["options"]["bs"]) for r in runs)
        link = [r["wire_bytes"] * 8 / r["runtime_s"] / r["link_bits_per_s"]
                for r in runs if r.get("link_bits_per_s") and r["runtime_s"]]
        if len(link) == len(runs):
            out["link_util"] = link
            out["link_util_median"] = statistics.median(link)
    lat = [r["lat_ns"]["mean"] / 1000.0 for r in runs if "lat_ns" in r]
    if lat:
        out["lat_mean_us"] = lat
        out["lat_mean_us_median"] = statistics.median(lat)
    # fio's completion latency percentiles (bench/fio-run.py), in us
    for pct in CLAT_PERCENTILES:
        v = [r["clat_ns"]["percentile"][pct] / 1000.0 for r in runs
             if pct in r.get("clat_ns", {}).get("percentile", {})]
        if v and len(v) == len(runs):
            out.setdefault("clat_us", {})[pct] = v
            out.setdefault("clat_us_median", {})[pct] = statistics.median(v)
    return out


def read_setup(results, raw, scenario):
    setup = {"kernel": None, "devices": [], "qemu": None}
    with open(os.path.join(raw, "setup.txt")) as f:
        for line in f:
            key, _, val = line.rstrip("\n").partition("=")
            if key == "device":
                setup["devices"].append(val)
            else:
                setup[key] = val
    prov = os.path.join(raw, "provenance.json")
    if os.path.exists(prov):
        with open(prov) as f:
            setup["provenance"] = json.load(f)
    qemu = os.path.join(results, "vm", f"bench-{scenario}", "qemu.cmdline")
    if os.path.exists(qemu):
        with open(qemu) as f:
            setup["qemu"] = f.read().strip()
    return setup


def provenance_line(p):
    if not p:
        return "unknown (no provenance.json)"
    return (f"project `{p['project_commit'][:12]}`"
            f"{' (dirty tree)' if p['project_dirty'] else ''}, series "
            f"`{p['series_hash'][:12]}`, kernel `{p['kernel_release']}`, "
            f"{p['qemu_version']}")


def link_use(v):
    """A variant's median share of its shaped link, "-" if unshaped."""
    return f"{100 * v['link_util_median']:.2f}%" if "link_util_median" in v else "-"


def plot(cases, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.38
    for i, c in enumerate(cases):
        for j, (variant, color) in enumerate((("baseline", "#7f7f7f"), ("feature", "#1f77b4"))):
            x = i + (j - 0.5) * width
            v = c[variant]
            ax.bar(x, v["iops_median"], width, color=color,
                   label=variant if i == 0 else None)
            ax.plot([x] * len(v["iops"]), v["iops"], "k.", markersize=4)
        ax.annotate(f"{c['ratio']:.2f}x", (i, max(c["feature"]["iops_median"],
                    c["baseline"]["iops_median"])), ha="center", va="bottom")
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([c["name"] for c in cases])
    ax.set_ylabel("IOPS (median; dots are runs)")
    ax.set_title(title, fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def metric_table(cases, key, title, header, cells):
    """A table of one more metric, when both variants of every case have it:
    HEADER is its markdown header line, CELLS(baseline, feature) a row's
    cells after the case name."""
    if not all(key in c[v] for c in cases for v in ("baseline", "feature")):
        return []
    rows = [f"| {c['name']} | {cells(c['baseline'], c['feature'])} |" for c in cases]
    return ["", f"## {title}", "", header, "|---|" + "---:|" * (header.count("|") - 2), *rows]


def main():
    results, scenario = sys.argv[1], sys.argv[2]
    raw = os.path.join(results, "bench", "raw", scenario)
    setup = read_setup(results, raw, scenario)
    cases = []
    with open(os.path.join(raw, "cases.tsv")) as f:
        for line in f:
            name, base_cmd, feat_cmd = line.rstrip("\n").split("\t")
            base = summarize(base_cmd, load_runs(raw, name, "baseline"))
            feat = summarize(feat_cmd, load_runs(raw, name, "feature"))
            if not base["runs"] or base["runs"] != feat["runs"]:
                sys.exit(f"report: case {name}: incomplete runs")
            case = {"name": name, "baseline": base, "feature": feat,
                    "ratio": feat["iops_median"] / base["iops_median"]}
            if "lat_mean_us_median" in base and "lat_mean_us_median" in feat:
                case["lat_ratio"] = feat["lat_mean_us_median"] / base["lat_mean_us_median"]
            cases.append(case)

    out = {"scenario": scenario, "description": setup.get("description"),
           "setup": setup, "method": "baseline and feature interleaved in one boot "
           "as ABBA pairs (odd runs baseline first, even runs feature first); "
           "median of the per-run mean IOPS; ratio = feature / baseline",
           "cases": cases}
    base_path = os.path.join(results, "bench", scenario)
    with open(base_path + ".json", "w") as f:
        json.dump(out, f, indent=2)

    lines = [f"# {scenario}: {setup.get('description')}", "",
             "## Setup", "",
             f"- kernel: `{setup.get('kernel')}`, guest CPUs: {setup.get('cpus')}",
             f"- runs per variant: {setup.get('runs')}, interleaved ABBA (A B, B A, ...)",
             f"- from: {provenance_line(setup.get('provenance'))}",
             f"- devices: {'; '.join(setup['devices'])}",
             *([f"- note: {setup['note']}"] if setup.get("note") else []),
             f"- QEMU: `{setup.get('qemu')}`", "",
             "## Results (median of runs)", "",
             "| case | baseline IOPS | feature IOPS | ratio | baseline lat (us) | feature lat (us) |",
             "|---|---:|---:|---:|---:|---:|"]
    for c in cases:
        b, f_ = c["baseline"], c["feature"]
        lat_b = f"{b['lat_mean_us_median']:.1f}" if "lat_mean_us_median" in b else "-"
        lat_f = f"{f_['lat_mean_us_median']:.1f}" if "lat_mean_us_median" in f_ else "-"
        lines.append(f"| {c['name']} | {b['iops_median']:.0f} | {f_['iops_median']:.0f} | "
                     f"{c['ratio']:.2f}x | {lat_b} | {lat_f} |")
    lines += metric_table(
        cases, "cpu_s_per_gib_median", "Throughput and guest CPU per GiB (median of runs)",
        "| case | baseline MiB/s | feature MiB/s | ratio | baseline CPU s/GiB | "
        "feature CPU s/GiB | CPU ratio |",
        lambda b, f_: f"{b['mib_s_median']:.1f} | {f_['mib_s_median']:.1f} | "
                      f"{f_['mib_s_median'] / b['mib_s_median']:.2f}x | "
                      f"{b['cpu_s_per_gib_median']:.2f} | {f_['cpu_s_per_gib_median']:.2f} | "
                      f"{f_['cpu_s_per_gib_median'] / b['cpu_s_per_gib_median']:.2f}x")
    lines += metric_table(
        cases, "wire_per_byte_median", "Network link (median of runs; link use only "
        "where it is shaped)",
        "| case | baseline link use | feature link use | baseline bytes on the link "
        "per byte copied | feature bytes on the link per byte copied | feature / baseline |",
        lambda b, f_: f"{link_use(b)} | {link_use(f_)} | "
                      f"{b['wire_per_byte_median']:.3f} | {f_['wire_per_byte_median']:.4f} | "
                      f"{100 * f_['wire_per_byte_median'] / b['wire_per_byte_median']:.2f}%")
    fio_cases = [c for c in cases
                 if "clat_us_median" in c["baseline"] and "clat_us_median" in c["feature"]]
    if fio_cases:
        lines += ["", "## fio completion latency percentiles, us (median of runs)", "",
                  "| case | " + " | ".join(f"baseline p{float(p):g} | feature p{float(p):g}"
                                         for p in CLAT_PERCENTILES) + " |",
                  "|---|" + "---:|" * (2 * len(CLAT_PERCENTILES))]
        for c in fio_cases:
            b, f_ = c["baseline"]["clat_us_median"], c["feature"]["clat_us_median"]
            lines.append(f"| {c['name']} | " + " | ".join(
                f"{b.get(p, float('nan')):.1f} | {f_.get(p, float('nan')):.1f}"
                for p in CLAT_PERCENTILES) + " |")
    lines += ["", "## Commands", ""]
    for c in cases:
        lines += [f"- {c['name']} baseline: `{c['baseline']['command']}`",
                  f"- {c['name']} feature: `{c['feature']['command']}`"]
    if plot(cases, base_path + ".png", f"{scenario}: {setup.get('description')}"):
        lines += ["", f"![{scenario}]({scenario}.png)"]
    with open(base_path + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[lines.index("## Results (median of runs)"):]))
    print(f"\nwritten: {base_path}.json, .md" + (", .png" if os.path.exists(base_path + ".png") else ""))


if __name__ == "__main__":
    main()
