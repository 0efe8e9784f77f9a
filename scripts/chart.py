#!/usr/bin/env python3
"""Horizontal bar chart of hwsched / best-peer ratios, as SVG.

Input: CSV with a header `workload,hwsched,best_peer` or JSON (a list of
{"workload": ..., "hwsched": ..., "best_peer": ...}). Values are times or
costs (lower is better), so a ratio under 1.0 means hwsched wins.

    python3 scripts/chart.py results.csv [-o bench-ratios.svg] [--title T]
"""
import argparse
import csv
import json
from xml.sax.saxutils import escape


def load(path):
    with open(path, newline="") as f:
        if path.endswith(".json"):
            rows = json.load(f)
        else:
            rows = list(csv.DictReader(f))
    return [(str(r["workload"]), float(r["hwsched"]) / float(r["best_peer"])) for r in rows]


def svg(rows, title):
    bar, gap, left, right, top = 22, 8, 230, 70, 40
    width = 760
    plot = width - left - right
    vmax = max([1.0] + [r for _, r in rows]) * 1.1
    x = lambda v: left + plot * v / vmax  # noqa: E731
    height = top + len(rows) * (bar + gap) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>',
    ]
    for i, (name, r) in enumerate(rows):
        y = top + i * (bar + gap)
        color = "#2a9d8f" if r <= 1.0 else "#e76f51"
        out.append(f'<text x="{left - 8}" y="{y + bar * 0.7}" text-anchor="end">{escape(name)}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{x(r) - left:.1f}" height="{bar}" fill="{color}"/>')
        out.append(f'<text x="{x(r) + 5:.1f}" y="{y + bar * 0.7}">{r:.2f}</text>')
    y_end = top + len(rows) * (bar + gap)
    out.append(f'<line x1="{x(1.0):.1f}" y1="{top - 6}" x2="{x(1.0):.1f}" y2="{y_end}" '
               'stroke="black" stroke-dasharray="4,3"/>')
    out.append(f'<text x="{x(1.0):.1f}" y="{y_end + 16}" text-anchor="middle">1.0</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("input", help="CSV or JSON of workload,hwsched,best_peer")
    p.add_argument("-o", "--output", default="bench-ratios.svg")
    p.add_argument("--title", default="hwsched / best peer (lower is better)")
    a = p.parse_args()
    rows = load(a.input)
    if not rows:
        raise SystemExit("chart.py: no rows in " + a.input)
    with open(a.output, "w") as f:
        f.write(svg(rows, a.title))
    print(f"wrote {a.output} ({len(rows)} workloads)")


if __name__ == "__main__":
    main()
