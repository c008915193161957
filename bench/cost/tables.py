"""docs/COST.md's tables: the report's data (``bench.cost.report.build``) rendered as Markdown."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bench.cost.comparisons import CONFIGURATION_COLUMNS
from bench.cost.inputs import (
    DEV,
    EFS_BATCHING,
    FRONT_DOORS,
    LATENCY_FACTORS,
    PROD,
    PROTOCOLS,
    REQUEST_SIZES,
    REQUESTS_PER_FLUSH,
    RETENTIONS_H,
    SERVE_BALANCER,
    SERVE_DNS,
    STORAGE_TEXT,
    TARGET_BATCHED_SMALL_RECORDS_PER_GB,
    TARGET_LARGE_REQUESTS_PER_GB,
    Assumptions,
)
from bench.cost.report import label


def usd(x: float, digits: int = 2) -> str:
    return f"${x:,.{digits}f}"


def md_table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, text_columns: int = 1) -> str:
    """A Markdown table: the first ``text_columns`` left-aligned, numbers right-aligned."""
    rule = "|" + "|".join("---" if i < text_columns else "---:" for i in range(len(headers))) + "|"
    lines = ["| " + " | ".join(headers) + " |", rule]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def render(doc: Mapping[str, Any], a: Assumptions) -> str:
    sections = [
        _render_counts(doc),
        _render_per_million(doc),
        _render_per_gb(doc),
        _render_fixed(doc),
        _render_monthly(doc),
        _render_break_even(doc),
        _render_sensitivity(doc),
        _render_configurations(doc),
        _render_targets(doc),
        _render_serve_fleet(doc),
        _render_retention(doc),
        f"### Idle long-polling consumer\n\nOne consumer long-polling an empty partition "
        f"({a.code.consume_max_wait_s:.0f} s waits at {a.code.consume_memory_mb} MB): "
        f"{usd(doc['idle_long_poll_consumer_monthly'])} a month.",
        _render_gc_capacity(doc),
    ]
    return "\n\n".join(sections) + "\n"


def _sizes() -> list[str]:
    return [label(s) for s in REQUEST_SIZES]


def _protocols() -> list[str]:
    return [pr.name for pr in PROTOCOLS]


def _by_protocol(name: str, cells: Mapping[str, list[str]]) -> list[list[str]]:
    """One row if every protocol shows the same cells, else one row per protocol (``"name, cas"``)."""
    first = cells[_protocols()[0]]
    if all(cells[pr] == first for pr in _protocols()):
        return [[name, *first]]
    return [[f"{name}, {pr}", *cells[pr]] for pr in _protocols()]


def _storage(doc: Mapping[str, Any], shape: str) -> str:
    """``"EBS gp3"``: the Oxia storage the report priced ``shape`` with."""
    return STORAGE_TEXT[doc["assumptions"]["shapes"][shape]["oxia_storage"]]


def _shape_text(doc: Mapping[str, Any], shape: str) -> str:
    """``"prod shape (Oxia on EBS gp3)"``, ``"dev shape (standalone Oxia on EFS)"``."""
    standalone = "standalone " if doc["assumptions"]["shapes"][shape]["wal_copies"] == 1 else ""
    return f"{shape} shape ({standalone}Oxia on {_storage(doc, shape)})"


def _display(doc: Mapping[str, Any], name: str) -> str:
    """``"llog prod cas"`` -> ``"llog prod (EBS gp3), cas"``; other names as they are."""
    words = name.split(" ")
    if words[0] == "llog" and len(words) == 3:
        return f"llog {words[1]} ({_storage(doc, words[1])}), {words[2]}"
    return name


def _render_counts(doc: Mapping[str, Any]) -> str:
    ops = doc["operations_per_request"]
    rows = []
    keys = [("api_requests", "API Gateway requests", 3), ("invocations", "Lambda invocations", 3),
            ("gb_seconds", "Lambda GB-seconds", 4), ("s3_put_class", "S3 PUT/LIST requests", 4),
            ("s3_get_class", "S3 GET/HEAD requests", 4), ("oxia_reads", "Oxia reads", 3),
            ("oxia_writes", "Oxia writes", 3)]  # fmt: skip
    for key, name, digits in keys:
        for part in ("produce", "consume", "compaction", "gc"):
            values = {pr: [ops[pr][s][part][key] for s in _sizes()] for pr in _protocols()}
            if any(any(v) for v in values.values()):
                cells = {pr: [f"{v:.{digits}f}" for v in values[pr]] for pr in _protocols()}
                rows += _by_protocol(f"{name}: {part}", cells)
    header = f"per produce request, {_shape_text(doc, PROD.name)}"  # Lambda time follows the Oxia storage
    return "### Operations per produce request\n\n" + md_table([header, *_sizes()], rows)


def _render_per_million(doc: Mapping[str, Any]) -> str:
    per = doc["per_million_requests"]
    prod = {pr: f"llog prod {pr}" for pr in _protocols()}
    rows = []
    for item in per[_sizes()[0]][prod["cas"]]:
        rows += _by_protocol(item, {pr: [usd(per[s][key][item]) for s in _sizes()] for pr, key in prod.items()})
    prod_shape, dev_shape = _shape_text(doc, PROD.name), _shape_text(doc, DEV.name)
    for pr, key in prod.items():
        rows.append([f"**llog, {prod_shape}, {pr}**", *(f"**{usd(sum(per[s][key].values()))}**" for s in _sizes())])
    for pr in _protocols():
        rows.append([f"llog, {dev_shape}, {pr}",
                     *(usd(sum(per[s][f"llog dev {pr}"].values())) for s in _sizes())])  # fmt: skip
    for name, key in (("Kinesis on-demand (data in + out)", "kinesis on-demand"),
                      ("Kinesis provisioned (at scale)", "kinesis provisioned")):  # fmt: skip
        rows.append([name, *(usd(sum(per[s][key].values())) for s in _sizes())])
    return "### Variable cost per million produce requests\n\n" + md_table(["USD per 1M requests", *_sizes()], rows)


def _render_per_gb(doc: Mapping[str, Any]) -> str:
    names = {f"llog {shape} {pr}": f"llog, {_shape_text(doc, shape)}, {pr}" for shape in ("prod", "dev")
             for pr in _protocols()}  # fmt: skip
    names |= {"kinesis on-demand": "Kinesis on-demand", "kinesis provisioned": "Kinesis provisioned (at scale)"}
    rows = [[name, *(usd(doc["per_gb"][s][key], 3) for s in _sizes())] for key, name in names.items()]
    return "### Variable cost per GB ingested\n\n" + md_table(["USD per GB (2^30 B) of payload", *_sizes()], rows)


def _render_fixed(doc: Mapping[str, Any]) -> str:
    fixed = doc["fixed_monthly"]
    shapes = ("dev", "prod")
    rows = []
    # Every line of either shape, in the order of the shape with the most (EC2 and EBS: the prod shape on EBS).
    items = dict.fromkeys(
        item for shape in sorted(shapes, key=lambda s: -len(fixed[s]["cas"])) for item in fixed[shape]["cas"]
    )

    def cell(shape: str, pr: str, item: str) -> str:
        return usd(fixed[shape][pr][item]) if item in fixed[shape][pr] else "-"

    for item in items:
        rows += _by_protocol(item, {pr: [cell(shape, pr, item) for shape in shapes] for pr in _protocols()})
    totals = {pr: [f"**{usd(sum(fixed[shape][pr].values()))}**" for shape in shapes] for pr in _protocols()}
    rows += [[f"**{name}**", *cells] for name, *cells in _by_protocol("total", totals)]
    topic = doc["one_more_topic_monthly"]
    more = md_table(["one more low-traffic topic", "USD per month"],
                    [[_display(doc, k), usd(v)] for k, v in topic.items()])  # fmt: skip
    columns = [f"dev (standalone, {_storage(doc, 'dev')})", f"prod (replicated, {_storage(doc, 'prod')})"]
    table = md_table(["USD per month", *columns], rows)
    return f"### Fixed monthly cost\n\n{table}\n\n{more}"


def _render_monthly(doc: Mapping[str, Any]) -> str:
    rows = []
    llog = [f"llog {shape} {pr}" for shape in ("dev", "prod") for pr in _protocols()]
    columns = (*llog, "kinesis on-demand", "kinesis provisioned")
    for size in REQUEST_SIZES:
        for mb, cols in doc["monthly"][label(size)].items():
            rate = f"{float(mb) * 1e6 / size:,.1f}"
            rows.append([label(size), mb, rate, *(usd(sum(cols[k].values()), 0) for k in columns)])
    headers = ["request", "MB/s", "requests/s", *(_display(doc, k) for k in llog), "Kinesis on-demand",
               "Kinesis provisioned"]  # fmt: skip
    return "### Monthly total at steady throughput\n\n" + md_table(headers, rows)


def _break_even_text(mb: float | None) -> str:
    return "never (up to 1,000 MB/s)" if mb is None else "always" if mb == 0 else f"above {mb:,.2f} MB/s"


def _render_break_even(doc: Mapping[str, Any]) -> str:
    rows = []
    for s in _sizes():
        found = doc["break_even_mb_s"][s]
        for shape in ("dev", "prod"):
            for kinesis in ("on-demand", "provisioned"):
                texts = [_break_even_text(found[f"llog {shape} {pr} vs Kinesis {kinesis}"]) for pr in _protocols()]
                rows.append([s, f"llog {shape} ({_storage(doc, shape)}) vs Kinesis {kinesis}", *texts])
    sizes = doc["break_even_request_bytes_vs_on_demand"]
    by_size = "\n".join(
        f"* {_display(doc, name)} vs Kinesis on-demand, variable cost per GB: "
        + ("never below 1 MB" if size is None else f"llog is cheaper from requests of {size / 1000:,.0f} KB")
        for name, size in sizes.items()
    )
    headers = ["request", "comparison", *(f"llog is cheaper, {pr}" for pr in _protocols())]
    table = md_table(headers, rows, text_columns=len(headers))
    return f"### Break-even throughput\n\n{table}\n\nBreak-even request size:\n\n{by_size}"


def _render_sensitivity(doc: Mapping[str, Any]) -> str:
    lat, efs = doc["latency_sensitivity"], doc["efs_batching_sensitivity"]
    rows, storage = [], _storage(doc, PROD.name)
    for f in LATENCY_FACTORS:
        rows += [[f"Oxia on {storage}, latencies x{f}", pr, *(usd(lat[pr][s][str(f)]) for s in _sizes())]
                 for pr in _protocols()]  # fmt: skip
    for b in EFS_BATCHING:
        rows += [[f"Oxia on EFS, Oxia writes per EFS write: {b:g}", pr, *(usd(efs[pr][s][str(b)]) for s in _sizes())]
                 for pr in _protocols()]  # fmt: skip
    table = md_table(["assumption", "protocol", *_sizes()], rows, text_columns=2)
    return "### Sensitivity (llog, prod shape, USD per 1M requests)\n\n" + table


def _configuration_text(name: str) -> str:
    door, storage, protocol = name.split(" ")
    doors = {d.name: d.line for d in FRONT_DOORS}
    return f"{doors[door]}, Oxia on {STORAGE_TEXT[storage]}, {protocol}"


def _render_configurations(doc: Mapping[str, Any]) -> str:
    table = doc["configurations_per_gb"]
    columns = [name for name, _, _ in CONFIGURATION_COLUMNS]
    rows = [[_configuration_text(name), *(usd(row[c], 3) for c in columns)] for name, row in table.items()]
    fixed = doc["fixed_monthly_prod_by_oxia_storage"]
    note = (f"Fixed monthly cost of the production shape: {usd(fixed['efs'])} with Oxia on EFS, "
            f"{usd(fixed['ebs'])} on EBS gp3 (EC2 instances instead of Fargate tasks for the data "
            "servers).")  # fmt: skip
    fleet = {name: usd(sum(m.values())) for name, m in doc["serve_fleet"]["monthly"].items()}
    note += (f" The serve fleet adds {fleet[SERVE_BALANCER.name]} a month behind its load balancer (two tasks of "
             f"1 vCPU and 2 GiB and the balancer's hours), {fleet[SERVE_DNS.name]} reached by DNS (a task in each of "
             "the three zones).")  # fmt: skip
    return ("### Production shape by front door and Oxia storage (USD per GB)\n\n"
            + md_table(["front door, Oxia storage, protocol", *columns], rows) + "\n\n" + note)  # fmt: skip


def _render_serve_fleet(doc: Mapping[str, Any]) -> str:
    table = doc["serve_fleet"]["per_gb_at_256_kb_by_requests_per_flush"]
    doors = {d.name: d.line for d in FRONT_DOORS}
    flushes = [str(k) for k in REQUESTS_PER_FLUSH]
    rows = [[doors[name], *(usd(row[k], 3) for k in flushes)] for name, row in table.items()]
    headers = ["256 KB requests, Oxia on EBS gp3, sequential", *(f"{float(k):g} per flush" for k in flushes)]
    return "### Serve fleet by requests per flush (USD per GB, variable cost)\n\n" + md_table(headers, rows)


def _size_text(size: int | None) -> str:
    return "not below 6 MB" if size is None else f"{size / 1000:,.0f} KB"


def _render_targets(doc: Mapping[str, Any]) -> str:
    rows = []
    for name, t in doc["targets"].items():
        rows.append([
            _configuration_text(name),
            "yes" if t["deployable"] else "no",
            usd(t["large_requests_per_gb"], 3), "met" if t["large_requests_met"] else "not met",
            _size_text(t["large_target_met_from_bytes"]),
            usd(t["batched_small_records_per_gb"], 3), "met" if t["batched_small_records_met"] else "not met",
        ])  # fmt: skip
    large, small = usd(TARGET_LARGE_REQUESTS_PER_GB), usd(TARGET_BATCHED_SMALL_RECORDS_PER_GB)
    headers = ["production shape", "deployable today", f"256 KB+ requests (target {large})", "target",
               f"{large} reached from", f"1 KB records via the client (target {small})", "target"]  # fmt: skip
    table = md_table(headers, rows, text_columns=2)
    return "### Targets (USD per GB, variable cost)\n\n" + table


def _render_retention(doc: Mapping[str, Any]) -> str:
    ret = doc["retention_per_gb"]
    names = list(ret[str(RETENTIONS_H[0])])
    rows = [[f"{h:g} h ({h / 24:g} d)", *(usd(ret[str(h)][n], 4) for n in names)] for h in RETENTIONS_H]
    return "### Storage per GB kept, by retention\n\n" + md_table(["retention", *names], rows)


def _render_gc_capacity(doc: Mapping[str, Any]) -> str:
    g = doc["gc_capacity"]
    page = g["page_ms"]
    prefix_ms = page["S3's request rate per prefix"]
    rows = [
        ["WAL runs an hour (`llog:walGcSchedule`)", f"{g['wal_runs_per_hour']:g}"],
        [f"reading {g['partitions']:,} partitions' WAL references, {g['read_concurrency']} at a time (a run)",
         f"{g['references_s']:.1f} s"],
        ["per 1,000 blobs: a LIST page (assumed)", f"{page['a LIST page']:.1f} ms"],
        [f"... DeleteObjects of 1,000 keys, {g['read_concurrency']} in flight (assumed 300 ms each)",
         f"{page['DeleteObjects calls']:.1f} ms"],
        ["... S3's 3,500 PUT and DELETE/s per prefix (wal-shared/ is one), half of them the WAL's PUTs",
         f"{prefix_ms:.1f} ms"],
        ["produce requests/s a run handles within its interval", f"{g['requests_per_s_by_run_time']:,.0f}"],
        ["objects deleted per run at most (`LLOG_GC_MAX_DELETES_PER_RUN`)", f"{g['max_deletes_per_run']:,}"],
        ["produce requests/s the deletion cap keeps up with", f"{g['requests_per_s_by_deletion_cap']:,.0f}"],
        [f"the hourly run's per-partition work at {g['partitions']:,} partitions (timeout {g['timeout_s']:g} s)",
         f"{g['hourly_partition_work_s']:.0f} s"],
        [f"**produce requests/s GC keeps up with** (next limit: {g['slowest']})",
         f"**{g['requests_per_s_kept_up_with']:,.0f}**"],
    ]  # fmt: skip
    table = md_table(["garbage collection in Lambda, one WAL blob per produce request", "value"], rows)
    return "### Garbage collection capacity\n\n" + table
