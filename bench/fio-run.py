#!/usr/bin/python3
"""Turn one fio run's JSON (--output-format=json) into the run record that
bench/report.py reads from iobench: iops, bw_bytes, ios, lat_ns.mean, plus
fio's completion latency percentiles (clat_ns.percentile, ns).

    bench/fio-run.py FIO_JSON RUN_JSON
"""
import json
import sys


def main():
    raw = open(sys.argv[1]).read()
    # fio may print notes before its JSON
    job = json.loads(raw[raw.index("{"):])["jobs"][0]
    side = job["write"] if job["write"]["io_bytes"] else job["read"]
    clat = side["clat_ns"]
    run = {"tool": "fio", "iops": side["iops"], "bw_bytes": side["bw_bytes"],
           "ios": side["total_ios"], "lat_ns": {"mean": side["lat_ns"]["mean"]},
           "clat_ns": {"mean": clat["mean"],
                       "percentile": clat.get("percentile", {})}}
    with open(sys.argv[2], "w") as f:
        json.dump(run, f, indent=1)
    p = run["clat_ns"]["percentile"]
    print(f"fio IOPS={run['iops']:.0f}, clat p50={p.get('50.000000', 0) / 1000:.1f} us "
          f"p99={p.get('99.000000', 0) / 1000:.1f} us")


if __name__ == "__main__":
    main()
