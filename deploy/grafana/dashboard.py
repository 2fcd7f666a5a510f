"""Write the Grafana dashboard ``dashboards/phylorl.json`` from the panel table below, with Grafana's typed
builders (``grafana-foundation-sdk``, the release generated for Grafana 11.3, the image compose runs), so
the JSON follows Grafana's own schema.

    python deploy/grafana/dashboard.py            # rewrite the JSON
    python deploy/grafana/dashboard.py --check    # exit 1 when the JSON differs from this table
    python deploy/grafana/dashboard.py --markdown # print the panel table of docs/deploy.md

Every panel: a title, what it means (shown as the panel's description, and in docs/deploy.md), a unit and
PromQL queries with their legends. ``$__rate_interval`` is Grafana's rate window (at least four scrape
intervals). Counters with labels that may not exist yet (``..._rejected_total{call,code}``) end in
``or on() vector(0)`` so the panel reads 0, not "no data", while nothing has been rejected.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import common, prometheus, timeseries
from grafana_foundation_sdk.builders.dashboard import Dashboard, Row
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import (
    LegendDisplayMode,
    LegendPlacement,
    SortOrder,
    TimeZoneBrowser,
    TooltipDisplayMode,
)
from grafana_foundation_sdk.models.dashboard import DashboardCursorSync, DataSourceRef, GridPos

# the datasource of provisioning/datasources/prometheus.yml
DATASOURCE_REF = DataSourceRef(type_val="prometheus", uid="phylorl-prometheus")
OUT = Path(__file__).resolve().parent / "dashboards" / "phylorl.json"
W = "[$__rate_interval]"


def quantiles(metric: str, by: str = "", qs: tuple[float, ...] = (0.5, 0.95, 0.99), legend: str = "") -> list:
    """p50/p95/p99 of histogram ``metric`` (``_bucket`` series), summed over instances or split ``by``."""
    group = f"{by}, le" if by else "le"
    return [
        (
            f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket{W})))",
            f"{legend}p{round(q * 100)}",
        )
        for q in qs
    ]


def mean(metric: str, legend: str = "mean", by: str = "") -> tuple:
    """Mean observation of histogram ``metric`` over the rate window."""
    b = f" by ({by})" if by else ""
    return (f"sum{b} (rate({metric}_sum{W})) / sum{b} (rate({metric}_count{W}))", legend)


def rate(metric: str, legend: str, by: str = "", zero: bool = False) -> tuple:
    """Per-second rate of counter ``metric``, summed over instances or split ``by``; with ``zero``, 0 while
    the counter has no series yet."""
    b = f" by ({by})" if by else ""
    expr = f"sum{b} (rate({metric}{W}))"
    return (expr + " or on() vector(0)" if zero else expr, legend)


# (row, [(title, description, unit, [(expr, legend), ...]), ...])
PANELS = [
    (
        "Learner",
        [
            (
                "Update latency (p50 / p95 / p99)",
                "Wall time of one learner update with a collated batch in hand (forward and backward passes "
                "of both critics, optimiser steps, temperature and target updates): quantiles of "
                "phylorl_learner_update_seconds over the rate window. The headline figure.",
                "s",
                quantiles("phylorl_learner_update_seconds"),
            ),
            (
                "Updates per second",
                "Learner updates completed per second (rate of phylorl_learner_updates_total).",
                "ops",
                [rate("phylorl_learner_updates_total", "updates/s")],
            ),
            (
                "Batch wait (p50 / p95)",
                "Time the learner waits for a sampled batch from the replay service before an update; high "
                "when replay is rate-limited or too small (phylorl_learner_batch_wait_seconds).",
                "s",
                quantiles("phylorl_learner_batch_wait_seconds", qs=(0.5, 0.95)),
            ),
            (
                "Losses",
                "Last update's losses: the two soft-Q critics (q1, q2) and the temperature loss (alpha).",
                "none",
                [("phylorl_learner_loss", "{{name}}")],
            ),
            (
                "Q mean, temperature α, |TD| mean, entropy",
                "Last update: mean Q(s,a) of the sampled batch, the temperature α, the mean absolute TD "
                "error (the basis of the new priorities), and the mean policy entropy on the batch's next "
                "states (nats).",
                "none",
                [
                    ("phylorl_learner_q_mean", "Q mean"),
                    ("phylorl_learner_alpha", "α"),
                    ("phylorl_learner_td_abs_mean", "|TD| mean"),
                    ("phylorl_learner_entropy", "entropy"),
                ],
            ),
        ],
    ),
    (
        "Weights and policy lag",
        [
            (
                "Weights version",
                "The learner's weights version (one per update), the version it last published to the "
                "actors (every publish_every updates) and, per actor, the version of the last inference "
                "answer it received.",
                "none",
                [
                    ("max(phylorl_learner_weights_version)", "learner"),
                    ("max(phylorl_learner_published_version)", "published"),
                    ("phylorl_actor_weights_version", "actor {{instance}}"),
                ],
            ),
            (
                "Publication time (p50 / p95)",
                "Time the learner's update loop spends on one publication of its weights to the inference "
                "endpoint (every publish_every updates; phylorl_learner_publish_seconds): copies of the "
                "networks on the learner's device, written into the endpoint's.",
                "s",
                quantiles("phylorl_learner_publish_seconds", qs=(0.5, 0.95)),
            ),
            (
                "Policy lag (versions)",
                "Learner version minus the version that chose the action, per sampled transition: how "
                "off-policy the training data is (phylorl_learner_policy_lag_versions).",
                "none",
                quantiles("phylorl_learner_policy_lag_versions", qs=(0.5, 0.95))
                + [mean("phylorl_learner_policy_lag_versions")],
            ),
        ],
    ),
    (
        "Inference (learner)",
        [
            (
                "Inference latency (p50 / p95 / p99)",
                "Server-side time of one batched inference, queueing included "
                "(phylorl_inference_latency_seconds).",
                "s",
                quantiles("phylorl_inference_latency_seconds"),
            ),
            (
                "Inference work by stage (mean)",
                "Mean time of each stage of the endpoint's work (phylorl_inference_stage_seconds): inputs "
                "(one request's records made into network inputs, on its gRPC thread), batch (a batch's "
                "inputs assembled and copied to the device), network (the twin networks, the move choice, "
                "the answers' copy back), reply (answers sliced, callers woken). Latency beyond batch + "
                "network + reply is queueing and the batching delay.",
                "s",
                [mean("phylorl_inference_stage_seconds", "{{stage}}", by="stage")],
            ),
            (
                "Inference batch size",
                "Observations per network call: batching across actors, bounded by the maximum batch size "
                "and delay.",
                "none",
                quantiles("phylorl_inference_batch_size", qs=(0.5, 0.95))
                + [mean("phylorl_inference_batch_size")],
            ),
            (
                "Inference requests and rejections per second",
                "Act requests served, and those refused because the inference queue was full (overload).",
                "reqps",
                [
                    rate("phylorl_inference_requests_total", "requests/s"),
                    rate("phylorl_inference_rejected_total", "rejected/s"),
                ],
            ),
            (
                "Inference queue depth",
                "Requests waiting for the next batch.",
                "none",
                [("phylorl_inference_queue_depth", "queued")],
            ),
            (
                "Inference network calls by path",
                "Network calls per second of the endpoint, replayed as a captured CUDA graph (graph; "
                "inference_cuda_graphs on a GPU) or run op by op (eager: the option off, a CPU, a batch "
                "shape's warm-up), and batch shapes whose graph capture failed (each then runs eagerly; the "
                "learner logs the CUDA error).",
                "none",
                [
                    rate("phylorl_inference_batches_total", "{{path}}/s", by="path"),
                    rate("phylorl_inference_capture_failures_total", "capture failures/s", zero=True),
                ],
            ),
        ],
    ),
    (
        "Actors",
        [
            (
                "Environment step latency by actor (p50 / p95)",
                "One environment step (SPR move, local branch-length optimisation, next observation) per "
                "actor (phylorl_actor_env_step_seconds).",
                "s",
                quantiles(
                    "phylorl_actor_env_step_seconds", by="instance", qs=(0.5, 0.95), legend="{{instance}} "
                ),
            ),
            (
                "Environment steps per second by actor",
                "Steps per second of each actor (all its environments) and of all actors together.",
                "ops",
                [
                    rate("phylorl_actor_env_steps_total", "{{instance}}", by="instance"),
                    rate("phylorl_actor_env_steps_total", "all actors"),
                ],
            ),
            (
                "Actor inference call latency by actor (p95)",
                "Round trip of one batched Act request (a message of its group's ActStream, or a unary "
                "call) as the actor sees it: network, queueing and the network forward pass.",
                "s",
                quantiles(
                    "phylorl_actor_inference_call_seconds", by="instance", qs=(0.95,), legend="{{instance}} "
                ),
            ),
            (
                "Actor time waiting on inference by actor",
                "Fraction of each actor's time its loop stood waiting for an Act answer (rate of "
                "phylorl_actor_inference_wait_seconds_total). Near 1: the actor is limited by inference; "
                "near 0: by its own core (its pipeline steps one group of environments while another's call "
                "is out).",
                "percentunit",
                [rate("phylorl_actor_inference_wait_seconds_total", "{{instance}}", by="instance")],
            ),
            (
                "Episode start latency (p50 / p95)",
                "One episode start: start tree and full branch-length optimisation "
                "(phylorl_actor_env_reset_seconds).",
                "s",
                quantiles("phylorl_actor_env_reset_seconds", qs=(0.5, 0.95)),
            ),
            (
                "Transitions sent per second and local buffer",
                "Transitions accepted by the replay service per second, per actor, and transitions waiting "
                "in each actor's local buffer (grows while the replay service is away).",
                "none",
                [
                    rate("phylorl_actor_transitions_sent_total", "sent/s {{instance}}", by="instance"),
                    ("phylorl_actor_buffer_size", "buffered {{instance}}"),
                ],
            ),
            (
                "Episode ΔlogL (p5 / p50 / p95)",
                "Log-likelihood gained over an episode (last tree minus start tree), all actors: quantiles "
                "of phylorl_actor_episode_delta_loglik. Rising = the policy finds better trees. (No mean: a "
                "histogram with negative buckets has no _sum series.)",
                "none",
                quantiles("phylorl_actor_episode_delta_loglik", qs=(0.05, 0.5, 0.95)),
            ),
            (
                "Episodes per second",
                "Finished episodes per second, per actor.",
                "ops",
                [rate("phylorl_actor_episodes_total", "{{instance}}", by="instance")],
            ),
        ],
    ),
    (
        "Replay",
        [
            (
                "Replay size",
                "Transitions held by the replay table (capacity-bounded, oldest evicted first).",
                "none",
                [("phylorl_replay_size", "transitions")],
            ),
            (
                "Replay rates",
                "Transitions inserted and sampled per second, priorities updated per second, and their ratio "
                "(samples per insert, which the rate limiter can hold to a target).",
                "none",
                [
                    rate("phylorl_replay_inserted_total", "inserted/s"),
                    rate("phylorl_replay_sampled_total", "sampled/s"),
                    rate("phylorl_replay_priority_updates_total", "priority updates/s"),
                    (
                        f"sum(rate(phylorl_replay_sampled_total{W})) / "
                        f"sum(rate(phylorl_replay_inserted_total{W}))",
                        "samples per insert",
                    ),
                ],
            ),
            (
                "Replay call latency (p50 / p95)",
                "Handling time of Insert and Sample calls, rate-limiter waits included.",
                "s",
                quantiles("phylorl_replay_insert_seconds", qs=(0.5, 0.95), legend="insert ")
                + quantiles("phylorl_replay_sample_seconds", qs=(0.5, 0.95), legend="sample "),
            ),
            (
                "Rate-limiter waits and rejected calls",
                "Seconds per second that calls spent waiting for the rate limiter (by call), and failed "
                "calls per second (by call and gRPC code); 0 when none.",
                "none",
                [
                    rate(
                        "phylorl_replay_rate_limited_seconds_total", "waiting {{call}}", by="call", zero=True
                    ),
                    rate(
                        "phylorl_replay_rejected_total",
                        "rejected {{call}} {{code}}",
                        by="call, code",
                        zero=True,
                    ),
                ],
            ),
        ],
    ),
]


def panel(
    pid: int, title: str, description: str, unit: str, queries: list, x: int, y: int
) -> timeseries.Panel:
    """One time-series panel (Grafana's typed builder) at grid position ``(x, y)``."""
    built = (
        timeseries.Panel()
        .id(pid)
        .title(title)
        .description(description)
        .datasource(DATASOURCE_REF)
        .unit(unit)
        .line_width(1)
        .fill_opacity(0)
        .grid_pos(GridPos(h=8, w=8, x=x, y=y))
        .legend(
            common.VizLegendOptions()
            .display_mode(LegendDisplayMode.LIST)
            .placement(LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(common.VizTooltipOptions().mode(TooltipDisplayMode.MULTI).sort(SortOrder.NONE))
    )
    for i, (expr, legend) in enumerate(queries):
        built = built.with_target(
            prometheus.Dataquery()
            .ref_id(chr(ord("A") + i))
            .datasource(DATASOURCE_REF)
            .expr(expr)
            .legend_format(legend)
            .range()
        )
    return built


def dashboard() -> dict:
    """The dashboard as Grafana's JSON model (built with grafana-foundation-sdk, then encoded)."""
    board = (
        Dashboard("phylorl training")
        .uid("phylorl-training")
        .tags(["phylorl"])
        .readonly()
        .version(1)
        .refresh("10s")
        .time("now-30m", "now")
        .timezone(TimeZoneBrowser)
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .description(
            "Learner update and inference latency, actors' environment steps, replay, weights and "
            "policy lag, episode ΔlogL. Panel descriptions say what each shows (docs/deploy.md)."
        )
    )
    pid, y = 1, 0
    for row, row_panels in PANELS:
        board = board.with_row(Row(row).id(pid).grid_pos(GridPos(h=1, w=24, x=0, y=y)))
        pid, y = pid + 1, y + 1
        for i, spec in enumerate(row_panels):
            board = board.with_panel(panel(pid, *spec, x=8 * (i % 3), y=y + 8 * (i // 3)))
            pid += 1
        y += 8 * ((len(row_panels) + 2) // 3)
    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that the JSON is up to date")
    parser.add_argument("--markdown", action="store_true", help="print the panels as a Markdown table")
    args = parser.parse_args(argv)
    if args.markdown:
        print("| row | panel | what it shows |\n| --- | --- | --- |")
        for row, row_panels in PANELS:
            for title, description, _, _ in row_panels:
                print("| " + " | ".join(c.replace("|", "\\|") for c in (row, title, description)) + " |")
        return 0
    text = json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run python deploy/grafana/dashboard.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({sum(p['type'] != 'row' for p in dashboard()['panels'])} panels)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
