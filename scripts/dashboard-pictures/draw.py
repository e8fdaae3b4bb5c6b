"""Draw each dashboard of a stack from what a running Prometheus answers to its panels' queries, as Grafana lays
them out (gridPos) and runs them (range queries for graphs and stats, instant for tables), into PNG pictures for
docs/monitoring.md. Not Grafana's own rendering (Grafana does not run here): the same queries, the same data,
drawn as SVG and rasterised by the system's librsvg and cairo through ctypes.

Usage (from the repository root): draw.py PROMETHEUS_URL END_SECONDS OUT_DIR STACK"""

import ctypes
import json
import math
import sys
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from html import escape
from pathlib import Path

PROM, END, OUTDIR, STACK = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
START, STEP = END - 6 * 3600, 60
COL, ROWH, PAD = 56, 30, 6
WIDTH = 24 * COL
PALETTE = ["#73BF69", "#F2CC0C", "#8AB8FF", "#FF780A", "#F2495C", "#5794F2", "#B877D9", "#FADE2A", "#56A64B", "#FF9830", "#3274D9", "#A352CC"]
BG, PANEL, TEXT, DIM, GRIDC = "#111217", "#181b1f", "#ccccdc", "#8e8e9e", "#2c3235"


def ask(path, **params):
    url = f"{PROM}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


def interpolate(expr, variables):
    for name, value in variables.items():
        expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
    return expr


def legend(fmt, metric):
    if fmt in ("", "__auto"):
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k != "__name__")
        return f"{metric.get('__name__', '')}{{{inner}}}" if inner or metric.get("__name__") else "value"
    out = fmt
    while "{{" in out:
        a = out.index("{{")
        b = out.index("}}", a)
        out = out[:a] + metric.get(out[a + 2 : b].strip(), "") + out[b + 2 :]
    return out


def text(x, y, s, size=12, color=TEXT, anchor="start", weight="normal"):
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{color}" text-anchor="{anchor}" font-weight="{weight}">{escape(str(s))}</text>'


def fmt(v, unit):
    if v is None or math.isnan(v):
        return "—"
    if unit == "percent":
        return f"{v:.0f}%"
    if unit == "percentunit":
        return f"{v * 100:.0f}%"
    if unit == "celsius":
        return f"{v:.0f}°C"
    if unit == "watt":
        return f"{v:.0f} W"
    if unit == "decmbytes":
        return f"{v / 1000:.1f} GB" if v >= 1000 else f"{v:.0f} MB"
    if unit == "s":
        return f"{v:.0f} s" if v < 120 else f"{v / 60:.0f} min"
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:.2f}"


def timeseries(panel, x, y, w, h, variables):
    parts = []
    unit = panel["fieldConfig"]["defaults"].get("unit", "none")
    stacked = panel["fieldConfig"]["defaults"].get("custom", {}).get("stacking", {}).get("mode") == "normal"
    overrides = {o["matcher"]["options"]: {p["id"]: p["value"] for p in o["properties"]} for o in panel["fieldConfig"].get("overrides", [])}
    lines = []
    for target in panel["targets"]:
        for result in ask("query_range", query=interpolate(target["expr"], variables), start=START, end=END, step=STEP):
            points = {int(float(t)): float(v) for t, v in result["values"]}
            lines.append((legend(target.get("legendFormat", ""), result["metric"]), points))
    lines.sort(key=lambda item: item[0])
    times = list(range(START, END + 1, STEP))
    legend_rows = len(lines) if len(lines) <= 5 else 4
    top, bottom = y + 28, y + h - 40 - legend_rows * 15 - (15 if len(lines) > legend_rows else 0)
    left, right = x + 46, x + w - 10
    # Stack the series that stack, in order (Grafana's normal stacking); overridden ones draw on their own.
    base = dict.fromkeys(times, 0.0)
    drawn = []
    for index, (name, points) in enumerate(lines):
        own = overrides.get(name, {})
        stacks = stacked and own.get("custom.stacking", {}).get("mode") != "none"
        values = {}
        for t in times:
            if t in points:
                values[t] = points[t] + (base[t] if stacks else 0)
        lows = {t: base[t] for t in values} if stacks else None
        if stacks:
            for t, v in values.items():
                base[t] = v
        color = own.get("color", {}).get("fixedColor", PALETTE[index % len(PALETTE)])
        drawn.append((name, points, values, lows, color, own))
    peak = max([v for _, _, vals, _, _, _ in drawn for v in vals.values()] + [1.0])
    if unit == "percent":
        peak = 100.0
    elif unit == "percentunit":
        peak = 1.0
    raw = peak / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    tick = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw - 1e-12)
    ticks = math.ceil(peak / tick - 1e-9)
    top_value = tick * ticks * 1.04

    def px(t):
        return left + (t - START) / (END - START) * (right - left)

    def py(v):
        return bottom - v / top_value * (bottom - top)

    for i in range(ticks + 1):
        v = tick * i
        parts.append(f'<line x1="{left}" y1="{py(v):.1f}" x2="{right}" y2="{py(v):.1f}" stroke="{GRIDC}"/>')
        parts.append(text(left - 4, py(v) + 4, fmt(v, unit), 10, DIM, "end"))
    for hour in range(7):
        t = START + hour * 3600
        parts.append(text(px(t), bottom + 13, datetime.fromtimestamp(t, UTC).strftime("%H:%M"), 10, DIM, "middle"))
    for _name, _points, values, lows, color, own in drawn:
        if not values:
            continue
        segments, current = [], []
        for t in times:
            if t in values:
                current.append(t)
            elif current:
                segments.append(current)
                current = []
        if current:
            segments.append(current)
        opacity = own.get("custom.fillOpacity", panel["fieldConfig"]["defaults"].get("custom", {}).get("fillOpacity", 0)) / 100
        dash = ' stroke-dasharray="8 6"' if own.get("custom.lineStyle", {}).get("fill") == "dash" else ""
        width = own.get("custom.lineWidth", 1.4)
        for seg in segments:
            path = " ".join(f"{px(t):.1f},{py(values[t]):.1f}" for t in seg)
            if opacity:
                low = [(px(t), py(lows[t] if lows else 0)) for t in reversed(seg)]
                area = path + " " + " ".join(f"{a:.1f},{b:.1f}" for a, b in low)
                parts.append(f'<polygon points="{area}" fill="{color}" fill-opacity="{opacity}" stroke="none"/>')
            parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="{width}"{dash}/>')
    ly = bottom + 30
    parts.append(text(x + w - 120, ly - 2, "Last", 10, DIM, "end") + text(x + w - 20, ly - 2, "Max", 10, DIM, "end"))
    for name, points, _values, _lows, color, _own in drawn[:legend_rows]:
        ly += 15
        series = [points[t] for t in sorted(points)]
        parts.append(f'<rect x="{x + 12}" y="{ly - 8}" width="12" height="3" fill="{color}"/>')
        parts.append(text(x + 30, ly - 2, name[:70], 10))
        parts.append(text(x + w - 120, ly - 2, fmt(series[-1] if series else None, unit), 10, TEXT, "end"))
        parts.append(text(x + w - 20, ly - 2, fmt(max(series) if series else None, unit), 10, TEXT, "end"))
    if len(drawn) > legend_rows:
        parts.append(text(x + 30, ly + 13, f"… and {len(drawn) - legend_rows} more series", 10, DIM))
    return parts


def stat(panel, x, y, w, h, variables):
    target = panel["targets"][0]
    result = ask("query_range", query=interpolate(target["expr"], variables), start=START, end=END, step=STEP)
    unit = panel["fieldConfig"]["defaults"].get("unit", "none")
    values = [float(v) for _, v in result[0]["values"]] if result else []
    last = values[-1] if values else None
    shown, fill = fmt(last, unit), PANEL
    for mapping in panel["fieldConfig"]["defaults"].get("mappings", []):
        hit = mapping["options"].get(fmt(last, "none"))
        if hit:
            shown, fill = hit["text"], {"green": "#1a7f37", "red": "#c4162a"}.get(hit["color"], PANEL)
    parts = [f'<rect x="{x}" y="{y + 24}" width="{w}" height="{h - 24}" fill="{fill}"/>']
    if values and fill == PANEL:
        top = max(values + [1.0])
        pts = " ".join(f"{x + i / max(len(values) - 1, 1) * w:.1f},{y + h - 4 - v / top * (h - 50):.1f}" for i, v in enumerate(values))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#73BF69" stroke-opacity="0.5"/>')
    parts.append(text(x + w / 2, y + h / 2 + 22, shown, 30, "#ffffff" if fill != PANEL else "#73BF69", "middle", "bold"))
    return parts


def table(panel, x, y, w, h, variables):
    target = panel["targets"][0]
    result = ask("query", query=interpolate(target["expr"], variables), time=END)
    organize = next((t["options"] for t in panel.get("transformations", []) if t["id"] == "organize"), {})
    excluded = {name for name, hidden in organize.get("excludeByName", {}).items() if hidden}
    renamed = organize.get("renameByName", {})
    unit = panel["fieldConfig"]["defaults"].get("unit", "none")
    columns = sorted({k for r in result for k in r["metric"] if k != "__name__"} - excluded)
    parts = []
    if not result:
        return [text(x + w / 2, y + h / 2 + 10, "No data", 14, DIM, "middle")]
    if "Value" not in excluded:
        columns.append("Value")
    cw = (w - 16) / len(columns)
    cy = y + 44
    for i, column in enumerate(columns):
        parts.append(text(x + 8 + i * cw, cy, renamed.get(column, column), 10, "#6e9fff", "start", "bold"))
    for row in result[: int((h - 60) / 16)]:
        cy += 16
        parts.append(f'<line x1="{x + 6}" y1="{cy - 12}" x2="{x + w - 6}" y2="{cy - 12}" stroke="{GRIDC}"/>')
        for i, column in enumerate(columns):
            value = fmt(float(row["value"][1]), unit) if column == "Value" else row["metric"].get(column, "")
            limit = max(int(cw / 6.2), 3)
            shown = value if len(value) <= limit else value[: limit - 1] + "…"
            parts.append(text(x + 8 + i * cw, cy, shown, 10))
    return parts


def render(board, variables):
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in board["panels"]) * ROWH + 60
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH + 2 * PAD}" height="{height}" font-family="Inter, Helvetica, Arial, sans-serif">',
        f'<rect width="100%" height="100%" fill="{BG}"/>',
        text(PAD + 8, 26, board["title"], 17, TEXT, "start", "bold"),
        text(WIDTH, 26, "last 6 hours (UTC) · synthetic series, real Prometheus and recording rules", 11, DIM, "end"),
    ]
    for panel in board["panels"]:
        g = panel["gridPos"]
        x, y, w, h = PAD + g["x"] * COL, 40 + g["y"] * ROWH, g["w"] * COL - PAD, g["h"] * ROWH - PAD
        if panel["type"] == "row":
            parts.append(text(x + 4, y + 20, panel["title"], 14, TEXT, "start", "bold"))
            continue
        parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{PANEL}" stroke="{GRIDC}" rx="2"/>')
        body = {"timeseries": timeseries, "stat": stat, "table": table}[panel["type"]](panel, x, y, w, h, variables)
        parts += body
        parts.append(text(x + 8, y + 17, panel["title"], 12, TEXT, "start", "bold"))
    parts.append("</svg>")
    return "\n".join(parts)


from components.config import parse_config  # noqa: E402
from components.monitoring import dashboards  # noqa: E402
from tests.harness import stack_config  # noqa: E402


def to_png(source: Path, target: Path) -> None:
    """SVG to PNG with librsvg and cairo (system libraries; nothing to install)."""
    rsvg, cairo = ctypes.CDLL("librsvg-2.so.2"), ctypes.CDLL("libcairo.so.2")

    class Dimensions(ctypes.Structure):
        _fields_ = [("width", ctypes.c_int), ("height", ctypes.c_int), ("em", ctypes.c_double), ("ex", ctypes.c_double)]

    rsvg.rsvg_handle_new_from_file.restype = ctypes.c_void_p
    rsvg.rsvg_handle_new_from_file.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    rsvg.rsvg_handle_get_dimensions.argtypes = [ctypes.c_void_p, ctypes.POINTER(Dimensions)]
    rsvg.rsvg_handle_render_cairo.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    cairo.cairo_image_surface_create.restype = ctypes.c_void_p
    cairo.cairo_create.restype = ctypes.c_void_p
    cairo.cairo_create.argtypes = [ctypes.c_void_p]
    cairo.cairo_surface_write_to_png.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    handle = rsvg.rsvg_handle_new_from_file(str(source).encode(), None)
    assert handle, source
    size = Dimensions()
    rsvg.rsvg_handle_get_dimensions(handle, ctypes.byref(size))
    surface = cairo.cairo_image_surface_create(0, size.width, size.height)  # CAIRO_FORMAT_ARGB32
    assert rsvg.rsvg_handle_render_cairo(handle, cairo.cairo_create(surface))
    assert cairo.cairo_surface_write_to_png(surface, str(target).encode()) == 0


config = parse_config({**stack_config(STACK), "monitoring": {"enabled": True}})
OUTDIR.mkdir(parents=True, exist_ok=True)
for config_map in dashboards.render(config):
    (board_text,) = config_map["data"].values()
    board = json.loads(board_text)
    variables = {v["name"]: v.get("allValue", "") for v in board["templating"]["list"] if v["type"] == "custom"}
    slug = config_map["metadata"]["name"].rsplit("-", 1)[-1]
    started = time.time()
    svg = OUTDIR / f"dashboard-{slug}.svg"
    svg.write_text(render(board, variables))
    to_png(svg, OUTDIR / f"dashboard-{slug}.png")
    svg.unlink()
    print(slug, f"{time.time() - started:.2f}s")
