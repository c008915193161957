"""The HTTP benchmark's report (bench/serve.py): its results as Markdown tables and issue 15's targets, met or not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.serve_settings import PEER_SCENARIOS, PRODUCE_SCENARIOS


def sustained(ingest: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The ingest run (llog serve's and its raw PUTs') where llog serve reached the most MB/s."""
    return max(ingest, key=lambda run: run["llog"]["mb_per_s"])


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _errors(errors: Mapping[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(errors.items())) or "0"


def _verdict(met: bool) -> str:
    return "met" if met else "**not met**"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def targets(r: Mapping[str, Any]) -> list[str]:
    """The issue's targets, each met or not with its numbers (all from this run)."""
    floor, produce, ingest = r["floor"], r["produce"], sustained(r["ingest"])
    idle, multi, busy = produce["idle"], produce["partitions16"], produce["clients32"]
    lines = []

    def target(text: str, value: float | None, limit: float, at_most: bool) -> None:
        met = value is not None and (value <= limit if at_most else value >= limit)
        sign = "≤" if at_most else "≥"
        lines.append(f"* {text}: {_f(value, 2)} ({sign} {limit:g}): {_verdict(met)}")

    target(f"Idle produce p50 / floor ({_f(idle['p50_ms'])} ms / {_f(floor['floor_ms'])} ms)",
           _ratio(idle["p50_ms"], floor["floor_ms"]), 2, True)  # fmt: skip
    target(f"32 clients requests/s / 1 client's ({_f(busy['requests_per_s'])} / {_f(idle['requests_per_s'])})",
           _ratio(busy["requests_per_s"], idle["requests_per_s"]), 15, False)  # fmt: skip
    cpu_ms, single_rate = busy.get("server_cpu_ms_per_request"), idle["requests_per_s"]
    if cpu_ms and single_rate:
        lines.append(f"  * server CPU per request at 32 clients: {cpu_ms:.2f} ms, so one core serves at most "
                     f"{1000 / cpu_ms:.0f} requests/s; 15x the single client's rate ({15 * single_rate:.0f} "
                     f"requests/s) needs at most {1000 / (15 * single_rate):.2f} ms")  # fmt: skip
    ceiling = r["ceiling"]["32"]["requests_per_s"]
    if ceiling and single_rate:
        lines.append(f"  * the same 32 clients against llog serve's HTTP server with nothing behind it: "
                     f"{ceiling:.0f} requests/s, {ceiling / single_rate:.1f}x the single llog client's rate; "
                     f"llog reached {busy['requests_per_s'] / ceiling:.2f} of that ceiling")  # fmt: skip
    target("32 clients S3 PUTs per request", busy["s3_puts_per_request"], 0.25, True)
    target(f"32 clients p99 / 1 client's p50 ({_f(busy['p99_ms'])} ms / {_f(idle['p50_ms'])} ms)",
           _ratio(busy["p99_ms"], idle["p50_ms"]), 4, True)  # fmt: skip
    target(f"16-partition request p50 / 1-partition p50 ({_f(multi['p50_ms'])} ms / {_f(idle['p50_ms'])} ms)",
           _ratio(multi["p50_ms"], idle["p50_ms"]), 2, True)  # fmt: skip
    for tail in r["tail"]:
        target(f"Tail consumer, {tail['what']}: produce→consume p50 / produce p50 "
               f"({_f(tail['e2e_p50_ms'])} ms / {_f(tail['produce_p50_ms'])} ms)",
               _ratio(tail["e2e_p50_ms"], tail["produce_p50_ms"]), 1.5, True)  # fmt: skip
    llog_mb, raw_mb = ingest["llog"]["mb_per_s"], ingest["raw_s3"]["mb_per_s"]
    target(f"Sustained ingest MB/s / raw S3 PUT MB/s ({ingest['llog']['connections']} connections: "
           f"{_f(llog_mb, 2)} / {_f(raw_mb, 2)})",
           _ratio(llog_mb, raw_mb), 0.5, False)  # fmt: skip
    many = r["many_clients"]
    lines.append(f"* {many['clients']} keep-alive clients, resets and refused connections: "
                 f"{many['transport_errors']} (= 0): {_verdict(many['transport_errors'] == 0)}")  # fmt: skip
    return lines


def _where_row(what: str, row: Mapping[str, Any]) -> str:
    flush, machine = row["flush"], row["machine_cpu"]
    processes = dict(machine["processes"])
    serve, clients = processes.pop("llog serve", 0.0), processes.pop("load", 0.0)
    rest = ", ".join(f"{name} {cores:.2f}" for name, cores in list(processes.items())[:4])
    return (f"| {what} | {_f(flush['latency_ms'], 2)} | {_f(flush['queue_ms'], 2)} | {_f(flush['batcher_ms'], 2)} | "
            f"{_f(flush['rest_ms'], 2)} | {_f(flush['flush_ms'], 2)} | {_f(flush['s3_put_ms'], 2)} | "
            f"{_f(flush['oxia_write_ms'], 2)} | {machine['busy_cores']:.2f} of {machine['cores']} | {serve:.2f} | "
            f"{clients:.2f} | {rest} |")  # fmt: skip


def report(r: Mapping[str, Any]) -> str:
    floor, batcher = r["floor"], r["batcher"]
    out = [
        f"S3 server: **{r['s3_server']}**. Batcher: `max_delay_ms` {batcher['max_delay_ms']}, `max_in_flight` "
        f"{batcher['max_in_flight']}, `max_bytes` {batcher['max_bytes']}. Floor on the same servers: S3 PUT p50 "
        f"{_f(floor['s3_put_p50_ms'], 2)} ms + Oxia put p50 {_f(floor['oxia_put_p50_ms'], 2)} ms = "
        f"**{_f(floor['floor_ms'], 2)} ms**.",
        "",
        "| produce | requests | requests/s | p50 ms | p99 ms | S3 PUTs/request | Oxia writes/request | "
        "server CPU ms/request | errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, _ in PRODUCE_SCENARIOS:
        row = r["produce"][key]
        out.append(f"| {row['what']} | {row['requests']} | {_f(row['requests_per_s'])} | {_f(row['p50_ms'])} | "
                   f"{_f(row['p99_ms'])} | {_f(row['s3_puts_per_request'], 3)} | "
                   f"{_f(row['oxia_writes_per_request'], 2)} | {_f(row['server_cpu_ms_per_request'], 2)} | "
                   f"{_errors(row['errors'])} |")  # fmt: skip
    out += [
        "",
        "| tail consumer (long-poll) | samples | produce p50 ms | produce→consume p50 ms | p99 ms | "
        "after the ack p50 ms | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in r["tail"]:
        out.append(f"| {row['what']} | {row['samples']} | {_f(row['produce_p50_ms'])} | {_f(row['e2e_p50_ms'])} | "
                   f"{_f(row['e2e_p99_ms'])} | {_f(row['after_ack_p50_ms'])} | {_errors(row['errors'])} |")  # fmt: skip
    out += [
        "",
        "| ingest | MB/s | requests or PUTs | p50 ms | p99 ms | S3 PUTs, mean size | server CPU ms/request | errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in r["ingest"]:
        llog, raw = run["llog"], run["raw_s3"]
        out += [
            f"| llog serve: {llog['connections']} connections, {llog['records']} records of {llog['record_size']} B "
            f"per request over {llog['partitions']} partitions | {_f(llog['mb_per_s'], 2)} | {llog['requests']} | "
            f"{_f(llog['p50_ms'])} | {_f(llog['p99_ms'])} | {llog['s3_puts']}, {llog['mean_put_bytes']:.0f} B | "
            f"{_f(llog['server_cpu_ms_per_request'], 2)} | {_errors(llog['errors'])} |",
            f"| raw S3 PUTs: {raw['writers']} writers, {raw['object_bytes']} B objects | {_f(raw['mb_per_s'], 2)} | "
            f"{raw['puts']} | {_f(raw['p50_ms'])} | - | {raw['puts']}, {raw['object_bytes']} B | - | 0 |",
        ]
    llog = sustained(r["ingest"])["llog"]
    out += [
        "",
        "| where the time went (means over the scenario) | request ms | waiting for its flush | in the batcher "
        "(waiting and written) | outside it (HTTP, the loop, the clients) | flush ms | S3 PUT ms | Oxia write ms | "
        "machine: busy cores | llog serve | load (clients) | the rest |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(_where_row(what, row) for what, row in (("idle produce", r["produce"]["idle"]),
                                                 ("32 clients", r["produce"]["clients32"]),
                                                 (f"ingest, {llog['connections']} connections", llog))),
    ]  # fmt: skip
    sharing = r["flush_sharing"]
    first = sharing[0]
    out += [
        "",
        f"| produce requests of {first['batch'] * first['record_size']:,} B ({first['batch']} records of "
        f"{first['record_size']:,} B), {first['partitions']} partitions | requests | S3 PUTs | requests per S3 PUT | "
        "MB/s | p50 ms | errors |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {row['clients']} clients | {row['requests']} | {row['s3_puts']} | "
            f"{_f(row['requests'] / row['s3_puts'] if row['s3_puts'] else None, 2)} | {_f(row['mb_per_s'], 2)} | "
            f"{_f(row['p50_ms'])} | {_errors(row['errors'])} |"
            for row in sharing
        ),
    ]
    out += [
        "",
        "| HTTP ceiling: llog serve's HTTP server, nothing behind it | requests | requests/s | p50 ms | p99 ms | "
        "errors |",
        "|---|---|---|---|---|---|",
        *(
            f"| {row['what']}, 1 record per request | {row['requests']} | {_f(row['requests_per_s'])} | "
            f"{_f(row['p50_ms'], 2)} | {_f(row['p99_ms'], 2)} | {_errors(row['errors'])} |"
            for row in r["ceiling"].values()
        ),
    ]
    many = r["many_clients"]
    out += [
        "",
        "| many clients | requests | requests/s | p50 ms | p99 ms | resets/refused | errors | reconciliation |",
        "|---|---|---|---|---|---|---|---|",
        f"| {many['clients']} keep-alive clients, 1 record per request, {many['partitions']} partitions | "
        f"{many['requests']} | "
        f"{_f(many['requests_per_s'])} | {_f(many['p50_ms'])} | {_f(many['p99_ms'])} | {many['transport_errors']} | "
        f"{_errors(many['errors'])} | {many['reconciliation']} |",
    ]
    peer = r["peer"]
    out.append("")
    if "rows" in peer:
        out += [
            "| peer: s2-lite 0.43.4, same S3 server | requests | appends/s | p50 ms | p99 ms | errors |",
            "|---|---|---|---|---|---|",
        ]
        for key, _ in PEER_SCENARIOS:
            row = peer["rows"][key]
            out.append(f"| {row['what']} | {row['requests']} | {_f(row['requests_per_s'])} | {_f(row['p50_ms'])} | "
                       f"{_f(row['p99_ms'])} | {_errors(row['errors'])} |")  # fmt: skip
    else:
        out.append(f"Peer (s2-lite 0.43.4): not measured: {peer['skipped']}.")
    out += ["", "Targets (issue 15), ratios from this run:", "", *targets(r)]
    return "\n".join(out)
