"""Draw search p95 against memories per user, one line per backend, as SVG.

    .venv/bin/python benchmarks/plot_search_curve.py runs/*.json --out benchmarks/search_curve.svg

Reads the ``--json`` files of benchmarks/store_ops.py (any number, any sizes;
a later file's figure for the same backend and size wins) and draws two
panels, keyword and hybrid search p95 in ms, on log-log axes, with the issue's
targets as dashed lines. Plain SVG written here (no plotting library to
install); ``rsvg-convert -o curve.png curve.svg`` makes a PNG of it.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

COLOURS = {
    "inmemory": "#4e79a7",
    "sqlite": "#f28e2b",
    "sqlitevec": "#e15759",
    "redis": "#76b7b2",
    "mysql": "#59a14f",
    "mysqlvec": "#edc948",
    "postgres": "#b07aa1",
    "pgvector": "#ff9da7",
    "chromadb": "#9c755f",
}
#: (mode, title, {size: target p95 in ms}) of each panel.
PANELS = [
    ("keyword", "keyword search p95 (ms)", {10_000: 30, 100_000: 60}),
    ("hybrid", "hybrid search p95 incl. query embedding (ms)", {10_000: 50, 100_000: 100}),
]
WIDTH, HEIGHT, PAD = 460, 320, 56


def load(paths: list[Path]) -> dict[str, dict[int, dict[str, float]]]:
    """backend → size → mode → p95."""
    curves: dict[str, dict[int, dict[str, float]]] = {}
    for path in paths:
        for row in json.loads(path.read_text()):
            if "error" in row:
                continue
            figures = {mode: float(row[mode][1]) for mode, _, _ in PANELS if row.get(mode)}
            if figures:  # a run without searches (--skip-search) draws nothing
                curves.setdefault(row["backend"], {})[int(row["size"])] = figures
    return curves


def panel(
    curves: dict[str, dict[int, dict[str, float]]], mode: str, title: str, targets: dict[int, int], x0: int
) -> list[str]:
    sizes = sorted({n for points in curves.values() for n in points}) or [1000, 100_000]
    values = [p[mode] for points in curves.values() for p in points.values() if mode in p]
    values += list(targets.values())
    lo_x, hi_x = math.log10(min(sizes)), math.log10(max(sizes))
    lo_y, hi_y = math.floor(math.log10(max(min(values), 1))), math.ceil(math.log10(max(values)))
    hi_x = hi_x if hi_x > lo_x else lo_x + 1
    hi_y = hi_y if hi_y > lo_y else lo_y + 1

    def x(n: float) -> float:
        return x0 + PAD + (math.log10(n) - lo_x) / (hi_x - lo_x) * (WIDTH - 1.5 * PAD)

    def y(v: float) -> float:
        return HEIGHT - PAD + (math.log10(max(v, 10**lo_y)) - lo_y) / (hi_y - lo_y) * -(HEIGHT - 1.6 * PAD)

    out = [f'<text x="{x0 + WIDTH / 2}" y="20" text-anchor="middle" font-weight="bold">{title}</text>']
    out.append(
        f'<line x1="{x(10**lo_x)}" y1="{y(10**lo_y)}" x2="{x(10**hi_x)}" y2="{y(10**lo_y)}" stroke="#333"/>'
    )
    out.append(
        f'<line x1="{x(10**lo_x)}" y1="{y(10**lo_y)}" x2="{x(10**lo_x)}" y2="{y(10**hi_y)}" stroke="#333"/>'
    )
    for n in sizes:
        out.append(f'<text x="{x(n)}" y="{HEIGHT - PAD + 16}" text-anchor="middle">{n:,}</text>')
    for e in range(lo_y, hi_y + 1):
        out.append(
            f'<line x1="{x(10**lo_x)}" y1="{y(10**e)}" x2="{x(10**hi_x)}" y2="{y(10**e)}" stroke="#ddd"/>'
        )
        out.append(f'<text x="{x(10**lo_x) - 6}" y="{y(10**e) + 4}" text-anchor="end">{10**e:g}</text>')
    out.append(f'<text x="{x0 + WIDTH / 2}" y="{HEIGHT - 14}" text-anchor="middle">memories per user</text>')
    for n, target in targets.items():
        if min(sizes) <= n <= max(sizes):
            out.append(
                f'<line x1="{x(n) - 18}" y1="{y(target)}" x2="{x(n) + 18}" y2="{y(target)}" '
                f'stroke="#c00" stroke-dasharray="4 3"/>'
            )
    for backend, points in sorted(curves.items()):
        colour = COLOURS.get(backend, "#000")
        line = [(x(n), y(p[mode])) for n, p in sorted(points.items()) if mode in p]
        if len(line) > 1:
            path = " ".join(f"{'M' if i == 0 else 'L'}{px:.1f},{py:.1f}" for i, (px, py) in enumerate(line))
            out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>' for px, py in line]
    return out


def render(curves: dict[str, dict[int, dict[str, float]]]) -> str:
    width = WIDTH * len(PANELS) + 130
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{HEIGHT}" fill="white"/>',
    ]
    for i, (mode, title, targets) in enumerate(PANELS):
        parts += panel(curves, mode, title, targets, i * WIDTH)
    legend_x = WIDTH * len(PANELS) + 10
    for i, backend in enumerate(sorted(curves)):
        colour = COLOURS.get(backend, "#000")
        parts.append(f'<rect x="{legend_x}" y="{40 + 18 * i}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{legend_x + 18}" y="{50 + 18 * i}">{backend}</text>')
    parts.append(
        f'<line x1="{legend_x}" y1="{56 + 18 * len(curves)}" x2="{legend_x + 12}" '
        f'y2="{56 + 18 * len(curves)}" stroke="#c00" stroke-dasharray="4 3"/>'
    )
    parts.append(f'<text x="{legend_x + 18}" y="{60 + 18 * len(curves)}">target</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="JSON files written by store_ops.py --json")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("search_curve.svg"))
    args = parser.parse_args()
    args.out.write_text(render(load(args.runs)))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
