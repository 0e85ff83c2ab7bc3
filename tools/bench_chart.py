#!/usr/bin/env python3
"""Draws docs/benchmarks-summary.svg from the CSV benches/summary.sh
writes: for each load, each server's requests per second and server CPU
per request relative to Redis 7.0 (Redis = 1), and the memory per
rate-limit counter. Plain SVG, no plotting library.

Usage: python3 tools/bench_chart.py docs/benchmarks-summary.csv docs/benchmarks-summary.svg
"""
import csv
import sys

COLOURS = {"redis": "#b22222", "tally": "#1f77b4", "valkey": "#2ca02c"}
NAMES = {"redis": "Redis 7.0", "tally": "tally", "valkey": "Valkey 8.1"}
PANEL_W, PANEL_H = 420, 230
LEFT, TOP, GAP = 60, 70, 90


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    value = {(r["load"], r["server"]): (float(r["rps"]), float(r["cpu_us_per_request_or_bytes_per_key"]))
             for r in rows}
    servers = [s for s in ("redis", "tally", "valkey") if any(k[1] == s for k in value)]
    loads = [l for l in dict.fromkeys(r["load"] for r in rows) if l != "memory"]
    width = LEFT + 2 * PANEL_W + GAP + 40
    height = TOP + PANEL_H + 110
    out = []
    add = out.append
    add(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">')
    add(f'<rect width="{width}" height="{height}" fill="white"/>')

    def panel(left, title, pick, top_value, ticks, note):
        add(f'<text x="{left + PANEL_W / 2}" y="{TOP - 30}" text-anchor="middle" '
            f'font-size="14" font-weight="bold">{title}</text>')
        add(f'<text x="{left + PANEL_W / 2}" y="{TOP - 14}" text-anchor="middle" '
            f'fill="#555">{note}</text>')
        add(f'<rect x="{left}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#888"/>')

        def y_of(v):
            return TOP + PANEL_H - min(v, top_value) / top_value * PANEL_H

        for t in ticks:
            y = y_of(t)
            dash = "" if t != 1 else ' stroke-dasharray="4,3"'
            add(f'<line x1="{left}" y1="{y:.1f}" x2="{left + PANEL_W}" y2="{y:.1f}" stroke="#ddd"{dash}/>')
            add(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{t:g}x</text>')
        group = PANEL_W / len(loads)
        bar = group * 0.8 / len(servers)
        for i, load in enumerate(loads):
            for j, server in enumerate(servers):
                v = pick(load, server)
                x = left + i * group + group * 0.1 + j * bar
                y = y_of(v)
                add(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar - 1:.1f}" height="{TOP + PANEL_H - y:.1f}" '
                    f'fill="{COLOURS[server]}"/>')
                label = f"{v:.2f}" if v < 10 else f"{v:.1f}"
                add(f'<text x="{x + bar / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="9">{label}</text>')
            cx = left + i * group + group / 2
            for k, word in enumerate(load.replace(" P=", "\nP=").split("\n")):
                add(f'<text x="{cx:.1f}" y="{TOP + PANEL_H + 16 + 13 * k}" text-anchor="middle">{word}</text>')

    def ratio(index):
        return lambda load, server: value[load, server][index] / value[load, "redis"][index]

    panel(LEFT, "Requests per second, relative to Redis", ratio(0), 6, [0.5, 1, 2, 3, 4, 5, 6],
          "higher is better")
    panel(LEFT + PANEL_W + GAP, "Server CPU per request, relative to Redis", ratio(1), 2.5,
          [0.25, 0.5, 1, 1.5, 2, 2.5], "lower is better")
    # Legend and memory line.
    y = TOP + PANEL_H + 62
    x = LEFT
    for server in servers:
        add(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{COLOURS[server]}"/>')
        add(f'<text x="{x + 18}" y="{y}">{NAMES[server]}</text>')
        x += 120
    if ("memory", "redis") in value:
        memory = ", ".join(f"{NAMES[s]} {value['memory', s][1]:.0f} B"
                           for s in servers if ("memory", s) in value)
        add(f'<text x="{LEFT}" y="{y + 28}">Memory per rate-limit counter '
            f'(SET ... EX 120, RSS growth): {memory}. EVALSHA: the sliding-window limiter '
            f'(lua/scripts/sliding_window.lua).</text>')
    add('</svg>')
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
