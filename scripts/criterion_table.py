#!/usr/bin/env python3
"""Turns criterion's terminal output into a markdown table.

Reads `cargo bench` output on stdin (one or more runs, each optionally
preceded by a line `### <label>`), takes the middle estimate of each
`group/runtime  time: [lo mid hi]` line, and prints, per label, one row per
group with a column per runtime and the ratio hwsched / best peer (of
times: below 1 means hwsched is faster). With `--csv FILE`, also appends
`workload,hwsched,best_peer` rows of the first label to FILE, the input of
scripts/chart.py.

    cargo bench --bench runtime 2>&1 | python3 scripts/criterion_table.py
"""
import re
import sys

UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}
PEERS = ("tokio", "async-executor")


def parse(lines):
    label, name, out = "", None, {}
    for line in lines:
        line = line.rstrip("\n")
        if line.startswith("### "):
            label = line[4:].strip()
            continue
        m = re.match(r"^(\S+/\S+)", line)
        if m and "time:" not in line.split(m.group(1), 1)[0]:
            name = m.group(1)
        t = re.search(r"time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
        if t and name:
            out.setdefault(label, {})[name] = float(t.group(1)) * UNITS[t.group(2)]
            name = None
    return out


def fmt(secs):
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if secs >= f:
            return f"{secs / f:.3g} {unit}"
    return f"{secs:.3g} s"


def main():
    csv_path = sys.argv[sys.argv.index("--csv") + 1] if "--csv" in sys.argv else None
    runs = parse(sys.stdin)
    for n, (label, res) in enumerate(runs.items()):
        groups, cols = {}, []
        for name, v in res.items():
            g, rt = name.split("/", 1)
            groups.setdefault(g, {})[rt] = v
            if rt not in cols:
                cols.append(rt)
        if label:
            print(f"\n{label}\n")
        print("| workload | " + " | ".join(cols) + " | hwsched / best peer |")
        print("|---" * (len(cols) + 2) + "|")
        for g, r in groups.items():
            peers = [r[p] for p in PEERS if p in r]
            ratio = f"{r['hwsched'] / min(peers):.2f}" if peers and "hwsched" in r else "-"
            if csv_path and n == 0 and peers and "hwsched" in r:
                new = not __import__("os").path.exists(csv_path)
                with open(csv_path, "a") as f:
                    if new:
                        f.write("workload,hwsched,best_peer\n")
                    f.write(f"{g},{r['hwsched']},{min(peers)}\n")
            cells = [fmt(r[c]) if c in r else "-" for c in cols]
            print(f"| {g} | " + " | ".join(cells) + f" | {ratio} |")


if __name__ == "__main__":
    main()
