#!/usr/bin/env python3
"""Draws docs/client-chart.svg from the CSV of
`cargo run --release --example simulate -p tally-client -- sweep`:
store round trips per request (an identity within its limit) and the share
of the limit admitted per window (an identity over it), against the
identity's request rate per node, for exact mode and the cached mode at 100
and 20 ms syncs. Plain SVG, no plotting library.

Usage: python3 tools/client_chart.py sweep.csv docs/client-chart.svg
"""
import csv
import math
import sys

MODES = [("exact", "#222222"), ("cached 100 ms", "#1f77b4"), ("cached 20 ms", "#e8740c")]
WIDTH, HEIGHT = 920, 410
PANEL_W, PANEL_H = 360, 260
LEFT, TOP = 70, 60
GAP = 110
X_MIN, X_MAX = 0.1, 10_000.0


def x_of(rate, left):
    span = math.log10(X_MAX) - math.log10(X_MIN)
    return left + (math.log10(rate) - math.log10(X_MIN)) / span * PANEL_W


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    out = []
    add = out.append
    add(f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'font-family="sans-serif" font-size="12">')
    add(f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>')

    def panel(left, title, y_of, y_ticks, y_label):
        add(f'<text x="{left + PANEL_W / 2}" y="{TOP - 25}" text-anchor="middle" '
            f'font-size="14" font-weight="bold">{title}</text>')
        add(f'<rect x="{left}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" '
            f'fill="none" stroke="#888"/>')
        for tick in [0.1, 1, 10, 100, 1000, 10000]:
            x = x_of(tick, left)
            add(f'<line x1="{x}" y1="{TOP}" x2="{x}" y2="{TOP + PANEL_H}" stroke="#eee"/>')
            add(f'<text x="{x}" y="{TOP + PANEL_H + 16}" text-anchor="middle">{tick:g}</text>')
        add(f'<text x="{left + PANEL_W / 2}" y="{TOP + PANEL_H + 36}" text-anchor="middle">'
            f'requests per second per node, one identity (10 nodes)</text>')
        for tick, label in y_ticks:
            y = y_of(tick)
            add(f'<line x1="{left}" y1="{y}" x2="{left + PANEL_W}" y2="{y}" stroke="#eee"/>')
            add(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{label}</text>')
        add(f'<text transform="translate({left - 48},{TOP + PANEL_H / 2}) rotate(-90)" '
            f'text-anchor="middle">{y_label}</text>')

    def polyline(points, color, dash=""):
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        add(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{extra}/>')
        for x, y in points:
            add(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>')

    # Round trips per request, log scale 0.0002 .. 2.
    def y_trips(v):
        low, high = math.log10(0.0002), math.log10(2)
        v = max(v, 0.0002)
        return TOP + PANEL_H - (math.log10(v) - low) / (high - low) * PANEL_H

    left = LEFT
    panel(left, "Store round trips per request (within its limit)", y_trips,
          [(0.001, "0.001"), (0.01, "0.01"), (0.05, "1/20"), (1, "1")],
          "round trips per request (log)")
    for mode, color in MODES:
        pts = [(x_of(float(r["per_node_rate"]), left), y_trips(float(r["round_trips_per_request"])))
               for r in rows if r["identity"] == "within" and r["mode"] == mode]
        polyline(pts, color)

    # Admission of an over-limit identity, % of its limit per window.
    def y_admitted(v):
        low, high = 97.0, 101.5
        v = min(max(v, low), high)
        return TOP + PANEL_H - (v - low) / (high - low) * PANEL_H

    left = LEFT + PANEL_W + GAP
    panel(left, "Identity over its limit: admitted per window", y_admitted,
          [(97, "97%"), (98, "98%"), (99, "99%"), (99.5, "99.5%"), (100, "100%"), (101, "101%")],
          "% of its limit (lowest window)")
    for bound in (99.5, 101):
        y = y_admitted(bound)
        add(f'<line x1="{left}" y1="{y}" x2="{left + PANEL_W}" y2="{y}" stroke="#c00" '
            f'stroke-dasharray="4,3"/>')
    # Only where the identity sends more than its limit (10 nodes, 60 s
    # windows, limit 1000: from 3 req/s per node); below, it is admitted
    # all it sends.
    for mode, color in MODES:
        pts = [(x_of(float(r["per_node_rate"]), left), y_admitted(float(r["admitted_min_pct"])))
               for r in rows if r["identity"] == "over" and r["mode"] == mode
               and float(r["per_node_rate"]) * 10 * 60 > 1000]
        polyline(pts, color)

    # Legend.
    for i, (mode, color) in enumerate(MODES):
        x = LEFT + i * 170
        y = HEIGHT - 14
        add(f'<line x1="{x}" y1="{y - 4}" x2="{x + 24}" y2="{y - 4}" stroke="{color}" stroke-width="2"/>')
        add(f'<text x="{x + 30}" y="{y}">{mode}</text>')
    add(f'<text x="{LEFT + 3 * 170}" y="{HEIGHT - 14}" fill="#c00">- - targets 99.5% / 101%</text>')
    add("</svg>")
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
